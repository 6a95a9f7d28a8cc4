// The conventions at kinks and ties (tests/support/convention_cases.h) on the interpreters: the f64
// oracle and the f32 interpreter must both give every hand-computed value, forward and gradient.
// tests/vk/vk_conventions_test.cpp runs the same table on Vulkan.
#include <gtest/gtest.h>

#include <string>

#include "support/convention_cases.h"
#include "support/library.h"

namespace tg {
namespace {

const conventions::Case& find_case(const std::string& id) {
  static const std::vector<conventions::Case> cases = conventions::convention_cases();
  for (const conventions::Case& c : cases) {
    if (c.id == id) return c;
  }
  throw Error("no convention case " + id);
}

class OnInterpreters : public ::testing::TestWithParam<std::string> {};

TEST_P(OnInterpreters, Hold) {
  const conventions::Case& c = find_case(GetParam());
  for (const ComputeType compute : {ComputeType::f64, ComputeType::f32}) {
    const TensorMap got = interpret(c.graph, c.inputs, {.compute = compute}).outputs;
    conventions::expect_conventions(got, c, compute == ComputeType::f64 ? "interp_f64" : "interp_f32");
  }
}

INSTANTIATE_TEST_SUITE_P(Conventions, OnInterpreters, ::testing::ValuesIn(conventions::convention_case_ids()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace tg
