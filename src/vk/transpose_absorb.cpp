// Transposes absorbed into matmul (see transpose_absorb.h): a fixpoint over the candidate
// transposes, then the matmul launches re-planned to read past the dropped ones.
#include "vk/transpose_absorb.h"

#include <algorithm>
#include <numeric>

#include "tensorgrad/ir/ops/ids/layout.h"
#include "tensorgrad/ir/ops/ids/matmul.h"

namespace tg::vk {

namespace {

// Whether `node` swaps exactly the last two axes of its input (a rank-2+ swap_axes of rank-2 and
// rank-1, in either order, or a permute that is the identity except for those two).
bool transposes_last_two(const Graph& graph, const Node& node) {
  if (node.inputs.size() != 1) return false;
  const auto rank = static_cast<std::int64_t>(graph.type(node.inputs[0]).shape.size());
  if (rank < 2) return false;
  if (node.op == op::SwapAxes) {
    const auto wrap = [rank](std::int64_t axis) { return axis < 0 ? axis + rank : axis; };
    const std::int64_t a = wrap(node.attrs.integer("axis0"));
    const std::int64_t b = wrap(node.attrs.integer("axis1"));
    return std::min(a, b) == rank - 2 && std::max(a, b) == rank - 1;
  }
  if (node.op == op::Permute) {
    std::vector<std::int64_t> want(static_cast<std::size_t>(rank));
    std::iota(want.begin(), want.end(), 0);
    std::swap(want[want.size() - 2], want.back());
    return node.attrs.ints("perm") == want;
  }
  return false;
}

// A use of a value: node `node` reads it as its input number `slot`.
struct Use {
  NodeId node = kNoNode;
  std::size_t slot = 0;
};

class Absorber {
 public:
  Absorber(const Graph& graph, std::vector<KernelLaunch>& launches) : graph_(graph), launches_(launches) {
    const auto& nodes = graph.nodes();
    uses_.resize(graph.values().size());
    candidate_.assign(nodes.size(), false);
    std::vector<bool> output(graph.values().size(), false);
    for (const GraphOutput& o : graph.outputs()) output[static_cast<std::size_t>(o.value)] = true;
    for (std::size_t n = 0; n < nodes.size(); ++n) {
      for (std::size_t s = 0; s < nodes[n].inputs.size(); ++s) {
        uses_[static_cast<std::size_t>(nodes[n].inputs[s])].push_back({static_cast<NodeId>(n), s});
      }
    }
    // A candidate: a transpose with a dispatch (the layout kernel's, not emptied by another pass)
    // whose output is read by some node and is not a graph output (writeback sources included).
    for (std::size_t n = 0; n < nodes.size(); ++n) {
      const ValueId out = nodes[n].output;
      candidate_[n] = transposes_last_two(graph, nodes[n]) && launches_[n].shader == "layout" &&
                      launches_[n].items > 0 && !output[static_cast<std::size_t>(out)] &&
                      !uses_[static_cast<std::size_t>(out)].empty();
    }
  }

  AbsorbedTransposes run() && {
    settle();
    AbsorbedTransposes result;
    const auto& nodes = graph_.nodes();
    for (std::size_t n = 0; n < nodes.size(); ++n) {
      if (nodes[n].op != op::Matmul) continue;
      const Source lhs = source(nodes[n].inputs[0]);
      const Source rhs = source(nodes[n].inputs[1]);
      if (lhs.value == nodes[n].inputs[0] && rhs.value == nodes[n].inputs[1]) continue;
      KernelLaunch launch =
          plan_matmul_reading(graph_, nodes[n], {lhs.value, lhs.transposed}, {rhs.value, rhs.transposed});
      for (const Source& s : {lhs, rhs}) {
        if (std::find(launch.extra_reads.begin(), launch.extra_reads.end(), s.value) == launch.extra_reads.end()) {
          launch.extra_reads.push_back(s.value);
        }
      }
      launches_[n] = std::move(launch);
    }
    for (std::size_t n = 0; n < nodes.size(); ++n) {
      if (!candidate_[n]) continue;
      launches_[n].items = 0;
      result.dropped.emplace_back(nodes[n].output, nodes[n].inputs[0]);
    }
    return result;
  }

 private:
  // Where a value's data is read from once the candidate transposes are gone: the first value up
  // the chain that no candidate produced, and whether an odd number of transposes lies between.
  struct Source {
    ValueId value = -1;
    bool transposed = false;
  };

  Source source(ValueId v) const {
    Source s{v, false};
    for (;;) {
      const NodeId producer = graph_.value(s.value).producer;
      if (producer == kNoNode || !candidate_[static_cast<std::size_t>(producer)]) return s;
      s.value = graph_.node(producer).inputs[0];
      s.transposed = !s.transposed;
    }
  }

  // Whether every reader of candidate n's output can do without it: another candidate, or a
  // matmul that can read the operand's source in its layout.
  bool absorbable(std::size_t n) const {
    const ValueId out = graph_.nodes()[n].output;
    for (const Use& use : uses_[static_cast<std::size_t>(out)]) {
      const Node& reader = graph_.node(use.node);
      if (candidate_[static_cast<std::size_t>(use.node)]) continue;
      if (reader.op != op::Matmul) return false;
      if (source(out).transposed && !matmul_can_read_transposed(graph_, reader, use.slot)) return false;
    }
    return true;
  }

  // Drops candidates until every remaining one is absorbable. Dropping one only changes the
  // sources of the values after it, so this ends (each pass removes one at least, or stops).
  void settle() {
    for (bool changed = true; changed;) {
      changed = false;
      for (std::size_t n = 0; n < candidate_.size(); ++n) {
        if (candidate_[n] && !absorbable(n)) {
          candidate_[n] = false;
          changed = true;
        }
      }
    }
  }

  const Graph& graph_;
  std::vector<KernelLaunch>& launches_;
  std::vector<std::vector<Use>> uses_;  // per value: the nodes reading it
  std::vector<bool> candidate_;         // per node: a transpose that may still be dropped
};

}  // namespace

AbsorbedTransposes absorb_transposes(const Graph& graph, std::vector<KernelLaunch>& launches) {
  return Absorber(graph, launches).run();
}

}  // namespace tg::vk
