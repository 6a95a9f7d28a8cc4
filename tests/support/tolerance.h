#pragma once
// The error bound allowed when an f32 run of a graph is compared with the f64 oracle, shared by the
// property suites and the golden tests (docs/testing.md, "Tolerances").
#include "support/library.h"

namespace tg::testing {

// The bound relative to `scale` = max(1, largest |value| in the f64 run): 4 eps_f32 times the sum,
// over the graph's nodes, of each op's tolerance_ulps for its reduction length (at least 1 ulp).
double graph_tolerance(const Graph& g);

}  // namespace tg::testing
