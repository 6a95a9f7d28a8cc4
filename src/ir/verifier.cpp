// The verifier: structural checks first (ids in range, SSA order, producer links, unique names),
// then each node against its op's contract (arity, attribute schema, shape rule == recorded type).
#include "tensorgrad/ir/verifier.h"

#include <set>
#include <string>
#include <vector>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/op_def.h"
#include "text_syntax.h"

namespace tg {

namespace {

class Verifier {
 public:
  explicit Verifier(const Graph& graph) : graph_(graph) {}

  void run() {
    check_inputs();
    check_values();
    for (std::size_t i = 0; i < graph_.nodes().size(); ++i) check_node(static_cast<NodeId>(i));
    check_outputs();
  }

 private:
  bool in_range(ValueId id) const { return id >= 0 && static_cast<std::size_t>(id) < graph_.values().size(); }

  [[noreturn]] void graph_error(const std::string& problem) const {
    throw VerifyError("graph '" + graph_.name() + "': " + problem);
  }

  [[noreturn]] void node_error(NodeId index, const std::string& problem) const {
    const Node& node = graph_.node(index);
    throw VerifyError("graph '" + graph_.name() + "', node %" + std::to_string(index) + " (" +
                      std::string(op_name(node.op)) + " at " + text::location_text(node.loc) + "): " + problem);
  }

  void check_inputs() const {
    std::set<std::string, std::less<>> names;
    std::set<ValueId> values;
    for (const GraphInput& in : graph_.inputs()) {
      const std::string label = "input '" + in.name + "'";
      if (!names.insert(in.name).second) graph_error(label + " is declared twice");
      if (!in_range(in.value))
        graph_error(label + " refers to value " + std::to_string(in.value) + ", which does not exist");
      if (!values.insert(in.value).second)
        graph_error(label + " shares value " + std::to_string(in.value) + " with another input");
      if (graph_.value(in.value).producer != kNoNode) {
        graph_error(label + " refers to value " + std::to_string(in.value) + ", which node %" +
                    std::to_string(graph_.value(in.value).producer) + " produces");
      }
    }
  }

  // Every value is either a graph input or the output of exactly the node that claims it.
  void check_values() const {
    const auto& values = graph_.values();
    for (std::size_t v = 0; v < values.size(); ++v) {
      const auto id = static_cast<ValueId>(v);
      const NodeId producer = values[v].producer;
      if (producer == kNoNode) {
        if (!graph_.input_of_value(id)) graph_error("value " + std::to_string(v) + " has no producer and is no input");
        continue;
      }
      if (producer < 0 || static_cast<std::size_t>(producer) >= graph_.nodes().size()) {
        graph_error("value " + std::to_string(v) + " names producer node " + std::to_string(producer) +
                    ", which does not exist");
      }
      if (graph_.node(producer).output != id) {
        graph_error("value " + std::to_string(v) + " names producer node %" + std::to_string(producer) +
                    ", whose output is value " + std::to_string(graph_.node(producer).output));
      }
    }
  }

  void check_node(NodeId index) const {
    const Node& node = graph_.node(index);
    if (!is_registered_op(node.op)) {
      node_error(index, "op id " + std::to_string(static_cast<unsigned>(node.op)) + " is not in the registry");
    }
    if (!in_range(node.output) || graph_.value(node.output).producer != index) {
      node_error(index, "its output value " + std::to_string(node.output) + " does not name it as producer");
    }
    std::vector<TensorType> types;
    for (std::size_t i = 0; i < node.inputs.size(); ++i) {
      const ValueId v = node.inputs[i];
      if (!in_range(v))
        node_error(index, "input " + std::to_string(i) + " refers to missing value " + std::to_string(v));
      // Values are numbered in creation order, so SSA order means every operand has a smaller id.
      if (v >= node.output) {
        node_error(index, "input " + std::to_string(i) + " uses value " + std::to_string(v) +
                              ", which is defined after this node");
      }
      types.push_back(graph_.type(v));
    }
    check_contract(index, node, types);
  }

  void check_contract(NodeId index, const Node& node, const std::vector<TensorType>& types) const {
    const OpDef& def = op_def(node.op);
    if (def.arity != kVariadic && types.size() != static_cast<std::size_t>(def.arity)) {
      node_error(index, "takes " + std::to_string(def.arity) + " input(s), got " + std::to_string(types.size()));
    }
    if (!def.shape) node_error(index, "op " + std::string(def.name) + " has no shape rule");
    TensorType expected;
    try {
      expected = infer_type(node.op, node.attrs, types);
    } catch (const RuleBroken& broken) {
      node_error(index, broken.rule);
    } catch (const std::exception& e) {
      node_error(index, e.what());
    }
    const TensorType& recorded = graph_.type(node.output);
    if (recorded != expected) {
      node_error(index,
                 "recorded type " + recorded.to_string() + " differs from the shape rule's " + expected.to_string());
    }
  }

  void check_outputs() const {
    std::set<std::string, std::less<>> names;
    for (const GraphOutput& out : graph_.outputs()) {
      if (!names.insert(out.name).second) graph_error("output '" + out.name + "' is declared twice");
      if (!in_range(out.value)) {
        graph_error("output '" + out.name + "' refers to value " + std::to_string(out.value) +
                    ", which does not exist");
      }
    }
  }

  const Graph& graph_;
};

}  // namespace

void verify(const Graph& graph) { Verifier(graph).run(); }

}  // namespace tg
