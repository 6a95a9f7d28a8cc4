// Reverse-mode autodiff as a Graph -> Graph pass. The forward graph is copied into a builder and the
// gradient nodes are appended with each op's grad rule, so the result is one graph that computes the
// loss and the gradients together.
#include "tensorgrad/passes/autodiff.h"

#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/api.h"
#include "tensorgrad/ir/ops/op_def.h"
#include "tensorgrad/ir/tensor.h"

namespace tg {

namespace {

std::vector<ValueId> resolve_wrt(const Graph& forward, const GradOptions& options) {
  std::vector<ValueId> wrt;
  if (options.wrt.empty()) {
    for (const auto& in : forward.inputs())
      if (in.kind == InputKind::param && is_float(forward.type(in.value).dtype)) wrt.push_back(in.value);
    return wrt;
  }
  for (const auto& name : options.wrt) {
    const auto id = forward.find_input(name);
    if (!id) throw Error("differentiate: graph '" + forward.name() + "' has no input named '" + name + "'");
    if (!is_float(forward.type(*id).dtype)) {
      throw Error("differentiate: input '" + name + "' is " + forward.type(*id).to_string() +
                  "; gradients exist only for float inputs");
    }
    wrt.push_back(*id);
  }
  return wrt;
}

// Values that depend on some wrt input (forward reachability); only they can carry gradients.
std::vector<bool> depends_on(const Graph& g, const std::vector<ValueId>& wrt) {
  std::vector<bool> reached(g.values().size(), false);
  for (ValueId v : wrt) reached[static_cast<std::size_t>(v)] = true;
  for (const Node& node : g.nodes()) {
    bool any = false;
    for (ValueId in : node.inputs) any = any || reached[static_cast<std::size_t>(in)];
    reached[static_cast<std::size_t>(node.output)] = any && is_float(g.type(node.output).dtype);
  }
  return reached;
}

// `g` without the nodes from `first` on whose outputs no output needs. A gradient rule returns a
// cotangent for every input, so differentiating x * c also builds dy * x for a constant c that
// needs none: left in, that node would run on every step and keep x (an attention matrix, say)
// alive until the backward reaches it. The forward's nodes (before `first`) all stay, and so do
// their value ids: the gradient graph computes what the forward did, errors included.
Graph without_dead_nodes(const Graph& g, std::size_t first) {
  const auto& nodes = g.nodes();
  std::vector<bool> needed(g.values().size(), false);
  for (const GraphOutput& out : g.outputs()) needed[static_cast<std::size_t>(out.value)] = true;
  for (std::size_t n = nodes.size(); n-- > 0;) {
    if (n >= first && !needed[static_cast<std::size_t>(nodes[n].output)]) continue;
    for (ValueId in : nodes[n].inputs) needed[static_cast<std::size_t>(in)] = true;
  }
  std::vector<const GraphInput*> input_of(g.values().size(), nullptr);  // one pass, not a search per value
  for (const GraphInput& in : g.inputs()) input_of[static_cast<std::size_t>(in.value)] = &in;
  Graph out(g.name());
  std::vector<ValueId> renamed(g.values().size(), -1);
  for (std::size_t v = 0; v < g.values().size(); ++v) {
    const auto id = static_cast<ValueId>(v);
    if (const GraphInput* in = input_of[v]) {
      renamed[v] = out.add_input(in->name, in->kind, g.type(id));
      continue;
    }
    const NodeId producer = g.value(id).producer;
    if (static_cast<std::size_t>(producer) >= first && !needed[v]) continue;
    const Node& node = g.node(producer);
    std::vector<ValueId> inputs;
    for (ValueId in : node.inputs) inputs.push_back(renamed[static_cast<std::size_t>(in)]);
    renamed[v] = out.add_node(node.op, std::move(inputs), node.attrs, g.type(id), node.loc);
    if (node.checkpoint != kNoCheckpoint) out.set_checkpoint(out.value(renamed[v]).producer, node.checkpoint);
  }
  for (const GraphOutput& o : g.outputs()) out.add_output(o.name, renamed[static_cast<std::size_t>(o.value)]);
  return out;
}

// Gradient checkpointing: the backward reads a checkpointed segment's values from a recomputation,
// emitted the first time the backward needs one of them (just before the segment's last node's
// gradient), rather than from the forward. The forward's copies then die inside the forward.
class Recomputation {
 public:
  Recomputation(const Graph& forward, GraphBuilder& builder) : forward_(forward), builder_(builder) {
    for (std::size_t n = 0; n < forward.nodes().size(); ++n) {
      const std::int32_t segment = forward.nodes()[n].checkpoint;
      if (segment == kNoCheckpoint) continue;
      members_[segment].push_back(static_cast<NodeId>(n));
    }
  }

