// Large magnitudes (issue 13 item 5) on the Vulkan executor: exp, sigmoid, tanh, gelu, silu,
// softmax, log_softmax, softmax_causal and cross_entropy on inputs up to |x| = 1e4 with the exact
// overflow points of f32 and f64 exp (tests/support/large_magnitude.h), forward and the gradient
// graph of loss = sum(y * w), against the f64 oracle under the per-element bounds of
// tests/support/large_magnitude_bounds.h (the same the f32 interpreter meets). The elementwise ops
// also run fused (op(x) * 2, and inside every gradient graph): fused and unfused programs must give
// the same bits. Under the validation layer when TG_VK_VALIDATION=1.
#include <gtest/gtest.h>

#include <bit>
#include <iostream>

#include "property/property_support.h"
#include "support/large_magnitude.h"
#include "support/large_magnitude_bounds.h"
#include "support/op_seed.h"
#include "tensorgrad/vk/executor.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using namespace tg::testing::large;

class VkLargeMagnitude : public testing::VkTest, public ::testing::WithParamInterface<OpId> {};

std::string op_param_name(const ::testing::TestParamInfo<OpId>& info) { return std::string(op_name(info.param)); }

// A subnormal result is off by a step of the f32 grid near 0; where the device flushes subnormals
// (no DenormPreserve: lavapipe 22.3, NVIDIA's H200) that step is FLT_MIN.
double tiny_unit(const std::shared_ptr<Context>& ctx) { return ctx->preserves_denormals() ? kDenormMin : kFloatMin; }

// Empty when both runs hold the same bits in every output.
std::string bit_difference(const TensorMap& a, const TensorMap& b) {
  for (const auto& [name, t] : a) {
    const auto u = b.at(name).to_f64();
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (std::bit_cast<std::uint32_t>(static_cast<float>(t.at(i))) !=
          std::bit_cast<std::uint32_t>(static_cast<float>(u[i]))) {
        return name + "[" + std::to_string(i) + "]: " + fmt(t.at(i)) + " vs " + fmt(u[i]);
      }
    }
  }
  return "";
}

// Runs g fused and unfused: the same bits, returned once.
TensorMap run_both_ways(const std::shared_ptr<Context>& ctx, const Graph& g, const TensorMap& in) {
  const TensorMap fused = Program(ctx, g).run(in);
  const TensorMap plain = Program(ctx, g, {.fuse_elementwise = false}).run(in);
  const std::string diff = bit_difference(fused, plain);
  EXPECT_EQ(diff, "") << "fused and unfused programs differ";
  return fused;
}

struct Worst {
  double forward = 0, gradient = 0;
};

void check_case(const std::shared_ptr<Context>& ctx, const Case& c, Worst& worst) {
  SCOPED_TRACE(c.label);
  const auto x = c.inputs.at("x").to_f64();
  const auto oracle = interpret(c.forward, c.inputs, {.compute = ComputeType::f64}).outputs.at("y").to_f64();
  const TensorMap got = run_both_ways(ctx, c.forward, c.inputs);
  const Comparison forward = compare("y", x, oracle, got.at("y").to_f64(), forward_allowed(c, oracle, tiny_unit(ctx)));
  EXPECT_FALSE(forward.failure) << *forward.failure;
  worst.forward = std::max(worst.forward, forward.worst);
  if (c.times_two) return;

  TensorMap inputs;
  const Graph grad_graph = gradient_graph(c, inputs, 0x9a4d + x.size());
  const auto grad_oracle = interpret(grad_graph, inputs, {.compute = ComputeType::f64}).outputs;
  const TensorMap grad_got = run_both_ways(ctx, grad_graph, inputs);
  const auto g = grad_oracle.at("grad.x").to_f64();
  const Comparison gradient = compare("grad.x", x, g, grad_got.at("grad.x").to_f64(),
                                      gradient_allowed(c, inputs, grad_oracle.at("y").to_f64(), g, tiny_unit(ctx)));
  EXPECT_FALSE(gradient.failure) << *gradient.failure << "gradient graph:\n"
                                 << print_graph(grad_graph, {.locations = false});
  worst.gradient = std::max(worst.gradient, gradient.worst);
}

TEST_P(VkLargeMagnitude, MatchesTheF64OracleForwardGradientAndFused) {
  const OpId op = GetParam();
  auto ctx = make_context();
  std::vector<Case> cases = fixed_cases(op);
  // Compiling the programs dominates a case on lavapipe; TG_PROPERTY_SCALE raises the count.
  const int random = tg::testing::scaled_cases(12);
  for (int i = 0; i < random; ++i) {
    cases.push_back(random_case(op, 0x7a4e0000ULL + static_cast<std::uint64_t>(i) * 104729 + tg::testing::op_seed(op)));
  }
  if (is_unary(op)) {
    // op(x) * 2 fuses into one dispatch: the fused kernel's copy of the math must match.
    for (std::size_t k = 0, n = cases.size(); k < n && k < 4; ++k) {
      Case chained = cases[k];
      chained.times_two = true;
      chained.forward = build_forward(chained, chained.inputs.at("x").type.shape);
      chained.label += " times two";
      cases.push_back(std::move(chained));
    }
  }
  Worst worst;
  for (const Case& c : cases) {
    check_case(ctx, c, worst);
    if (HasFailure()) break;
  }
  std::cout << op_name(op) << ": worst error / bound, forward " << worst.forward << ", gradient " << worst.gradient
            << "\n";
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

INSTANTIATE_TEST_SUITE_P(Ops, VkLargeMagnitude, ::testing::ValuesIn(magnitude_ops()), op_param_name);

}  // namespace
}  // namespace tg::vk
