// tg::compile on Backend::vulkan: the linear regression of tests/unit/training_test.cpp trained on
// the device and on the f32 interpreter side by side, a NaN step that changes nothing on the
// device, and an attached forward reading the device params.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
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

Tensor predict(const LinReg& m, const Inputs& in) { return m.l(in.at("x")); }

TensorMap batch() {
  std::vector<float> x, y;
  for (int i = 0; i < kN; ++i) {
    const float x0 = std::sin(0.7f * static_cast<float>(i)), x1 = std::cos(1.3f * static_cast<float>(i));
    x.insert(x.end(), {x0, x1});
    y.push_back(1.5f * x0 - 2.f * x1 + 0.5f);
  }
  return {{"x", HostTensor::f32({kN, 2}, x)}, {"y", HostTensor::f32({kN, 1}, y)}};
}

Training compile_on(const LinReg& model, Backend backend, std::shared_ptr<Context> ctx) {
  return compile(TrainingSpec<LinReg>{.model = model,
                                      .loss = mse,
                                      .inputs = {{"x", {{kN, 2}}}, {"y", {{kN, 1}}}},
                                      .optimizer = {.kind = AdamConfig{}},
                                      .lr = 0.05,
                                      .backend = backend,
                                      .seed = 3,
                                      .vk_context = std::move(ctx)});
}

