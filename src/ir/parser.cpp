// The text parser: a hand-written recursive-descent reader of the format in tensorgrad/ir/text.h.
// Every refusal is a ParseError with the line and column of the offending token; nothing else
// escapes (the parser is fuzzed with truncated and corrupted texts).
#include <charconv>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/op_def.h"
#include "tensorgrad/ir/text.h"
#include "tensorgrad/ir/verifier.h"
#include "text_cursor.h"
#include "text_syntax.h"

namespace tg {

namespace {

std::string with_article(std::string_view noun) {
  const bool vowel = !noun.empty() && std::string_view("aeiou").find(noun[0]) != std::string_view::npos;
  return (vowel ? "an " : "a ") + std::string(noun);
}

struct PendingInput {
  std::string name;
  InputKind kind = InputKind::data;
  TensorType type;
  std::size_t nodes_before = 0;  // from "after %k": the input's value comes after node k's
  std::size_t at = 0;
  ValueId value = -1;  // set once added to the graph
};

class Parser : public text::TextCursor {
 public:
  explicit Parser(std::string_view src) : TextCursor(src) {}

  Graph parse() {
    expect_keyword("graph", "a graph must start with 'graph <name>('");
    graph_.set_name(name("a graph name").text);
    parse_header();
    expect('{', "'{' to open the graph body");
    parse_body();
    expect('}', "'}' to close the graph body");
    skip_space();
    if (pos_ < src_.size()) fail(pos_, "unexpected text after the end of the graph");
    return std::move(graph_);
  }

 private:
  // ---- header ----
  void parse_header() {
    expect('(', "'(' after the graph name");
    if (!accept(')')) {
      do {
        parse_input_decl(std::nullopt);
      } while (accept(','));
      expect(')', "',' or ')' after an input");
    }
    // The grouped form `params(...) state(...)` is read as well as the per-input prefixes.
    while (true) {
      skip_space();
      const std::size_t at = pos_;
      const std::string_view group = ident();
      if (group.empty()) break;
      if (group != "params" && group != "state") fail(at, "expected '{' or a params(...)/state(...) list");
      const InputKind kind = group == "params" ? InputKind::param : InputKind::state;
      expect('(', "'(' after " + std::string(group));
      if (!accept(')')) {
        do {
          parse_input_decl(kind);
        } while (accept(','));
        expect(')', "',' or ')' after an input");
      }
    }
    add_pending_inputs(0);
  }

  void parse_input_decl(std::optional<InputKind> group_kind) {
    skip_space();
    InputKind kind = group_kind.value_or(InputKind::data);
    const std::size_t prefix_at = pos_;
    if (const std::string_view prefix = ident(); !prefix.empty()) {
      if (group_kind) fail(prefix_at, "inputs inside a params(...) or state(...) list take no kind prefix");
      if (prefix == "param") {
        kind = InputKind::param;
      } else if (prefix == "state") {
        kind = InputKind::state;
      } else {
        fail(prefix_at, "expected an input such as %x: f32[2] or param %w: f32[2]");
      }
    }
    text::Name input = value_name("an input such as %x: f32[2]");
    if (!input.quoted && text::is_all_digits(input.text)) {
      fail(input.at, "input name %" + input.text + " would read as a node output; quote it as %\"" + input.text + "\"");
    }
    if (inputs_by_name_.count(input.text)) fail(input.at, "redefined value %" + text::name_text(input.text));
    expect(':', "':' and a type after the input name");
    // type() refuses a shape past the size limits (shape.h) at the dimension that breaks them.
    PendingInput pending{.name = input.text, .kind = kind, .type = type(), .at = input.at};
    if (accept_keyword("after")) {
      text::Name node = value_name("a node output after 'after'");
      if (node.quoted || !text::is_all_digits(node.text)) fail(node.at, "'after' names a node output such as %3");
      std::size_t index = 0;
      auto [end, ec] = std::from_chars(node.text.data(), node.text.data() + node.text.size(), index);
      if (ec != std::errc() || end != node.text.data() + node.text.size()) fail(node.at, "node index out of range");
      if (index >= std::size_t{1} << 31) fail(node.at, "node index out of range");
      pending.nodes_before = index + 1;
    }
    if (!pending_.empty() && pending.nodes_before < pending_.back().nodes_before) {
      fail(pending.at, "input %" + text::name_text(pending.name) +
                           " comes earlier in value order than the input listed before it; list inputs in the "
                           "order they were added");
    }
    inputs_by_name_[pending.name] = pending_.size();
    pending_.push_back(std::move(pending));
  }

