#pragma once
// Gradient checkpointing: tg::checkpoint traces a segment of the forward and marks its nodes, and
// autodiff (tensorgrad/passes/autodiff.h) then recomputes them in the backward from the segment's
// inputs instead of keeping their values alive from the forward to the backward. Memory for compute:
// a checkpointed segment's intermediates live only while the forward (and later its recomputation)
// needs them; the price is running the segment's forward a second time in every step.
#include <cstddef>
#include <functional>
#include <source_location>
#include <vector>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/tensor.h"

namespace tg {

// A checkpoint the caller got wrong: a segment returning no tensor, or tensors of another graph,
// or a checkpoint inside another one. The message names the call site.
class CheckpointError : public Error {
 public:
  using Error::Error;
};

using Segment = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Calls `segment(inputs)` and returns what it returns; every node it appends to the graph being
// traced is put in one new checkpoint segment (Node::checkpoint). The segment may also read
// tensors it captures (a module's params): everything it did not compute is an input of the
// segment, kept from the forward. Random ops inside (randn, dropout) recompute the same draws:
// they are keyed by the step seed and a salt attribute, both copied with the node.
// Throws CheckpointError when the segment returns no tensor or one of another graph, or when
// called while another segment is being traced (nested checkpoints are refused: the outer
// segment recomputes the inner one anyway, so the inner mark would save nothing more).
// A segment that appends no node (returns its inputs) marks nothing.
std::vector<Tensor> checkpoint(const Segment& segment, const std::vector<Tensor>& inputs,
                               std::source_location loc = std::source_location::current());

// The one-tensor form: checkpoint([&](const Tensor& x) { return block(x); }, x).
Tensor checkpoint(const std::function<Tensor(const Tensor&)>& segment, const Tensor& input,
                  std::source_location loc = std::source_location::current());

// A module call as a checkpoint segment: checkpointed(layer)(x) is layer(x) with the layer's nodes
// checkpointed. Works for any callable taking one tensor: a tg::Linear, a tg::LayerNorm, a
// user-defined block with an operator(). The layer must outlive the call.
template <class Layer>
class Checkpointed {
 public:
  explicit Checkpointed(const Layer& layer) : layer_(layer) {}
  Tensor operator()(const Tensor& x, std::source_location loc = std::source_location::current()) const {
    return checkpoint([this](const Tensor& t) { return Tensor(layer_(t)); }, x, loc);
  }

 private:
  const Layer& layer_;
};

template <class Layer>
Checkpointed<Layer> checkpointed(const Layer& layer) {
  return Checkpointed<Layer>(layer);
}

// The segments of `graph`: how many distinct segment numbers its nodes carry.
std::size_t checkpoint_segment_count(const Graph& graph);

}  // namespace tg
