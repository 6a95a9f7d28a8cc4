// Optimizer and LR-schedule parity with PyTorch. tools/goldens_optim.py trains a tiny model
// (pred = x W + b, loss = mean((pred - y)^2)) with torch.optim.{Adam, AdamW, SGD},
// clip_grad_norm_ and the lr_scheduler classes, in float64 and float32, and stores each step's
// rate and loss and the final params in tests/golden/optim/<case>.json. Here the same model is
// traced, differentiated, given append_optimizer's update and run step by step through tg::Session:
// on interp_f64 it must follow PyTorch's float64 trajectory to 1e-13 relative, on interp_f32 its
// float32 trajectory within the bound explained at kF32DriftFactor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/library.h"
#include "support/train_parity.h"
#include "tensorgrad/passes/optimizer.h"
#include "tensorgrad/train/schedule.h"

namespace tg {
namespace {

namespace fs = std::filesystem;
using testing::at;
using testing::find_member;
using testing::integer;
using testing::number;
using testing::numbers;
using testing::read_text;
const fs::path kGoldenDir = fs::path(TG_SOURCE_DIR) / "tests/golden/optim";

const std::vector<std::string> kCases = {"adam",         "adamw_no_decay_b", "sgd_momentum",  "sgd_nesterov_l2",
                                         "adam_clip",    "sgd_clip",         "sgd_staircase", "sgd_multi_step",
                                         "adamw_cosine", "adam_linear",      "adam_warmup",   "sgd_warmup_cosine"};

// f64: the graph repeats PyTorch's operations in its order, with every hyperparameter fed as a
// double, so the only differences are PyTorch's fused multiply-adds (add(alpha=), addcmul and
// addcdiv use fma on CPU), its summation order in the gradient and the norms, and its recursive
// schedulers: a few ulps. Measured (2026, torch 1.13): at most 1e-15 relative over every case.
constexpr double kF64Rel = 1e-13;
// f32: both runs round every op to float, but not at exactly the same places (the fused
// multiply-adds, the order of reductions), so each is its own f32 approximation of the exact
// trajectory. PyTorch's own f32-vs-f64 distance D (per case and quantity, from the golden: 1e-8 to
// 2e-7 here) measures how far f32 rounding carries this trajectory in 20 steps; ours is as far on
// its side, so the two f32 runs may differ by about 2 D, plus a few ulps of the value where D is
// small by luck. Measured: at most 0.34 of this bound (2.3e-7 on a loss near 1).
constexpr double kF32DriftFactor = 2.0;
constexpr double kF32Ulps = 4.0;

OptimizerConfig optimizer_of(const nlohmann::json& c) {
  const nlohmann::json& o = at(c, "optimizer");
  OptimizerConfig config;
  const std::string kind = at(o, "kind").get<std::string>();
  if (kind == "adam") config.kind = AdamConfig{number(o, "beta1"), number(o, "beta2"), number(o, "eps")};
  if (kind == "adamw") {
    config.kind = AdamWConfig{number(o, "beta1"), number(o, "beta2"), number(o, "eps"), number(o, "weight_decay")};
  }
  if (kind == "sgd")
    config.kind = SgdConfig{number(o, "momentum"), at(o, "nesterov").get<bool>(), number(o, "weight_decay")};
  if (const nlohmann::json* clip = find_member(c, "clip_grad_norm")) config.clip_grad_norm = number(*clip);
  return config;
}

Schedule schedule_of(const nlohmann::json& s) {
  const std::string kind = at(s, "kind").get<std::string>();
  if (kind == "constant") return number(s, "lr");
  if (kind == "linear") return lr::Linear{number(s, "peak"), number(s, "final"), integer(s, "steps")};
  if (kind == "cosine_annealing")
    return lr::CosineAnnealing{number(s, "peak"), number(s, "final"), integer(s, "steps")};
  if (kind == "staircase") return lr::Staircase{number(s, "peak"), integer(s, "every"), number(s, "gamma")};
  if (kind == "multi_step") {
    std::vector<std::int64_t> milestones;
    for (double m : numbers(at(s, "milestones"))) milestones.push_back(static_cast<std::int64_t>(m));
    return lr::MultiStep{number(s, "peak"), milestones, number(s, "gamma")};
  }
  if (kind == "warmup") return lr::warmup({number(s, "peak"), integer(s, "steps")}, schedule_of(at(s, "after")));
  throw Error("golden: unknown schedule kind '" + kind + "'");
}

HostTensor tensor_of(const nlohmann::json& t) {
  Shape shape;
  for (double d : numbers(at(t, "shape"))) shape.push_back(static_cast<std::int64_t>(d));
  return HostTensor::of({DType::f32, shape}, numbers(at(t, "values")));
}

// The model of tools/goldens_optim.py, differentiated.
Graph model_graph(const nlohmann::json& model) {
  GraphBuilder b("optim_parity");
  TracingScope scope(b);
  Tensor x = b.input("x", tensor_of(at(model, "x")).type);
  Tensor y = b.input("y", tensor_of(at(model, "y")).type);
  Tensor w = b.param("W", tensor_of(at(model, "W")).type);
  Tensor bias = b.param("b", tensor_of(at(model, "b")).type);
  b.output("loss", mean(square(matmul(x, w) + bias - y)));
  return differentiate(b.take());
}

struct Trajectory {
  std::vector<double> lr, loss, grad_norm;
  std::vector<double> w, b;
};

Trajectory golden_trajectory(const nlohmann::json& t) {
  Trajectory out{numbers(at(t, "lr")), numbers(at(t, "loss")), {}, numbers(at(t, "W")), numbers(at(t, "b"))};
  if (const nlohmann::json* norms = find_member(t, "grad_norm")) out.grad_norm = numbers(*norms);
  return out;
}

Trajectory run_case(const nlohmann::json& c, Backend backend) {
  const Graph graph = model_graph(at(c, "model"));
  std::vector<ParamGrad> grads = param_grads(graph);
  EXPECT_EQ(grads.size(), 2u);
  if (const nlohmann::json* no_decay = find_member(c, "no_decay")) {
    for (const nlohmann::json& name : *no_decay)
      for (ParamGrad& g : grads) g.decay = g.decay && g.param != name.get<std::string>();
  }
  const OptimizerConfig config = optimizer_of(c);
  const Schedule schedule = find_member(c, "schedule") ? schedule_of(at(c, "schedule")) : Schedule(number(c, "lr"));
  const OptimizedGraph og = append_optimizer(graph, grads, config);
  Session session(og.graph, {.backend = backend, .writebacks = og.writebacks});
  const nlohmann::json& model = at(c, "model");
  session.set_param("W", tensor_of(at(model, "W")));
  session.set_param("b", tensor_of(at(model, "b")));
  for (const std::string& state : og.state_inputs) {
    session.set_param(state, HostTensor::filled(og.graph.type(*og.graph.find_input(state)), 0.0));
  }
  Trajectory out;
  for (std::int64_t step = 1; step <= integer(c, "steps"); ++step) {
    TensorMap inputs = optimizer_step_inputs(config, schedule, step);
    inputs.emplace("x", tensor_of(at(model, "x")));
    inputs.emplace("y", tensor_of(at(model, "y")));
    const RunResult r = session.run(inputs);
    if (!r.ok()) {
      ADD_FAILURE() << "step " << step << ": " << r.failure().message;
      return out;
    }
    out.lr.push_back(lr_at(schedule, step));
    out.loss.push_back(r.output("loss").at(0));
    if (config.clip_grad_norm) out.grad_norm.push_back(r.output(kGradNormOutput).at(0));
  }
  out.w = session.param("W").to_f64();
  out.b = session.param("b").to_f64();
  return out;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

// |got - want| <= tolerance(want) element by element.
template <class Tolerance>
void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, Tolerance tolerance,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tolerance(want[i])) << what << "[" << i << "]";
  }
}

