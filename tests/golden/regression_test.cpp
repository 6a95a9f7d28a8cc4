// The regression runner: every tests/golden/regressions/*.graph (a graph in the IR text format, a
// line `---`, then `input` and `expect` value lines; see tests/golden/regressions/README.md) must
// parse, print and parse back to the same graph, give the recorded f64 outputs in f64 and, within
// the graph tolerance, in f32, and have autodiff gradients that match central differences. Each file is its own test,
// Regressions/File.Passes/<stem>.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include "golden_compare.h"
#include "golden_file.h"
#include "property/checks.h"
#include "support/tolerance.h"
#include "tensorgrad/ir/ops/ids/elementwise_unary.h"

namespace tg::golden {
namespace {

namespace fs = std::filesystem;

struct Regression {
  std::string file;
  Graph graph;
  TensorMap inputs;
  TensorMap expected;
  std::set<std::string> frozen;  // inputs the gradient check holds fixed
};

// Splits at the first line that is exactly `---`; the values part keeps its line numbers.
Regression load_regression(const fs::path& path) {
  const std::string file = path.filename().string();
  const std::string text = read_text_file(path);
  std::size_t pos = 0;
  std::size_t line = 1;
  std::optional<std::size_t> separator;
  while (pos <= text.size() && !separator) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    std::string_view row(text.data() + pos, end - pos);
    while (!row.empty() && (row.back() == '\r' || row.back() == ' ')) row.remove_suffix(1);
    if (row == "---") {
      separator = pos;
    } else {
      pos = end + 1;
      ++line;
    }
  }
  if (!separator) throw FormatError(file, line - 1, "no `---` line between the graph and its values");
  Regression r;
  r.file = file;
  try {
    r.graph = parse_graph(std::string_view(text).substr(0, *separator));
  } catch (const ParseError& e) {
    throw FormatError(file, e.line(), e.what());
  }
  const std::size_t values_start = std::min(text.find('\n', *separator), text.size());
  for (const Directive& d : read_directives(std::string_view(text).substr(values_start), file, line)) {
    if (d.keyword == "frozen") {
      if (d.tokens.size() != 1) throw FormatError(file, d.line, "frozen takes one input name");
      r.frozen.insert(d.tokens[0]);
      continue;
    }
    if (d.keyword != "input" && d.keyword != "expect") {
      throw FormatError(file, d.line, "unknown keyword '" + d.keyword + "' (input, expect or frozen)");
    }
    NamedTensor t = parse_tensor(d, 0, true, file);
    auto& into = d.keyword == "input" ? r.inputs : r.expected;
    if (!into.emplace(t.name, std::move(t.value)).second) {
      throw FormatError(file, d.line, d.keyword + " '" + t.name + "' given twice");
    }
  }
  for (const auto& [name, value] : r.expected) {
    if (!r.graph.find_output(name)) throw FormatError(file, 1, "expect '" + name + "': the graph has no such output");
  }
  return r;
}

// Paths as strings: GoogleTest's value printer recurses on std::filesystem::path.
std::vector<std::string> regression_files() {
  std::vector<std::string> paths;
  const fs::path dir = fs::path(TG_GOLDEN_DIR) / "regressions";
  if (fs::is_directory(dir)) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() == ".graph") paths.push_back(entry.path().string());
    }
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

class File : public ::testing::TestWithParam<std::string> {};

TEST_P(File, Passes) {
  Regression r;
  try {
    r = load_regression(GetParam());
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  const std::string printed = print_graph(r.graph);
  const Graph reparsed = parse_graph(printed);
  EXPECT_TRUE(reparsed == r.graph) << r.file << ": parse(print(g)) differs from g:\n" << printed;
  EXPECT_EQ(print_graph(reparsed), printed) << r.file << ": print(parse(print(g))) differs";

  InterpResult f64;
  InterpResult f32;
  try {
    f64 = interpret(r.graph, r.inputs, {.compute = ComputeType::f64, .keep_all_values = true});
    f32 = interpret(r.graph, r.inputs, {.compute = ComputeType::f32});
  } catch (const std::exception& e) {
    FAIL() << r.file << ": the interpreter failed: " << e.what();
  }
  std::vector<const HostTensor*> all_values;
  for (const auto& v : f64.values) all_values.push_back(&v);
  const double f32_tolerance = testing::graph_tolerance(r.graph) * std::max(1.0, max_magnitude(all_values));
  const double input_scale = max_magnitude(r.inputs);
  for (const auto& [name, want] : r.expected) {
    const double f64_tolerance = kF64Relative * (1 + std::max(input_scale, max_magnitude({&want})));
    if (auto why = compare_tensors(want, f64.outputs.at(name), f64_tolerance)) {
      ADD_FAILURE() << r.file << ": output " << name << ", f64 vs the recorded oracle: " << *why;
    }
    if (auto why = compare_tensors(want, f32.outputs.at(name), f32_tolerance)) {
      ADD_FAILURE() << r.file << ": output " << name << ", f32 vs the recorded oracle: " << *why;
    }
  }

  // A gradient bug's file holds only the forward graph, so the gradients are re-derived here and
  // checked against central differences, as the property that found it did. stop_gradient is the
  // one op finite differences see through by design, so graphs holding it skip this check.
  const bool has_stop_gradient = std::any_of(r.graph.nodes().begin(), r.graph.nodes().end(),
                                             [](const Node& node) { return node.op == op::StopGradient; });
  if (!has_stop_gradient) {
    const testing::GraphCase c{r.graph, r.inputs, r.frozen};
    for (std::uint64_t seed : {1, 2, 3}) {
      if (auto why = testing::check_directional_gradient(c, seed)) ADD_FAILURE() << r.file << ": " << *why;
    }
  }
}

std::string file_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = fs::path(info.param).stem().string();
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Regressions, File, ::testing::ValuesIn(regression_files()), file_test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(File);

}  // namespace
}  // namespace tg::golden