TEST_F(VkTest, TrainingMatchesTheF32InterpreterFor20Steps) {
  auto ctx = make_context();
  LinReg model;
  Training gpu = compile_on(model, Backend::vulkan, ctx), cpu = compile_on(model, Backend::interp_f32, nullptr);
  ASSERT_EQ(gpu.download_params(), cpu.download_params()) << "the same seed gives the same init on every backend";
  const TensorMap data = batch();
  double worst = 0;
  for (int step = 1; step <= 20; ++step) {
    const StepResult a = gpu.step(data), b = cpu.step(data);
    ASSERT_TRUE(a.ok()) << a.failure().message;
    ASSERT_TRUE(b.ok()) << b.failure().message;
    // Both compute in float with different summation orders (matmul, mean, the gradient sums) and
    // Vulkan's division and sqrt are within a few ulp rather than correctly rounded: each op adds
    // ~1e-7 relative, about 30 ops per step, and the differences carry from step to step through
    // the params. Linear growth over 20 steps bounds them by 20 * 30 * 1e-7 = 6e-5; 1e-4 leaves room.
    const double diff = std::abs(a.loss() - b.loss()) / std::max(1.0, std::abs(b.loss()));
    worst = std::max(worst, diff);
    EXPECT_LT(diff, 1e-4) << "step " << step << ": vulkan " << a.loss() << ", interp_f32 " << b.loss();
  }
  const ParamValues pa = gpu.download_params(), pb = cpu.download_params();
  for (const auto& [name, values] : pb) {
    for (std::size_t i = 0; i < values.size(); ++i) EXPECT_NEAR(pa.at(name)[i], values[i], 1e-4) << name;
  }
  // The last step's gradients stay on the device until asked for; they are the interpreter's.
  const ParamValues ga = gpu.download_param_grads(), gb = cpu.download_param_grads();
  ASSERT_EQ(ga.size(), gb.size());
  for (const auto& [name, values] : gb) {
    ASSERT_EQ(ga.at(name).size(), values.size()) << name;
    for (std::size_t i = 0; i < values.size(); ++i) EXPECT_NEAR(ga.at(name)[i], values[i], 1e-4) << name;
  }
  char worst_text[32];
  std::snprintf(worst_text, sizeof worst_text, "%.3g", worst);
  RecordProperty("worst_relative_loss_difference", worst_text);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// A model whose sums are long enough for the device's summation order (tree/grid-stride) to differ
// from the interpreter's: 64 rows, 16 features, a hidden layer of 32.
struct Mlp : Module {
  Linear l1{*this, "l1", 16, 32, {.init = init::kaiming()}};
  Linear l2{*this, "l2", 32, 1, {.init = init::kaiming({.gain = 1.0})}};
};

TEST_F(VkTest, MlpTrainingStaysCloseToTheF32InterpreterFor20Steps) {
  auto ctx = make_context();
  Mlp model;
  const auto make = [&](Backend backend, std::shared_ptr<Context> c) {
    return compile(TrainingSpec<Mlp>{.model = model,
                                     .loss =
                                         [](const Mlp& m, const Inputs& in) {
                                           Tensor r = m.l2(relu(m.l1(in.at("x")))) - in.at("y");
                                           return mean(r * r);
                                         },
                                     .inputs = {{"x", {{64, 16}}}, {"y", {{64, 1}}}},
                                     .optimizer = {.kind = AdamWConfig{}},
                                     .lr = 1e-2,
                                     .backend = backend,
                                     .seed = 17,
                                     .vk_context = std::move(c)});
  };
  Training gpu = make(Backend::vulkan, ctx), cpu = make(Backend::interp_f32, nullptr);
  std::vector<float> x(64 * 16), y(64);
  for (int i = 0; i < 64; ++i) {
    float target = 0;
    for (int j = 0; j < 16; ++j) {
      x[i * 16 + j] = std::sin(0.37f * static_cast<float>(i * 16 + j));
      target += x[i * 16 + j] * static_cast<float>(j % 3 - 1);
    }
    y[i] = std::tanh(target);
  }
  const TensorMap data{{"x", HostTensor::f32({64, 16}, x)}, {"y", HostTensor::f32({64, 1}, y)}};
  double worst = 0, first = 0, last = 0;
  for (int step = 1; step <= 20; ++step) {
    const StepResult a = gpu.step(data), b = cpu.step(data);
    ASSERT_TRUE(a.ok()) << a.failure().message;
    ASSERT_TRUE(b.ok()) << b.failure().message;
    // The bound of TrainingMatchesTheF32InterpreterFor20Steps: sums of 16-64 terms add a few ulp
    // of their magnitude each, Adam's update is bounded by lr per element, so differences grow at
    // most linearly over the steps.
    const double diff = std::abs(a.loss() - b.loss()) / std::max(1.0, std::abs(b.loss()));
    worst = std::max(worst, diff);
    EXPECT_LT(diff, 1e-4) << "step " << step << ": vulkan " << a.loss() << ", interp_f32 " << b.loss();
    (step == 1 ? first : last) = b.loss();
  }
  EXPECT_LT(last, first) << "it trains";
  char worst_text[32];
  std::snprintf(worst_text, sizeof worst_text, "%.3g", worst);
  RecordProperty("worst_relative_loss_difference", worst_text);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, TrainingNanStepLeavesDeviceParamsAndStateUnchanged) {
  auto ctx = make_context();
  LinReg model;
  Training train = compile_on(model, Backend::vulkan, ctx);
  const TensorMap data = batch();
  for (int s = 0; s < 3; ++s) ASSERT_TRUE(train.step(data).ok());
  const TensorMap params = train.download_param_tensors(), state = train.download_optimizer_state();
  const TensorMap grads = train.download_param_grad_tensors();
  TensorMap bad = data;
  bad.at("x").set(0, std::numeric_limits<double>::quiet_NaN());
  const StepResult r = train.step(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure().kind, "nonfinite");
  EXPECT_EQ(train.download_param_tensors(), params);
  EXPECT_EQ(train.download_optimizer_state(), state);
  EXPECT_EQ(train.download_param_grad_tensors(), grads) << "the grads are those of the last completed step";
  EXPECT_EQ(train.steps(), 3);
  ASSERT_TRUE(train.step(data).ok());
  EXPECT_EQ(train.steps(), 4);
  EXPECT_NE(train.download_param_tensors(), params);
  // Resetting the optimizer forgets the gradients.
  train.reset({.params = false, .optimizer = true});
  EXPECT_THROW((void)train.download_param_grads(), Error);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// An attached forward on the device reads the training's params after every step (the copy through
// the host that Forward documents).
TEST_F(VkTest, AttachedForwardFollowsTheTrainingParams) {
  auto ctx = make_context();
  LinReg model;
  Training train = compile_on(model, Backend::vulkan, ctx);
  Forward infer = train.attach(ForwardSpec<LinReg>{.forward = predict, .inputs = {{"x", {{-1, 2}}}}});
  const HostTensor x = HostTensor::f32({3, 2}, {1.f, 0.f, 0.f, 1.f, 2.f, -1.f});
  for (int step = 0; step < 3; ++step) {
    const ForwardResult r = infer.run({{"x", x}});
    ASSERT_TRUE(r.ok()) << r.failure().message;
    const ParamValues p = train.download_params();
    for (int i = 0; i < 3; ++i) {
      // Two products and two adds in float: a few ulp of values below 10.
      const double want = x.at(2 * i) * p.at("l.W")[0] + x.at(2 * i + 1) * p.at("l.W")[1] + p.at("l.b")[0];
      EXPECT_NEAR(r.output().at(i), want, 1e-6) << "step " << step << " row " << i;
    }
    ASSERT_TRUE(train.step(batch()).ok());
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// A checkpoint saved from the device resumes on the f32 interpreter (and back): the file holds
// params, optimizer state and the step counter, whatever the backend.
TEST_F(VkTest, CheckpointMovesBetweenVulkanAndTheInterpreter) {
  auto ctx = make_context();
  LinReg model;
  Training gpu = compile_on(model, Backend::vulkan, ctx), cpu = compile_on(model, Backend::interp_f32, nullptr);
  const TensorMap data = batch();
  for (int s = 0; s < 4; ++s) ASSERT_TRUE(gpu.step(data).ok());
  const std::string path = (std::filesystem::temp_directory_path() / "tg_vk_training.safetensors").string();
  gpu.save(path);
  cpu.load(path);
  EXPECT_EQ(cpu.steps(), 4);
  EXPECT_EQ(cpu.download_param_tensors(), gpu.download_param_tensors()) << "F32 holds f32 values exactly";
  EXPECT_EQ(cpu.download_optimizer_state(), gpu.download_optimizer_state());
  for (int s = 0; s < 3; ++s) {
    const StepResult a = gpu.step(data), b = cpu.step(data);
    ASSERT_TRUE(a.ok() && b.ok());
    // The bound of TrainingMatchesTheF32InterpreterFor20Steps, for fewer steps.
    EXPECT_NEAR(a.loss(), b.loss(), 1e-4 * std::max(1.0, b.loss())) << "step " << s + 5;
  }
  cpu.save(path);
  gpu.load(path);
  EXPECT_EQ(gpu.steps(), 7);
  EXPECT_EQ(gpu.download_param_tensors(), cpu.download_param_tensors());
  std::remove(path.c_str());
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
