// Dynamic loss scaling in the step graph (tensorgrad/passes/loss_scaling.h, PrecisionPolicy):
// GradScaler's semantics. An f16 gradient that overflows skips the whole update (params and Adam
// moments bit-identical, the step counter held) and halves the scale; growth_interval good steps in
// a row double it; a power-of-two scale changes no f32 gradient bit; the scale is saved with
// checkpoints; bad configs are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "support/library.h"

namespace tg {
namespace {

struct Net : Module {
  Linear l1{*this, "l1", 8, 4};
  Linear l2{*this, "l2", 4, 1};
};
Tensor net_loss(const Net& m, const Inputs& in) {
  const Tensor r = m.l2(relu(m.l1(in.at("x")))) - in.at("y");
  return mean(r * r);
}

Training net_training(const Net& net, PrecisionPolicy precision) {
  return compile(TrainingSpec<Net>{.model = net,
                                   .loss = net_loss,
                                   .inputs = {{"x", {{16, 8}}}, {"y", {{16, 1}}}},
                                   .optimizer = {.kind = AdamConfig{}},
                                   .lr = 1e-2,
                                   .seed = 11,
                                   .precision = precision});
}

TensorMap batch(double x_value) {
  std::vector<float> x(16 * 8), y(16);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(x_value * ((i % 7) - 3.0) / 3.0);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 3) - 1.0f;
  return {{"x", HostTensor::f32({16, 8}, x)}, {"y", HostTensor::f32({16, 1}, y)}};
}

// Every param and optimizer state value, bit for bit (the scale state left out).
std::vector<std::pair<std::string, std::vector<float>>> update_state(const Training& t) {
  std::vector<std::pair<std::string, std::vector<float>>> out;
  for (const auto& [name, value] : t.download_param_tensors()) out.emplace_back(name, value.to_f32());
  for (const auto& [name, value] : t.download_optimizer_state()) {
    if (!name.starts_with("optim.")) out.emplace_back(name, value.to_f32());
  }
  return out;
}

TEST(LossScaling, OnByDefaultForF16Only) {
  const Net net;
  EXPECT_EQ(net_training(net, {.compute = DType::f16}).loss_scale(), 65536.0);
  EXPECT_TRUE(net_training(net, {.compute = DType::f16}).graph().find_input(kLossScaleInput).has_value());
  EXPECT_FALSE(net_training(net, {.compute = DType::bf16}).graph().find_input(kLossScaleInput).has_value());
  EXPECT_FALSE(net_training(net, {}).graph().find_input(kLossScaleInput).has_value());
  const Training off = net_training(net, {.compute = DType::f16, .loss_scaling = LossScaling{.enabled = false}});
  EXPECT_FALSE(off.graph().find_input(kLossScaleInput).has_value());
  EXPECT_EQ(off.loss_scale(), 1.0);
}

// x = 1000: the f16 forward is finite, but d loss / d l1.W = x^T (scale * dy) overflows f16 at a
// scale of 2^16, so the step is skipped and the scale halves.
TEST(LossScaling, AnOverflowingGradientSkipsTheWholeUpdateAndHalvesTheScale) {
  const Net net;
  Training train = net_training(net, {.compute = DType::f16});
  ASSERT_TRUE(train.step(batch(0.5)).ok());  // nonzero Adam moments to keep
  ASSERT_FALSE(train.last_step_skipped());
  ASSERT_EQ(train.steps(), 1);
  const auto before = update_state(train);
  const StepResult r = train.step(batch(1000.0));
  ASSERT_TRUE(r.ok()) << r.failure().message;
  EXPECT_TRUE(std::isfinite(r.loss()));
  EXPECT_TRUE(train.last_step_skipped());
  EXPECT_EQ(train.steps(), 1) << "a skipped step advanced the step counter (Adam's bias correction)";
  EXPECT_EQ(train.loss_scale(), 32768.0);
  const auto after = update_state(train);
  ASSERT_EQ(after.size(), before.size());
  for (std::size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(after[i].first, before[i].first);
    EXPECT_EQ(0, std::memcmp(after[i].second.data(), before[i].second.data(), before[i].second.size() * sizeof(float)))
        << before[i].first << " changed in a skipped step";
  }
  // The gradients of the skipped step hold the non-finite values that caused it.
  bool nonfinite = false;
  for (const auto& [name, g] : train.download_param_grads())
    for (float v : g) nonfinite = nonfinite || !std::isfinite(v);
  EXPECT_TRUE(nonfinite);
  // The next good step applies and counts.
  ASSERT_TRUE(train.step(batch(0.5)).ok());
  EXPECT_FALSE(train.last_step_skipped());
  EXPECT_EQ(train.steps(), 2);
  EXPECT_EQ(train.loss_scale(), 32768.0);
}

TEST(LossScaling, GrowthIntervalGoodStepsDoubleTheScale) {
  const Net net;
  Training train = net_training(net, {.compute = DType::f16, .loss_scaling = LossScaling{.growth_interval = 3}});
  ASSERT_TRUE(train.step(batch(1000.0)).ok());  // skipped: 2^15, the count restarts
  ASSERT_TRUE(train.last_step_skipped());
  const std::vector<double> want = {32768, 32768, 65536, 65536, 65536, 131072};
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(train.step(batch(0.5)).ok());
    EXPECT_FALSE(train.last_step_skipped());
    EXPECT_EQ(train.loss_scale(), want[i]) << "after good step " << i + 1;
  }
  EXPECT_EQ(train.steps(), 6);
}

