#pragma once
// Shared by the parity tests (tests/unit/optimizer_parity_test.cpp, tests/unit/train_parity_test.cpp,
// tests/vk/vk_train_parity_test.cpp): reading the JSON goldens, and for the training goldens of
// tools/goldens_train.py (tests/golden/train/<name>.json + .safetensors) loading a golden, training
// the examples/models.h model from its literal init on its stored batches, and the float32 check.
// Header-only: each test binary compiles what it uses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "../../examples/models.h"
#include "support/library.h"
#include "tensorgrad/train/safetensors.h"
#include "tensorgrad/train/training.h"

namespace tg::testing {

// ---- JSON goldens ----

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The member `key` of a golden's object, or null.
inline const nlohmann::json* find_member(const nlohmann::json& v, const char* key) {
  const auto it = v.find(key);
  return it == v.end() ? nullptr : &*it;
}
inline const nlohmann::json& at(const nlohmann::json& v, const char* key) {
  const nlohmann::json* member = find_member(v, key);
  if (!member) throw Error(std::string("golden: no member '") + key + "'");
  return *member;
}
inline double number(const nlohmann::json& v) { return v.get<double>(); }
inline double number(const nlohmann::json& v, const char* key) { return number(at(v, key)); }
inline std::int64_t integer(const nlohmann::json& v, const char* key) {
  return static_cast<std::int64_t>(number(v, key));
}
inline std::vector<double> numbers(const nlohmann::json& v) {
  std::vector<double> out;
  for (const nlohmann::json& item : v) out.push_back(number(item));
  return out;
}

inline double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

// ---- training goldens ----

// f32: both sides round every op to float but at different places, so each is its own f32
// approximation of the exact trajectory. PyTorch's own float32-vs-float64 distance D (of the losses
// up to this step, or of one param tensor) measures how far f32 rounding carries this trajectory;
// ours may be as far on the other side, so the two f32 runs may differ by about 2 D, plus a few
// ulps of the value where D is small by luck (the first steps). Vulkan's exp, tanh, division and
// sqrt are within a few ulp instead of correctly rounded, which adds to our side's rounding but not
// to its order of magnitude. Measured: at most 0.15 (w1) and 0.39 (w2_small) of the bound on
// interp_f32; Vulkan (lavapipe) 0.15 and 0.45.
constexpr double kF32DriftFactor = 2.0;
constexpr double kF32Ulps = 4.0;

struct TrainGolden {
  std::string name;
  nlohmann::json doc;
  TensorMap tensors;  // init.<param>, data.<input> [steps, ...], final64.<param>, final32.<param>
  std::int64_t steps = 0;
};

inline TrainGolden load_train_golden(const std::filesystem::path& dir, const std::string& name) {
  TrainGolden g{name, nlohmann::json::parse(read_text(dir / (name + ".json"))), {}, 0};
  g.tensors = load_safetensors((dir / at(g.doc, "tensors").get<std::string>()).string()).tensors;
  g.steps = integer(g.doc, "steps");
  return g;
}

inline std::vector<std::string> golden_param_names(const TrainGolden& g) {
  std::vector<std::string> names;
  for (const nlohmann::json& p : at(g.doc, "params")) names.push_back(at(p, "name").get<std::string>());
  return names;
}

inline std::vector<double> golden_losses(const TrainGolden& g, const char* precision) {
  return numbers(at(at(g.doc, precision), "loss"));
}

// The params whose gradient is zero in exact arithmetic: softmax is invariant to a shift of a score
// row, and the key bias adds q_i . b_k to every score of row i. The computed gradient is rounding
// noise, which Adam normalises into steps of up to lr, so their final values are not comparable
// (PyTorch's own f32 run moves them by 1e-3, its f64 run by 1e-12).
inline bool gradient_is_exactly_zero(const std::string& param) { return param.ends_with(".attn.k.b"); }

// The batch of one step: data.<input> [steps, ...] sliced at `step` (0-based).
inline TensorMap golden_batch(const TrainGolden& g, std::int64_t step) {
  TensorMap out;
  for (const auto& [key, all] : g.tensors) {
    if (!key.starts_with("data.")) continue;
    const TensorType type{all.type.dtype, Shape(all.type.shape.begin() + 1, all.type.shape.end())};
    const auto count = static_cast<std::ptrdiff_t>(all.size()) / g.steps;
    const std::vector<double> values = all.to_f64();
    const auto first = values.begin() + step * count;
    out.emplace(key.substr(5), HostTensor::of(type, std::vector<double>(first, first + count)));
  }
  return out;
}

inline OptimizerConfig golden_optimizer(const TrainGolden& g) {
  const nlohmann::json& o = at(g.doc, "optimizer");
  if (at(o, "kind").get<std::string>() == "adam")
    return {.kind = AdamConfig{number(o, "beta1"), number(o, "beta2"), number(o, "eps")}};
  return {.kind = AdamWConfig{number(o, "beta1"), number(o, "beta2"), number(o, "eps"), number(o, "weight_decay")}};
}

struct Trained {
  std::vector<double> loss;
  TensorMap params;  // the final params, as the backend holds them
  std::vector<ParamInfo> infos;
};

template <class M>
Trained train_on_golden(const TrainGolden& g, const M& model, std::function<Tensor(const M&, const Inputs&)> loss,
                        Backend backend, std::int64_t steps, std::shared_ptr<vk::Context> ctx) {
  InputSpecs inputs;
  for (const auto& [name, value] : golden_batch(g, 0))
    inputs.emplace(name, InputSpec{value.type.shape, value.type.dtype});
  Training training = compile(TrainingSpec<M>{.model = model,
                                              .loss = std::move(loss),
                                              .inputs = inputs,
                                              .optimizer = golden_optimizer(g),
                                              .lr = number(g.doc, "lr"),
                                              .backend = backend,
                                              .seed = 0,
                                              .vk_context = std::move(ctx)});
  Trained run{{}, {}, training.params()};
  ParamValues init;
  for (const std::string& name : golden_param_names(g)) init.emplace(name, g.tensors.at("init." + name).to_f32());
  training.upload_params(init);
  for (std::int64_t step = 0; step < steps; ++step) {
    const StepResult r = training.step(golden_batch(g, step));
    if (!r.ok()) {
      ADD_FAILURE() << g.name << " step " << step << ": " << r.failure().kind << ": " << r.failure().message;
      return run;
    }
    run.loss.push_back(r.loss());
  }
  run.params = training.download_param_tensors();
  return run;
}

// Trains the golden's model (w1: the MLP; otherwise the char transformer of its "model" entry) for
// `steps` steps (-1: the golden's).
inline Trained train_on_golden(const TrainGolden& g, Backend backend, std::int64_t steps = -1,
                               std::shared_ptr<vk::Context> ctx = nullptr) {
  if (steps < 0) steps = g.steps;
  if (g.name == "w1") {
    const examples::Mlp model;
    return train_on_golden<examples::Mlp>(g, model, examples::mlp_loss, backend, steps, std::move(ctx));
  }
  const nlohmann::json& m = at(g.doc, "model");
  const examples::CharTransformer model(examples::TransformerConfig{
      integer(m, "vocab"), integer(m, "context"), integer(m, "width"), integer(m, "layers"), integer(m, "heads")});
  return train_on_golden<examples::CharTransformer>(g, model, examples::transformer_loss, backend, steps,
                                                    std::move(ctx));
}

// Losses and final params against PyTorch's float32 run within kF32DriftFactor * D + kF32Ulps ulp
// (params whose gradient is exactly zero left out). Returns the largest |difference| / bound.
inline double expect_follows_float32(const TrainGolden& g, const Trained& run) {
  const std::vector<double> exact = golden_losses(g, "float64"), want = golden_losses(g, "float32");
  EXPECT_EQ(run.loss.size(), want.size()) << g.name;
  const auto ulps = [](double v) {
    return kF32Ulps * std::numeric_limits<float>::epsilon() * std::max(1.0, std::abs(v));
  };
  double drift = 0, worst = 0;
  for (std::size_t t = 0; t < std::min(want.size(), run.loss.size()); ++t) {
    drift = std::max(drift, std::abs(want[t] - exact[t]));  // PyTorch's f32 distance up to this step
    const double bound = kF32DriftFactor * drift + ulps(want[t]);
    worst = std::max(worst, std::abs(run.loss[t] - want[t]) / bound);
    EXPECT_NEAR(run.loss[t], want[t], bound) << g.name << " step " << t << " (PyTorch float64: " << exact[t] << ")";
  }
  for (const std::string& name : golden_param_names(g)) {
    if (gradient_is_exactly_zero(name)) continue;
    const auto it = run.params.find(name);
    if (it == run.params.end()) {
      ADD_FAILURE() << g.name << ": no final value for param " << name;
      continue;
    }
    const auto got = it->second.to_f64();
    const auto final32 = g.tensors.at("final32." + name).to_f64();
    const double param_drift = max_abs_diff(final32, g.tensors.at("final64." + name).to_f64());
    EXPECT_EQ(got.size(), final32.size()) << g.name << " " << name;
    for (std::size_t i = 0; i < std::min(got.size(), final32.size()); ++i) {
      const double bound = kF32DriftFactor * param_drift + ulps(final32[i]);
      worst = std::max(worst, std::abs(got[i] - final32[i]) / bound);
      EXPECT_NEAR(got[i], final32[i], bound) << g.name << " " << name << "[" << i << "]";
    }
  }
  return worst;
}

}  // namespace tg::testing
