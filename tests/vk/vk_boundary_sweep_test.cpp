// The vk property at boundary sizes, one op at a time: every registry op on samples drawn with the
// boundary profile (dims from the kernels' size thresholds, tests/property/graph_gen.h), its graph
// and its projected-gradient graph run by tg::vk::Program and compared with the f64 oracle under
// graph_tolerance. Seeds are fixed (an op's is a hash of its name), so the launch paths it reaches
// are the same on every run (the path-coverage check relies on that). Which paths a fixed set of
// draws reaches is still luck, so an op's sweep draws more cases, up to twice its count, while one
// of its Vulkan paths (known gaps aside) is unreached. The cases rotate through three launch setups:
//   - the default launch choices;
//   - ScopedSmallLaunchThresholdsForTesting: matmul's large tiles, the workgroup combine of split
//     reductions and sum_to_shape's block partials switch at small sizes (kernels.h);
//   - ProgramOptions::max_workgroups of 1-3: every shader's grid-stride loop runs.
// The convolutions, matmul and sum_to_shape run each case twice, with the kernels GPUs run and
// with those CPU devices run (ScopedConvKernelForTesting, ScopedMatmulKernelForTesting,
// ScopedLongSumsForTesting), whichever the device runs by default.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "property/checks.h"
#include "property/graph_gen.h"
#include "property/property_support.h"
#include "support/op_seed.h"
#include "support/path_coverage.h"
#include "support/tolerance.h"
#include "tensorgrad/ir/ops/ids/image.h"
#include "tensorgrad/ir/ops/ids/layout.h"
#include "tensorgrad/ir/ops/ids/matmul.h"
#include "tensorgrad/vk/executor.h"
#include "vk/kernels/kernels.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using tg::testing::GraphCase;

// Cases per op: 12, and 6 more for each Vulkan launch path named after the op (its kernel's
// branches), up to 64: ops with many size-dependent paths get the draws to reach them all.
int cases_for(OpId op) {
  int paths = 0;
  for (const LaunchPathCount& p : launch_path_counts())
    if (p.backend == "vulkan" && p.kernel == op_name(op)) ++paths;
  return std::min(64, 12 + 6 * paths);
}

// The paths of tests/coverage/known_gaps.txt (first word of each line that is not a comment).
const std::set<std::string>& known_gaps() {
  static const std::set<std::string> gaps = [] {
    std::set<std::string> names;
    std::ifstream file(TG_KNOWN_GAPS_FILE);
    std::string line;
    while (std::getline(file, line)) {
      std::istringstream words(line);
      std::string name;
      if (words >> name && name[0] != '#') names.insert(name);
    }
    return names;
  }();
  return gaps;
}

// Whether a Vulkan path named after the op, other than a known gap, has no hit in this process yet.
bool has_unreached_path(OpId op) {
  for (const LaunchPathCount& p : launch_path_counts()) {
    if (p.backend == "vulkan" && p.kernel == op_name(op) && p.hits == 0 && !known_gaps().contains(p.name()))
      return true;
  }
  return false;
}

// An op and the float dtype its free float inputs take: f32 for every op, f16 and bf16 for the
// float_generic ones. The 16-bit sweeps draw fewer cases (kLowPrecisionCases, the first two size
// tiers): Vulkan runs a 16-bit node as its f32 kernel between casts (docs/vulkan.md), so what they
// add is the casts and the dtype handling around every op, not new launch paths.
struct OpInDtype {
  OpId op;
  DType dtype;
};
constexpr int kLowPrecisionCases = 4;

std::vector<OpInDtype> ops_in_dtypes() {
  std::vector<OpInDtype> out;
  for (OpId op : all_ops()) {
    out.push_back({op, DType::f32});
    if (op_def(op).dtypes != DTypeRule::float_generic) continue;
    for (DType dtype : {DType::f16, DType::bf16}) out.push_back({op, dtype});
  }
  return out;
}

class BoundarySweep : public testing::VkTest, public ::testing::WithParamInterface<OpInDtype> {};

std::string sweep_name(const ::testing::TestParamInfo<OpInDtype>& param) {
  const std::string name(op_name(param.param.op));
  return param.param.dtype == DType::f32 ? name : name + "_" + std::string(dtype_name(param.param.dtype));
}

