// capture(), set_lr, save/load and replace_model of tg::Training.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/train/capture.h"
#include "tensorgrad/train/training.h"

namespace tg {
namespace {

constexpr int kN = 8;

struct Net : Module {
  Net(std::int64_t in, std::int64_t hidden) : l1(*this, "l1", in, hidden), l2(*this, "l2", hidden, 1) {}
  Linear l1, l2;
};

Tensor net_forward(const Net& m, const Inputs& in) { return m.l2(relu(m.l1(in.at("x")))); }
Tensor net_loss(const Net& m, const Inputs& in) {
  Tensor r = net_forward(m, in) - in.at("y");
  return mean(r * r);
}

TensorMap batch() {
  std::vector<float> x, y;
  for (int i = 0; i < kN; ++i) {
    x.insert(x.end(), {0.3f * static_cast<float>(i) - 1.f, 0.5f - 0.1f * static_cast<float>(i)});
    y.push_back(x[2 * i] * x[2 * i] - x[2 * i + 1]);
  }
  return {{"x", HostTensor::f32({kN, 2}, x)}, {"y", HostTensor::f32({kN, 1}, y)}};
}

TrainingSpec<Net> net_spec(const Net& model, Backend backend = Backend::interp_f32) {
  return {.model = model,
          .loss = net_loss,
          .inputs = {{"x", {{kN, 2}}}, {"y", {{kN, 1}}}},
          .optimizer = {.kind = AdamConfig{}},
          .lr = 0.01,
          .backend = backend,
          .seed = 21};
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tg_training_" + name + ".safetensors")).string();
}

TEST(TrainingCapture, StepAndRunReturnCaptures) {
  Net model(2, 3);
  TrainingSpec<Net> spec = net_spec(model);
  spec.inputs.emplace("s", InputSpec{{2, 3, 2, 2}});
  spec.loss = [](const Net& m, const Inputs& in) {
    capture("scores", in.at("s") * 2.f);
    Tensor r = capture("residual", net_forward(m, in) - in.at("y"));
    return mean(r * r);
  };
  Training train = compile(std::move(spec));
  TensorMap data = batch();
  std::vector<float> s(24);
  for (int i = 0; i < 24; ++i) s[i] = static_cast<float>(i);
  data.emplace("s", HostTensor::f32({2, 3, 2, 2}, s));
  const StepResult r = train.step(data);
  ASSERT_TRUE(r.ok()) << r.failure().message;
  EXPECT_EQ(r.captures().names(), (std::vector<std::string>{"residual", "scores"}));
  EXPECT_EQ(r.captures().shape("residual"), (Shape{kN, 1}));
  double mse = 0;
  for (const double v : r.captures().get("residual")) mse += v * v / kN;
  EXPECT_NEAR(mse, r.loss(), 1e-6 * r.loss()) << "the captured residual is the one the loss used";
  // per_head splits axis 1 of [B=2, H=3, 2, 2]: head h holds s[:, h] * 2, batch-major.
  const std::vector<std::vector<double>> heads = r.captures().per_head("scores", 3);
  ASSERT_EQ(heads.size(), 3U);
  for (int h = 0; h < 3; ++h) {
    std::vector<double> want;
    for (int b = 0; b < 2; ++b)
      for (int k = 0; k < 4; ++k) want.push_back(2.0 * (b * 12 + h * 4 + k));
    EXPECT_EQ(heads[h], want) << "head " << h;
  }
  EXPECT_THROW((void)r.captures().per_head("scores", 2), Error);
  EXPECT_THROW((void)r.captures().per_head("residual", 2), Error) << "[8,1]: axis 1 has length 1";
  EXPECT_EQ(r.captures().per_head("residual", 1)[0], r.captures().get("residual"));
  EXPECT_THROW((void)r.captures().get("nope"), Error);

  Forward infer = train.attach(ForwardSpec<Net>{
      .forward = [](const Net& m, const Inputs& in) { return m.l2(capture("hidden", relu(m.l1(in.at("x"))))); },
      .inputs = {{"x", {{-1, 2}}}}});
  const ForwardResult f = infer.run({{"x", HostTensor::f32({1, 2}, {0.5f, 0.5f})}});
  ASSERT_TRUE(f.ok()) << f.failure().message;
  EXPECT_EQ(f.captures().shape("hidden"), (Shape{1, 3}));
}

TEST(TrainingCapture, DuplicateNamesAreRefused) {
  Net model(2, 3);
  TrainingSpec<Net> spec = net_spec(model);
  spec.loss = [](const Net& m, const Inputs& in) {
    Tensor r = capture("r", net_forward(m, in) - in.at("y"));
    capture("r", r);
    return mean(r * r);
  };
  try {
    (void)compile(std::move(spec));
    FAIL() << "expected tg::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("capture 'r' appears twice"), std::string::npos) << e.what();
  }
}

TEST(TrainingSetLr, NewScheduleStartsAtTheNextStep) {
  Net model(2, 3);
  TrainingSpec<Net> spec = net_spec(model, Backend::interp_f64);
  spec.optimizer = {.kind = SgdConfig{}};  // p' = p - lr * g: the rate is visible in the update
  Training train = compile(std::move(spec));
  for (int s = 0; s < 3; ++s) ASSERT_TRUE(train.step(batch()).ok());
  const Schedule decay = lr::Linear{.peak = 0.1, .final = 0.0, .steps = 4};
  train.set_lr(decay);
  for (int k = 1; k <= 2; ++k) {
    const TensorMap before = train.download_param_tensors();
    ASSERT_TRUE(train.step(batch()).ok());
    const TensorMap after = train.download_param_tensors(), grads = train.download_param_grad_tensors();
    const double lr = lr_at(decay, k);  // 0.1, then 0.075
    for (const auto& [name, g] : grads) {
      for (std::size_t i = 0; i < g.size(); ++i) {
        EXPECT_NEAR(after.at(name).at(i), before.at(name).at(i) - lr * g.at(i), 1e-15) << name;
      }
    }
  }
  EXPECT_THROW(train.set_lr(-1.0), Error);
}

TEST(TrainingCheckpoint, SaveLoadResumesBitForBit) {
  Net model(2, 4);
  Training train = compile(net_spec(model));
  for (int s = 0; s < 3; ++s) ASSERT_TRUE(train.step(batch()).ok());
  const std::string path = temp_path("resume");
  train.save(path);
  std::vector<double> losses;
  for (int s = 0; s < 2; ++s) losses.push_back(train.step(batch()).loss());
  const TensorMap params = train.download_param_tensors(), state = train.download_optimizer_state();

  Training other = compile(net_spec(model));  // another session: load must restore everything
  other.load(path);
  EXPECT_EQ(other.steps(), 3);
  for (int s = 0; s < 2; ++s) EXPECT_EQ(other.step(batch()).loss(), losses[s]) << "step " << s + 4;
  EXPECT_EQ(other.download_param_tensors(), params);
  EXPECT_EQ(other.download_optimizer_state(), state);
  std::remove(path.c_str());
}

TEST(TrainingCheckpoint, LoadRefusesMismatchesAndChangesNothing) {
  Net model(2, 4), wider(2, 5);
  Training train = compile(net_spec(model));
  ASSERT_TRUE(train.step(batch()).ok());
  const TensorMap params = train.download_param_tensors(), state = train.download_optimizer_state();

  Training wide = compile(net_spec(wider));
  const std::string wide_path = temp_path("wide");
  wide.save(wide_path);
  try {
    train.load(wide_path);
    FAIL() << "expected SafetensorsError";
  } catch (const SafetensorsError& e) {
    EXPECT_NE(std::string(e.what()).find("l1.W"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[2,5]"), std::string::npos) << e.what();
  }
  const std::string bare_path = temp_path("bare");
  TensorMap bare = params;
  bare.merge(TensorMap(state));
  save_safetensors(bare_path, bare);  // the right tensors, no step counter
  EXPECT_THROW(train.load(bare_path), SafetensorsError);
  EXPECT_EQ(train.download_param_tensors(), params);
  EXPECT_EQ(train.download_optimizer_state(), state);
  EXPECT_EQ(train.steps(), 1);
  std::remove(wide_path.c_str());
  std::remove(bare_path.c_str());
}

struct Other : Module {
  Linear l{*this, "l", 2, 1};
};

TEST(TrainingReplaceModel, SwapsTheModelAndKeepsForwardsValid) {
  Net small(2, 3), big(2, 6), broken(3, 6);
  Training train = compile(net_spec(small));
  Forward infer = train.attach(ForwardSpec<Net>{.forward = net_forward, .inputs = {{"x", {{-1, 2}}}}});
  const TensorMap x{{"x", HostTensor::f32({2, 2}, {1.f, 2.f, 3.f, 4.f})}};
  ASSERT_TRUE(infer.run(x).ok());
  ASSERT_TRUE(train.step(batch()).ok());

  // A model the loss cannot trace: the error comes out and nothing changes.
  const TensorMap before = train.download_param_tensors();
  EXPECT_THROW(train.replace_model(broken, {.seed = 1}), ShapeError);
  EXPECT_EQ(train.download_param_tensors(), before);
  EXPECT_EQ(train.steps(), 1);
  EXPECT_EQ(train.seed(), 21U);
  Other other;
  EXPECT_THROW(train.replace_model(other), Error);

  train.replace_model(big, {.seed = 9});
  EXPECT_EQ(train.seed(), 9U);
  EXPECT_EQ(train.steps(), 0);
  EXPECT_EQ(train.download_params().at("l1.W").size(), 12U);
  for (const auto& [name, t] : train.download_optimizer_state())
    for (const double v : t.to_f64()) EXPECT_EQ(v, 0.0) << name;
  TrainingSpec<Net> reference = net_spec(big);
  reference.seed = 9;
  EXPECT_EQ(train.download_params(), compile(std::move(reference)).download_params());

  const ForwardResult r = infer.run(x);
  ASSERT_TRUE(r.ok()) << r.failure().message;
  const auto hidden = infer.graph_for(x).find_input("l1.W");
  ASSERT_TRUE(hidden.has_value());
  EXPECT_EQ(infer.graph_for(x).type(*hidden).shape, (Shape{2, 6})) << "the forward traced the new model";
  ASSERT_TRUE(train.step(batch()).ok());
  EXPECT_EQ(train.steps(), 1);
}

}  // namespace
}  // namespace tg
