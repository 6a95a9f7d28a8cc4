// Optimizer passes against hand-written double-precision reference loops. The graph under test has
// its "gradient" outputs fed from data inputs, so every step's gradients are chosen by the test and
// the reference loop sees the same ones. The updates run through tg::Session on the f64 oracle,
// state and params carried by the writebacks the pass returns.
#include "tensorgrad/passes/optimizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "support/library.h"

namespace tg {
namespace {

const std::map<std::string, Shape> kShapes = {{"w", {2, 3}}, {"bias", {3}}, {"scale", {}}};
const std::vector<std::string> kParams = {"w", "bias", "scale"};

// Params w [2, 3], bias [3], scale []; outputs grad.<p> = the data input g.<p>, and a loss that
// uses the params (it plays no part in the updates).
Graph fed_gradient_graph() {
  GraphBuilder b("fed");
  TracingScope scope(b);
  Tensor loss = scalar(0.0);
  for (const std::string& name : kParams) {
    Tensor p = b.param(name, {DType::f32, kShapes.at(name)});
    Tensor g = b.input("g." + name, {DType::f32, kShapes.at(name)});
    loss = loss + sum(p * p);
    b.output("grad." + name, g * 1.f);
  }
  b.output("loss", loss);
  return b.take();
}

using Values = std::map<std::string, std::vector<double>>;

Values initial_params() {
  Values v;
  v["w"] = {0.5, -1.25, 2.0, 0.75, -0.5, 1.5};
  v["bias"] = {0.25, -0.125, 1.0};
  v["scale"] = {1.5};
  return v;
}

// Gradients of step t (1-based): uniform in [-1, 1) times a per-step magnitude that alternates
// between small and large, so clipping is active on some steps and not on others.
Values gradients(int step) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(1000 + step));
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  const double magnitude = step % 2 == 0 ? 4.0 : 0.1;
  Values g;
  for (const std::string& name : kParams) {
    const auto n = static_cast<std::size_t>(num_elements(kShapes.at(name)));
    for (std::size_t i = 0; i < n; ++i) g[name].push_back(magnitude * u(rng));
  }
  return g;
}

double lr_of_step(int step) { return 0.01 * (1 + step % 3); }  // varies, as under a schedule

struct RunOutcome {
  Values params;
  std::vector<double> grad_norms;  // kGradNormOutput per step, when clipping
};

// Appends the optimizer, runs `steps` steps on `backend` and returns the final params.
RunOutcome run_graph(const OptimizerConfig& config, const std::vector<ParamGrad>& grads, int steps,
                     Backend backend = Backend::interp_f64) {
  const OptimizedGraph og = append_optimizer(fed_gradient_graph(), grads, config);
  verify(og.graph);
  Session session(og.graph, {.backend = backend, .writebacks = og.writebacks});
  for (const auto& [name, values] : initial_params()) {
    session.set_param(name, HostTensor::of({DType::f32, kShapes.at(name)}, values));
  }
  for (const std::string& state : og.state_inputs) {
    const TensorType type = og.graph.type(*og.graph.find_input(state));
    session.set_param(state, HostTensor::filled(type, 0.0));
  }
  EXPECT_TRUE(session.unset_params().empty());
  RunOutcome run;
  for (int step = 1; step <= steps; ++step) {
    TensorMap data;
    for (const auto& [name, values] : gradients(step)) {
      data.emplace("g." + name, HostTensor::of({DType::f32, kShapes.at(name)}, values));
    }
    for (const auto& [name, value] : scalars_for_step(config, step, lr_of_step(step)).values) {
      data.emplace(name, HostTensor::of({DType::f32, {}}, {value}));
    }
    const RunResult r = session.run(data);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.failure().message);
    if (!r.ok()) return run;
    if (config.clip_grad_norm) run.grad_norms.push_back(r.output(kGradNormOutput).at(0));
  }
  for (const std::string& name : kParams) run.params[name] = session.param(name).to_f64();
  return run;
}

// ---- the reference: torch.optim's single-tensor loops written out in double ----

struct Reference {
  OptimizerConfig config;
  std::function<bool(const std::string&)> decays;
  Values params = initial_params();
  Values m, v, buf;
  std::vector<double> grad_norms;

