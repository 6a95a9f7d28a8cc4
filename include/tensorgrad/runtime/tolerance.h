#pragma once
// The error bound allowed when an f32 run of a graph (interp_f32 or Vulkan) is compared with the
// f64 oracle, built from the ops' tolerance classes (tensorgrad/ir/ops/op_def.h). The property
// suites, the golden runners and `tg check` all judge results by it (docs/testing.md,
// "Tolerances").
//
// Two forms. The whole-graph bound: an f32 result r of an f64 result e passes when |r - e| <=
// graph_tolerance(g) * oracle_scale(every value of the f64 run). The per-output (cone) bound,
// output_tolerances: the same formula over only the output's cone, the values it transitively
// depends on, so a large value elsewhere in the graph (a loss term, another param's update) does
// not loosen the bound of an output that never reads it. i32 and bool results must be equal.
#include <cstdint>
#include <string>
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

// The cone of `value`: a mask over g's values (indexed by ValueId), true for `value` itself and for
// every value it transitively reads (node inputs, back to graph inputs). Throws tg::Error for a
// ValueId that is not g's.
std::vector<bool> value_cone(const Graph& g, ValueId value);

// The bound of one output, from its cone only.
struct OutputTolerance {
  // 4 eps_f32 times max(1, the sum of tolerance_ulps over the nodes producing values of the cone):
  // graph_tolerance restricted to the cone.
  double relative = 0;
  // max(1, the largest finite |value| among the cone's values in the f64 run): oracle_scale
  // restricted to the cone (the output itself, its inputs and intermediates), leaving out
  // constants: values of exact-class nodes whose inputs are all such constants (full, ones,
  // arange, their reshapes and broadcasts). They have the same bits in both runs, and the values
  // they feed count with their own magnitudes; mean's backward divides by a constant N, the batch
  // size, which would otherwise scale every gradient and optimizer update.
  double scale = 1;
  double absolute() const { return relative * scale; }
};

// One OutputTolerance per output of g, in g.outputs() order. `oracle_values` is the f64 run with
// InterpOptions::keep_all_values (one tensor per ValueId); tg::Error when its count is not g's
// value count. Never looser than the whole-graph bound: a cone's nodes and values are a subset of
// the graph's.
std::vector<OutputTolerance> output_tolerances(const Graph& g, const std::vector<HostTensor>& oracle_values);

// One element of an output compared with the oracle.
struct ElementError {
  std::size_t index = 0;  // flat, row-major
  double got = 0, expected = 0;
  double error = 0;  // |got - expected|; infinity for a NaN on one side only or unequal infinities
};

// One output of a run compared with the oracle's (compare_with_oracle).
struct OutputComparison {
  std::string name;
  OutputTolerance tolerance;      // the cone bound, its relative part times the tolerance_scale given
  bool type_mismatch = false;     // the run's tensor has another type than the oracle's (all else empty)
  std::int64_t elements_off = 0;  // float: error > tolerance.absolute(); i32/bool: not equal
  double largest_error = 0;
  // The largest error / |expected| over the elements whose expected value is finite and nonzero.
  double largest_relative_error = 0;
  std::vector<ElementError> worst;  // the largest errors (> 0), largest first
  bool ok() const { return !type_mismatch && elements_off == 0; }
};

// What `tg check` does: compares every output of `got` (a run of g on some backend, keyed by output
// name) with the f64 oracle's run `oracle_values` (keep_all_values) under each output's cone bound
// (output_tolerances, its relative part multiplied by `tolerance_scale`). A float element passes
// when both are NaN, they are equal, or |got - expected| <= the bound; an i32 or bool element when
// equal. `worst`: how many of the largest errors each comparison keeps. One entry per output of g,
// in g.outputs() order; tg::Error when `got` lacks an output or oracle_values is not one per value.
std::vector<OutputComparison> compare_with_oracle(const Graph& g, const TensorMap& got,
                                                  const std::vector<HostTensor>& oracle_values,
                                                  double tolerance_scale = 1.0, std::size_t worst = 3);

}  // namespace tg
