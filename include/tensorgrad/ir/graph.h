#pragma once
// The SSA graph: values (type, producer), nodes (op, inputs, attributes, call site), named inputs of
// three kinds and named outputs. Every node has exactly one output value.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tensorgrad/ir/attrs.h"
#include "tensorgrad/ir/ops/op_id.h"
#include "tensorgrad/ir/shape.h"
#include "tensorgrad/ir/source_loc.h"

namespace tg {

using ValueId = std::int32_t;
using NodeId = std::int32_t;
inline constexpr NodeId kNoNode = -1;
// A node outside every gradient-checkpoint segment (Node::checkpoint).
inline constexpr std::int32_t kNoCheckpoint = -1;

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
  // The gradient-checkpoint segment the node belongs to (tg::checkpoint), or kNoCheckpoint. Only
  // autodiff reads it: it recomputes a segment's nodes in the backward instead of keeping their
  // forward values alive (docs/architecture.md, "Gradient checkpointing").
  std::int32_t checkpoint = kNoCheckpoint;
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
  // Puts node `node` in checkpoint segment `segment` (>= 0) or takes it out (kNoCheckpoint).
  void set_checkpoint(NodeId node, std::int32_t segment);

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

  // Equal graphs have equal names, values, nodes, inputs and outputs (the lookup indexes below
  // follow from those).
  friend bool operator==(const Graph& a, const Graph& b);

 private:
  // Hashes std::string and std::string_view alike, so lookups by a string_view build no string.
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view name) const { return std::hash<std::string_view>{}(name); }
  };
  using NameIndex = std::unordered_map<std::string, std::size_t, NameHash, std::equal_to<>>;

  std::string name_;
  std::vector<ValueInfo> values_;
  std::vector<Node> nodes_;
  std::vector<GraphInput> inputs_;
  std::vector<GraphOutput> outputs_;
  // Indexes derived from the vectors above, so the lookups are O(1) and building a graph with many
  // inputs and outputs stays linear: name -> position in inputs_ / outputs_, and per value its
  // position in inputs_ (kNotAnInput for a node's output).
  static constexpr std::int32_t kNotAnInput = -1;
  NameIndex input_by_name_;
  NameIndex output_by_name_;
  std::vector<std::int32_t> input_of_value_;
};

}  // namespace tg