  void clip(Values& g) {
    double squares = 0;
    for (const std::string& name : kParams) {
      double s = 0;
      for (double x : g[name]) s += x * x;
      squares += s;  // (||g_i||)^2
    }
    const double norm = std::sqrt(squares);
    grad_norms.push_back(norm);
    const double coef = std::min(*config.clip_grad_norm / (norm + 1e-6), 1.0);
    for (auto& [name, values] : g)
      for (double& x : values) x *= coef;
  }

  void step(int t, double lr) {
    Values g = gradients(t);
    if (config.clip_grad_norm) clip(g);
    for (const std::string& name : kParams) {
      auto& p = params[name];
      const std::size_t n = p.size();
      m[name].resize(n);
      v[name].resize(n);
      buf[name].resize(n);
      for (std::size_t i = 0; i < n; ++i)
        update_one(name, t, lr, p[i], g[name][i], m[name][i], v[name][i], buf[name][i]);
    }
  }

  void update_one(const std::string& name, int t, double lr, double& p, double g, double& m1, double& m2, double& b) {
    const auto adam = [&](double beta1, double beta2, double eps) {
      m1 = beta1 * m1 + (1 - beta1) * g;
      m2 = beta2 * m2 + (1 - beta2) * g * g;
      const double m_hat_scale = lr / (1 - std::pow(beta1, t));
      const double denom = std::sqrt(m2) / std::sqrt(1 - std::pow(beta2, t)) + eps;
      p -= m_hat_scale * m1 / denom;
    };
    if (const auto* c = std::get_if<AdamConfig>(&config.kind)) adam(c->beta1, c->beta2, c->eps);
    if (const auto* c = std::get_if<AdamWConfig>(&config.kind)) {
      if (decays(name)) p *= 1 - lr * c->weight_decay;
      adam(c->beta1, c->beta2, c->eps);
    }
    if (const auto* c = std::get_if<SgdConfig>(&config.kind)) {
      double d = g;
      if (decays(name)) d += c->weight_decay * p;
      if (c->momentum != 0) {
        b = c->momentum * b + d;
        d = c->nesterov ? d + c->momentum * b : b;
      }
      p -= lr * d;
    }
  }
};

Reference run_reference(const OptimizerConfig& config, const std::function<bool(const std::string&)>& decays,
                        int steps) {
  Reference ref{config, decays};
  for (int t = 1; t <= steps; ++t) ref.step(t, lr_of_step(t));
  return ref;
}

void expect_close(const Values& got, const Values& want, double rel, const std::string& what) {
  for (const std::string& name : kParams) {
    ASSERT_EQ(got.at(name).size(), want.at(name).size()) << what << " " << name;
    for (std::size_t i = 0; i < want.at(name).size(); ++i) {
      const double w = want.at(name)[i];
      EXPECT_NEAR(got.at(name)[i], w, rel * std::max(1.0, std::abs(w))) << what << ": " << name << "[" << i << "]";
    }
  }
}

std::vector<ParamGrad> all_grads() {
  std::vector<ParamGrad> grads;
  for (const std::string& name : kParams) grads.push_back({name, "grad." + name, true});
  return grads;
}

const auto kAllDecay = [](const std::string&) { return true; };
constexpr int kSteps = 12;
// Same formulas, same double arithmetic; only the order of a few operations may differ.
constexpr double kF64Rel = 1e-13;

TEST(Optimizer, ParamGradsListsEveryDifferentiatedParam) {
  GraphBuilder b("model");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {2}});
  Tensor w = b.param("w", {DType::f32, {2}});
  Tensor frozen = b.param("frozen", {DType::f32, {2}});
  b.output("loss", sum(x * w + frozen));
  const Graph g = differentiate(b.take(), {.wrt = {"w"}});
  EXPECT_EQ(param_grads(g), (std::vector<ParamGrad>{{"w", "grad.w", true}}));
}

