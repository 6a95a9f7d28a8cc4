// Graph storage. Checks here are the cheap structural ones; the verifier does the rest.
#include "tensorgrad/ir/graph.h"

#include "tensorgrad/ir/error.h"

namespace tg {

std::string_view input_kind_name(InputKind kind) {
  switch (kind) {
    case InputKind::data:
      return "data";
    case InputKind::param:
      return "param";
    case InputKind::state:
      return "state";
  }
  return "?";
}

ValueId Graph::add_input(std::string name, InputKind kind, TensorType type) {
  if (find_input(name)) throw Error("graph '" + name_ + "' already has an input named '" + name + "'");
  auto id = static_cast<ValueId>(values_.size());
  values_.push_back(ValueInfo{std::move(type), kNoNode});
  inputs_.push_back(GraphInput{std::move(name), kind, id});
  return id;
}

ValueId Graph::add_node(OpId op, std::vector<ValueId> inputs, Attrs attrs, TensorType out, SourceLoc loc) {
  for (ValueId v : inputs) {
    if (v < 0 || static_cast<std::size_t>(v) >= values_.size()) {
      throw Error("node " + std::string(op_name(op)) + " uses value " + std::to_string(v) +
                  " that does not exist in graph '" + name_ + "'");
    }
  }
  auto node_id = static_cast<NodeId>(nodes_.size());
  auto value_id = static_cast<ValueId>(values_.size());
  values_.push_back(ValueInfo{std::move(out), node_id});
  nodes_.push_back(Node{op, std::move(inputs), std::move(attrs), value_id, std::move(loc)});
  return value_id;
}

void Graph::add_output(std::string name, ValueId value) {
  if (value < 0 || static_cast<std::size_t>(value) >= values_.size()) {
    throw Error("output '" + name + "' names value " + std::to_string(value) + " that does not exist");
  }
  if (find_output(name)) throw Error("graph '" + name_ + "' already has an output named '" + name + "'");
  outputs_.push_back(GraphOutput{std::move(name), value});
}

std::optional<ValueId> Graph::find_input(std::string_view name) const {
  for (const auto& in : inputs_)
    if (in.name == name) return in.value;
  return std::nullopt;
}

std::optional<ValueId> Graph::find_output(std::string_view name) const {
  for (const auto& out : outputs_)
    if (out.name == name) return out.value;
  return std::nullopt;
}

const GraphInput* Graph::input_of_value(ValueId id) const {
  for (const auto& in : inputs_)
    if (in.value == id) return &in;
  return nullptr;
}

}  // namespace tg
