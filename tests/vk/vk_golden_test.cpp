// The golden suite on Vulkan. Every case of tests/golden/data/*.golden is traced by golden::trace_case
// exactly as tests/golden/golden_test.cpp does, and its graph (and, when the file holds
// gradients, the graph of the gradients of sum(y * proj)) runs through tg::vk::Program with guard
// regions, and again with memory reuse (same bits required). The outputs must match PyTorch under
// the rule golden_test.cpp applies to the f32 interpreter (graph_tolerance times the largest
// |value| of the f64 run). A case whose graph holds an op without a Vulkan kernel fails
// naming the op. Each regression graph of tests/golden/regressions runs too: its outputs against
// the recorded oracle values, and its autodiff graph against the f64 oracle.
//
// load_regression() repeats a file-local function of regression_test.cpp (that file holds that
// suite's tests, so it cannot be linked here).
#include <algorithm>
#include <bit>
#include <cctype>
#include <filesystem>
#include <set>

#include "golden/golden_calls.h"
#include "golden/golden_compare.h"
#include "golden/golden_file.h"
#include "support/tolerance.h"
#include "tensorgrad/vk/executor.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

namespace fs = std::filesystem;
using golden::GoldenCase;
using golden::kProjInput;
using golden::Traced;

const fs::path kGoldenDir = TG_GOLDEN_DIR;
constexpr std::uint64_t kGuardBytes = 64;

struct GoldenLibrary {
  std::vector<GoldenCase> cases;
  std::vector<std::string> errors;  // files that do not parse (the golden label reports them too)
};

// Loaded while GoogleTest lists the tests, so a malformed file must not throw out of here.
const GoldenLibrary& golden_library() {
  static const GoldenLibrary lib = [] {
    GoldenLibrary l;
    std::vector<fs::path> paths;
    if (fs::is_directory(kGoldenDir / "data")) {
      for (const auto& entry : fs::directory_iterator(kGoldenDir / "data"))
        if (entry.path().extension() == ".golden") paths.push_back(entry.path());
    }
    std::sort(paths.begin(), paths.end());
    for (const auto& path : paths) {
      try {
        auto cases = golden::load_golden_file(path);
        l.cases.insert(l.cases.end(), std::make_move_iterator(cases.begin()), std::make_move_iterator(cases.end()));
      } catch (const std::exception& e) {
        l.errors.push_back(e.what());
      }
    }
    return l;
  }();
  return lib;
}

// Empty when every op of `g` has a Vulkan kernel; otherwise their names.
std::string ops_without_kernel(const Graph& g) {
  std::set<std::string> missing;
  for (const Node& node : g.nodes())
    if (!has_kernel(node.op)) missing.insert(std::string(op_name(node.op)));
  std::string text;
  for (const std::string& name : missing) text += (text.empty() ? "" : ", ") + name;
  return text;
}

// The first output element whose bits differ between `a` and `b` (f32, f16 and bf16 by bit
// pattern, so a NaN equals itself; i32 and bool by value), or nullopt.
std::optional<std::string> first_bit_difference(const TensorMap& a, const TensorMap& b) {
  for (const auto& [name, x] : a) {
    const HostTensor& y = b.at(name);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const DType dtype = x.type.dtype;
      const auto f32_bits = [](double v) { return std::bit_cast<std::uint32_t>(static_cast<float>(v)); };
      const auto bits16 = [dtype](double v) { return f32_to_low_precision_bits(static_cast<float>(v), dtype); };
      const bool same = dtype == DType::f32       ? f32_bits(x.at(i)) == f32_bits(y.at(i))
                        : is_low_precision(dtype) ? bits16(x.at(i)) == bits16(y.at(i))
                                                  : x.at(i) == y.at(i);
      if (!same) {
        return name + "[" + std::to_string(i) + "]: " + golden::format_number(x.at(i)) + " vs " +
               golden::format_number(y.at(i));
      }
    }
  }
  return std::nullopt;
}