TEST(Optimizer, AdamMatchesTheReferenceAndNamesItsStateAndScalars) {
  const OptimizerConfig config{.kind = AdamConfig{.beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6}};
  const OptimizedGraph og = append_optimizer(fed_gradient_graph(), all_grads(), config);
  EXPECT_EQ(og.scalar_inputs,
            (std::vector<std::string>{kBeta1Input, kOneMinusBeta1Input, kBeta2Input, kOneMinusBeta2Input, kEpsInput,
                                      kStepSizeInput, kBiasCorrection2SqrtInput}));
  EXPECT_EQ(og.state_inputs, (std::vector<std::string>{"w.adam.m", "w.adam.v", "bias.adam.m", "bias.adam.v",
                                                       "scale.adam.m", "scale.adam.v"}));
  EXPECT_EQ(og.writebacks.front(), (Writeback{"w.new", "w"}));
  EXPECT_EQ(og.writebacks.size(), 9u);
  EXPECT_EQ(og.graph.input_of_value(*og.graph.find_input("w.adam.m"))->kind, InputKind::state);
  EXPECT_TRUE(og.graph.find_output("grad.w")) << "gradient outputs stay";
  expect_close(run_graph(config, all_grads(), kSteps).params, run_reference(config, kAllDecay, kSteps).params, kF64Rel,
               "adam");
}

TEST(Optimizer, AdamWDecaysOnlyFlaggedParamsThatPassTheFilter) {
  OptimizerConfig config{.kind = AdamWConfig{.weight_decay = 0.3}};
  config.decay_filter = [](const std::string& name) { return name != "scale"; };
  std::vector<ParamGrad> grads = all_grads();
  grads[1].decay = false;  // bias: by flag; scale: by filter; only w decays
  const auto decays = [](const std::string& name) { return name == "w"; };
  const Values got = run_graph(config, grads, kSteps).params;
  expect_close(got, run_reference(config, decays, kSteps).params, kF64Rel, "adamw");
  // The decay is visible: with every param decaying, bias and scale end elsewhere.
  const Values all = run_reference(config, kAllDecay, kSteps).params;
  EXPECT_GT(std::abs(all.at("bias")[2] - got.at("bias")[2]), 1e-4);
  EXPECT_GT(std::abs(all.at("scale")[0] - got.at("scale")[0]), 1e-4);
  EXPECT_EQ(append_optimizer(fed_gradient_graph(), grads, config).scalar_inputs.back(), kDecayFactorInput);
}

struct SgdCase {
  const char* name;
  SgdConfig sgd;
  bool bias_decays;
};

class SgdVariants : public ::testing::TestWithParam<SgdCase> {};

TEST_P(SgdVariants, MatchTheReference) {
  const SgdCase& c = GetParam();
  const OptimizerConfig config{.kind = c.sgd};
  std::vector<ParamGrad> grads = all_grads();
  grads[1].decay = c.bias_decays;
  const auto decays = [&](const std::string& name) { return name != "bias" || c.bias_decays; };
  const OptimizedGraph og = append_optimizer(fed_gradient_graph(), grads, config);
  std::vector<std::string> scalars = {kLrInput};
  if (c.sgd.momentum != 0) scalars.push_back(kMomentumInput);
  if (c.sgd.weight_decay != 0) scalars.push_back(kWeightDecayInput);
  EXPECT_EQ(og.scalar_inputs, scalars);
  EXPECT_EQ(og.state_inputs.size(), c.sgd.momentum != 0 ? 3u : 0u);
  expect_close(run_graph(config, grads, kSteps).params, run_reference(config, decays, kSteps).params, kF64Rel, c.name);
}

INSTANTIATE_TEST_SUITE_P(
    Optimizer, SgdVariants,
    ::testing::Values(SgdCase{"plain", {}, true}, SgdCase{"momentum", {.momentum = 0.9}, true},
                      SgdCase{"nesterov", {.momentum = 0.9, .nesterov = true}, true},
                      SgdCase{"l2_no_bias", {.weight_decay = 0.05}, false},
                      SgdCase{"nesterov_l2", {.momentum = 0.5, .nesterov = true, .weight_decay = 0.1}, true}),
    [](const auto& p) { return std::string(p.param.name); });

TEST(Optimizer, ClippingScalesEveryGradientByOneGlobalFactor) {
  for (const OptimizerKind& kind : {OptimizerKind{AdamConfig{}}, OptimizerKind{SgdConfig{.momentum = 0.9}}}) {
    const OptimizerConfig config{.kind = kind, .clip_grad_norm = 2.0};
    const RunOutcome got = run_graph(config, all_grads(), kSteps);
    const Reference want = run_reference(config, kAllDecay, kSteps);
    expect_close(got.params, want.params, kF64Rel, "clipped");
    ASSERT_EQ(got.grad_norms.size(), want.grad_norms.size());
    int clipped = 0;
    for (std::size_t i = 0; i < want.grad_norms.size(); ++i) {
      EXPECT_NEAR(got.grad_norms[i], want.grad_norms[i], 1e-13 * want.grad_norms[i]) << "step " << i + 1;
      clipped += want.grad_norms[i] > 2.0 ? 1 : 0;
    }
    EXPECT_GT(clipped, 0) << "some steps clip";
    EXPECT_LT(clipped, kSteps) << "some steps do not";
    // And clipping changes the result.
    const OptimizerConfig unclipped{.kind = kind};
    const Values free = run_graph(unclipped, all_grads(), kSteps).params;
    EXPECT_GT(std::abs(free.at("w")[0] - got.params.at("w")[0]), 1e-6);
  }
}

