// Reverse-mode autodiff as a Graph -> Graph pass. The forward graph is copied into a builder and the
// gradient nodes are appended with each op's grad rule, so the result is one graph that computes the
// loss and the gradients together.
#include "tensorgrad/passes/autodiff.h"

#include <optional>
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
                  "; gradients exist only for f32 inputs");
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

}  // namespace

Graph differentiate(const Graph& forward, const GradOptions& options) {
  const auto loss = forward.find_output(options.loss);
  if (!loss) throw Error("differentiate: graph '" + forward.name() + "' has no output named '" + options.loss + "'");
  const TensorType& loss_type = forward.type(*loss);
  if (loss_type.dtype != DType::f32 || loss_type.rank() != 0) {
    throw Error("differentiate: the loss '" + options.loss + "' must be a 0-d f32 scalar, got " +
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
    cotangent[static_cast<std::size_t>(*loss)] = ones({}, DType::f32);
  }

  const auto& nodes = forward.nodes();
  std::vector<Tensor> inputs;
  for (std::size_t n = nodes.size(); n-- > 0;) {
    const Node& node = nodes[n];
    const auto& g = cotangent[static_cast<std::size_t>(node.output)];
    if (!g || !reached[static_cast<std::size_t>(node.output)]) continue;
    const OpDef& def = op_def(node.op);
    if (!def.differentiable) continue;
    if (!def.grad) throw Error("differentiate: op '" + std::string(def.name) + "' has no gradient rule");

    inputs.clear();
    for (ValueId v : node.inputs) inputs.push_back(builder.wrap(v));
    builder.set_location_override(node.loc);
    const auto grads = def.grad(GradArgs{inputs, builder.wrap(node.output), *g, node.attrs});
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
    builder.output(options.grad_prefix + in->name, g ? *g : zeros(forward.type(v).shape, DType::f32));
  }
  return builder.take();
}

}  // namespace tg
