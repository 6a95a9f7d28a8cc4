// tg::checkpoint: trace a segment and number its nodes. Autodiff does the recomputation.
#include "tensorgrad/ir/checkpoint.h"

#include <algorithm>
#include <limits>
#include <set>
#include <string>

namespace tg {

namespace {

// The builder whose segment this thread is tracing, if any: a checkpoint inside a checkpoint of
// the same graph is refused. (Per thread, like the tracing scope.)
thread_local const GraphBuilder* builder_in_segment = nullptr;

class SegmentScope {
 public:
  explicit SegmentScope(const GraphBuilder& builder) : previous_(builder_in_segment) { builder_in_segment = &builder; }
  ~SegmentScope() { builder_in_segment = previous_; }
  SegmentScope(const SegmentScope&) = delete;
  SegmentScope& operator=(const SegmentScope&) = delete;

 private:
  const GraphBuilder* previous_;
};

std::int32_t next_segment(const Graph& graph) {
  std::int32_t last = kNoCheckpoint;
  for (const Node& node : graph.nodes()) last = std::max(last, node.checkpoint);
  if (last == std::numeric_limits<std::int32_t>::max()) {
    throw CheckpointError("checkpoint: graph '" + graph.name() +
                          "' already numbers a segment 2^31 - 1, the last number");
  }
  return last + 1;
}

}  // namespace

std::vector<Tensor> checkpoint(const Segment& segment, const std::vector<Tensor>& inputs, std::source_location loc) {
  const std::string where = " (checkpoint called at " + SourceLoc::from(loc).to_string() + ")";
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].valid())
      throw CheckpointError("checkpoint: input " + std::to_string(i) + " is an empty tensor" + where);
  }
  GraphBuilder& builder = inputs.empty() ? current_builder() : inputs.front().builder();
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    if (&inputs[i].builder() != &builder) {
      throw CheckpointError("checkpoint: input " + std::to_string(i) + " belongs to another graph than input 0" +
                            where);
    }
  }
  if (builder_in_segment == &builder) {
    throw CheckpointError("checkpoint: nested inside another checkpoint segment of graph '" + builder.graph().name() +
                          "'; the outer segment already recomputes everything inside it" + where);
  }
  const std::size_t first = builder.graph().nodes().size();
  std::vector<Tensor> outputs;
  {
    SegmentScope scope(builder);
    outputs = segment(inputs);
  }
  if (outputs.empty()) throw CheckpointError("checkpoint: the segment returned no tensor" + where);
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].valid() || &outputs[i].builder() != &builder) {
      throw CheckpointError("checkpoint: output " + std::to_string(i) + " of the segment is " +
                            (outputs[i].valid() ? "a tensor of another graph" : "an empty tensor") + where);
    }
  }
  Graph& graph = builder.mutable_graph();
  const std::size_t end = graph.nodes().size();
  if (end == first) return outputs;
  const std::int32_t id = next_segment(graph);
  for (std::size_t n = first; n < end; ++n) graph.set_checkpoint(static_cast<NodeId>(n), id);
  return outputs;
}

Tensor checkpoint(const std::function<Tensor(const Tensor&)>& segment, const Tensor& input, std::source_location loc) {
  return checkpoint([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{segment(in.front())}; },
                    std::vector<Tensor>{input}, loc)
      .front();
}

std::size_t checkpoint_segment_count(const Graph& graph) {
  std::set<std::int32_t> segments;
  for (const Node& node : graph.nodes())
    if (node.checkpoint != kNoCheckpoint) segments.insert(node.checkpoint);
  return segments.size();
}

}  // namespace tg
