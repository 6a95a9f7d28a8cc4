#pragma once
// The error bound allowed when an f32 run of a graph is compared with the f64 oracle, shared by the
// property suites and the golden tests (docs/testing.md, "Tolerances"). It lives in the library
// (tensorgrad/runtime/tolerance.h) since `tg check` judges results by it too; the tests call it as
// tg::testing::graph_tolerance. The per-output form (output_tolerances, compare_with_oracle: each
// output against its own cone) is what the property suites' f32-vs-f64 and Vulkan-vs-oracle checks
// use.
#include "support/library.h"
#include "tensorgrad/runtime/tolerance.h"

namespace tg::testing {

using tg::compare_with_oracle;
using tg::graph_tolerance;
using tg::output_tolerances;

}  // namespace tg::testing