  // The value the gradient of a node of segment `reader` reads for forward value `v`: the
  // recomputed copy when v was computed in that same segment, else `v` itself (a value from outside
  // is a segment input, kept from the forward; and a node outside reading a segment's result reads
  // the forward's, which lives on anyway, so its backward does not start the recomputation early).
  // Emits the segment's recomputation on first use.
  Tensor read(ValueId v, std::int32_t reader) {
    const NodeId producer = forward_.value(v).producer;
    if (reader == kNoCheckpoint || producer == kNoNode) return builder_.wrap(v);
    const std::int32_t segment = forward_.node(producer).checkpoint;
    if (segment != reader) return builder_.wrap(v);
    if (done_.insert(segment).second) recompute(segment);
    return builder_.wrap(copy_.at(v));
  }

 private:
  // Re-emits the segment's nodes in forward order, the same op, attributes (a random op's salt
  // included) and call site, reading the forward values the segment did not compute itself.
  // Recomputed nodes carry no segment mark: they are backward nodes. Those the gradient does not
  // read are dropped afterwards with the other dead backward nodes.
  void recompute(std::int32_t segment) {
    Graph& graph = builder_.mutable_graph();
    for (NodeId n : members_.at(segment)) {
      const Node& node = forward_.node(n);
      std::vector<ValueId> inputs;
      for (ValueId in : node.inputs) {
        const auto it = copy_.find(in);
        inputs.push_back(it != copy_.end() ? it->second : in);
      }
      copy_[node.output] = graph.add_node(node.op, std::move(inputs), node.attrs, forward_.type(node.output), node.loc);
    }
  }

  const Graph& forward_;
  GraphBuilder& builder_;
  // Per segment, its nodes in forward order. Keyed by number (a parsed graph may number its
  // segments sparsely), and the segments recomputed so far.
  std::unordered_map<std::int32_t, std::vector<NodeId>> members_;
  std::unordered_set<std::int32_t> done_;
  std::unordered_map<ValueId, ValueId> copy_;  // forward value -> recomputed value
};

}  // namespace

Graph differentiate(const Graph& forward, const GradOptions& options) {
  const auto loss = forward.find_output(options.loss);
  if (!loss) throw Error("differentiate: graph '" + forward.name() + "' has no output named '" + options.loss + "'");
  const TensorType& loss_type = forward.type(*loss);
  if (!is_float(loss_type.dtype) || loss_type.rank() != 0) {
    throw Error("differentiate: the loss '" + options.loss + "' must be a 0-d float scalar, got " +
                loss_type.to_string());
  }
  const std::vector<ValueId> wrt = resolve_wrt(forward, options);
  const std::vector<bool> reached = depends_on(forward, wrt);

  GraphBuilder builder(forward.name());
  builder.mutable_graph() = forward;
  TracingScope scope(builder);

  std::vector<std::optional<Tensor>> cotangent(forward.values().size());
  const auto accumulate = [&](ValueId v, Tensor g) {
    auto& slot = cotangent[static_cast<std::size_t>(v)];
    const Shape& shape = forward.type(v).shape;
    if (g.shape() != shape) g = sum_to_shape(g, shape);
    slot = slot ? add(*slot, g) : g;
  };

  if (reached[static_cast<std::size_t>(*loss)]) {
    const Node* loss_node = nullptr;
    if (auto producer = forward.value(*loss).producer; producer != kNoNode) loss_node = &forward.node(producer);
    builder.set_location_override(loss_node ? std::optional<SourceLoc>(loss_node->loc) : std::nullopt);
    cotangent[static_cast<std::size_t>(*loss)] = ones({}, loss_type.dtype);  // d loss / d loss, in its dtype
  }

  const auto& nodes = forward.nodes();
  Recomputation recomputed(forward, builder);
  std::vector<Tensor> inputs;
  for (std::size_t n = nodes.size(); n-- > 0;) {
    const Node& node = nodes[n];
    const auto& g = cotangent[static_cast<std::size_t>(node.output)];
    if (!g || !reached[static_cast<std::size_t>(node.output)]) continue;
    const OpDef& def = op_def(node.op);
    if (!def.differentiable) continue;
    if (!def.grad) throw Error("differentiate: op '" + std::string(def.name) + "' has no gradient rule");

    inputs.clear();
    for (ValueId v : node.inputs) inputs.push_back(recomputed.read(v, node.checkpoint));
    const Tensor output = recomputed.read(node.output, node.checkpoint);
    builder.set_location_override(node.loc);
    const auto grads = def.grad(GradArgs{inputs, output, *g, node.attrs});
    if (grads.size() != node.inputs.size()) {
      throw Error("differentiate: the gradient rule of '" + std::string(def.name) + "' returned " +
                  std::to_string(grads.size()) + " cotangents for " + std::to_string(node.inputs.size()) + " inputs");
    }
    for (std::size_t i = 0; i < grads.size(); ++i) {
      const ValueId in = node.inputs[i];
      if (grads[i] && reached[static_cast<std::size_t>(in)]) accumulate(in, *grads[i]);
    }
  }
  builder.set_location_override(std::nullopt);

  for (ValueId v : wrt) {
    const GraphInput* in = forward.input_of_value(v);
    const auto& g = cotangent[static_cast<std::size_t>(v)];
    builder.output(options.grad_prefix + in->name, g ? *g : zeros(forward.type(v).shape, forward.type(v).dtype));
  }
  return without_dead_nodes(builder.take(), forward.nodes().size());
}

}  // namespace tg