// Runs `g` on Vulkan with guard regions and checks each expected output within the f32
// interpreter's golden bound: graph_tolerance(g) * max(1, largest |value| of the f64 run). Then
// runs it again from a Program without guards, whose plan reuses dead values' memory (what real
// runs do): it must give the same bits.
void check_on_vulkan(const std::shared_ptr<Context>& ctx, const std::string& what, const Graph& g,
                     const TensorMap& inputs, const TensorMap& expected) {
  InterpResult f64;
  TensorMap guarded_result;
  TensorMap reused_result;
  std::optional<Program> guarded;
  try {
    f64 = interpret(g, inputs, {.compute = ComputeType::f64, .keep_all_values = true});
    guarded.emplace(ctx, g, ProgramOptions{.guard_bytes = kGuardBytes});
    guarded_result = guarded->run(inputs);
    reused_result = Program(ctx, g).run(inputs);
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": the run failed: " << e.what() << "\ngraph:\n" << print_graph(g, {.locations = false});
    return;
  }
  for (const std::string& guard : guarded->check_guards()) ADD_FAILURE() << what << ": guard overwritten: " << guard;
  std::vector<const HostTensor*> all_values;
  for (const auto& v : f64.values) all_values.push_back(&v);
  const double tolerance = tg::testing::graph_tolerance(g) * std::max(1.0, golden::max_magnitude(all_values));
  for (const auto& [name, want] : expected) {
    if (auto why = golden::compare_tensors(want, guarded_result.at(name), tolerance)) {
      ADD_FAILURE() << what << ", " << name << ", Vulkan vs expected: " << *why;
    }
  }
  if (auto diff = first_bit_difference(guarded_result, reused_result)) {
    ADD_FAILURE() << what << ": the Program with memory reuse gives other bits than the one with guards: " << *diff;
  }
}

class VkGoldenCase : public testing::VkTest, public ::testing::WithParamInterface<std::size_t> {};

