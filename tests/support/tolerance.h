#pragma once
// The error bound allowed when an f32 run of a graph is compared with the f64 oracle, shared by the
// property suites and the golden tests (docs/testing.md, "Tolerances"). It lives in the library
// (tensorgrad/runtime/tolerance.h) since `tg check` judges results by it too; the tests call it as
// tg::testing::graph_tolerance.
#include "support/library.h"
#include "tensorgrad/runtime/tolerance.h"

namespace tg::testing {

using tg::graph_tolerance;

}  // namespace tg::testing
