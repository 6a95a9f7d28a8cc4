#pragma once
// The error bound allowed when an f32 run of a graph (interp_f32 or Vulkan) is compared with the
// f64 oracle, built from the ops' tolerance classes (tensorgrad/ir/ops/op_def.h). The property
// suites, the golden runners and `tg check` all judge results by it (docs/testing.md,
// "Tolerances"): an f32 result r of an f64 result e passes when |r - e| <= graph_tolerance(g) *
// oracle_scale(every value of the f64 run); i32 and bool results must be equal.
#include <vector>

#include "tensorgrad/interp/host_tensor.h"
#include "tensorgrad/ir/graph.h"

namespace tg {

// The bound relative to the scale: 4 eps_f32 times the sum, over the graph's nodes, of each op's
// tolerance_ulps for its reduction length (at least 1 ulp). The factor 4 covers errors growing
// through later ops' derivatives.
double graph_tolerance(const Graph& g);

// max(1, the largest finite |value| among `values`): the magnitude the bound is relative to. Pass
// every value of the f64 run (InterpOptions::keep_all_values), inputs and intermediates included,
// since an output near 0 after cancellation carries the rounding of its large operands.
double oracle_scale(const std::vector<HostTensor>& values);

}  // namespace tg