TEST(Optimizer, AppendGradClipAloneAddsClippedOutputsAndTheNorm) {
  const ClippedGraph clipped = append_grad_clip(fed_gradient_graph(), all_grads(), 1.0);
  ASSERT_EQ(clipped.grads.size(), 3u);
  EXPECT_EQ(clipped.grads[0].grad, "grad.w.clipped");
  const Values g = gradients(2);  // a large step: the norm exceeds 1
  TensorMap inputs;
  for (const auto& [name, values] : initial_params()) {
    inputs.emplace(name, HostTensor::of({DType::f32, kShapes.at(name)}, values));
    inputs.emplace("g." + name, HostTensor::of({DType::f32, kShapes.at(name)}, g.at(name)));
  }
  EXPECT_EQ(clipped.scalars.values.at(kMaxNormInput), 1.0);
  for (const auto& [name, value] : clipped.scalars.values)
    inputs.emplace(name, HostTensor::of({DType::f32, {}}, {value}));
  const TensorMap out = interpret(clipped.graph, inputs).outputs;
  double squares = 0;
  for (const auto& [name, values] : g)
    for (double x : values) squares += x * x;
  const double norm = std::sqrt(squares);
  ASSERT_GT(norm, 1.0);
  EXPECT_NEAR(out.at(kGradNormOutput).at(0), norm, 1e-13 * norm);
  double clipped_squares = 0;
  for (const std::string& name : kParams) {
    const auto got = out.at("grad." + name + ".clipped").to_f64();
    EXPECT_EQ(out.at("grad." + name).to_f64(), g.at(name)) << "the raw gradient stays";
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], g.at(name)[i] / (norm + 1e-6), 1e-15);
      clipped_squares += got[i] * got[i];
    }
  }
  EXPECT_NEAR(std::sqrt(clipped_squares), 1.0, 1e-6);
}

TEST(Optimizer, Float32RunStaysCloseToTheOracle) {
  for (const OptimizerKind& kind :
       {OptimizerKind{AdamConfig{}}, OptimizerKind{AdamWConfig{}}, OptimizerKind{SgdConfig{.momentum = 0.9}}}) {
    const OptimizerConfig config{.kind = kind, .clip_grad_norm = 2.0};
    // f32 rounding of inputs and of each op; 12 steps of well-conditioned updates stay within 1e-5.
    expect_close(run_graph(config, all_grads(), kSteps, Backend::interp_f32).params,
                 run_graph(config, all_grads(), kSteps).params, 1e-5, "f32");
  }
}

TEST(Optimizer, AdamWWithNoDecayingParamStillTakesItsScalars) {
  const OptimizerConfig config{.kind = AdamWConfig{}, .decay_filter = [](const std::string&) { return false; }};
  const auto none = [](const std::string&) { return false; };
  // The decay-factor input is unused but present, so the inputs a trainer feeds depend on the kind only.
  expect_close(run_graph(config, all_grads(), 3).params, run_reference(config, none, 3).params, kF64Rel, "adamw");
}

