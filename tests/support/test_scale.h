#pragma once
// How many cases the long suites run, read from the environment in one place:
//   TG_PROPERTY_SCALE  soak runs: more cases (scripts/soak.sh; default 1);
//   TG_TEST_SCALE      sanitizer runs: fewer cases (the asan-ubsan test preset sets 0.1, because
//                      ASan + UBSan run the f64 oracle and lavapipe several times slower; default 1).
// The two multiply. Every RandomGraph/SingleOp property, the Vulkan random-graph properties and the
// Vulkan boundary sweep take their counts through scaled_count (tests/property/property_support.h).
#include <cstdlib>

namespace tg::testing {

// A positive number from the environment variable `name`; 1 when unset, empty or not positive.
inline double positive_env(const char* name) {
  const char* text = std::getenv(name);
  if (!text || !*text) return 1.0;
  const double value = std::atof(text);
  return value > 0 ? value : 1.0;
}

// TG_TEST_SCALE alone: below 1 in a reduced (sanitizer) run.
inline double test_scale() { return positive_env("TG_TEST_SCALE"); }

// What case counts are multiplied by: TG_PROPERTY_SCALE times TG_TEST_SCALE.
inline double case_scale() { return positive_env("TG_PROPERTY_SCALE") * test_scale(); }

// `cases` times case_scale(), at least 1.
inline int scaled_count(int cases) {
  const double n = cases * case_scale();
  return n < 1 ? 1 : static_cast<int>(n);
}

}  // namespace tg::testing