std::string fmt(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

// Empty when every output of `c` on Vulkan (under `options`) is within graph_tolerance of the f64
// oracle (i32/bool exactly), NaN matching NaN; otherwise the first disagreement.
std::string compare(const std::shared_ptr<Context>& ctx, const GraphCase& c, const ProgramOptions& options) {
  const InterpResult oracle = interpret(c.graph, c.inputs, {.compute = ComputeType::f64, .keep_all_values = true});
  double scale = 1.0;
  for (const HostTensor& t : oracle.values)
    for (double v : t.to_f64())
      if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
  const double tol = tg::testing::graph_tolerance(c.graph) * scale;
  Program program(ctx, c.graph, options);
  const TensorMap got = program.run(c.inputs);
  for (const auto& [name, want] : oracle.outputs) {
    const HostTensor& g = got.at(name);
    if (g.type != want.type) return "output " + name + " has type " + g.type.to_string();
    for (std::size_t i = 0; i < want.size(); ++i) {
      const double d = want.at(i), f = g.at(i);
      const bool ok =
          (std::isnan(d) && std::isnan(f)) || (is_float(want.type.dtype) ? std::fabs(f - d) <= tol : f == d);
      if (!ok) {
        return "output " + name + "[" + std::to_string(i) + "]: Vulkan gives " + fmt(f) + ", the f64 oracle " + fmt(d) +
               " (allowed error " + fmt(tol) + ")";
      }
    }
  }
  return "";
}

TEST_P(BoundarySweep, MatchesTheF64OracleForwardAndGradient) {
  const auto [op, dtype] = GetParam();
  const bool low_precision = dtype != DType::f32;
  auto ctx = make_context();
  // Four size tiers, by case: plain boundary draws (2 in 6), boundary draws of at least 128 (2 in
  // 6: row segments, tiles), of at least 8192 (1 in 6: split rows, split-K, chunked sums), and of
  // at least 128 under a 16x larger element cap (1 in 6: paths past 2^17 elements, such as
  // softmax_causal's workgroup rows at T = 1025 and sum_to_shape's long contiguous rows).
  std::array<tg::testing::GenOptions, 4> tiers{};
  for (auto& tier : tiers) {
    tier = tg::testing::boundary_options();
    tier.size.boundary_chance = 0.5;  // one op per graph: draw its dims at the boundaries more often
    tier.float_dtypes = {dtype};
  }
  tiers[1].size.min_boundary = 128;
  tiers[2].size.min_boundary = 8192;
  tiers[3].size.min_boundary = 128;
  tiers[3].size.boundary_chance = 0.8;  // both sides of a [rows, length] pair at a boundary
  tiers[3].size.max_elements = std::int64_t{1} << 21;
  tiers[3].max_graph_elements = std::int64_t{1} << 23;
  constexpr std::array<int, 6> kTierOfCase{0, 0, 1, 1, 2, 3};
  const int cases = tg::testing::scaled_cases(low_precision ? kLowPrecisionCases : cases_for(op));
  int checked = 0;
  for (int i = 0; i < cases || (!low_precision && i < 2 * cases && has_unreached_path(op)); ++i) {
    const std::uint64_t seed = 0x5eeb0000ULL + static_cast<std::uint64_t>(i) * 104729 + tg::testing::op_seed(op);
    const std::array<OpId, 1> only{op};
    const auto& tier = tiers[static_cast<std::size_t>(kTierOfCase[static_cast<std::size_t>(i % 6)])];
    const GraphCase c = tg::testing::build_graph({tg::testing::Step{0, seed}}, only, tier);
    if (c.graph.nodes().empty()) continue;  // the step was skipped (a non-finite or huge result)
    if (low_precision && !tg::testing::holds_dtype(c, dtype)) continue;  // the sample drew integer inputs only
    ProgramOptions options;
    std::optional<ScopedSmallLaunchThresholdsForTesting> small;
    // The launch setup rotates every 6 cases, so each tier meets each setup.
    const int setup_index = (i / 6 + i) % 3;
    // Small thresholds switch pooling to a workgroup per output (correct but slow on lavapipe past
    // a few thousand outputs) and split the convolutions' K from 32 terms (many partials), so image
    // graphs take them only up to 2^12 elements.
    const bool image_op = op == op::MaxPool2d || op == op::MaxPool2dGrad || op == op::Conv2d ||
                          op == op::Conv2dInputGrad || op == op::Conv2dWeightGrad;
    if (setup_index == 1 &&
        tg::testing::largest_value(c.graph) <= (image_op ? std::int64_t{1} << 12 : std::int64_t{1} << 17))
      small.emplace();
    if (setup_index == 2) options.max_workgroups = static_cast<std::uint32_t>(1 + i % 3);
    const std::string launch = !small && setup_index != 2 ? "default launch choices"
                               : small                    ? "small launch thresholds"
                                                          : "max_workgroups " + std::to_string(options.max_workgroups);
    // The convolutions, matmul and sum_to_shape run every case both ways the devices differ on:
    // as GPUs run them (tiles, a workgroup per long sum) and as CPU devices do (row blocks, long
    // sums' block partials), whichever the device takes by default.
    using Kernel = LaunchThresholds::ConvKernel;
    using LongSums = LaunchThresholds::LongSums;
    const bool conv_op = op == op::Conv2d || op == op::Conv2dInputGrad || op == op::Conv2dWeightGrad;
    const bool both_ways = conv_op || op == op::Matmul || op == op::SumToShape;
    const std::vector<Kernel> kernels =
        both_ways ? std::vector{Kernel::tiles, Kernel::rows} : std::vector{Kernel::by_device};
    for (const Kernel kernel : kernels) {
      std::optional<ScopedConvKernelForTesting> forced_conv;
      std::optional<ScopedMatmulKernelForTesting> forced_matmul;
      std::optional<ScopedLongSumsForTesting> forced_sums;
      if (both_ways) {
        forced_conv.emplace(kernel);
        forced_matmul.emplace(kernel);
        forced_sums.emplace(kernel == Kernel::tiles ? LongSums::workgroup_per_output : LongSums::block_partials);
      }
      const std::string setup = std::string(kernel == Kernel::tiles  ? "GPU kernels, "
                                            : kernel == Kernel::rows ? "CPU kernels, "
                                                                     : "") +
                                launch;
      if (std::string why = compare(ctx, c, options); !why.empty()) {
        FAIL() << why << " (" << setup << ", case " << i << ")" << tg::testing::describe(c);
      }
      const auto grads = low_precision ? tg::testing::dtype_gradient_case(c, dtype, seed)
                                       : tg::testing::projected_gradient_case(c, seed);
      if (grads) {
        if (std::string why = compare(ctx, *grads, options); !why.empty()) {
          FAIL() << why << " (" << setup << ", case " << i << ", gradient graph)" << tg::testing::describe(*grads);
        }
      }
    }
    ++checked;
  }
  if (!low_precision) {
    EXPECT_GT(checked, 0) << op_name(op) << ": every boundary sample was skipped";
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
  tg::testing::write_path_coverage();
}

INSTANTIATE_TEST_SUITE_P(Registry, BoundarySweep, ::testing::ValuesIn(ops_in_dtypes()), sweep_name);

}  // namespace
}  // namespace tg::vk
