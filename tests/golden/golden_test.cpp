// The golden runner: every case of tests/golden/data/*.golden (PyTorch's values, written by
// tools/make_goldens.py) is traced through call_table(), run by the interpreter in f64 and f32, and
// compared with PyTorch: the output, and the gradients of sum(y * proj) when the file holds them.
// Each case is its own test, Golden/Case.MatchesPyTorch/<case name>.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "golden_calls.h"
#include "golden_compare.h"
#include "golden_file.h"
#include "support/tolerance.h"

namespace tg::golden {
namespace {

namespace fs = std::filesystem;

const fs::path kGoldenDir = TG_GOLDEN_DIR;
constexpr const char* kProjInput = "golden.proj";  // not a valid golden input name, so no clash

struct Library {
  std::vector<std::string> files;
  std::vector<GoldenCase> cases;
  std::vector<std::string> errors;  // files that do not parse
};

const Library& library() {
  static const Library lib = [] {
    Library l;
    std::vector<fs::path> paths;
    const fs::path dir = kGoldenDir / "data";
    if (fs::is_directory(dir)) {
      for (const auto& entry : fs::directory_iterator(dir)) {
        if (entry.path().extension() == ".golden") paths.push_back(entry.path());
      }
    }
    std::sort(paths.begin(), paths.end());
    for (const auto& path : paths) {
      l.files.push_back(path.filename().string());
      try {
        auto cases = load_golden_file(path);
        l.cases.insert(l.cases.end(), std::make_move_iterator(cases.begin()), std::make_move_iterator(cases.end()));
      } catch (const std::exception& e) {
        l.errors.push_back(e.what());
      }
    }
    return l;
  }();
  return lib;
}

// The runner's loss nodes carry this call site, and autodiff points their gradient nodes at it too,
// so the completeness test can tell the harness's nodes from the case's.
const CallSite& loss_site() {
  static const CallSite site = CallSite::current();
  return site;
}

struct Traced {
  Graph forward;                  // the case's inputs, output "y"
  std::optional<Graph> gradient;  // plus kProjInput; outputs y, loss, grad.<input>
};

Traced trace(const GoldenCase& c) {
  const auto& table = call_table();
  const auto call = table.find(c.call);
  if (call == table.end()) {
    throw Error("no golden call named '" + c.call +
                "' in call_table() (register it in tests/golden/calls_<family>.cpp)");
  }
  GraphBuilder b(c.name);
  TracingScope scope(b);
  std::vector<Tensor> inputs;
  for (const auto& in : c.inputs) inputs.push_back(b.input(in.name, in.value.type));
  const Tensor y = call->second(inputs, c.attrs);
  if (!y.valid()) throw Error("call '" + c.call + "' returned no tensor");
  if (y.type() != c.output.value.type) {
    throw Error("call '" + c.call + "' returns " + y.type().to_string() + " but PyTorch's output is " +
                c.output.value.type.to_string());
  }
  b.output("y", y);
  Traced traced{b.graph(), std::nullopt};
  if (c.proj && !c.grads.empty()) {
    const Tensor proj = b.input(kProjInput, c.proj->value.type);
    b.output("loss", sum(mul(y, proj, loss_site()), Axes::all(), {}, loss_site()));
    std::vector<std::string> wrt;
    for (const auto& g : c.grads) wrt.push_back(g.name);
    traced.gradient = differentiate(b.graph(), {.loss = "loss", .wrt = wrt});
  }
  return traced;
}

// Runs `g` in f64 and f32 and checks each expected output: f64 within kF64Relative of PyTorch,
// f32 within the property suite's graph tolerance.
void check_runs(const GoldenCase& c, const Graph& g, const TensorMap& inputs, const TensorMap& expected) {
  InterpResult f64;
  InterpResult f32;
  try {
    f64 = interpret(g, inputs, {.compute = ComputeType::f64, .keep_all_values = true});
    f32 = interpret(g, inputs, {.compute = ComputeType::f32});
  } catch (const std::exception& e) {
    ADD_FAILURE() << "case " << c.name << " (" << c.where() << "): the interpreter failed: " << e.what() << "\ngraph:\n"
                  << print_graph(g, {.locations = false});
    return;
  }
  const double input_scale = max_magnitude(inputs);
  std::vector<const HostTensor*> all_values;
  for (const auto& v : f64.values) all_values.push_back(&v);
  const double f32_tolerance = testing::graph_tolerance(g) * std::max(1.0, max_magnitude(all_values));
  for (const auto& [name, want] : expected) {
    const double f64_tolerance = kF64Relative * (1 + std::max(input_scale, max_magnitude({&want})));
    if (auto why = compare_tensors(want, f64.outputs.at(name), f64_tolerance)) {
      ADD_FAILURE() << "case " << c.name << " (" << c.where() << "), " << name << ", f64 vs PyTorch: " << *why;
    }
    if (auto why = compare_tensors(want, f32.outputs.at(name), f32_tolerance)) {
      ADD_FAILURE() << "case " << c.name << " (" << c.where() << "), " << name << ", f32 vs PyTorch: " << *why;
    }
  }
}

class Case : public ::testing::TestWithParam<std::size_t> {};

TEST_P(Case, MatchesPyTorch) {
  const GoldenCase& c = library().cases.at(GetParam());
  Traced traced;
  try {
    traced = trace(c);
  } catch (const std::exception& e) {
    FAIL() << "case " << c.name << " (" << c.where() << "): tracing call '" << c.call << "' failed: " << e.what();
  }
  TensorMap inputs;
  for (const auto& in : c.inputs) inputs.emplace(in.name, in.value);
  check_runs(c, traced.forward, inputs, {{"y", c.output.value}});
  if (traced.gradient) {
    inputs.emplace(kProjInput, c.proj->value);
    TensorMap grads;
    for (const auto& g : c.grads) grads.emplace("grad." + g.name, g.value);
    check_runs(c, *traced.gradient, inputs, grads);
  }
}

std::vector<std::size_t> case_indices() {
  std::vector<std::size_t> indices(library().cases.size());
  for (std::size_t i = 0; i < indices.size(); ++i) indices[i] = i;
  return indices;
}

// The case's name, made unique (GoogleTest refuses duplicates; CaseNamesAreUnique reports them).
std::string case_test_name(const ::testing::TestParamInfo<std::size_t>& info) {
  const auto& cases = library().cases;
  std::string name = cases.at(info.param).name;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  std::size_t earlier = 0;
  for (std::size_t i = 0; i < info.param; ++i) earlier += cases[i].name == cases[info.param].name ? 1 : 0;
  return earlier ? name + "_dup" + std::to_string(earlier) : name;
}

INSTANTIATE_TEST_SUITE_P(Golden, Case, ::testing::ValuesIn(case_indices()), case_test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Case);

TEST(GoldenFiles, ParseAndExist) {
  const Library& lib = library();
  EXPECT_FALSE(lib.files.empty()) << "no .golden files in " << (kGoldenDir / "data");
  for (const auto& error : lib.errors) ADD_FAILURE() << error;
}

TEST(GoldenFiles, CaseNamesAreUnique) {
  std::map<std::string, std::string> first;
  for (const auto& c : library().cases) {
    const auto [it, fresh] = first.emplace(c.name, c.where());
    EXPECT_TRUE(fresh) << "case " << c.name << " at " << c.where() << " was already defined at " << it->second;
  }
}

// Each module tools/goldens/<m>.py has its tests/golden/data/<m>.golden (someone ran the generator).
TEST(GoldenFiles, EveryGeneratorModuleHasADataFile) {
  const fs::path modules = kGoldenDir.parent_path().parent_path() / "tools" / "goldens";
  if (!fs::is_directory(modules)) GTEST_SKIP() << modules << " is not here";
  for (const auto& entry : fs::directory_iterator(modules)) {
    const std::string stem = entry.path().stem().string();
    if (entry.path().extension() != ".py" || stem == "spec" || stem == "__init__") continue;
    EXPECT_TRUE(fs::exists(kGoldenDir / "data" / (stem + ".golden")))
        << "tools/goldens/" << stem << ".py has no tests/golden/data/" << stem
        << ".golden: run /usr/bin/python3 tools/make_goldens.py --only " << stem;
  }
}

// Every registry op is exercised by some case: in its forward graph, or in its gradient graph
// outside the runner's own loss (conv2d_input_grad appears only there).
TEST(GoldenCompleteness, EveryRegistryOpAppearsInAGoldenGraph) {
  const SourceLoc harness = SourceLoc::from(loss_site());
  std::set<OpId> seen;
  for (const auto& c : library().cases) {
    Traced traced;
    try {
      traced = trace(c);
    } catch (const std::exception&) {
      continue;  // reported by the case's own test
    }
    for (const Node& node : traced.forward.nodes()) seen.insert(node.op);
    if (!traced.gradient) continue;
    for (const Node& node : traced.gradient->nodes()) {
      if (node.loc != harness) seen.insert(node.op);
    }
  }
  std::string missing;
  for (OpId op : all_ops()) {
    if (!seen.contains(op)) missing += (missing.empty() ? "" : ", ") + std::string(op_name(op));
  }
  EXPECT_TRUE(missing.empty()) << "ops that no golden case exercises: " << missing;
}

TEST(GoldenCompleteness, EveryGoldenCallHasACase) {
  std::set<std::string, std::less<>> called;
  for (const auto& c : library().cases) called.insert(c.call);
  std::string unused;
  for (const auto& [name, fn] : call_table()) {
    if (!called.contains(name)) unused += (unused.empty() ? "" : ", ") + name;
  }
  EXPECT_TRUE(unused.empty()) << "golden calls without a case in tests/golden/data: " << unused;
}

}  // namespace
}  // namespace tg::golden
