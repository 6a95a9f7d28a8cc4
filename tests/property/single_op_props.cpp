// Every op in the registry, one at a time, on its own samples: the kernel fills exactly the shape
// its rule promises, f32 matches the f64 oracle under the op's tolerance class, print/parse round
// trips, and (for differentiable ops) the full Jacobian from autodiff matches central differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <iostream>
#include <limits>

#include "checks.h"
#include "graph_gen.h"
#include "property_support.h"
#include "support/op_seed.h"
#include "tensorgrad/ir/ops/ids/elementwise_unary.h"

namespace tg::testing {
namespace {

constexpr std::int64_t kMaxJacobianElements = 64;

// An op and the float dtype its free float inputs take: f32 for every op, and f16 and bf16 for the
// float_generic ones (an explicit-dtype op's samples draw their own dtypes).
struct OpInDtype {
  OpId op;
  DType dtype;
};

class SingleOp : public ::testing::TestWithParam<OpInDtype> {};

std::string op_param_name(const ::testing::TestParamInfo<OpInDtype>& info) {
  const std::string name(op_name(info.param.op));
  return info.param.dtype == DType::f32 ? name : name + "_" + std::string(dtype_name(info.param.dtype));
}

std::vector<OpInDtype> ops_in_dtypes() {
  std::vector<OpInDtype> out;
  for (OpId op : all_ops()) {
    out.push_back({op, DType::f32});
    if (op_def(op).dtypes != DTypeRule::float_generic) continue;
    for (DType dtype : {DType::f16, DType::bf16}) out.push_back({op, dtype});
  }
  return out;
}

std::optional<std::string> check_low_precision_gradient(const GraphCase& c, DType dtype, std::uint64_t seed) {
  const std::optional<GraphCase> grad = dtype_gradient_case(c, dtype, seed);
  return grad ? check_f32_matches_f64(*grad) : std::nullopt;
}

// The op's own tolerance class, relative to the largest magnitude among its inputs and outputs; a
// 16-bit result may also sit one ulp of its dtype apart, where the runs' results straddle a
// rounding boundary (docs/testing.md, "Tolerances").
std::optional<std::string> check_op_tolerance(const GraphCase& c) {
  const auto oracle = interpret(c.graph, c.inputs, {.compute = ComputeType::f64});
  const auto fast = interpret(c.graph, c.inputs, {.compute = ComputeType::f32});
  const Node& node = c.graph.nodes().front();
  const OpDef& def = op_def(node.op);
  std::vector<TensorType> types;
  for (ValueId v : node.inputs) types.push_back(c.graph.type(v));
  const HostTensor& expected = oracle.outputs.at("y");
  std::int64_t n = 1;
  if (def.reduction_length) {
    n = def.reduction_length(node.attrs, types);
  } else if (!types.empty() && expected.type.size() > 0) {
    n = std::max<std::int64_t>(1, types[0].size() / expected.type.size());
  }
  double scale = 1;
  for (const auto& [name, t] : c.inputs)
    for (double v : t.to_f64()) scale = std::max(scale, std::fabs(v));
  for (double v : expected.to_f64()) scale = std::max(scale, std::fabs(v));
  const double ulps = tolerance_ulps(def.tolerance, n);
  const double flip = ulps > 0 && is_low_precision(expected.type.dtype) ? 2 * unit_roundoff(expected.type.dtype) : 0;
  const double tol = 2 * (ulps * std::numeric_limits<float>::epsilon() + flip) * scale;
  const HostTensor& got = fast.outputs.at("y");
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double err = std::fabs(got.at(i) - expected.at(i));
    if (err > tol) {
      return "y[" + std::to_string(i) + "]: f32 " + std::to_string(got.at(i)) + " vs f64 " +
             std::to_string(expected.at(i)) + ", error " + std::to_string(err) + " > allowed " + std::to_string(tol) +
             " (" + std::string(tolerance_class_name(def.tolerance)) + ", n=" + std::to_string(n) + ")";
    }
  }
  return std::nullopt;
}

TEST_P(SingleOp, PassesEveryPropertyOnItsSamples) {
  const auto [op, dtype] = GetParam();
  const OpDef& def = op_def(op);
  ASSERT_NE(def.samples, nullptr) << def.name << " has no sample generator";
  const int cases = scaled_cases(100);
  int jacobians_checked = 0;
  for (int i = 0; i < cases; ++i) {
    SampleRng rng(0x5eed0000ULL + static_cast<std::uint64_t>(i) * 7919 + tg::testing::op_seed(op));
    auto sample = sample_in_dtype(op, rng, std::nullopt, dtype);
    ASSERT_TRUE(sample.has_value()) << def.name << ": samples() without a given input type must produce a sample";
    GraphCase c = build_single_op(op, *sample, rng);
    if (dtype != DType::f32 && !holds_dtype(c, dtype)) continue;
    for (const auto& check : {check_coverage(c), check_op_tolerance(c), check_round_trip(c)}) {
      ASSERT_FALSE(check.has_value()) << *check << describe(c);
    }
    if (!def.differentiable) continue;
    if (dtype != DType::f32) {
      const auto problem = check_low_precision_gradient(c, dtype, static_cast<std::uint64_t>(i));
      ASSERT_FALSE(problem.has_value()) << *problem << describe(c);
      continue;
    }
    std::int64_t total = c.graph.type(c.graph.outputs().front().value).size();
    for (const auto& in : c.graph.inputs()) total = std::max(total, c.graph.type(in.value).size());
    if (total > kMaxJacobianElements) {
      const auto problem = check_directional_gradient(c, static_cast<std::uint64_t>(i));
      ASSERT_FALSE(problem.has_value()) << *problem << describe(c);
      continue;
    }
    const auto problem = check_full_jacobian(c);
    ASSERT_FALSE(problem.has_value()) << *problem << describe(c);
    ++jacobians_checked;
  }
  if (def.differentiable && dtype == DType::f32) {
    EXPECT_GT(jacobians_checked, 0) << def.name << ": no sample was small enough for a full Jacobian check";
  }
  write_path_coverage();
}

// The op on samples drawn with the boundary profile (dims from the kernels' size thresholds, up
// to SizeProfile::max_elements per tensor): the kernel's blocked, tiled and split paths against
// the f64 oracle, and the gradient along a random direction against central differences.
TEST_P(SingleOp, PassesAtBoundarySizes) {
  const auto [op, dtype] = GetParam();
  const OpDef& def = op_def(op);
  ASSERT_NE(def.samples, nullptr) << def.name << " has no sample generator";
  GenOptions options = boundary_options();
  options.float_dtypes = {dtype};
  const int cases = scaled_cases(40);
  std::int64_t largest = 0;
  for (int i = 0; i < cases; ++i) {
    const std::uint64_t seed = 0xb0d0000ULL + static_cast<std::uint64_t>(i) * 7919 + tg::testing::op_seed(op);
    // One step of this op through the generator: its bounds (elements, work) apply, and a step it
    // skips (a non-finite or huge result) simply draws nothing.
    const std::vector<Step> steps{Step{0, seed}};
    const std::array<OpId, 1> only{op};
    const GraphCase c = build_graph(steps, only, options);
    if (c.graph.nodes().empty() || (dtype != DType::f32 && !holds_dtype(c, dtype))) continue;
    for (const auto& in : c.inputs) largest = std::max(largest, in.second.type.size());
    for (const auto& check : {check_coverage(c), check_f32_matches_f64(c)}) {
      ASSERT_FALSE(check.has_value()) << *check << describe(c);
    }
    if (dtype != DType::f32) {
      if (!def.differentiable || op == op::StopGradient) continue;
      const auto problem = check_low_precision_gradient(c, dtype, seed);
      ASSERT_FALSE(problem.has_value()) << *problem << describe(c);
      continue;
    }
    // Skipped over the memory bound (docs/testing.md), as in the random-graph properties.
    if (def.differentiable && op != op::StopGradient && within_memory_bound(directional_gradient_cost(c, seed))) {
      const auto problem = check_directional_gradient(c, seed);
      ASSERT_FALSE(problem.has_value()) << *problem << describe(c);
    }
  }
  std::cout << def.name << ": largest input " << largest << " elements\n";
  write_path_coverage();
}

INSTANTIATE_TEST_SUITE_P(Registry, SingleOp, ::testing::ValuesIn(ops_in_dtypes()), op_param_name);

}  // namespace
}  // namespace tg::testing
