#pragma once
// The SSA graph: values (type, producer), nodes (op, inputs, attributes, call site), named inputs of
// three kinds and named outputs. Every node has exactly one output value.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensorgrad/ir/attrs.h"
#include "tensorgrad/ir/ops/op_id.h"
#include "tensorgrad/ir/shape.h"
#include "tensorgrad/ir/source_loc.h"

namespace tg {

using ValueId = std::int32_t;
using NodeId = std::int32_t;
inline constexpr NodeId kNoNode = -1;

enum class InputKind : std::uint8_t { data, param, state };
std::string_view input_kind_name(InputKind kind);

struct ValueInfo {
  TensorType type;
  NodeId producer = kNoNode;  // kNoNode for graph inputs
  friend bool operator==(const ValueInfo&, const ValueInfo&) = default;
};

struct Node {
  OpId op{};
  std::vector<ValueId> inputs;
  Attrs attrs;
  ValueId output = -1;
  SourceLoc loc;
  friend bool operator==(const Node&, const Node&) = default;
};

struct GraphInput {
  std::string name;
  InputKind kind = InputKind::data;
  ValueId value = -1;
  friend bool operator==(const GraphInput&, const GraphInput&) = default;
};

// A value carried from one run to the next: after a run, output `output` becomes the value of
// param or state input `input` (an optimizer's update, a step counter). Backends apply it.
struct Writeback {
  std::string output;
  std::string input;
  friend bool operator==(const Writeback&, const Writeback&) = default;
};

struct GraphOutput {
  std::string name;
  ValueId value = -1;
  friend bool operator==(const GraphOutput&, const GraphOutput&) = default;
};

class Graph {
 public:
  explicit Graph(std::string name = "main") : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  ValueId add_input(std::string name, InputKind kind, TensorType type);
  // Appends a node whose output type is already known (the builder ran the shape rule).
  ValueId add_node(OpId op, std::vector<ValueId> inputs, Attrs attrs, TensorType out, SourceLoc loc);
  void add_output(std::string name, ValueId value);

  const std::vector<ValueInfo>& values() const { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<GraphInput>& inputs() const { return inputs_; }
  const std::vector<GraphOutput>& outputs() const { return outputs_; }
  const ValueInfo& value(ValueId id) const { return values_.at(static_cast<std::size_t>(id)); }
  const TensorType& type(ValueId id) const { return value(id).type; }
  const Node& node(NodeId id) const { return nodes_.at(static_cast<std::size_t>(id)); }

  std::optional<ValueId> find_input(std::string_view name) const;
  std::optional<ValueId> find_output(std::string_view name) const;
  const GraphInput* input_of_value(ValueId id) const;  // nullptr when produced by a node

  friend bool operator==(const Graph&, const Graph&) = default;

 private:
  std::string name_;
  std::vector<ValueInfo> values_;
  std::vector<Node> nodes_;
  std::vector<GraphInput> inputs_;
  std::vector<GraphOutput> outputs_;
};

}  // namespace tg
