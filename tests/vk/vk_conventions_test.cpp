// The conventions at kinks and ties (tests/support/convention_cases.h) on the Vulkan executor, with
// elementwise fusion on and off: every hand-computed value, forward and gradient, bit for bit. The
// long-row cases reach the reduce shaders' paths (one invocation per row, 32-lane segments, a
// 256-lane group, rows split over workgroups). tests/unit/conventions_test.cpp runs the same table
// on the interpreters. Under the validation layer when TG_VK_VALIDATION=1.
#include <gtest/gtest.h>

#include <string>

#include "support/convention_cases.h"
#include "support/library.h"
#include "tensorgrad/vk/executor.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

const conventions::Case& find_case(const std::string& id) {
  static const std::vector<conventions::Case> cases = conventions::convention_cases();
  for (const conventions::Case& c : cases) {
    if (c.id == id) return c;
  }
  throw Error("no convention case " + id);
}

class OnVulkan : public testing::VkTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(OnVulkan, Hold) {
  const conventions::Case& c = find_case(GetParam());
  auto ctx = make_context();
  for (const bool fuse : {true, false}) {
    Program program(ctx, c.graph, {.fuse_elementwise = fuse});
    conventions::expect_conventions(program.run(c.inputs), c, fuse ? "vk (fused)" : "vk (unfused)");
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

INSTANTIATE_TEST_SUITE_P(Conventions, OnVulkan, ::testing::ValuesIn(conventions::convention_case_ids()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace tg::vk
