// W2 at design.md's full size (vocab 65, B 32, T 128, d 128, 4 layers, 4 heads, AdamW) trains on the
// Vulkan executor, and its first step's loss and every param gradient match the f64 oracle (the
// same model, params and batch compiled on interp_f64). Its plan is larger than one storage-buffer
// binding on lavapipe (128 MiB), so this runs the multi-block plan at a real size in CI.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <string>

#include "support/library.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"
#include "vk_transformer_step.h"

namespace tg::vk {
namespace {

using testing::VkTest;

double l2(const HostTensor& t) {
  double sum = 0;
  for (double v : t.to_f64()) sum += v * v;
  return std::sqrt(sum);
}

double l2_diff(const HostTensor& a, const HostTensor& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += (a.at(i) - b.at(i)) * (a.at(i) - b.at(i));
  return std::sqrt(sum);
}

TEST_F(VkTest, W2AtFullSizeTrainsAndItsFirstStepMatchesTheF64Oracle) {
  auto ctx = make_context();
  const examples::TransformerConfig config{};  // design.md's W2
  constexpr std::int64_t kBatch = 32;
  Training vk = testing::compile_transformer(config, kBatch, Backend::vulkan, ctx);
  Training oracle = testing::compile_transformer(config, kBatch, Backend::interp_f64);
  oracle.upload_params(vk.download_params());
  const MemoryPlan plan = vk.memory_plan();
  std::cout << "W2 step on " << ctx->info().name << ": " << plan.to_string() << ", largest binding "
            << ctx->info().max_storage_buffer_range << " bytes\n";

  const TensorMap batch{{"tokens", testing::random_indices({kBatch, config.context}, config.vocab, 1)},
                        {"targets", testing::random_indices({kBatch, config.context}, config.vocab, 2)}};
  const StepResult got = vk.step(batch);
  const StepResult want = oracle.step(batch);
  ASSERT_TRUE(got.ok()) << got.failure().message;
  ASSERT_TRUE(want.ok()) << want.failure().message;
  EXPECT_NEAR(got.loss(), want.loss(), 1e-5 * std::abs(want.loss()));
  const TensorMap grads = vk.download_param_grad_tensors();
  const TensorMap oracle_grads = oracle.download_param_grad_tensors();
  ASSERT_EQ(grads.size(), oracle_grads.size());
  // Each gradient within 1e-4 of its own L2 norm, plus 1e-6 of the whole gradient's norm: the
  // attention key biases' gradients are exactly zero in exact arithmetic (softmax ignores a
  // constant added to a row), so f32 leaves only rounding noise there, on the whole gradient's scale.
  double global = 0;
  for (const auto& [name, g] : oracle_grads) global += l2(g) * l2(g);
  global = std::sqrt(global);
  double worst = 0;
  std::string worst_name;
  for (const auto& [name, g] : oracle_grads) {
    const double diff = l2_diff(grads.at(name), g), bound = 1e-4 * l2(g) + 1e-6 * global;
    EXPECT_LE(diff, bound) << name << ": |g| " << l2(g) << ", whole gradient " << global;
    if (diff / bound > worst) {
      worst = diff / bound;
      worst_name = name;
    }
  }
  std::cout << "loss " << got.loss() << " (oracle " << want.loss() << "), gradients at most " << worst
            << " of their bound (" << worst_name << "), whole gradient norm " << global << "\n";
  // Two more steps: the params written back across the plan's blocks keep training.
  for (int step = 0; step < 2; ++step) {
    const StepResult more = vk.step(batch);
    ASSERT_TRUE(more.ok()) << more.failure().message;
    EXPECT_TRUE(std::isfinite(more.loss()));
  }
  EXPECT_EQ(vk.steps(), 3);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
