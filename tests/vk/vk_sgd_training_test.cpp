// SGD on Backend::vulkan: momentum (plain, and Nesterov with global gradient-norm clipping) with
// weight decay, the momentum buffer resident on the device and written back every step, trained
// side by side with the f32 interpreter for 20 steps (Adam and AdamW: vk_training_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/train/training.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

constexpr int kN = 8;

struct LinReg : Module {
  Linear l{*this, "l", 2, 1};
};

Tensor mse(const LinReg& m, const Inputs& in) {
  Tensor r = m.l(in.at("x")) - in.at("y");
  return mean(r * r);
}

TensorMap batch() {
  std::vector<float> x, y;
  for (int i = 0; i < kN; ++i) {
    const float x0 = 0.25f * static_cast<float>(i) - 1.f, x1 = 0.5f - 0.125f * static_cast<float>(i);
    x.insert(x.end(), {x0, x1});
    y.push_back(1.5f * x0 - 2.f * x1 + 0.5f);
  }
  return {{"x", HostTensor::f32({kN, 2}, x)}, {"y", HostTensor::f32({kN, 1}, y)}};
}

TEST_F(VkTest, SgdWithMomentumMatchesTheF32InterpreterFor20Steps) {
  auto ctx = make_context();
  for (const bool nesterov : {false, true}) {
    SCOPED_TRACE(nesterov ? "nesterov, clipped" : "momentum");
    LinReg model;
    const auto make = [&](Backend backend, std::shared_ptr<Context> c) {
      return compile(TrainingSpec<LinReg>{
          .model = model,
          .loss = mse,
          .inputs = {{"x", {{kN, 2}}}, {"y", {{kN, 1}}}},
          .optimizer = {.kind = SgdConfig{.momentum = 0.9, .nesterov = nesterov, .weight_decay = 0.01},
                        .clip_grad_norm = nesterov ? std::optional<double>(0.5) : std::nullopt},
          .lr = 0.05,
          .backend = backend,
          .seed = 7,
          .vk_context = std::move(c)});
    };
    Training gpu = make(Backend::vulkan, ctx), cpu = make(Backend::interp_f32, nullptr);
    const TensorMap data = batch();
    double first_loss = 0, last_loss = 0;
    for (int step = 1; step <= 20; ++step) {
      const StepResult a = gpu.step(data), b = cpu.step(data);
      ASSERT_TRUE(a.ok()) << a.failure().message;
      ASSERT_TRUE(b.ok()) << b.failure().message;
      // As in vk_training_test.cpp: different summation orders and Vulkan's few-ulp division give
      // ~1e-7 relative per op, carried from step to step through the params and the momentum.
      const double diff = std::abs(a.loss() - b.loss()) / std::max(1.0, std::abs(b.loss()));
      EXPECT_LT(diff, 1e-4) << "step " << step << ": vulkan " << a.loss() << ", interp_f32 " << b.loss();
      if (step == 1) {
        first_loss = b.loss();
        double squared = 0;  // the gradients before clipping: above the clip norm, so it acts
        for (const auto& [name, values] : cpu.download_param_grads()) {
          for (const float g : values) squared += static_cast<double>(g) * g;
        }
        if (nesterov) {
          EXPECT_GT(std::sqrt(squared), 0.5) << "the first step's gradients are clipped";
        }
      }
      last_loss = b.loss();
    }
    EXPECT_LT(last_loss, 0.5 * first_loss) << "the steps train";
    const ParamValues pa = gpu.download_params(), pb = cpu.download_params();
    for (const auto& [name, values] : pb) {
      for (std::size_t i = 0; i < values.size(); ++i) EXPECT_NEAR(pa.at(name)[i], values[i], 1e-4) << name;
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