// Multiplying the loss by a power of two and the gradients by its inverse is exact in f32 (no
// overflow here): scaled and unscaled f32 training give the same bits.
TEST(LossScaling, APowerOfTwoScaleChangesNoF32Bit) {
  const Net net;
  Training plain = net_training(net, {});
  Training scaled = net_training(net, {.loss_scaling = LossScaling{.init_scale = 1024.0}});
  for (int step = 0; step < 3; ++step) {
    const StepResult a = plain.step(batch(0.5 + step)), b = scaled.step(batch(0.5 + step));
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a.loss(), b.loss());
  }
  EXPECT_EQ(plain.download_params(), scaled.download_params());
  EXPECT_EQ(plain.download_param_grads(), scaled.download_param_grads());
}

TEST(LossScaling, TheScaleIsSavedResetAndLoaded) {
  const Net net;
  Training train = net_training(net, {.compute = DType::f16});
  ASSERT_TRUE(train.step(batch(1000.0)).ok());
  ASSERT_EQ(train.loss_scale(), 32768.0);
  const std::string path = (std::filesystem::temp_directory_path() / "tg_loss_scaling_test.safetensors").string();
  train.save(path);
  Training other = net_training(net, {.compute = DType::f16});
  EXPECT_EQ(other.loss_scale(), 65536.0);
  other.load(path);
  EXPECT_EQ(other.loss_scale(), 32768.0);
  other.reset();
  EXPECT_EQ(other.loss_scale(), 65536.0);
  // A checkpoint whose scale is not > 0 (every later step would divide by it) is refused whole.
  SafetensorsFile file = load_safetensors(path);
  file.tensors.at(kLossScaleInput) = HostTensor::f32({}, {0.0f});
  save_safetensors(path, file.tensors, file.metadata);
  try {
    other.load(path);
    ADD_FAILURE() << "a zero loss scale was loaded";
  } catch (const SafetensorsError& e) {
    EXPECT_NE(std::string(e.what()).find(kLossScaleInput), std::string::npos) << e.what();
  }
  EXPECT_EQ(other.loss_scale(), 65536.0);
  std::filesystem::remove(path);
}

// A loss the model itself returns in a 16-bit dtype trains too, scaled or not: differentiate
// seeds its cotangent in that dtype, and the scaled loss is its f32 cast times the scale.
TEST(LossScaling, ALossIn16BitsTrains) {
  const Net net;
  for (const bool scaled : {false, true}) {
    SCOPED_TRACE(scaled ? "scaled" : "unscaled");
    Training train = compile(
        TrainingSpec<Net>{.model = net,
                          .loss = [](const Net& m, const Inputs& in) { return cast(net_loss(m, in), DType::bf16); },
                          .inputs = {{"x", {{16, 8}}}, {"y", {{16, 1}}}},
                          .optimizer = {.kind = AdamConfig{}},
                          .lr = 1e-2,
                          .seed = 11,
                          .precision = {.compute = DType::bf16, .loss_scaling = LossScaling{.enabled = scaled}}});
    const double first = train.step(batch(0.5)).loss();
    double last = first;
    for (int step = 0; step < 20; ++step) {
      const StepResult r = train.step(batch(0.5));
      ASSERT_TRUE(r.ok()) << r.failure().message;
      last = r.loss();
    }
    EXPECT_LT(last, first);
    EXPECT_EQ(train.steps(), 21);
  }
}

TEST(LossScaling, BadConfigsAreRefused) {
  const Net net;
  const auto refused = [&](LossScaling config, const std::string& field) {
    try {
      net_training(net, {.compute = DType::f16, .loss_scaling = config});
      ADD_FAILURE() << field << " accepted";
    } catch (const CompileError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  refused({.init_scale = 0}, "init_scale");
  refused({.growth_factor = 0.5}, "growth_factor");
  refused({.backoff_factor = 0}, "backoff_factor");
  refused({.growth_interval = 0}, "growth_interval");
  EXPECT_THROW(net_training(net, {.compute = DType::i32}), CompileError);
}

}  // namespace
}  // namespace tg
