#pragma once
// Reverse-mode autodiff as a Graph -> Graph pass. The result keeps every output of the forward graph
// and adds one output per requested input, named grad_prefix + input name, so one program computes
// the loss and its gradients on any backend.
#include <string>
#include <vector>

#include "tensorgrad/ir/graph.h"

namespace tg {

struct GradOptions {
  std::string loss = "loss";          // name of a 0-d float output (f32, f16 or bf16)
  std::vector<std::string> wrt;       // inputs to differentiate against; empty: every param input
  std::string grad_prefix = "grad.";  // output names: grad_prefix + input name
};

// Cotangents accumulate with add; broadcasting is reversed with sum_to_shape; stop_gradient,
// non-differentiable ops and integer values pass no gradient; a requested input the loss does not
// use gets a zero gradient in its dtype. The loss's cotangent is seeded with 1 in the loss's dtype.
// Throws tg::Error for an unknown loss or input, a non-scalar or non-float loss, or a non-float
// input in wrt.
// Checkpointed nodes (Node::checkpoint, set by tg::checkpoint) are recomputed: the gradient of a
// segment's node reads the segment's values from a copy of the segment's nodes emitted in the
// backward, so the forward's intermediates are not kept for it. Results are bit-identical to the
// unmarked graph's; the returned graph keeps the forward's marks, its recomputed nodes carry none.
// See docs/architecture.md ("Gradient checkpointing").
Graph differentiate(const Graph& forward, const GradOptions& options = {});

}  // namespace tg
