// Training parity with PyTorch on the two workloads of examples/models.h. tools/goldens_train.py
// mirrors each model in PyTorch with explicit params (same names, [in, out] Linear weights), trains
// it from a literal init on stored batches with torch.optim.Adam (W1) / AdamW with tensorgrad's
// decay groups (W2, shrunk to vocab 65, T 16, d 32, 2 layers, 4 heads, B 4) for 20 steps, in float64
// and float32, and stores each step's loss and the final params (tests/golden/train/<name>.json and
// .safetensors). Here tg::compile trains the examples/models.h model from the same init
// (Training::upload_params) on the same batches: on interp_f64 it must follow PyTorch's float64
// trajectory to kF64Rel, on interp_f32 its float32 trajectory within the drift bound explained at
// kF32DriftFactor (tests/support/train_parity.h). tests/vk/vk_train_parity_test.cpp does the f32 comparison on Vulkan.
#include "support/train_parity.h"

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

#include "support/library.h"

namespace tg {
namespace {

namespace fs = std::filesystem;
using namespace tg::testing;
const fs::path kGoldenDir = fs::path(TG_SOURCE_DIR) / "tests/golden/train";
const std::vector<std::string> kWorkloads = {"w1", "w2_small"};

// f64: the same ops as PyTorch's in the same order, every hyperparameter a double, the two f32
// constants of the model (LayerNorm eps, the attention scale) rounded to float on both sides; what
// remains is summation order (matmul, the reductions, the gradient sums, PyTorch's Welford
// LayerNorm) and PyTorch's fused multiply-adds in the optimizer. Measured (torch 1.13): losses within
// 4e-16 relative, final params within 3e-15. The bound catches a one-ulp change of one f32 constant:
// an attention scale of 1/sqrt(8) in double instead of float moves the w2_small losses by 3e-10.
constexpr double kF64Rel = 1e-13;
class TrainParity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const fs::path path = kGoldenDir / (GetParam() + ".json");
    ASSERT_TRUE(fs::exists(path)) << path << " is missing (regenerate: /usr/bin/python3 tools/goldens_train.py)";
    golden_ = load_train_golden(kGoldenDir, GetParam());
  }
  TrainGolden golden_;
};

// tensorgrad's default decay flags (weights, embeddings and positions decay; biases and LayerNorm
// params do not) are the groups the PyTorch run gave AdamW, and the params are the same.
TEST_P(TrainParity, ParamsAndDecayFlagsAreThoseOfThePyTorchRun) {
  const Trained run = train_on_golden(golden_, Backend::interp_f32, 0);
  const nlohmann::json& want = at(golden_.doc, "params");
  ASSERT_EQ(run.infos.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(run.infos[i].name, at(want[i], "name").get<std::string>());
    Shape shape;
    for (double d : numbers(at(want[i], "shape"))) shape.push_back(static_cast<std::int64_t>(d));
    EXPECT_EQ(run.infos[i].shape, shape) << run.infos[i].name;
    EXPECT_EQ(run.infos[i].decay, at(want[i], "decay").get<bool>()) << run.infos[i].name;
  }
}

TEST_P(TrainParity, Float64FollowsPyTorchsFloat64Trajectory) {
  const std::vector<double> want = golden_losses(golden_, "float64");
  const Trained run = train_on_golden(golden_, Backend::interp_f64);
  ASSERT_EQ(run.loss.size(), want.size());
  double worst_loss = 0, worst_param = 0;
  for (std::size_t t = 0; t < want.size(); ++t) {
    const double rel = std::abs(run.loss[t] - want[t]) / std::max(1.0, std::abs(want[t]));
    worst_loss = std::max(worst_loss, rel);
    EXPECT_LE(rel, kF64Rel) << "step " << t << ": tensorgrad " << run.loss[t] << ", PyTorch " << want[t];
  }
  for (const std::string& name : golden_param_names(golden_)) {
    const auto got = run.params.at(name).to_f64();
    const auto final64 = golden_.tensors.at("final64." + name).to_f64();
    const auto init = golden_.tensors.at("init." + name).to_f64();
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
  const Trained run = train_on_golden(golden_, Backend::interp_f32);
  const double worst = expect_follows_float32(golden_, run);
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
