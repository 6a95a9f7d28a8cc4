// Gradient checkpointing on Vulkan: the gradient graphs of random chains with random segments
// checkpointed (recomputation nodes in the backward) run on the Vulkan executor within the property
// suites' tolerance of the f64 oracle and repeat their bits; and they match the unmarked graph's
// Vulkan run within the same bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "support/checkpoint_chain.h"
#include "support/test_scale.h"
#include "vk_oracle_check.h"

namespace tg::vk {
namespace {

class VkCheckpoint : public testing::VkTest {};

// Seeds 1-4 draw one chain of each length, 3, 4, 5 and 2 blocks (TG_PROPERTY_SCALE multiplies them:
// each seed costs lavapipe about 10 s of fused-launch compiles, so CI stopped at 4 of the 6 it ran).
TEST_F(VkCheckpoint, RecomputedGradientsMatchTheOracleAndTheUnmarkedGraph) {
  const std::shared_ptr<Context> ctx = make_context();
  int checked = 0;
  const auto seeds = static_cast<std::uint32_t>(std::max(4, tg::testing::scaled_count(4)));  // not below 4 under ASan
  for (std::uint32_t seed = 1; seed <= seeds; ++seed) {
    const tg::testing::Chain marked = tg::testing::random_chain(seed, 2 + static_cast<int>(seed % 4), true);
    if (marked.segments.empty()) continue;
    ++checked;
    const Graph with = differentiate(marked.forward);
    const Graph without = differentiate(tg::testing::random_chain(seed, 2 + static_cast<int>(seed % 4), false).forward);
    const TensorMap in = tg::testing::chain_inputs(with, seed);
    SCOPED_TRACE("seed " + std::to_string(seed));
    // Fused (as Programs run by default) against the oracle. Guards are the other suites' concern,
    // and fused launches cost lavapipe about a second each to compile, so the comparison with the
    // unmarked graph runs unfused (fusion keeps the unfused kernels' bits).
    testing::check_against_oracle(ctx, with, in, {.otherwise = std::nullopt, .guards = false});
    const double tol = testing::f32_tolerance(with, in);
    const TensorMap a = Program(ctx, with, {.fuse_elementwise = false}).run(in);
    const TensorMap b = Program(ctx, without, {.fuse_elementwise = false}).run(in);
    for (const auto& [name, want] : b) {
      const HostTensor& got = a.at(name);
      ASSERT_EQ(got.type, want.type) << name;
      for (std::size_t i = 0; i < want.size(); ++i) {
        EXPECT_LE(std::fabs(got.at(i) - want.at(i)), tol) << name << "[" << i << "]";
      }
    }
  }
  EXPECT_GE(checked, 3);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
