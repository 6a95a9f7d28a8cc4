#pragma once
// Glue between RapidCheck and GoogleTest with a per-property case count. TG_PROPERTY_SCALE (a
// positive number, default 1) multiplies every count for long soak runs; RC_PARAMS still sets the
// seed and the other RapidCheck options.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

#include "support/path_coverage.h"

namespace tg::testing {

inline double property_scale() {
  const char* text = std::getenv("TG_PROPERTY_SCALE");
  if (!text || !*text) return 1.0;
  const double scale = std::atof(text);
  return scale > 0 ? scale : 1.0;
}

inline int scaled_cases(int cases) {
  const double n = cases * property_scale();
  return n < 1 ? 1 : static_cast<int>(n);
}

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
