// Training parity with PyTorch on the two workloads of examples/models.h. tools/goldens_train.py
// mirrors each model in PyTorch with explicit params (same names, [in, out] Linear weights), trains
// it from a literal init on stored batches with torch.optim.Adam (W1) / AdamW with tensorgrad's
// decay groups (W2, shrunk to vocab 65, T 16, d 32, 2 layers, 4 heads, B 4) for 20 steps, in float64
// and float32, and stores each step's loss and the final params (tests/golden/train/<name>.json and
// .safetensors). Here tg::compile trains the examples/models.h model from the same init
// (Training::upload_params) on the same batches: on interp_f64 it must follow PyTorch's float64
// trajectory to kF64Rel, on interp_f32 its float32 trajectory within the drift bound explained at
// kF32DriftFactor. tests/vk/vk_train_parity_test.cpp does the f32 comparison on Vulkan.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../../examples/models.h"
#include "tensorgrad/tensorgrad.h"
#include "tensorgrad/train/safetensors.h"
#include "tensorgrad/train/training.h"
#include "train/json.h"

namespace tg {
namespace {

namespace fs = std::filesystem;
const fs::path kGoldenDir = fs::path(TG_SOURCE_DIR) / "tests/golden/train";
const std::vector<std::string> kWorkloads = {"w1", "w2_small"};

// f64: the same ops as PyTorch's in the same order, every hyperparameter a double, the two f32
// constants of the model (LayerNorm eps, the attention scale) rounded to float on both sides; what
// remains is summation order (matmul, the reductions, the gradient sums, PyTorch's Welford
// LayerNorm) and PyTorch's fused multiply-adds in the optimizer. Measured (torch 1.13): losses within
// 4e-16 relative, final params within 3e-15. The bound catches a one-ulp change of one f32 constant:
// an attention scale of 1/sqrt(8) in double instead of float moves the w2_small losses by 3e-10.
constexpr double kF64Rel = 1e-13;
// f32: both sides round every op to float but at different places, so each is its own f32
// approximation of the exact trajectory. PyTorch's own float32-vs-float64 distance D (of the losses
// up to this step, or of one param tensor) measures how far f32 rounding carries this trajectory;
// ours may be as far on the other side, so the two f32 runs may differ by about 2 D, plus a few
// ulps of the value where D is small by luck (the first steps). Measured: at most 0.15 (w1) and 0.39
// (w2_small) of the bound; Vulkan (lavapipe) 0.15 and 0.45.
constexpr double kF32DriftFactor = 2.0;
constexpr double kF32Ulps = 4.0;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

const json::Value& at(const json::Value& v, const char* key) {
  const json::Value* member = v.find(key);
  if (!member) throw Error(std::string("golden: no member '") + key + "'");
  return *member;
}
double number(const json::Value& v) { return std::strtod(v.text.c_str(), nullptr); }
double number(const json::Value& v, const char* key) { return number(at(v, key)); }
std::int64_t integer(const json::Value& v, const char* key) { return static_cast<std::int64_t>(number(v, key)); }
std::vector<double> numbers(const json::Value& v) {
  std::vector<double> out;
  for (const json::Value& item : v.items) out.push_back(number(item));
  return out;
}

struct Golden {
  std::string name;
  json::Value doc;
  TensorMap tensors;  // init.<param>, data.<input> [steps, ...], final64.<param>, final32.<param>
  std::int64_t steps = 0;
};

Golden load_golden(const std::string& name) {
  Golden g{name, json::parse(read_text(kGoldenDir / (name + ".json"))), {}, 0};
  g.tensors = load_safetensors((kGoldenDir / at(g.doc, "tensors").text).string()).tensors;
  g.steps = integer(g.doc, "steps");
  return g;
}

std::vector<std::string> golden_param_names(const Golden& g) {
  std::vector<std::string> names;
  for (const json::Value& p : at(g.doc, "params").items) names.push_back(at(p, "name").text);
  return names;
}

// The params whose gradient is zero in exact arithmetic: softmax is invariant to a shift of a score
// row, and the key bias adds q_i . b_k to every score of row i. The computed gradient is rounding
// noise, which Adam normalises into steps of up to lr, so their final values are not comparable
// (PyTorch's own f32 run moves them by 1e-3, its f64 run by 1e-12).
bool gradient_is_exactly_zero(const std::string& param) { return param.ends_with(".attn.k.b"); }

// The batch of one step: data.<input> [steps, ...] sliced at `step` (0-based).
TensorMap batch(const Golden& g, std::int64_t step) {
  TensorMap out;
  for (const auto& [key, all] : g.tensors) {
    if (!key.starts_with("data.")) continue;
    const TensorType type{all.type.dtype, Shape(all.type.shape.begin() + 1, all.type.shape.end())};
    const auto count = static_cast<std::ptrdiff_t>(all.values.size()) / g.steps;
    const auto first = all.values.begin() + step * count;
    out.emplace(key.substr(5), HostTensor::of(type, std::vector<double>(first, first + count)));
  }
  return out;
}

InputSpecs input_specs(const Golden& g) {
  InputSpecs specs;
  for (const auto& [name, value] : batch(g, 0)) specs.emplace(name, InputSpec{value.type.shape, value.type.dtype});
  return specs;
}

OptimizerConfig optimizer_of(const Golden& g) {
  const json::Value& o = at(g.doc, "optimizer");
  if (at(o, "kind").text == "adam")
    return {.kind = AdamConfig{number(o, "beta1"), number(o, "beta2"), number(o, "eps")}};
  return {.kind = AdamWConfig{number(o, "beta1"), number(o, "beta2"), number(o, "eps"), number(o, "weight_decay")}};
}

struct Trained {
  std::vector<double> loss;
  TensorMap params;  // the final params, as the backend holds them
  std::vector<ParamInfo> infos;
};

template <class M>
Trained train(const Golden& g, const M& model, std::function<Tensor(const M&, const Inputs&)> loss, Backend backend,
              std::int64_t steps) {
  Training training = compile(TrainingSpec<M>{.model = model,
                                              .loss = std::move(loss),
                                              .inputs = input_specs(g),
                                              .optimizer = optimizer_of(g),
                                              .lr = number(g.doc, "lr"),
                                              .backend = backend,
                                              .seed = 0});
  Trained run{{}, {}, training.params()};
  ParamValues init;
  for (const std::string& name : golden_param_names(g)) init.emplace(name, g.tensors.at("init." + name).to_f32());
  training.upload_params(init);
  for (std::int64_t step = 0; step < steps; ++step) {
    const StepResult r = training.step(batch(g, step));
    if (!r.ok()) {
      ADD_FAILURE() << g.name << " step " << step << ": " << r.failure().kind << ": " << r.failure().message;
      return run;
    }
    run.loss.push_back(r.loss());
  }
  run.params = training.download_param_tensors();
  return run;
}

// `steps` defaults to the golden's.
Trained train(const Golden& g, Backend backend, std::int64_t steps = -1) {
  if (steps < 0) steps = g.steps;
  if (g.name == "w1") {
    const examples::Mlp model;
    return train<examples::Mlp>(g, model, examples::mlp_loss, backend, steps);
  }
  const json::Value& m = at(g.doc, "model");
  const examples::CharTransformer model(examples::TransformerConfig{
      integer(m, "vocab"), integer(m, "context"), integer(m, "width"), integer(m, "layers"), integer(m, "heads")});
  return train<examples::CharTransformer>(g, model, examples::transformer_loss, backend, steps);
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

class TrainParity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const fs::path path = kGoldenDir / (GetParam() + ".json");
    ASSERT_TRUE(fs::exists(path)) << path << " is missing (regenerate: /usr/bin/python3 tools/goldens_train.py)";
    golden_ = load_golden(GetParam());
  }
  std::vector<double> golden_loss(const char* precision) const {
    return numbers(at(at(golden_.doc, precision), "loss"));
  }
  Golden golden_;
};

// tensorgrad's default decay flags (weights, embeddings and positions decay; biases and LayerNorm
// params do not) are the groups the PyTorch run gave AdamW, and the params are the same.
TEST_P(TrainParity, ParamsAndDecayFlagsAreThoseOfThePyTorchRun) {
  const Trained run = train(golden_, Backend::interp_f32, 0);
  const std::vector<json::Value>& want = at(golden_.doc, "params").items;
  ASSERT_EQ(run.infos.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(run.infos[i].name, at(want[i], "name").text);
    Shape shape;
    for (double d : numbers(at(want[i], "shape"))) shape.push_back(static_cast<std::int64_t>(d));
    EXPECT_EQ(run.infos[i].shape, shape) << run.infos[i].name;
    EXPECT_EQ(run.infos[i].decay, at(want[i], "decay").boolean) << run.infos[i].name;
  }
}

TEST_P(TrainParity, Float64FollowsPyTorchsFloat64Trajectory) {
  const std::vector<double> want = golden_loss("float64");
  const Trained run = train(golden_, Backend::interp_f64);
  ASSERT_EQ(run.loss.size(), want.size());
  double worst_loss = 0, worst_param = 0;
  for (std::size_t t = 0; t < want.size(); ++t) {
    const double rel = std::abs(run.loss[t] - want[t]) / std::max(1.0, std::abs(want[t]));
    worst_loss = std::max(worst_loss, rel);
    EXPECT_LE(rel, kF64Rel) << "step " << t << ": tensorgrad " << run.loss[t] << ", PyTorch " << want[t];
  }
  for (const std::string& name : golden_param_names(golden_)) {
    const std::vector<double>& got = run.params.at(name).values;
    const std::vector<double>& final64 = golden_.tensors.at("final64." + name).values;
    const std::vector<double>& init = golden_.tensors.at("init." + name).values;
    if (gradient_is_exactly_zero(name)) {
      // The premise: in float64 the noise is far below Adam's eps, so PyTorch hardly moved it.
      EXPECT_LT(max_abs_diff(final64, init), 1e-9) << name;
      continue;
    }
    ASSERT_EQ(got.size(), final64.size()) << name;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double rel = std::abs(got[i] - final64[i]) / std::max(1.0, std::abs(final64[i]));
      worst_param = std::max(worst_param, rel);
      EXPECT_LE(rel, kF64Rel) << name << "[" << i << "]";
    }
    // The updates moved every param: the comparison is not of two initial states.
    EXPECT_GT(max_abs_diff(final64, init), 1e-3) << name;
  }
  EXPECT_LT(want.back(), want.front()) << "the golden run did not train";
  std::printf("[ measured ] %s interp_f64: loss %.2g, params %.2g relative (bound %.0e)\n", golden_.name.c_str(),
              worst_loss, worst_param, kF64Rel);
}

