// tg::compile and tg::Training on the interpreter backends: a linear regression trained with Adam
// against a hand-written double-precision Adam, failed steps that change nothing, param access,
// reset and seeds.
#include "tensorgrad/train/training.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "support/library.h"

namespace tg {
namespace {

constexpr int kN = 8;  // a power of two: mean's 1/N is exact, so the f64 run is PyTorch-exact

struct LinReg : Module {
  Linear l{*this, "l", 2, 1};
};

Tensor mse(const LinReg& m, const Inputs& in) {
  Tensor r = m.l(in.at("x")) - in.at("y");
  return mean(r * r);
}

InputSpecs lin_inputs() { return {{"x", {{kN, 2}}}, {"y", {{kN, 1}}}}; }

struct Batch {
  std::vector<float> x, y;
  TensorMap map() const { return {{"x", HostTensor::f32({kN, 2}, x)}, {"y", HostTensor::f32({kN, 1}, y)}}; }
};

Batch batch() {
  Batch b;
  for (int i = 0; i < kN; ++i) {
    const float x0 = std::sin(0.7f * static_cast<float>(i)), x1 = std::cos(1.3f * static_cast<float>(i));
    b.x.insert(b.x.end(), {x0, x1});
    b.y.push_back(1.5f * x0 - 2.f * x1 + 0.5f);
  }
  return b;
}

Training compile_lin(const LinReg& model, Backend backend, Schedule lr = 0.05, std::uint64_t seed = 11) {
  return compile(TrainingSpec<LinReg>{.model = model,
                                      .loss = mse,
                                      .inputs = lin_inputs(),
                                      .optimizer = {.kind = AdamConfig{}},
                                      .lr = std::move(lr),
                                      .backend = backend,
                                      .seed = seed});
}

// torch.optim.Adam's single-tensor step, operation by operation, in double.
struct HandAdam {
  std::vector<double> p, m, v;
  void step(const std::vector<double>& g, double lr, int t) {
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    const double step_size = lr / (1 - std::pow(b1, t)), bc2 = std::sqrt(1 - std::pow(b2, t));
    for (std::size_t i = 0; i < p.size(); ++i) {
      m[i] = m[i] * b1 + g[i] * (1 - b1);
      v[i] = v[i] * b2 + (g[i] * (1 - b2)) * g[i];
      p[i] = p[i] - (step_size * m[i]) / (std::sqrt(v[i]) / bc2 + eps);
    }
  }
};

// Loss and gradient of mean((x W + b - y)^2) in double; p = {W0, W1, b}.
double hand_loss_grad(const Batch& b, const std::vector<double>& p, std::vector<double>& g) {
  g.assign(3, 0.0);
  double loss = 0;
  for (int i = 0; i < kN; ++i) {
    const double r = double(b.x[2 * i]) * p[0] + double(b.x[2 * i + 1]) * p[1] + p[2] - double(b.y[i]);
    loss += r * r / kN;
    g[0] += 2 * r * double(b.x[2 * i]) / kN;
    g[1] += 2 * r * double(b.x[2 * i + 1]) / kN;
    g[2] += 2 * r / kN;
  }
  return loss;
}

class TrainingBackends : public ::testing::TestWithParam<Backend> {};

TEST_P(TrainingBackends, AdamDecreasesTheLoss) {
  LinReg model;
  Training train = compile_lin(model, GetParam());
  const TensorMap data = batch().map();
  double first = 0, last = 0;
  for (int s = 0; s < 200; ++s) {
    const StepResult r = train.step(data);
    ASSERT_TRUE(r.ok()) << r.failure().message;
    (s == 0 ? first : last) = r.loss();
  }
  EXPECT_EQ(train.steps(), 200);
  EXPECT_GT(first, 1.0);
  EXPECT_LT(last, 1e-3 * first);
  const ParamValues p = train.download_params();
  EXPECT_NEAR(p.at("l.W")[0], 1.5, 0.05);
  EXPECT_NEAR(p.at("l.W")[1], -2.0, 0.05);
  EXPECT_NEAR(p.at("l.b")[0], 0.5, 0.05);
}

INSTANTIATE_TEST_SUITE_P(Interp, TrainingBackends, ::testing::Values(Backend::interp_f32, Backend::interp_f64),
                         [](const auto& p) { return std::string(backend_name(p.param)); });

// The f64 oracle follows the hand-written Adam to rounding, with a schedule and a failed step in
// the middle (which must neither move the params nor advance the schedule).
TEST(Training, F64MatchesHandAdamWithScheduleAndAFailedStep) {
  LinReg model;
  const Schedule lr = lr::Staircase{.peak = 0.05, .every = 4, .gamma = 0.5};
  Training train = compile_lin(model, Backend::interp_f64, lr);
  const Batch b = batch();
  TensorMap bad = b.map();
  bad.at("x").set(3, std::numeric_limits<double>::quiet_NaN());

  const TensorMap init = train.download_param_tensors();
  HandAdam hand{.p = {init.at("l.W").at(0), init.at("l.W").at(1), init.at("l.b").at(0)},
                .m = std::vector<double>(3, 0.0),
                .v = std::vector<double>(3, 0.0)};
  std::vector<double> g;
  for (int t = 1; t <= 12; ++t) {
    if (t == 6) {
      const StepResult failed = train.step(bad);
      ASSERT_FALSE(failed.ok());
      EXPECT_EQ(failed.failure().kind, "nonfinite");
    }
    const double loss = hand_loss_grad(b, hand.p, g);
    const StepResult r = train.step(b.map());
    ASSERT_TRUE(r.ok()) << r.failure().message;
    EXPECT_NEAR(r.loss(), loss, 1e-12 * loss) << "step " << t;
    if (t == 1) {
      const TensorMap grads = train.download_param_grad_tensors();
      EXPECT_NEAR(grads.at("l.W").at(0), g[0], 1e-13);
      EXPECT_NEAR(grads.at("l.W").at(1), g[1], 1e-13);
      EXPECT_NEAR(grads.at("l.b").at(0), g[2], 1e-13);
    }
    hand.step(g, lr_at(lr, t), t);
    EXPECT_EQ(train.steps(), t);
  }
  const TensorMap p = train.download_param_tensors();
  EXPECT_NEAR(p.at("l.W").at(0), hand.p[0], 1e-12);
  EXPECT_NEAR(p.at("l.W").at(1), hand.p[1], 1e-12);
  EXPECT_NEAR(p.at("l.b").at(0), hand.p[2], 1e-12);
  const TensorMap state = train.download_optimizer_state();
  EXPECT_NEAR(state.at("l.W.adam.m").at(0), hand.m[0], 1e-12);
  EXPECT_NEAR(state.at("l.b.adam.v").at(0), hand.v[2], 1e-12);
}

TEST(Training, NonFiniteLossLeavesParamsAndStateAsTheyWere) {
  LinReg model;
  Training train = compile_lin(model, Backend::interp_f32);
  const Batch b = batch();
  for (int s = 0; s < 3; ++s) ASSERT_TRUE(train.step(b.map()).ok());
  const TensorMap params = train.download_param_tensors(), state = train.download_optimizer_state();
  const ParamValues grads = train.download_param_grads();
  for (const double poison : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    TensorMap bad = b.map();
    bad.at("y").set(0, poison);
    const StepResult r = train.step(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.failure().kind, "nonfinite");
    EXPECT_NE(r.failure().message.find("loss"), std::string::npos) << r.failure().message;
    EXPECT_EQ(train.download_param_tensors(), params);
    EXPECT_EQ(train.download_optimizer_state(), state);
    EXPECT_EQ(train.download_param_grads(), grads) << "the grads are those of the last completed step";
    EXPECT_EQ(train.steps(), 3);
  }
  EXPECT_TRUE(train.step(b.map()).ok());
  EXPECT_EQ(train.steps(), 4);
}

void expect_input_failure(Training& train, const TensorMap& data, const std::vector<std::string>& needles) {
  const TensorMap before = train.download_param_tensors();
  const StepResult r = train.step(data);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure().kind, "input");
  for (const std::string& needle : needles) {
    EXPECT_NE(r.failure().message.find(needle), std::string::npos) << needle << " not in: " << r.failure().message;
  }
  EXPECT_EQ(train.download_param_tensors(), before);
  EXPECT_EQ(train.steps(), 0);
}

TEST(Training, BadInputsFailNamingTheInput) {
  LinReg model;
  Training train = compile_lin(model, Backend::interp_f32);
  const Batch b = batch();
  TensorMap unknown = b.map();
  unknown.emplace("z", HostTensor::f32({1}, {0.f}));
  expect_input_failure(train, unknown, {"unknown input 'z'", "x, y"});
  TensorMap missing = b.map();
  missing.erase("y");
  expect_input_failure(train, missing, {"missing input 'y'", "f32[8,1]"});
  TensorMap misshapen = b.map();
  misshapen.at("x") = HostTensor::f32({kN, 3}, std::vector<float>(kN * 3, 0.f));
  expect_input_failure(train, misshapen, {"input 'x'", "expected f32[8,2]", "got f32[8,3]"});
  TensorMap wrong_dtype = b.map();
  wrong_dtype.at("y") = HostTensor::i32({kN, 1}, std::vector<std::int32_t>(kN, 0));
  expect_input_failure(train, wrong_dtype, {"input 'y'", "expected f32[8,1]", "got i32[8,1]"});
  TensorMap short_values = b.map();
  short_values.at("y") = HostTensor::f32({kN - 1, 1}, std::vector<float>(kN - 1, 0.0F));
  expect_input_failure(train, short_values, {"input 'y'", "expected f32[8,1]", "got f32[7,1]"});
  TensorMap optimizer_scalar = b.map();
  optimizer_scalar.emplace(kLrInput, HostTensor::f32({}, {1.f}));
  expect_input_failure(train, optimizer_scalar, {"unknown input 'optim.lr'"});
  EXPECT_THROW((void)train.download_param_grads(), Error) << "no step has completed";
}

TEST(Training, CompileRefusesANonScalarLossNamingItsType) {
  LinReg model;
  try {
    (void)compile(TrainingSpec<LinReg>{.model = model,
                                       .loss = [](const LinReg& m, const Inputs& in) { return m.l(in.at("x")); },
                                       .inputs = lin_inputs()});
    FAIL() << "expected tg::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("0-d float"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("f32[8,1]"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)compile(TrainingSpec<LinReg>{.model = model, .loss = mse, .inputs = {{"x", {{-1, 2}}}}}), Error);
}

TEST(Training, UploadParamsIsPartialAndAllOrNothing) {
  LinReg model;
  Training train = compile_lin(model, Backend::interp_f32);
  const ParamValues before = train.download_params();
  train.upload_params({{"l.b", {0.25f}}});
  ParamValues after = train.download_params();
  EXPECT_EQ(after.at("l.b"), std::vector<float>{0.25f});
  EXPECT_EQ(after.at("l.W"), before.at("l.W")) << "a partial upload keeps the other params";

  const auto expect_refused = [&](const ParamValues& values, const std::vector<std::string>& needles) {
    const ParamValues current = train.download_params();
    try {
      train.upload_params(values);
      FAIL() << "expected tg::Error";
    } catch (const Error& e) {
      for (const std::string& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
    }
    EXPECT_EQ(train.download_params(), current) << "nothing written";
  };
  expect_refused({{"l.W", {9.f, 9.f}}, {"l.nope", {1.f}}}, {"unknown param 'l.nope'"});
  expect_refused({{"l.b", {9.f}}, {"l.W", {1.f, 2.f, 3.f}}}, {"param 'l.W'", "f32[2,1]", "got 3 values"});
  // Round trip: download -> upload gives the same bits.
  train.upload_params(before);
  EXPECT_EQ(train.download_params(), before);
}

TEST(Training, ResetRestoresInitAndZeroesState) {
  LinReg model;
  Training train = compile_lin(model, Backend::interp_f32);
  const TensorMap init = train.download_param_tensors();
  const Batch b = batch();
  for (int s = 0; s < 5; ++s) ASSERT_TRUE(train.step(b.map()).ok());
  ASSERT_NE(train.download_param_tensors(), init);

  const TensorMap trained = train.download_param_tensors();
  train.reset({.params = false, .optimizer = true});
  EXPECT_EQ(train.download_param_tensors(), trained);
  EXPECT_EQ(train.steps(), 0);
  for (const auto& [name, t] : train.download_optimizer_state()) {
    for (const double x : t.to_f64()) EXPECT_EQ(x, 0.0) << name;
  }
  ASSERT_TRUE(train.step(b.map()).ok());
  train.reset({.params = true, .optimizer = false});
  EXPECT_EQ(train.download_param_tensors(), init);
  EXPECT_EQ(train.steps(), 1);
  train.reset();
  EXPECT_EQ(train.steps(), 0);
  EXPECT_THROW((void)train.download_param_grads(), Error);
  // After a full reset the run repeats bit for bit.
  Training fresh = compile_lin(model, Backend::interp_f32);
  for (int s = 0; s < 3; ++s) {
    const StepResult x = train.step(b.map()), y = fresh.step(b.map());
    ASSERT_TRUE(x.ok() && y.ok());
    EXPECT_EQ(x.loss(), y.loss());
  }
  EXPECT_EQ(train.download_param_tensors(), fresh.download_param_tensors());
}

TEST(Training, SeedsDetermineTheInit) {
  LinReg model;
  Training a = compile_lin(model, Backend::interp_f32, 0.05, 7), b = compile_lin(model, Backend::interp_f64, 0.05, 7);
  Training c = compile_lin(model, Backend::interp_f32, 0.05, 8);
  EXPECT_EQ(a.seed(), 7U);
  EXPECT_EQ(a.download_params(), b.download_params()) << "same seed, same bits, whatever the backend";
  EXPECT_NE(a.download_params().at("l.W"), c.download_params().at("l.W"));
  const Training r1 = compile(TrainingSpec<LinReg>{.model = model, .loss = mse, .inputs = lin_inputs()});
  const Training r2 = compile(TrainingSpec<LinReg>{.model = model, .loss = mse, .inputs = lin_inputs()});
  EXPECT_NE(r1.seed(), r2.seed()) << "a random seed when none is given (2^-64 to collide)";
  Training replay = compile_lin(model, Backend::interp_f32, 0.05, r1.seed());
  EXPECT_EQ(replay.download_params(), r1.download_params());
}

TEST(Training, ExposesNamesGraphAndKernels) {
  LinReg model;
  Training train = compile_lin(model, Backend::interp_f32);
  EXPECT_EQ(train.param_names(), (std::vector<std::string>{"l.W", "l.b"}));
  EXPECT_EQ(train.backend(), Backend::interp_f32);
  const std::vector<std::string> kernels = train.kernels();
  EXPECT_EQ(kernels.size(), train.graph().nodes().size());
  EXPECT_NE(std::find(kernels.begin(), kernels.end(), "matmul"), kernels.end());
  EXPECT_TRUE(train.graph().find_output("loss").has_value());
  EXPECT_TRUE(train.graph().find_output("grad.l.W").has_value());
  EXPECT_TRUE(train.graph().find_input("l.W.adam.m").has_value());
}

// A loss with dropout draws from the step seed: compile feeds it (a hash of the seed and the step
// number), so runs from the same seed repeat and the masks change from step to step.
TEST(Training, StochasticLossesAreFedAStepSeed) {
  LinReg model;
  const auto make = [&](std::uint64_t seed) {
    return compile(TrainingSpec<LinReg>{.model = model,
                                        .loss =
                                            [](const LinReg& m, const Inputs& in) {
                                              Tensor r = m.l(dropout(in.at("x"), 0.5)) - in.at("y");
                                              return mean(r * r);
                                            },
                                        .inputs = lin_inputs(),
                                        .seed = seed});
  };
  Training a = make(4), b = make(4);
  ASSERT_TRUE(a.graph().find_input(kStepSeedInput).has_value());
  const TensorMap data = batch().map();
  std::vector<double> losses;
  for (int s = 0; s < 4; ++s) {
    const StepResult x = a.step(data), y = b.step(data);
    ASSERT_TRUE(x.ok()) << x.failure().message;
    ASSERT_TRUE(y.ok()) << y.failure().message;
    EXPECT_EQ(x.loss(), y.loss()) << "step " << s;
    losses.push_back(x.loss());
  }
  // Same params, two steps apart: with the masks fixed the loss would be the same both times.
  a.reset();
  const double first = a.step(data).loss();
  a.reset({.params = true, .optimizer = false});
  EXPECT_EQ(first, losses[0]);
  EXPECT_NE(a.step(data).loss(), first) << "step 2 draws another mask than step 1 from the same params";
}

}  // namespace
}  // namespace tg
