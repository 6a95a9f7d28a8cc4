// Claims the docs make that a test can hold them to: sections and references name a date and a
// subject, never a work-session or issue number (which mean nothing to a reader); every test the
// docs cite by its gtest name exists; and limitations the docs state are still true.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/ir/text.h"

namespace tg {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = TG_SOURCE_DIR;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// README.md and every .md under docs/.
std::vector<fs::path> doc_files() {
  std::vector<fs::path> files{kRoot / "README.md"};
  for (const auto& entry : fs::recursive_directory_iterator(kRoot / "docs")) {
    if (entry.is_regular_file() && entry.path().extension() == ".md") files.push_back(entry.path());
  }
  return files;
}

std::size_t line_of(const std::string& text, std::size_t offset) {
  return 1 +
         static_cast<std::size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
}

TEST(DocClaims, NoSectionOrReferenceNamesASessionOrIssueNumber) {
  // "Session 10", "session 5", "issue 17", "Issue #3"; `Session` the class is never followed by a number.
  const std::regex numbered(R"(\b(session|issue) #?[0-9]+)", std::regex::icase);
  std::size_t files = 0;
  for (const fs::path& path : doc_files()) {
    ++files;
    const std::string text = read_text(path);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), numbered); it != std::sregex_iterator(); ++it) {
      ADD_FAILURE() << fs::relative(path, kRoot).string() << ":"
                    << line_of(text, static_cast<std::size_t>(it->position())) << ": \"" << it->str()
                    << "\": name the date and the subject instead";
    }
  }
  EXPECT_GT(files, 10U) << "the docs were not found under " << kRoot;
}

// Every `Suite.Name` the docs cite in backticks is a test defined under tests/ (TEST, TEST_F,
// TEST_P or a RapidCheck property, TG_PROPERTY included), so a renamed or deleted test cannot leave a doc pointing at
// it.
TEST(DocClaims, EveryTestTheDocsCiteExists) {
  const std::regex definition(
      R"((?:TEST|TEST_F|TEST_P|RC_GTEST_PROP|RC_GTEST_FIXTURE_PROP|TG_PROPERTY)\(\s*(\w+)\s*,\s*(\w+))");
  std::set<std::string> defined;
  for (const auto& entry : fs::recursive_directory_iterator(kRoot / "tests")) {
    if (!entry.is_regular_file() || entry.path().extension() != ".cpp") continue;
    const std::string text = read_text(entry.path());
    for (auto it = std::sregex_iterator(text.begin(), text.end(), definition); it != std::sregex_iterator(); ++it) {
      defined.insert((*it)[1].str() + "." + (*it)[2].str());
    }
  }
  ASSERT_GT(defined.size(), 100U);
  const std::regex cited(R"(`([A-Z][A-Za-z0-9]*\.[A-Z][A-Za-z0-9]+)`)");
  std::size_t citations = 0;
  for (const fs::path& path : doc_files()) {
    const std::string text = read_text(path);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), cited); it != std::sregex_iterator(); ++it) {
      ++citations;
      EXPECT_TRUE(defined.contains((*it)[1].str()))
          << fs::relative(path, kRoot).string() << ":" << line_of(text, static_cast<std::size_t>(it->position()))
          << " cites " << (*it)[1].str() << ", which no test under tests/ defines";
    }
  }
  EXPECT_GT(citations, 20U);
}

// docs/ops.md and docs/architecture.md: second order through max pooling is not supported;
// max_pool2d_grad is marked not differentiable and autodiff passes no gradient through it. The
// true derivative of sum(max_pool2d_grad(x, g)) with respect to g is 1 for every element (each
// window's g lands once in the sum); autodiff gives 0. When the op gets a gradient rule this test
// fails, and the docs must say so.
TEST(DocClaims, MaxPoolGradPassesNoGradient) {
  GraphBuilder b("pool_grad");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {1, 1, 4, 4}});
  const Tensor g = b.input("g", {DType::f32, {1, 1, 2, 2}});
  b.output("loss", sum(max_pool2d_grad(x, g, 2, 2, 0)));
  const Graph grads = differentiate(b.take(), {.wrt = {"x", "g"}});
  std::vector<float> xs(16);
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>((i * 7) % 16);
  const TensorMap out = interpret(grads, {{"x", HostTensor::f32({1, 1, 4, 4}, xs)},
                                          {"g", HostTensor::f32({1, 1, 2, 2}, {1.F, 2.F, 3.F, 4.F})}})
                            .outputs;
  EXPECT_EQ(out.at("loss").at(0), 10.0) << "the forward sums every window's g once";
  for (const std::string name : {"grad.x", "grad.g"}) {
    const HostTensor& grad = out.at(name);
    ASSERT_GT(grad.size(), 0U) << name;
    for (std::size_t i = 0; i < grad.size(); ++i) EXPECT_EQ(grad.at(i), 0.0) << name << "[" << i << "]";
  }
}

// docs/ops.md: every conv2d attribute is required, dilation and groups included: a graph text that
// leaves one out is refused by name rather than run with a guessed default.
TEST(DocClaims, Conv2dAttributesAreAllRequired) {
  GraphBuilder b("conv");
  TracingScope scope(b);
  b.output("y", conv2d(b.input("x", {DType::f32, {1, 4, 5, 5}}), b.input("w", {DType::f32, {4, 2, 3, 3}}),
                       {.dilation = 2, .groups = 2}));
  const std::string text = print_graph(b.take(), {.locations = false});
  EXPECT_NO_THROW(parse_graph(text)) << text;
  for (const std::string attribute : {"dilation", "groups"}) {
    const std::size_t at = text.find(attribute + "=");
    ASSERT_NE(at, std::string::npos) << text;
    const std::size_t next = text.find_first_of(",}", text.find_first_of(attribute == "dilation" ? "]" : ",}", at));
    ASSERT_NE(next, std::string::npos) << text;
    std::string without = text;
    without.erase(at, next - at + (without[next] == ',' ? 2 : 0));
    try {
      parse_graph(without);
      ADD_FAILURE() << "a conv2d without " << attribute << " parsed:\n" << without;
    } catch (const ParseError& e) {
      EXPECT_NE(std::string(e.what()).find(attribute), std::string::npos) << e.what();
    }
  }
}

// docs/ops.md: there is no i32 arithmetic at all (so no floor or truncating division and no
// remainder): the arithmetic ops refuse i32 operands at trace time rather than compute in f32.
TEST(DocClaims, ArithmeticRefusesI32Operands) {
  GraphBuilder b("ints");
  TracingScope scope(b);
  const Tensor i = b.input("i", {DType::i32, {2, 3}});
  const Tensor j = b.input("j", {DType::i32, {2, 3}});
  EXPECT_THROW(add(i, j), ShapeError);
  EXPECT_THROW(sub(i, j), ShapeError);
  EXPECT_THROW(mul(i, j), ShapeError);
  EXPECT_THROW(div(i, j), ShapeError);
  EXPECT_THROW(minimum(i, j), ShapeError);
  EXPECT_THROW(maximum(i, j), ShapeError);
}

}  // namespace
}  // namespace tg