TEST_P(VkGoldenCase, MatchesPyTorch) {
  const GoldenCase& c = golden_library().cases.at(GetParam());
  const std::string what = "case " + c.name + " (" + c.where() + ")";
  Traced traced;
  try {
    traced = golden::trace_case(c);
  } catch (const std::exception& e) {
    FAIL() << what << ": tracing call '" << c.call << "' failed: " << e.what();
  }
  if (const std::string missing = ops_without_kernel(traced.forward); !missing.empty()) {
    FAIL() << what << ": no Vulkan kernel for " << missing;
  }
  auto ctx = make_context();
  TensorMap inputs;
  for (const auto& in : c.inputs) inputs.emplace(in.name, in.value);
  check_on_vulkan(ctx, what, traced.forward, inputs, {{"y", c.output.value}});
  if (traced.gradient) {
    if (const std::string missing = ops_without_kernel(*traced.gradient); !missing.empty()) {
      FAIL() << what << ": the gradient graph needs " << missing << ", which has no Vulkan kernel";
    }
    inputs.emplace(kProjInput, c.proj->value);
    TensorMap grads;
    for (const auto& g : c.grads) grads.emplace("grad." + g.name, g.value);
    check_on_vulkan(ctx, what + " (gradients)", *traced.gradient, inputs, grads);
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

std::vector<std::size_t> case_indices() {
  std::vector<std::size_t> indices(golden_library().cases.size());
  for (std::size_t i = 0; i < indices.size(); ++i) indices[i] = i;
  return indices;
}

// As golden_test.cpp names them, so one case has the same name in both suites.
std::string case_test_name(const ::testing::TestParamInfo<std::size_t>& info) {
  const auto& cases = golden_library().cases;
  std::string name = cases.at(info.param).name;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  std::size_t earlier = 0;
  for (std::size_t i = 0; i < info.param; ++i) earlier += cases[i].name == cases[info.param].name ? 1 : 0;
  return earlier ? name + "_dup" + std::to_string(earlier) : name;
}

INSTANTIATE_TEST_SUITE_P(VkGolden, VkGoldenCase, ::testing::ValuesIn(case_indices()), case_test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(VkGoldenCase);

TEST(VkGoldenFiles, ParseAndExist) {
  EXPECT_FALSE(golden_library().cases.empty()) << "no golden cases in " << (kGoldenDir / "data");
  for (const auto& error : golden_library().errors) ADD_FAILURE() << error;
}

// ---- regression graphs ----------------------------------------------------------------------

struct Regression {
  Graph graph;
  TensorMap inputs;
  TensorMap expected;
  std::set<std::string> frozen;
};

// The format of tests/golden/regressions/README.md: a graph, a line `---`, then input, expect and
// frozen lines (regression_test.cpp checks the format strictly; this reads what it accepts).
Regression load_regression(const fs::path& path) {
  const std::string file = path.filename().string();
  const std::string text = golden::read_text_file(path);
  std::size_t pos = 0;
  std::size_t line = 1;
  while (pos < text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    std::string_view row(text.data() + pos, end - pos);
    while (!row.empty() && (row.back() == '\r' || row.back() == ' ')) row.remove_suffix(1);
    if (row == "---") break;
    pos = end + 1;
    ++line;
  }
  if (pos >= text.size()) throw golden::FormatError(file, line, "no `---` line");
  Regression r;
  r.graph = parse_graph(std::string_view(text).substr(0, pos));
  const std::size_t values_start = std::min(text.find('\n', pos), text.size());
  for (const golden::Directive& d : golden::read_directives(std::string_view(text).substr(values_start), file, line)) {
    if (d.keyword == "frozen" && d.tokens.size() == 1) {
      r.frozen.insert(d.tokens[0]);
    } else if (d.keyword == "input" || d.keyword == "expect") {
      golden::NamedTensor t = golden::parse_tensor(d, 0, true, file);
      (d.keyword == "input" ? r.inputs : r.expected).emplace(t.name, std::move(t.value));
    } else {
      throw golden::FormatError(file, d.line, "unexpected '" + d.keyword + "'");
    }
  }
  return r;
}

// The graph with loss = sum_k sum(out_k * proj_k) over its f32 outputs (proj_k fixed values in
// [-1, 1]), differentiated against its unfrozen f32 inputs; nullopt when either set is empty.
std::optional<Graph> regression_gradient(const Regression& r, TensorMap& inputs) {
  GraphBuilder b(r.graph.name());
  b.mutable_graph() = r.graph;
  {
    TracingScope scope(b);
    std::optional<Tensor> loss;
    for (const auto& out : r.graph.outputs()) {
      const TensorType& type = r.graph.type(out.value);
      if (type.dtype != DType::f32) continue;
      const std::string name = "proj." + out.name;
      std::vector<double> values(static_cast<std::size_t>(type.size()));
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>((i * 7 + 3) % 17) / 8.0 - 1.0;
      inputs.emplace(name, HostTensor::of(type, std::move(values)));
      const Tensor term = sum(b.wrap(out.value) * b.input(name, type));
      loss = loss ? *loss + term : term;
    }
    if (!loss) return std::nullopt;
    b.output("loss", *loss);
  }
  std::vector<std::string> wrt;
  for (const auto& in : r.graph.inputs())
    if (r.graph.type(in.value).dtype == DType::f32 && !r.frozen.contains(in.name)) wrt.push_back(in.name);
  if (wrt.empty()) return std::nullopt;
  return differentiate(b.take(), {.loss = "loss", .wrt = wrt});
}

std::vector<std::string> regression_files() {
  std::vector<std::string> paths;
  if (fs::is_directory(kGoldenDir / "regressions")) {
    for (const auto& entry : fs::directory_iterator(kGoldenDir / "regressions"))
      if (entry.path().extension() == ".graph") paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

class VkRegression : public testing::VkTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(VkRegression, MatchesTheOracle) {
  const std::string file = fs::path(GetParam()).filename().string();
  Regression r;
  try {
    r = load_regression(GetParam());
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  if (const std::string missing = ops_without_kernel(r.graph); !missing.empty()) {
    FAIL() << file << ": no Vulkan kernel for " << missing;
  }
  auto ctx = make_context();
  check_on_vulkan(ctx, file + " vs the recorded oracle", r.graph, r.inputs, r.expected);
  TensorMap inputs = r.inputs;
  if (const std::optional<Graph> gradient = regression_gradient(r, inputs)) {
    if (const std::string missing = ops_without_kernel(*gradient); !missing.empty()) {
      FAIL() << file << ": the gradient graph needs " << missing << ", which has no Vulkan kernel";
    }
    const TensorMap oracle = interpret(*gradient, inputs, {.compute = ComputeType::f64}).outputs;
    check_on_vulkan(ctx, file + " autodiff graph vs the f64 oracle", *gradient, inputs, oracle);
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

std::string file_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = fs::path(info.param).stem().string();
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(VkRegressions, VkRegression, ::testing::ValuesIn(regression_files()), file_test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(VkRegression);

}  // namespace
}  // namespace tg::vk