TEST(Optimizer, ScalarsForStepAreTorchsHostComputation) {
  const OptimizerConfig adamw{.kind = AdamWConfig{.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-7, .weight_decay = 0.01},
                              .clip_grad_norm = 0.3};
  const auto s = scalars_for_step(adamw, 3, 0.001).values;
  ASSERT_EQ(s.size(), 9u);
  EXPECT_EQ(s.at(kBeta1Input), 0.9);
  EXPECT_EQ(s.at(kOneMinusBeta1Input), 1 - 0.9);
  EXPECT_EQ(s.at(kOneMinusBeta2Input), 1 - 0.999);
  EXPECT_EQ(s.at(kEpsInput), 1e-7);
  EXPECT_EQ(s.at(kMaxNormInput), 0.3);
  EXPECT_DOUBLE_EQ(s.at(kStepSizeInput), 0.001 / (1 - 0.9 * 0.9 * 0.9));
  EXPECT_DOUBLE_EQ(s.at(kBiasCorrection2SqrtInput), std::sqrt(1 - 0.999 * 0.999 * 0.999));
  EXPECT_DOUBLE_EQ(s.at(kDecayFactorInput), 1 - 0.001 * 0.01);
  // The names are the graph's scalar inputs, so a trainer feeds exactly what the graph takes.
  const OptimizedGraph og = append_optimizer(fed_gradient_graph(), all_grads(), adamw);
  std::vector<std::string> names;
  for (const auto& [name, value] : s) names.push_back(name);
  std::vector<std::string> inputs = og.scalar_inputs;
  std::sort(inputs.begin(), inputs.end());
  EXPECT_EQ(names, inputs);
  const auto sgd = scalars_for_step({.kind = SgdConfig{}}, 7, 0.5).values;
  EXPECT_EQ(sgd.size(), 1u);
  EXPECT_EQ(sgd.at(kLrInput), 0.5);
  EXPECT_THROW(scalars_for_step(adamw, 0, 0.001), Error);
  EXPECT_THROW(scalars_for_step(adamw, 1, -1.0), Error);
  EXPECT_THROW(scalars_for_step(adamw, 1, std::nan("")), Error);
  EXPECT_THROW(scalars_for_step({.kind = AdamConfig{.beta2 = 1.0}}, 1, 0.1), Error);
}

void expect_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Optimizer, BadParamsAndGradientsAreRefusedByName) {
  const Graph g = fed_gradient_graph();
  const OptimizerConfig adam{};
  expect_error([&] { append_optimizer(g, {{"nope", "grad.w"}}, adam); }, "param 'nope': the graph has no input");
  expect_error([&] { append_optimizer(g, {{"g.w", "grad.w"}}, adam); }, "param 'g.w': the input is a data input");
  expect_error(
      [&] {
        append_optimizer(g, {{"w", "grad.missing"}}, adam);
      },
      "param 'w': the graph has no gradient output 'grad.missing'");
  expect_error(
      [&] {
        append_optimizer(g, {{"w", "grad.bias"}}, adam);
      },
      "param 'w': its gradient output 'grad.bias' is f32[3], the param is f32[2,3]");
  expect_error([&] { append_optimizer(g, {{"w", "grad.w"}, {"w", "grad.w"}}, adam); }, "param 'w': listed twice");
  expect_error([&] { append_optimizer(g, {}, adam); }, "no params to update");
  expect_error([&] { append_grad_clip(g, all_grads(), 0.0); }, "max_norm must be > 0");
  // An update output name that the graph already uses.
  GraphBuilder b("taken");
  TracingScope scope(b);
  Tensor w = b.param("w", {DType::f32, {2}});
  b.output("grad.w", w * 2.f);
  b.output("w.new", w);
  expect_error(
      [&] {
        append_optimizer(b.graph(), {{"w", "grad.w"}}, {.kind = SgdConfig{}});
      },
      "already has an output named 'w.new'");
}

TEST(Optimizer, BadHyperparametersAreRefused) {
  const Graph g = fed_gradient_graph();
  const auto grads = all_grads();
  expect_error([&] { append_optimizer(g, grads, {.kind = AdamConfig{.beta1 = 1.0}}); }, "Adam beta1 must be in [0, 1)");
  expect_error([&] { append_optimizer(g, grads, {.kind = AdamWConfig{.beta2 = -0.1}}); },
               "AdamW beta2 must be in [0, 1)");
  expect_error([&] { append_optimizer(g, grads, {.kind = AdamWConfig{.weight_decay = -1}}); },
               "AdamW weight_decay must be >= 0");
  expect_error([&] { append_optimizer(g, grads, {.kind = SgdConfig{.nesterov = true}}); },
               "nesterov needs momentum > 0");
  expect_error([&] { append_optimizer(g, grads, {.kind = SgdConfig{.momentum = -0.5}}); }, "SGD momentum must be >= 0");
  expect_error([&] { append_optimizer(g, grads, {.clip_grad_norm = -1.0}); }, "clip_grad_norm must be > 0");
}

}  // namespace
}  // namespace tg