TEST_P(TrainParity, Float32FollowsPyTorchsFloat32Trajectory) {
  const std::vector<double> exact = golden_loss("float64"), want = golden_loss("float32");
  const Trained run = train(golden_, Backend::interp_f32);
  ASSERT_EQ(run.loss.size(), want.size());
  const auto ulps = [](double v) {
    return kF32Ulps * std::numeric_limits<float>::epsilon() * std::max(1.0, std::abs(v));
  };
  double drift = 0, worst = 0;  // worst: the largest |difference| / bound
  for (std::size_t t = 0; t < want.size(); ++t) {
    drift = std::max(drift, std::abs(want[t] - exact[t]));  // PyTorch's f32 distance up to this step
    const double bound = kF32DriftFactor * drift + ulps(want[t]);
    worst = std::max(worst, std::abs(run.loss[t] - want[t]) / bound);
    EXPECT_NEAR(run.loss[t], want[t], bound) << "step " << t << " (PyTorch float64: " << exact[t] << ")";
  }
  for (const std::string& name : golden_param_names(golden_)) {
    if (gradient_is_exactly_zero(name)) continue;
    const std::vector<double>& got = run.params.at(name).values;
    const std::vector<double>& final32 = golden_.tensors.at("final32." + name).values;
    const double param_drift = max_abs_diff(final32, golden_.tensors.at("final64." + name).values);
    ASSERT_EQ(got.size(), final32.size()) << name;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double bound = kF32DriftFactor * param_drift + ulps(final32[i]);
      worst = std::max(worst, std::abs(got[i] - final32[i]) / bound);
      EXPECT_NEAR(got[i], final32[i], bound) << name << "[" << i << "]";
    }
  }
  std::printf("[ measured ] %s interp_f32: at most %.2f of the bound\n", golden_.name.c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Golden, TrainParity, ::testing::ValuesIn(kWorkloads), [](const auto& p) { return p.param; });

TEST(TrainParityFiles, EveryGoldenFileIsAWorkload) {
  std::set<std::string> files;
  for (const auto& entry : fs::directory_iterator(kGoldenDir)) files.insert(entry.path().filename().string());
  std::set<std::string> want;
  for (const std::string& w : kWorkloads) want.insert({w + ".json", w + ".safetensors"});
  EXPECT_EQ(files, want);
}

}  // namespace
}  // namespace tg