  // Adds the inputs whose place in value order comes before node `node_count`.
  void add_pending_inputs(std::size_t node_count) {
    while (next_pending_ < pending_.size() && pending_[next_pending_].nodes_before <= node_count) {
      PendingInput& in = pending_[next_pending_++];
      in.value = graph_.add_input(in.name, in.kind, in.type);
    }
  }

  // ---- body ----
  void parse_body() {
    while (true) {
      skip_space();
      if (accept_keyword("return")) break;
      if (peek() != '%')
        fail(pos_, "expected a node '%" + std::to_string(graph_.nodes().size()) + " = ...' or 'return'" + found());
      add_pending_inputs(graph_.nodes().size());
      parse_node();
    }
    add_pending_inputs(graph_.nodes().size());
    if (next_pending_ < pending_.size()) {
      const PendingInput& in = pending_[next_pending_];
      fail(in.at, "input %" + text::name_text(in.name) + " is declared after node %" +
                      std::to_string(in.nodes_before - 1) + ", which does not exist");
    }
    parse_outputs();
  }

  ValueId value_ref(const text::Name& ref) {
    if (!ref.quoted && text::is_all_digits(ref.text)) {
      std::size_t index = 0;
      auto [end, ec] = std::from_chars(ref.text.data(), ref.text.data() + ref.text.size(), index);
      if (ec == std::errc() && end == ref.text.data() + ref.text.size() && index < graph_.nodes().size()) {
        return graph_.nodes()[index].output;
      }
      fail(ref.at, "unknown value %" + ref.text + " (no such node yet)");
    }
    auto it = inputs_by_name_.find(ref.text);
    if (it == inputs_by_name_.end()) fail(ref.at, "unknown value %" + text::name_text(ref.text));
    const PendingInput& in = pending_[it->second];
    if (in.value < 0) {
      fail(ref.at, "input %" + text::name_text(ref.text) + " is used before its place (after %" +
                       std::to_string(in.nodes_before - 1) + ")");
    }
    return in.value;
  }

  void parse_node() {
    const std::size_t expected = graph_.nodes().size();
    const text::Name def = value_name("a node definition");
    if (def.quoted || !text::is_all_digits(def.text)) {
      if (inputs_by_name_.count(def.text)) fail(def.at, "redefined value %" + text::name_text(def.text));
      fail(def.at, "node outputs are numbered in order: expected %" + std::to_string(expected));
    }
    std::size_t index = 0;
    auto [end, ec] = std::from_chars(def.text.data(), def.text.data() + def.text.size(), index);
    if (ec == std::errc() && end == def.text.data() + def.text.size() && index < expected) {
      fail(def.at, "redefined value %" + def.text);
    }
    if (ec != std::errc() || index != expected) {
      fail(def.at, "node outputs are numbered in order: expected %" + std::to_string(expected));
    }
    expect('=', "'=' after the node's name");

    skip_space();
    const std::size_t op_at = pos_;
    const std::string_view op_text = ident();
    if (op_text.empty()) fail(op_at, "expected an op name" + found());
    const std::optional<OpId> op = find_op(op_text);
    if (!op) fail(op_at, "unknown op '" + std::string(op_text) + "'");

    std::vector<ValueId> args;
    expect('(', "'(' after the op name");
    if (!accept(')')) {
      do {
        args.push_back(value_ref(value_name("an operand such as %0 or %x")));
      } while (accept(','));
      expect(')', "',' or ')' after an operand");
    }
    Attrs attrs = parse_attrs(*op, op_at);
    skip_space();
    const std::size_t type_at = pos_;
    expect(':', "':' and the node's type");
    const TensorType declared = type();
    std::int32_t segment = kNoCheckpoint;
    if (accept_keyword("checkpoint")) {
      skip_space();
      const std::size_t segment_at = pos_;
      const auto number = integer<std::int64_t>("a checkpoint segment number");
      if (number < 0 || number > std::numeric_limits<std::int32_t>::max()) {
        fail(segment_at, "checkpoint segment " + std::to_string(number) + " is out of range (0 to 2^31 - 1)");
      }
      segment = static_cast<std::int32_t>(number);
    }
    SourceLoc loc;
    if (accept('@')) loc = location();

    const TensorType inferred = infer(*op, attrs, args, op_at);
    if (inferred != declared) {
      fail(type_at, "declared type " + declared.to_string() + " differs from the type " + inferred.to_string() +
                        " that " + std::string(op_text) + "'s shape rule gives");
    }
    const ValueId out = graph_.add_node(*op, std::move(args), std::move(attrs), declared, std::move(loc));
    if (segment != kNoCheckpoint) graph_.set_checkpoint(graph_.value(out).producer, segment);
  }

