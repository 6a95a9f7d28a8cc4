// Graph storage. Checks here are the cheap structural ones and the size limits of every type that
// enters the graph (shape.h); the verifier does the rest.
#include "tensorgrad/ir/graph.h"

#include <limits>

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

namespace {

// Value and node ids are int32: a graph refuses to grow past them rather than wrap.
void check_id_room(std::size_t count, const std::string& graph_name, const char* what) {
  if (count >= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw Error("graph '" + graph_name + "' cannot hold more " + what + " (the limit is 2^31 - 1)");
  }
}

}  // namespace

ValueId Graph::add_input(std::string name, InputKind kind, TensorType type) {
  if (input_by_name_.contains(name)) throw Error("graph '" + name_ + "' already has an input named '" + name + "'");
  if (std::string problem = shape_limit_problem(type.shape); !problem.empty()) {
    throw ShapeError("input '" + name + "'", {type}, problem, SourceLoc{});
  }
  check_id_room(values_.size(), name_, "values");
  auto id = static_cast<ValueId>(values_.size());
  values_.push_back(ValueInfo{std::move(type), kNoNode});
  input_of_value_.push_back(static_cast<std::int32_t>(inputs_.size()));
  input_by_name_.emplace(name, inputs_.size());
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
  if (std::string problem = shape_limit_problem(out.shape); !problem.empty()) {
    std::vector<TensorType> input_types;
    for (ValueId v : inputs) input_types.push_back(type(v));
    throw ShapeError(std::string(op_name(op)), std::move(input_types), "its result is past the size limits: " + problem,
                     std::move(loc));
  }
  check_id_room(values_.size(), name_, "values");
  auto node_id = static_cast<NodeId>(nodes_.size());
  auto value_id = static_cast<ValueId>(values_.size());
  values_.push_back(ValueInfo{std::move(out), node_id});
  input_of_value_.push_back(kNotAnInput);
  nodes_.push_back(Node{op, std::move(inputs), std::move(attrs), value_id, std::move(loc)});
  return value_id;
}

void Graph::add_output(std::string name, ValueId value) {
  if (value < 0 || static_cast<std::size_t>(value) >= values_.size()) {
    throw Error("output '" + name + "' names value " + std::to_string(value) + " that does not exist");
  }
  if (output_by_name_.contains(name)) {
    throw Error("graph '" + name_ + "' already has an output named '" + name + "'");
  }
  output_by_name_.emplace(name, outputs_.size());
  outputs_.push_back(GraphOutput{std::move(name), value});
}

void Graph::set_checkpoint(NodeId node, std::int32_t segment) {
  if (node < 0 || static_cast<std::size_t>(node) >= nodes_.size()) {
    throw Error("graph '" + name_ + "' has no node %" + std::to_string(node) + " to put in a checkpoint segment");
  }
  if (segment < kNoCheckpoint) {
    throw Error("checkpoint segment " + std::to_string(segment) + " of node %" + std::to_string(node) + " in graph '" +
                name_ + "' is negative (segments are numbered from 0)");
  }
  nodes_[static_cast<std::size_t>(node)].checkpoint = segment;
}

std::optional<ValueId> Graph::find_input(std::string_view name) const {
  const auto it = input_by_name_.find(name);
  if (it == input_by_name_.end()) return std::nullopt;
  return inputs_[it->second].value;
}

std::optional<ValueId> Graph::find_output(std::string_view name) const {
  const auto it = output_by_name_.find(name);
  if (it == output_by_name_.end()) return std::nullopt;
  return outputs_[it->second].value;
}

const GraphInput* Graph::input_of_value(ValueId id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= input_of_value_.size()) return nullptr;
  const std::int32_t index = input_of_value_[static_cast<std::size_t>(id)];
  return index == kNotAnInput ? nullptr : &inputs_[static_cast<std::size_t>(index)];
}

bool operator==(const Graph& a, const Graph& b) {
  return a.name_ == b.name_ && a.values_ == b.values_ && a.nodes_ == b.nodes_ && a.inputs_ == b.inputs_ &&
         a.outputs_ == b.outputs_;
}

}  // namespace tg
