// Training parity with PyTorch on Vulkan: the goldens of tools/goldens_train.py (W1, and W2 shrunk
// to vocab 65, T 16, d 32, 2 layers, 4 heads, B 4; 20 steps of Adam / AdamW from a literal init on
// stored batches), trained by tg::compile on Backend::vulkan. The losses and final params must
// follow PyTorch's float32 run within the bound of tests/unit/train_parity_test.cpp (which also
// checks interp_f64 against the float64 run to 1e-13): 2 D + 4 ulp, D being PyTorch's own
// float32-vs-float64 distance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "../../examples/models.h"
#include "tensorgrad/tensorgrad.h"
#include "tensorgrad/train/safetensors.h"
#include "tensorgrad/train/training.h"
#include "train/json.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;
namespace fs = std::filesystem;
const fs::path kGoldenDir = fs::path(TG_GOLDEN_DIR) / "train";

// As in train_parity_test.cpp: PyTorch's float32 run is one f32 approximation of the exact
// trajectory, at distance D from its float64 run; ours is another, and may be as far on the other
// side. Vulkan's exp, tanh, division and sqrt are within a few ulp instead of correctly rounded,
// which adds to our side's rounding but not to its order of magnitude.
constexpr double kF32DriftFactor = 2.0;
constexpr double kF32Ulps = 4.0;

const json::Value& at(const json::Value& v, const char* key) {
  const json::Value* member = v.find(key);
  if (!member) throw Error(std::string("golden: no member '") + key + "'");
  return *member;
}
double number(const json::Value& v, const char* key) { return std::strtod(at(v, key).text.c_str(), nullptr); }
std::int64_t integer(const json::Value& v, const char* key) { return static_cast<std::int64_t>(number(v, key)); }
std::vector<double> losses(const json::Value& doc, const char* precision) {
  std::vector<double> out;
  for (const json::Value& item : at(at(doc, precision), "loss").items)
    out.push_back(std::strtod(item.text.c_str(), nullptr));
  return out;
}

struct Golden {
  std::string name;
  json::Value doc;
  TensorMap tensors;  // init.<param>, data.<input> [steps, ...], final64.<param>, final32.<param>
  std::int64_t steps = 0;
};

Golden load_golden(const std::string& name) {
  std::ifstream in(kGoldenDir / (name + ".json"));
  std::stringstream text;
  text << in.rdbuf();
  Golden g{name, json::parse(text.str()), {}, 0};
  g.tensors = load_safetensors((kGoldenDir / at(g.doc, "tensors").text).string()).tensors;
  g.steps = integer(g.doc, "steps");
  return g;
}

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

struct Trained {
  std::vector<double> loss;
  TensorMap params;
};

template <class M>
Trained train(const Golden& g, const M& model, std::function<Tensor(const M&, const Inputs&)> loss,
              std::shared_ptr<Context> ctx) {
  InputSpecs inputs;
  for (const auto& [name, value] : batch(g, 0)) inputs.emplace(name, InputSpec{value.type.shape, value.type.dtype});
  const json::Value& o = at(g.doc, "optimizer");
  OptimizerConfig optimizer{.kind = AdamConfig{number(o, "beta1"), number(o, "beta2"), number(o, "eps")}};
  if (at(o, "kind").text == "adamw") {
    optimizer.kind = AdamWConfig{number(o, "beta1"), number(o, "beta2"), number(o, "eps"), number(o, "weight_decay")};
  }
  Training training = compile(TrainingSpec<M>{.model = model,
                                              .loss = std::move(loss),
                                              .inputs = inputs,
                                              .optimizer = optimizer,
                                              .lr = number(g.doc, "lr"),
                                              .backend = Backend::vulkan,
                                              .seed = 0,
                                              .vk_context = std::move(ctx)});
  ParamValues init;
  for (const std::string& name : training.param_names()) init.emplace(name, g.tensors.at("init." + name).to_f32());
  training.upload_params(init);
  Trained out;
  for (std::int64_t step = 0; step < g.steps; ++step) {
    const StepResult r = training.step(batch(g, step));
    if (!r.ok()) {
      ADD_FAILURE() << g.name << " step " << step << ": " << r.failure().kind << ": " << r.failure().message;
      return out;
    }
    out.loss.push_back(r.loss());
  }
  out.params = training.download_param_tensors();
  return out;
}

// The same check as train_parity_test.cpp's Float32FollowsPyTorchsFloat32Trajectory (the params whose
// gradient is zero in exact arithmetic, the attention key biases, are left out: Adam turns their
// rounding noise into steps of up to lr). Returns the largest |difference| / bound.
double expect_follows_float32(const Golden& g, const Trained& run) {
  const std::vector<double> exact = losses(g.doc, "float64"), want = losses(g.doc, "float32");
  EXPECT_EQ(run.loss.size(), want.size());
  const auto ulps = [](double v) {
    return kF32Ulps * std::numeric_limits<float>::epsilon() * std::max(1.0, std::abs(v));
  };
  double drift = 0, worst = 0;
  for (std::size_t t = 0; t < std::min(want.size(), run.loss.size()); ++t) {
    drift = std::max(drift, std::abs(want[t] - exact[t]));
    const double bound = kF32DriftFactor * drift + ulps(want[t]);
    worst = std::max(worst, std::abs(run.loss[t] - want[t]) / bound);
    EXPECT_NEAR(run.loss[t], want[t], bound) << g.name << " step " << t << " (PyTorch float64: " << exact[t] << ")";
  }
  for (const auto& [name, got] : run.params) {
    if (name.ends_with(".attn.k.b")) continue;
    const std::vector<double>& final32 = g.tensors.at("final32." + name).values;
    const std::vector<double>& final64 = g.tensors.at("final64." + name).values;
    double param_drift = 0;
    for (std::size_t i = 0; i < final32.size(); ++i)
      param_drift = std::max(param_drift, std::abs(final32[i] - final64[i]));
    EXPECT_EQ(got.values.size(), final32.size()) << name;
    for (std::size_t i = 0; i < std::min(got.values.size(), final32.size()); ++i) {
      const double bound = kF32DriftFactor * param_drift + ulps(final32[i]);
      worst = std::max(worst, std::abs(got.values[i] - final32[i]) / bound);
      EXPECT_NEAR(got.values[i], final32[i], bound) << g.name << " " << name << "[" << i << "]";
    }
  }
  return worst;
}

TEST_F(VkTest, W1FollowsPyTorchsFloat32Trajectory) {
  auto ctx = make_context();
  const Golden g = load_golden("w1");
  const examples::Mlp model;
  const Trained run = train<examples::Mlp>(g, model, examples::mlp_loss, ctx);
  const double worst = expect_follows_float32(g, run);
  std::printf("[ measured ] w1 vulkan: at most %.2f of the bound\n", worst);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, W2SmallFollowsPyTorchsFloat32Trajectory) {
  auto ctx = make_context();
  const Golden g = load_golden("w2_small");
  const json::Value& m = at(g.doc, "model");
  const examples::CharTransformer model(examples::TransformerConfig{
      integer(m, "vocab"), integer(m, "context"), integer(m, "width"), integer(m, "layers"), integer(m, "heads")});
  const Trained run = train<examples::CharTransformer>(g, model, examples::transformer_loss, ctx);
  const double worst = expect_follows_float32(g, run);
  std::printf("[ measured ] w2_small vulkan: at most %.2f of the bound\n", worst);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
