#pragma once
// Glue between RapidCheck and GoogleTest with a per-property case count. TG_PROPERTY_SCALE (a
// positive number, default 1) multiplies every count for long soak runs, TG_TEST_SCALE too (below 1
// in sanitizer runs; tests/support/test_scale.h); RC_PARAMS still sets the seed and the other
// RapidCheck options.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

#include "support/path_coverage.h"
#include "support/test_scale.h"

namespace tg::testing {

// `cases` times TG_PROPERTY_SCALE times TG_TEST_SCALE, at least 1 (tests/support/test_scale.h).
inline int scaled_cases(int cases) { return scaled_count(cases); }

template <class Testable>
void check_property(Testable&& testable, int cases) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  rc::detail::TestMetadata metadata;
  metadata.id = std::string(info->test_suite_name()) + "/" + info->name();
  metadata.description = info->name();
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.maxSuccess = scaled_cases(cases);
  const auto result =
      rc::detail::checkProperty(rc::detail::toProperty(std::forward<Testable>(testable)), metadata, params);
  write_path_coverage();  // the launch paths this property reached (docs/testing.md, "Launch paths")
  if (result.template is<rc::detail::SuccessResult>()) {
    const auto& success = result.template get<rc::detail::SuccessResult>();
    std::cout << "passed " << success.numSuccess << " cases\n";
    if (!success.distribution.empty()) rc::detail::printResultMessage(result, std::cout);
  } else {
    std::ostringstream message;
    rc::detail::printResultMessage(result, message);
    FAIL() << message.str();
  }
}

}  // namespace tg::testing

// Like RC_GTEST_PROP, with the number of successful cases to run (before TG_PROPERTY_SCALE).
#define TG_PROPERTY(Suite, Name, Cases, ArgList)                                                  \
  void tg_property_impl_##Suite##_##Name ArgList;                                                 \
  TEST(Suite, Name) { ::tg::testing::check_property(&tg_property_impl_##Suite##_##Name, Cases); } \
  void tg_property_impl_##Suite##_##Name ArgList
