// The text printer. The format is described in tensorgrad/ir/text.h; parser.cpp reads it back.
#include <algorithm>
#include <string>
#include <vector>

#include "tensorgrad/ir/text.h"
#include "text_syntax.h"

namespace tg {

namespace {

constexpr std::size_t kMaxHeaderWidth = 100;  // wider headers put one input per line

std::string value_ref(const Graph& graph, ValueId id) {
  if (id >= 0 && static_cast<std::size_t>(id) < graph.values().size()) {
    const NodeId producer = graph.value(id).producer;
    if (producer != kNoNode) return "%" + std::to_string(producer);
    if (const GraphInput* in = graph.input_of_value(id)) return "%" + text::name_text(in->name);
  }
  // Only a malformed graph gets here; print something the parser refuses rather than guessing.
  return "%<invalid value " + std::to_string(id) + ">";
}

// Number of nodes appended before the given value: inputs added after nodes keep their place in
// value order through an `after %k` suffix, so print -> parse reproduces the same value ids.
// `node_outputs` holds every node's output id, sorted: a binary search per input keeps printing a
// graph with many inputs and nodes O(n log n) (a count over all nodes per input was quadratic).
std::size_t nodes_before(const std::vector<ValueId>& node_outputs, ValueId id) {
  return static_cast<std::size_t>(std::lower_bound(node_outputs.begin(), node_outputs.end(), id) -
                                  node_outputs.begin());
}

std::string input_decl(const Graph& graph, const GraphInput& in, const std::vector<ValueId>& node_outputs) {
  std::string s;
  if (in.kind == InputKind::param) s += "param ";
  if (in.kind == InputKind::state) s += "state ";
  s += "%" + text::name_text(in.name) + ": " + graph.type(in.value).to_string();
  if (const std::size_t before = nodes_before(node_outputs, in.value); before > 0) {
    s += " after %" + std::to_string(before - 1);
  }
  return s;
}

std::string header(const Graph& graph) {
  const std::string opening = "graph " + text::name_text(graph.name()) + "(";
  std::vector<ValueId> node_outputs;
  node_outputs.reserve(graph.nodes().size());
  for (const Node& node : graph.nodes()) node_outputs.push_back(node.output);
  std::sort(node_outputs.begin(), node_outputs.end());
  std::vector<std::string> decls;
  std::size_t width = opening.size() + 3;
  for (const GraphInput& in : graph.inputs()) {
    decls.push_back(input_decl(graph, in, node_outputs));
    width += decls.back().size() + 2;
  }
  const std::string separator = width > kMaxHeaderWidth ? ",\n" + std::string(opening.size(), ' ') : std::string(", ");
  std::string s = opening;
  for (std::size_t i = 0; i < decls.size(); ++i) s += (i ? separator : "") + decls[i];
  return s + ") {\n";
}

std::string node_line(const Graph& graph, NodeId index, const Node& node, const PrintOptions& options) {
  std::string s = "  %" + std::to_string(index) + " = " + std::string(op_name(node.op)) + "(";
  for (std::size_t i = 0; i < node.inputs.size(); ++i) s += (i ? ", " : "") + value_ref(graph, node.inputs[i]);
  s += ")";
  if (!node.attrs.empty()) s += " " + node.attrs.to_string();
  s += " : " + graph.type(node.output).to_string();
  if (node.checkpoint != kNoCheckpoint) s += " checkpoint " + std::to_string(node.checkpoint);
  if (options.locations && !(node.loc == SourceLoc{})) {
    s +=
        " @" + text::quote(node.loc.file) + ":" + std::to_string(node.loc.line) + ":" + std::to_string(node.loc.column);
  }
  return s + "\n";
}

}  // namespace

std::string print_graph(const Graph& graph, const PrintOptions& options) {
  std::string s = header(graph);
  for (std::size_t i = 0; i < graph.nodes().size(); ++i) {
    s += node_line(graph, static_cast<NodeId>(i), graph.nodes()[i], options);
  }
  s += "  return";
  for (std::size_t i = 0; i < graph.outputs().size(); ++i) {
    const GraphOutput& out = graph.outputs()[i];
    s += (i ? ", " : " ") + text::name_text(out.name) + "=" + value_ref(graph, out.value);
  }
  return s + "\n}\n";
}

}  // namespace tg
