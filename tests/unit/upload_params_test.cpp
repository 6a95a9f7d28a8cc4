// Params from outside: Training::upload_params of shaped tensors (every dtype and shape checked, a
// transposed matrix named as such, nothing written on any refusal), the flat form's element-count
// check, and Training::load with LoadOptions::params_only (params set, optimizer state, gradients
// and step counter back at their init).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "support/bad_input.h"
#include "tensorgrad/train/nn.h"
#include "tensorgrad/train/safetensors.h"
#include "tensorgrad/train/training.h"

namespace tg {
namespace {

using testing::BadCall;
using testing::BadInputCase;
using testing::ScratchDir;
using testing::throws;

struct Net : Module {
  Linear l1{*this, "l1", 3, 2};  // W is f32[3,2]: its transpose has another shape
};

Tensor net_loss(const Net& m, const Inputs& in) {
  const Tensor r = m.l1(in.at("x")) - in.at("y");
  return mean(r * r);
}
Tensor net_forward(const Net& m, const Inputs& in) { return m.l1(in.at("x")); }

HostTensor f32(Shape shape, std::vector<double> values) {
  return HostTensor::of({DType::f32, std::move(shape)}, std::move(values));
}
TensorMap batch() {
  return {{"x", f32({4, 3}, {0.5, -1, 2, 0.25, -0.75, 1.5, 1, -2, 0.5, 1, 1, -1})},
          {"y", f32({4, 2}, {1, -1, 0.5, 2, 0, 1, -1, 0.25})}};
}
// The params as PyTorch's nn.Linear(3, 2) would hold them after a conversion that forgot the .T.
TensorMap pytorch_layout() { return {{"l1.W", f32({2, 3}, {1, 2, 3, 4, 5, 6})}, {"l1.b", f32({2}, {0.5, -0.5})}}; }
// The same params in tensorgrad's layout: W is weight.T.
TensorMap tensorgrad_layout() { return {{"l1.W", f32({3, 2}, {1, 4, 2, 5, 3, 6})}, {"l1.b", f32({2}, {0.5, -0.5})}}; }

Training compile_net(const Net& net, Backend backend = Backend::interp_f32) {
  return compile(TrainingSpec<Net>{.model = net,
                                   .loss = net_loss,
                                   .inputs = {{"x", {{4, 3}}}, {"y", {{4, 2}}}},
                                   .optimizer = {.kind = AdamConfig{}},
                                   .lr = 0.1,
                                   .backend = backend,
                                   .seed = 5});
}

// ---- refusals: the message, and every param, moment and the step counter unchanged ----

struct Trained {
  std::shared_ptr<Net> net = std::make_shared<Net>();
  std::shared_ptr<Training> train = std::make_shared<Training>(compile_net(*net));
  std::shared_ptr<ScratchDir> dir = std::make_shared<ScratchDir>("upload");
  Trained() {
    for (int i = 0; i < 2; ++i)
      if (!train->step(batch()).ok()) throw Error("the setup step failed");
  }
  BadCall with(std::function<void(Training&)> call) const {
    return BadCall{[t = train, n = net, d = dir, call] { call(*t); },
                   [t = train] {
                     return testing::bits(t->download_param_tensors()) + testing::bits(t->download_optimizer_state()) +
                            testing::bits(t->download_param_grad_tensors()) + "steps = " + std::to_string(t->steps());
                   }};
  }
};

template <class E>
BadInputCase on_training(std::string name, std::function<void(Training&)> call, std::vector<std::string> fragments) {
  return {.name = std::move(name),
          .setup = [call] { return Trained().with(call); },
          .expected = throws<E>(),
          .fragments = std::move(fragments)};
}

// Saves `tensors` as a params-only file in the scratch directory and loads it params-only.
BadInputCase bad_params_file(std::string name, TensorMap tensors, std::vector<std::string> fragments) {
  return {.name = std::move(name),
          .setup =
              [tensors] {
                Trained t;
                const std::string path = t.dir->file("params.safetensors");
                save_safetensors(path, tensors);
                return t.with([path](Training& tr) { tr.load(path, {.params_only = true}); });
              },
          .expected = throws<SafetensorsError>(),
          .fragments = std::move(fragments)};
}

std::vector<BadInputCase> upload_cases() {
  const std::string hint = "looks transposed";
  const std::string pytorch = "PyTorch's nn.Linear stores its weight as [out, in], tensorgrad's Linear W is [in, out]";
  TensorMap transposed_w_good_b = pytorch_layout();
  TensorMap i32_w = {{"l1.W", HostTensor::i32({3, 2}, {1, 2, 3, 4, 5, 6})}};
  TensorMap nan_b = {{"l1.b", f32({2}, {1, std::numeric_limits<double>::quiet_NaN()})}};
  TensorMap flat_shape = {{"l1.W", f32({6}, {1, 2, 3, 4, 5, 6})}};
  TensorMap unknown = {{"l2.W", f32({3, 2}, {1, 2, 3, 4, 5, 6})}};
  return {
      on_training<RuntimeError>("tensors_transposed_linear_weight",
                                [=](Training& t) { t.upload_params(transposed_w_good_b); },
                                {"upload_params: param 'l1.W': expected f32[3,2], got f32[2,3]", hint,
                                 "the expected shape reversed", pytorch, "nothing was written"}),
      on_training<RuntimeError>("tensors_wrong_dtype", [=](Training& t) { t.upload_params(i32_w); },
                                {"param 'l1.W': expected f32[3,2], got i32[3,2]", "nothing was written"}),
      on_training<RuntimeError>("tensors_flattened", [=](Training& t) { t.upload_params(flat_shape); },
                                {"param 'l1.W': expected f32[3,2], got f32[6]"}),
      on_training<RuntimeError>("tensors_nan", [=](Training& t) { t.upload_params(nan_b); },
                                {"param 'l1.b' element 1 is nan", "allow_nonfinite_params"}),
      on_training<RuntimeError>("tensors_unknown_name", [=](Training& t) { t.upload_params(unknown); },
                                {"unknown param 'l2.W' (the params are l1.W, l1.b)"}),
      on_training<RuntimeError>(
          "forward_tensors_transposed",
          [=](Training& t) {
            Forward f = t.attach(ForwardSpec<Net>{.forward = net_forward, .inputs = {{"x", {{-1, 3}}}}});
            f.upload_params(transposed_w_good_b);
          },
          {"param 'l1.W': expected f32[3,2], got f32[2,3]", hint}),
      on_training<RuntimeError>("flat_wrong_size_names_the_shape",
                                [](Training& t) {
                                  t.upload_params({{"l1.W", {1, 2, 3, 4, 5}}, {"l1.b", {1, 2}}});
                                },
                                {"param 'l1.W' is f32[3,2] (6 values), got 5 values", "nothing was written"}),
      bad_params_file("params_only_transposed", pytorch_layout(),
                      {"params.safetensors", "'l1.W': expected f32[3,2], found f32[2,3]", "'l1.W' looks transposed",
                       pytorch, "save weight.T"}),
      bad_params_file("params_only_missing_param", {{"l1.W", f32({3, 2}, {1, 2, 3, 4, 5, 6})}},
                      {"params.safetensors", "missing: 'l1.b' f32[2]"}),
      bad_params_file(
          "params_only_with_optimizer_state",
          {{"l1.W", f32({3, 2}, {1, 2, 3, 4, 5, 6})}, {"l1.b", f32({2}, {0, 0})}, {"l1.b.adam.m", f32({2}, {0, 0})}},
          {"unexpected: 'l1.b.adam.m' f32[2]"}),
      bad_params_file(
          "params_only_inf",
          {{"l1.W", f32({3, 2}, {1, 2, 3, 4, 5, std::numeric_limits<double>::infinity()})}, {"l1.b", f32({2}, {0, 0})}},
          {"tensor 'l1.W' element 5 is inf", "not finite"}),
  };
}

TG_BAD_INPUT_SUITE(UploadParamsRefusal, upload_cases);

// ---- what is accepted ----

TEST(UploadParams, ShapedTensorsAreWrittenAndSeenByForwards) {
  Net net;
  Training train = compile_net(net);
  Forward forward = train.attach(ForwardSpec<Net>{.forward = net_forward, .inputs = {{"x", {{-1, 3}}}}});
  train.upload_params(tensorgrad_layout());
  EXPECT_EQ(train.download_param_tensors(), tensorgrad_layout());
  // x = e_0 picks row 0 of W (= column 0 of PyTorch's weight) plus b.
  const ForwardResult r = forward.run({{"x", f32({1, 3}, {1, 0, 0})}});
  ASSERT_TRUE(r.ok()) << r.failure().message;
  EXPECT_EQ(r.output(), f32({1, 2}, {1.5, 3.5}));
}

TEST(UploadParams, WrongShapeThatIsNotATransposeHasNoTransposeHint) {
  Net net;
  Training train = compile_net(net);
  try {
    train.upload_params(TensorMap{{"l1.W", f32({1, 6}, {1, 2, 3, 4, 5, 6})}});
    FAIL() << "a [1,6] value for a [3,2] param was accepted";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("expected f32[3,2], got f32[1,6]"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("transposed"), std::string::npos) << e.what();
  }
}

TEST(UploadParams, WideValuesStayUnroundedOnTheOracle) {
  Net net;
  Training train = compile_net(net, Backend::interp_f64);
  const TensorMap wide = {{"l1.W", f32({3, 2}, {0.1, 0.2, 0.3, 0.4, 0.5, 1.0 / 3.0})}};
  train.upload_params(wide);
  EXPECT_EQ(train.download_param_tensors().at("l1.W").to_f64(), wide.at("l1.W").to_f64());
}

// ---- params-only load ----

TEST(ParamsOnlyLoad, SetsTheParamsAndPutsTheOptimizerBackAtItsInit) {
  ScratchDir dir("params_only");
  const std::string path = dir.file("converted.safetensors");
  // A converter's metadata is not read (not even a tensorgrad step counter).
  save_safetensors(path, tensorgrad_layout(), {{"format", "pt"}, {"tensorgrad.step", "99"}});

  Net net;
  Training train = compile_net(net);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(train.step(batch()).ok());
  train.set_lr(lr::Linear{.peak = 0.01, .final = 0.001, .steps = 10});
  ASSERT_EQ(train.lr().start, 3);  // rebased: its step 1 is the training's step 4
  train.load(path, {.params_only = true});

  EXPECT_EQ(train.download_param_tensors(), tensorgrad_layout());
  EXPECT_EQ(train.steps(), 0);
  for (const auto& [name, moment] : train.download_optimizer_state()) {
    EXPECT_EQ(moment, HostTensor::filled(moment.type, 0.0)) << name;
  }
  EXPECT_THROW((void)train.download_param_grads(), Error);
  EXPECT_EQ(train.lr().start, 0);  // the schedule restarts with the step counter, as reset() does
  EXPECT_EQ(lr_at(train.lr(), 1), 0.01);
  train.set_lr(0.1);  // the rate the fresh training below steps with

  // Its next step is a fresh training's first step from the same params, bit for bit.
  Net fresh_net;
  Training fresh = compile_net(fresh_net);
  fresh.upload_params(tensorgrad_layout());
  const StepResult loaded_step = train.step(batch());
  const StepResult fresh_step = fresh.step(batch());
  ASSERT_TRUE(loaded_step.ok() && fresh_step.ok());
  EXPECT_EQ(loaded_step.loss(), fresh_step.loss());
  EXPECT_EQ(train.download_param_tensors(), fresh.download_param_tensors());
  EXPECT_EQ(train.download_optimizer_state(), fresh.download_optimizer_state());
}

TEST(ParamsOnlyLoad, AFullCheckpointStillLoadsWithoutTheOption) {
  ScratchDir dir("params_only_full");
  const std::string path = dir.file("ckpt.safetensors");
  Net net;
  Training train = compile_net(net);
  ASSERT_TRUE(train.step(batch()).ok());
  train.save(path);
  const TensorMap state = train.download_optimizer_state();
  ASSERT_TRUE(train.step(batch()).ok());
  train.load(path);
  EXPECT_EQ(train.steps(), 1);
  EXPECT_EQ(train.download_optimizer_state(), state);
}

}  // namespace
}  // namespace tg