class OptimizerParity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const fs::path path = kGoldenDir / (GetParam() + ".json");
    const std::string text = read_text(path);
    ASSERT_FALSE(text.empty()) << "cannot read " << path << " (regenerate: /usr/bin/python3 tools/goldens_optim.py)";
    golden_ = nlohmann::json::parse(text);
  }
  nlohmann::json golden_;
};

TEST_P(OptimizerParity, Float64FollowsPyTorchsFloat64Trajectory) {
  const Trajectory want = golden_trajectory(at(golden_, "float64"));
  const Trajectory got = run_case(golden_, Backend::interp_f64);
  const auto rel = [](double w) { return kF64Rel * std::max(1.0, std::abs(w)); };
  expect_near_all(got.lr, want.lr, rel, "lr");
  expect_near_all(got.loss, want.loss, rel, "loss");
  expect_near_all(got.grad_norm, want.grad_norm, rel, "grad_norm");
  expect_near_all(got.w, want.w, rel, "W");
  expect_near_all(got.b, want.b, rel, "b");
  // The updates moved the params: the comparison is not of two initial states.
  EXPECT_GT(max_abs_diff(want.w, tensor_of(at(at(golden_, "model"), "W")).to_f64()), 0.05);
  EXPECT_LT(want.loss.back(), want.loss.front());
}

TEST_P(OptimizerParity, Float32FollowsPyTorchsFloat32Trajectory) {
  const Trajectory exact = golden_trajectory(at(golden_, "float64"));
  const Trajectory want = golden_trajectory(at(golden_, "float32"));
  const Trajectory got = run_case(golden_, Backend::interp_f32);
  const auto check = [&](const std::vector<double>& g, const std::vector<double>& w, const std::vector<double>& x,
                         const std::string& what) {
    const double drift = max_abs_diff(w, x);  // PyTorch's f32 distance from the exact trajectory
    const auto tolerance = [&](double v) {
      return kF32DriftFactor * drift + kF32Ulps * std::numeric_limits<float>::epsilon() * std::max(1.0, std::abs(v));
    };
    expect_near_all(g, w, tolerance, what);
  };
  check(got.loss, want.loss, exact.loss, "loss");
  check(got.grad_norm, want.grad_norm, exact.grad_norm, "grad_norm");
  check(got.w, want.w, exact.w, "W");
  check(got.b, want.b, exact.b, "b");
}

INSTANTIATE_TEST_SUITE_P(Golden, OptimizerParity, ::testing::ValuesIn(kCases), [](const auto& p) { return p.param; });

TEST(OptimizerParityFiles, EveryGoldenFileIsACase) {
  std::set<std::string> files;
  for (const auto& entry : fs::directory_iterator(kGoldenDir))
    if (entry.path().extension() == ".json") files.insert(entry.path().stem().string());
  EXPECT_EQ(files, std::set<std::string>(kCases.begin(), kCases.end()));
}

}  // namespace
}  // namespace tg
