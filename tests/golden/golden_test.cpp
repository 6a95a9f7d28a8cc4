// The golden runner: every case of tests/golden/data/*.golden (PyTorch's values, written by
// tools/make_goldens.py) is traced (trace_case: its explicit call, or the registry op it names), run
// by the interpreter in f64 and f32, and compared with PyTorch: the output, and the gradients of
// sum(y * proj) when the file holds them. Each case is its own test, Golden/Case.MatchesPyTorch/<case
// name>. The completeness tests tie the files to the registry: a module and a data file per op family,
// each op's cases in its family's file, every op in some case's graph.
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
// tools/goldens, beside tests/golden in the source tree.
const fs::path kModuleDir = kGoldenDir.parent_path().parent_path() / "tools" / "goldens";

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

// The module a data file comes from: data/<module>.golden.
std::string module_of(const GoldenCase& c) { return fs::path(c.file).stem().string(); }

// Runs `g` in f64 and f32 and checks each expected output: f64 within kF64Relative of PyTorch,
// f32 within the property suite's graph tolerance; a 16-bit output within compare_16bit's bound, a
// cast's output bit for bit.
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
  // 16-bit goldens (golden_compare.h derives the bound): one ulp of the dtype at a rounding flip plus
  // PyTorch's f32 arithmetic error, relative to the same scale as the f32 bound; casts bit for bit.
  const double arithmetic = f32_arithmetic_tolerance(g) * std::max(1.0, max_magnitude(all_values));
  const bool is_cast = c.call == "cast";
  for (const auto& [name, want] : expected) {
    const bool sixteen_bit = is_low_precision(want.type.dtype);
    const double f64_tolerance = kF64Relative * (1 + std::max(input_scale, max_magnitude({&want})));
    const auto compare = [&](const HostTensor& got, bool oracle) {
      if (is_cast) return compare_bits(want, got);
      if (sixteen_bit) return compare_16bit(want, got, oracle ? arithmetic : 2 * arithmetic);
      return compare_tensors(want, got, oracle ? f64_tolerance : f32_tolerance);
    };
    if (auto why = compare(f64.outputs.at(name), true)) {
      ADD_FAILURE() << "case " << c.name << " (" << c.where() << "), " << name << ", f64 vs PyTorch: " << *why;
    }
    if (auto why = compare(f32.outputs.at(name), false)) {
      ADD_FAILURE() << "case " << c.name << " (" << c.where() << "), " << name << ", f32 vs PyTorch: " << *why;
    }
  }
}

class Case : public ::testing::TestWithParam<std::size_t> {};

TEST_P(Case, MatchesPyTorch) {
  const GoldenCase& c = library().cases.at(GetParam());
  Traced traced;
  try {
    traced = trace_case(c);
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
  if (!fs::is_directory(kModuleDir)) GTEST_SKIP() << kModuleDir << " is not here";
  for (const auto& entry : fs::directory_iterator(kModuleDir)) {
    const std::string stem = entry.path().stem().string();
    if (entry.path().extension() != ".py" || stem == "spec" || stem == "__init__") continue;
    EXPECT_TRUE(fs::exists(kGoldenDir / "data" / (stem + ".golden")))
        << "tools/goldens/" << stem << ".py has no tests/golden/data/" << stem
        << ".golden: run /usr/bin/python3 tools/make_goldens.py --only " << stem;
  }
}

// One module per op family of ops.def, named like its TG_FAMILY line, with its data file.
TEST(GoldenCompleteness, EveryOpFamilyHasAModuleAndADataFile) {
  for (const std::string_view family : op_families()) {
    const std::string name(family);
    if (fs::is_directory(kModuleDir)) {
      EXPECT_TRUE(fs::exists(kModuleDir / (name + ".py")))
          << "op family " << name << " (ops.def) has no golden module tools/goldens/" << name << ".py";
    }
    EXPECT_TRUE(fs::exists(kGoldenDir / "data" / (name + ".golden")))
        << "op family " << name << " has no tests/golden/data/" << name
        << ".golden: run /usr/bin/python3 tools/make_goldens.py --only " << name;
  }
}

// A case that calls an op lives in the module of the op's family (composites live where they fit).
TEST(GoldenCompleteness, OpCasesLiveInTheirFamilysModule) {
  for (const auto& c : library().cases) {
    const auto op = find_op(c.call);
    if (!op) continue;
    EXPECT_TRUE(module_of(c) == op_family(*op))
        << "case " << c.name << " (" << c.where() << ") calls op " << c.call << " of family " << op_family(*op)
        << ": move it to tools/goldens/" << op_family(*op) << ".py";
  }
}

// Every call resolves: an explicit entry or a registry op (the case's own test says why it fails).
TEST(GoldenCompleteness, EveryCaseCallResolves) {
  for (const auto& c : library().cases) {
    EXPECT_TRUE(call_table().contains(c.call) || find_op(c.call))
        << "case " << c.name << " (" << c.where() << ") calls '" << c.call
        << "', which is neither a registry op nor an explicit entry of tests/golden/calls_*.cpp";
  }
}

// Every registry op is exercised by some case: in its forward graph, or in its gradient graph
// outside the runner's own loss (conv2d_input_grad appears only there).
TEST(GoldenCompleteness, EveryRegistryOpAppearsInAGoldenGraph) {
  const SourceLoc harness = SourceLoc::from(harness_site());
  std::set<OpId> seen;
  for (const auto& c : library().cases) {
    Traced traced;
    try {
      traced = trace_case(c);
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

// Every explicit entry is used by a case of its own module's data file: the calls_<m>.cpp files hold
// only what tools/goldens/<m>.py needs.
TEST(GoldenCompleteness, EveryExplicitCallHasACaseInItsModule) {
  std::set<std::pair<std::string, std::string>, std::less<>> used;  // (module, call)
  for (const auto& c : library().cases) used.emplace(module_of(c), c.call);
  for (const auto& [name, entry] : call_table()) {
    EXPECT_TRUE(used.contains(std::pair(entry.module, name)))
        << "explicit golden call '" << name << "' of tests/golden/calls_" << entry.module
        << ".cpp has no case in tests/golden/data/" << entry.module << ".golden";
  }
}

}  // namespace
}  // namespace tg::golden
