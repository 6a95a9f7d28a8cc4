// Graphviz export: inputs as boxes, op nodes as ellipses, outputs as sink nodes, edges along data
// flow (labelled with the operand index where an op takes more than one).
#include <string>

#include "tensorgrad/ir/text.h"

namespace tg {

namespace {

// A DOT double-quoted string; "\n" inside labels is Graphviz's line break, so real newlines and
// backslashes are escaped first.
std::string dot_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) >= 0x20) {
      out += c;
    }
  }
  return out + "\"";
}

std::string label(std::initializer_list<std::string> lines) {
  std::string joined;
  for (const std::string& line : lines) {
    if (line.empty()) continue;
    if (!joined.empty()) joined += '\n';
    joined += line;
  }
  return dot_string(joined);
}

// The DOT node id of whatever produces a value.
std::string source_of(const Graph& graph, ValueId value) {
  if (value < 0 || static_cast<std::size_t>(value) >= graph.values().size()) return "missing";
  const NodeId producer = graph.value(value).producer;
  if (producer != kNoNode) return "n" + std::to_string(producer);
  for (std::size_t i = 0; i < graph.inputs().size(); ++i)
    if (graph.inputs()[i].value == value) return "in" + std::to_string(i);
  return "missing";
}

}  // namespace

std::string to_dot(const Graph& graph) {
  std::string s = "digraph " + dot_string(graph.name()) + " {\n";
  s += "  node [fontname=\"monospace\"];\n";
  for (std::size_t i = 0; i < graph.inputs().size(); ++i) {
    const GraphInput& in = graph.inputs()[i];
    const std::string kind = in.kind == InputKind::data ? "" : std::string(input_kind_name(in.kind));
    s += "  in" + std::to_string(i) + " [shape=box, label=" +
         label({kind.empty() ? in.name : kind + " " + in.name, graph.type(in.value).to_string()}) + "];\n";
  }
  for (std::size_t i = 0; i < graph.nodes().size(); ++i) {
    const Node& node = graph.nodes()[i];
    const std::string id = "n" + std::to_string(i);
    s += "  " + id + " [shape=ellipse, label=" +
         label({"%" + std::to_string(i) + " = " + std::string(op_name(node.op)), node.attrs.to_string(),
                graph.type(node.output).to_string(),
                node.checkpoint == kNoCheckpoint ? "" : "checkpoint " + std::to_string(node.checkpoint)}) +
         "];\n";
    for (std::size_t k = 0; k < node.inputs.size(); ++k) {
      s += "  " + source_of(graph, node.inputs[k]) + " -> " + id;
      if (node.inputs.size() > 1) s += " [label=\"" + std::to_string(k) + "\"]";
      s += ";\n";
    }
  }
  for (std::size_t i = 0; i < graph.outputs().size(); ++i) {
    const GraphOutput& out = graph.outputs()[i];
    const std::string id = "out" + std::to_string(i);
    s += "  " + id + " [shape=doubleoctagon, label=" + label({out.name}) + "];\n";
    s += "  " + source_of(graph, out.value) + " -> " + id + ";\n";
  }
  return s + "}\n";
}

}  // namespace tg
