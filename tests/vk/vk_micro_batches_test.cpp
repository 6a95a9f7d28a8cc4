// Gradient accumulation (TrainingSpec::micro_batches) on Vulkan: the step follows interp_f32's and
// repeats bit for bit, and its memory plan holds one micro-batch's activations at a time.
// tests/unit/micro_batches_test.cpp checks the semantics on the interpreters.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/train/training.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

struct Wide : Module {
  Linear l1{*this, "l1", 6, 256};
  Linear l2{*this, "l2", 256, 4};
};

Tensor wide_loss(const Wide& m, const Inputs& in) {
  return cross_entropy(m.l2(relu(m.l1(in.at("x")))), in.at("label"));
}

constexpr std::int64_t kRows = 256;

TensorMap wide_batch(int step) {
  std::vector<float> x;
  std::vector<std::int32_t> label;
  for (std::int64_t i = 0; i < kRows; ++i) {
    for (std::int64_t j = 0; j < 6; ++j) x.push_back(std::cos(0.19f * static_cast<float>(i * 6 + j + step)));
    label.push_back(static_cast<std::int32_t>((i + step) % 4));
  }
  return {{"x", HostTensor::f32({kRows, 6}, x)}, {"label", HostTensor::i32({kRows}, label)}};
}

Training compile_wide(const Wide& model, Backend backend, int micro_batches, std::shared_ptr<Context> ctx = nullptr) {
  return compile(TrainingSpec<Wide>{.model = model,
                                    .loss = wide_loss,
                                    .inputs = {{"x", {{kRows, 6}}}, {"label", {{kRows}, DType::i32}}},
                                    .optimizer = {.kind = AdamConfig{}},
                                    .lr = 0.01,
                                    .backend = backend,
                                    .seed = 3,
                                    .vk_context = std::move(ctx),
                                    .micro_batches = micro_batches});
}

TEST_F(VkTest, MicroBatchesFollowTheInterpreterAndRepeatBitForBit) {
  auto ctx = make_context();
  const Wide model;
  Training interp = compile_wide(model, Backend::interp_f32, 4);
  Training first = compile_wide(model, Backend::vulkan, 4, ctx);
  Training again = compile_wide(model, Backend::vulkan, 4, ctx);
  for (int step = 0; step < 3; ++step) {
    const TensorMap data = wide_batch(step);
    const StepResult a = interp.step(data), b = first.step(data), c = again.step(data);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    EXPECT_NEAR(a.loss(), b.loss(), 1e-5) << "step " << step;
    EXPECT_EQ(b.loss(), c.loss()) << "step " << step;
  }
  const ParamValues p_interp = interp.download_params(), p_first = first.download_params(),
                    p_again = again.download_params();
  for (const auto& [name, values] : p_first) {
    for (std::size_t i = 0; i < values.size(); ++i) {
      EXPECT_NEAR(values[i], p_interp.at(name)[i], 1e-4) << name << "[" << i << "]";
      EXPECT_EQ(values[i], p_again.at(name)[i]) << name << "[" << i << "]";
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, MicroBatchesHoldOneMicroBatchsActivations) {
  auto ctx = make_context();
  const Wide model;
  // The [256, 256] activations and their gradients dominate the plan; 8 micro-batches hold an
  // eighth of them (plus the gradient sums, the size of the params).
  const std::uint64_t full = compile_wide(model, Backend::vulkan, 1, ctx).memory_plan().total_bytes;
  const std::uint64_t micro = compile_wide(model, Backend::vulkan, 8, ctx).memory_plan().total_bytes;
  EXPECT_LT(micro, full / 2) << "8 micro-batches: " << micro << " bytes, one batch: " << full;
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
