// Training parity with PyTorch on Vulkan: the goldens of tools/goldens_train.py (W1, and W2 shrunk
// to vocab 65, T 16, d 32, 2 layers, 4 heads, B 4; 20 steps of Adam / AdamW from a literal init on
// stored batches), trained by tg::compile on Backend::vulkan. The losses and final params must
// follow PyTorch's float32 run within the bound of tests/unit/train_parity_test.cpp (which also
// checks interp_f64 against the float64 run to 1e-13): 2 D + 4 ulp, D being PyTorch's own
// float32-vs-float64 distance.
#include <gtest/gtest.h>

#include <cstdio>

#include "support/train_parity.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;
const std::filesystem::path kGoldenDir = std::filesystem::path(TG_GOLDEN_DIR) / "train";

void expect_follows_pytorch_on_vulkan(const std::shared_ptr<Context>& ctx, const std::string& name) {
  const tg::testing::TrainGolden g = tg::testing::load_train_golden(kGoldenDir, name);
  const tg::testing::Trained run = tg::testing::train_on_golden(g, Backend::vulkan, -1, ctx);
  const double worst = tg::testing::expect_follows_float32(g, run);
  std::printf("[ measured ] %s vulkan: at most %.2f of the bound\n", name.c_str(), worst);
}

TEST_F(VkTest, W1FollowsPyTorchsFloat32Trajectory) {
  auto ctx = make_context();
  expect_follows_pytorch_on_vulkan(ctx, "w1");
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, W2SmallFollowsPyTorchsFloat32Trajectory) {
  auto ctx = make_context();
  expect_follows_pytorch_on_vulkan(ctx, "w2_small");
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