  TensorType infer(OpId op, const Attrs& attrs, const std::vector<ValueId>& args, std::size_t op_at) {
    const OpDef& def = op_def(op);
    const std::string op_text(op_name(op));
    if (def.arity != kVariadic && args.size() != static_cast<std::size_t>(def.arity)) {
      fail(op_at,
           "op " + op_text + " takes " + std::to_string(def.arity) + " input(s), got " + std::to_string(args.size()));
    }
    if (!def.shape) fail(op_at, "op " + op_text + " has no shape rule");
    std::vector<TensorType> types;
    for (ValueId v : args) types.push_back(graph_.type(v));
    try {
      return infer_type(op, attrs, types);
    } catch (const RuleBroken& broken) {
      fail(op_at, "op " + op_text + " refuses its inputs: " + broken.rule);
    } catch (const std::exception& e) {
      fail(op_at, "op " + op_text + " refuses its inputs: " + e.what());
    }
  }

  // ---- attributes ----
  Attrs parse_attrs(OpId op, std::size_t op_at) {
    const OpDef& def = op_def(op);
    const std::string op_text(op_name(op));
    Attrs attrs;
    if (accept('{') && !accept('}')) {
      do {
        skip_space();
        const std::size_t name_at = pos_;
        const std::string attr_name(ident());
        if (attr_name.empty()) fail(name_at, "expected an attribute name" + found());
        const AttrSpec* spec = nullptr;
        for (const AttrSpec& s : def.attrs)
          if (s.name == attr_name) spec = &s;
        if (!spec) fail(name_at, "op " + op_text + " has no attribute '" + attr_name + "'");
        if (attrs.has(attr_name)) fail(name_at, "attribute '" + attr_name + "' is given twice");
        expect('=', "'=' after the attribute name");
        attrs.set(attr_name, coerce(literal(), *spec, op_text));
      } while (accept(','));
      expect('}', "',' or '}' after an attribute");
    }
    for (const AttrSpec& spec : def.attrs) {
      if (!attrs.has(spec.name)) fail(op_at, "op " + op_text + " needs attribute '" + std::string(spec.name) + "'");
    }
    return attrs;
  }

  AttrValue coerce(const text::Literal& lit, const AttrSpec& spec, const std::string& op_text) {
    const AttrKind given = attr_kind(lit.value);
    if (given == spec.kind) return lit.value;
    if (given == AttrKind::integer && spec.kind == AttrKind::real) {
      return static_cast<double>(std::get<std::int64_t>(lit.value));
    }
    fail(lit.at, "attribute '" + std::string(spec.name) + "' of op " + op_text + " must be " +
                     with_article(attr_kind_name(spec.kind)) + ", got " + with_article(attr_kind_name(given)));
  }

  // ---- outputs ----
  void parse_outputs() {
    if (peek() == '}') return;
    do {
      const text::Name out = name("an output such as loss=%3");
      if (graph_.find_output(out.text)) fail(out.at, "output '" + out.text + "' is named twice");
      expect('=', "'=' after the output name");
      const ValueId value = value_ref(value_name("the output's value such as %3"));
      graph_.add_output(out.text, value);
    } while (accept(','));
  }

  Graph graph_;
  std::vector<PendingInput> pending_;
  std::size_t next_pending_ = 0;
  std::map<std::string, std::size_t, std::less<>> inputs_by_name_;
};

}  // namespace

Graph parse_graph(std::string_view text) {
  Parser parser(text);
  Graph graph;
  try {
    graph = parser.parse();
  } catch (const ParseError&) {
    throw;
  } catch (const std::exception& e) {
    // Anything else is a gap in the checks above; still report it as a parse error, never a crash.
    parser.fail(parser.position(), e.what());
  }
  try {
    verify(graph);
  } catch (const VerifyError& e) {
    parser.fail(text.size(), std::string("the parsed graph does not verify: ") + e.what());
  }
  return graph;
}

}  // namespace tg
