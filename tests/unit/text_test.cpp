// The text printer and parser (round trips, exact text, every ParseError with its position, fuzzing)
// and the DOT export.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "support/library.h"
#include "tensorgrad/ir/ops/ids/elementwise_binary.h"
#include "tensorgrad/ir/ops/ids/elementwise_unary.h"
#include "tensorgrad/ir/ops/ids/reduce.h"

namespace {

using tg::DType;
using tg::Graph;
using tg::InputKind;
using tg::OpId;
namespace op = tg::op;

tg::TensorType f32(tg::Shape shape) { return {DType::f32, std::move(shape)}; }

// A small graph built straight through Graph, with types worked out by hand.
Graph hand_built_graph() {
  Graph g("g");
  const auto x = g.add_input("x", InputKind::data, f32({2, 3}));
  const auto w = g.add_input("w", InputKind::param, f32({2, 3}));
  const auto sum = g.add_node(op::Add, {x, w}, {}, f32({2, 3}), {"model.cpp", 12, 7});
  const auto total =
      g.add_node(op::Sum, {sum}, {{"axes", std::vector<std::int64_t>{0, 1}}, {"keep_dims", false}}, f32({}), {});
  g.add_output("loss", total);
  g.add_output("h", sum);
  return g;
}

void expect_round_trip(const Graph& g) {
  const std::string text = tg::print_graph(g);
  SCOPED_TRACE(text);
  const Graph parsed = tg::parse_graph(text);
  EXPECT_TRUE(parsed == g) << tg::print_graph(parsed);
  EXPECT_EQ(tg::print_graph(parsed), text);
  // Without locations the graph differs only in its call sites.
  const Graph no_locations = tg::parse_graph(tg::print_graph(g, {.locations = false}));
  ASSERT_EQ(no_locations.nodes().size(), g.nodes().size());
  for (const auto& node : no_locations.nodes()) EXPECT_EQ(node.loc, tg::SourceLoc{});
  EXPECT_EQ(tg::print_graph(no_locations), tg::print_graph(g, {.locations = false}));
}

TEST(TextPrinter, ExactTextOfASmallGraph) {
  const std::string expected =
      "graph g(%x: f32[2,3], param %w: f32[2,3]) {\n"
      "  %0 = add(%x, %w) : f32[2,3] @\"model.cpp\":12:7\n"
      "  %1 = sum(%0) {axes=[0,1], keep_dims=false} : f32[]\n"
      "  return loss=%1, h=%0\n"
      "}\n";
  EXPECT_EQ(tg::print_graph(hand_built_graph()), expected);
  const std::string without =
      "graph g(%x: f32[2,3], param %w: f32[2,3]) {\n"
      "  %0 = add(%x, %w) : f32[2,3]\n"
      "  %1 = sum(%0) {axes=[0,1], keep_dims=false} : f32[]\n"
      "  return loss=%1, h=%0\n"
      "}\n";
  EXPECT_EQ(tg::print_graph(hand_built_graph(), {.locations = false}), without);
}

TEST(TextPrinter, QuotesNamesThatAreNotBare) {
  Graph g("my graph");
  const auto a = g.add_input("0", InputKind::data, f32({}));
  const auto b = g.add_input("has space\"q", InputKind::state, f32({}));
  const auto c = g.add_node(op::Add, {a, b}, {}, f32({}), {"dir\\odd \"file\".cpp", 1, 2});
  g.add_output("", c);
  const std::string text = tg::print_graph(g);
  EXPECT_NE(text.find("graph \"my graph\"(%\"0\": f32[], state %\"has space\\\"q\": f32[])"), std::string::npos)
      << text;
  EXPECT_NE(text.find("@\"dir\\\\odd \\\"file\\\".cpp\":1:2"), std::string::npos) << text;
  EXPECT_NE(text.find("return \"\"=%0"), std::string::npos) << text;
  expect_round_trip(g);
}

TEST(TextRoundTrip, HandBuiltGraph) { expect_round_trip(hand_built_graph()); }

TEST(TextRoundTrip, HandWrittenTexts) {
  const std::string texts[] = {
      "graph mlp(%x: f32[256,1], param %l1.W: f32[1,64], param %l1.b: f32[64], state %m: f32[1,64]) {\n"
      "  %0 = matmul(%x, %l1.W) : f32[256,64] @\"model.cpp\":12:7\n"
      "  %1 = add(%0, %l1.b) : f32[256,64]\n"
      "  %2 = relu(%1) : f32[256,64]\n"
      "  %3 = sum(%2) {axes=[0,1], keep_dims=false} : f32[]\n"
      "  return loss=%3, grad.l1.W=%0, m=%m\n"
      "}\n",
      "graph creation() {\n"
      "  %0 = full() {dtype=f32, shape=[2], value=0.5} : f32[2]\n"
      "  %1 = arange() {dtype=i32, n=4} : i32[4]\n"
      "  %2 = clamp(%0) {hi=inf, lo=-1.5} : f32[2]\n"
      "  %3 = zeros() {dtype=bool, shape=[]} : bool[]\n"
      "  return a=%1, b=%2, c=%3\n"
      "}\n",
  };
  for (const std::string& text : texts) {
    const Graph parsed = tg::parse_graph(text);
    EXPECT_EQ(tg::print_graph(parsed), text);
    EXPECT_TRUE(tg::parse_graph(tg::print_graph(parsed)) == parsed);
  }
  const Graph made = tg::parse_graph(texts[1]);
  EXPECT_EQ(made.node(2).attrs.real("hi"), std::numeric_limits<double>::infinity());
  EXPECT_EQ(made.node(0).attrs.dtype("dtype"), DType::f32);
  EXPECT_EQ(made.type(made.node(3).output), (tg::TensorType{DType::boolean, {}}));
}

TEST(TextParser, RealsReadBackToTheSameBits) {
  for (double v : {0.1, -1e-300, 1e20, 3.0, 1.0 / 3.0, -0.0, 5e-324}) {
    Graph g("r");
    const auto x = g.add_input("x", InputKind::data, f32({2}));
    g.add_output("y", g.add_node(op::Clamp, {x}, {{"lo", v}, {"hi", 1e300}}, f32({2}), {}));
    const Graph parsed = tg::parse_graph(tg::print_graph(g));
    const double back = parsed.node(0).attrs.real("lo");
    EXPECT_EQ(std::signbit(back), std::signbit(v));
    EXPECT_EQ(back, v) << tg::print_graph(g);
  }
}

TEST(TextParser, GroupedInputListsAndCommentsAndIntegerForReal) {
  const Graph g = tg::parse_graph(
      "# a golden file\n"
      "// written by hand\n"
      "graph g(%x: f32[2]) params(%w: f32[2]) state(%m: f32[2]) {\n"
      "  %0 = add(%x, %w) : f32[2]   # the sum\n"
      "  %1 = clamp(%0) {hi=2, lo=-1} : f32[2]\n"
      "  return y=%1\n"
      "}\n");
  ASSERT_EQ(g.inputs().size(), 3u);
  EXPECT_EQ(g.inputs()[1].kind, InputKind::param);
  EXPECT_EQ(g.inputs()[2].kind, InputKind::state);
  EXPECT_EQ(g.node(1).attrs.real("hi"), 2.0);  // coerced from the integer literal
  EXPECT_EQ(g.node(1).attrs.real("lo"), -1.0);
  EXPECT_EQ(g.node(0).loc, tg::SourceLoc{});
}

TEST(TextRoundTrip, BuilderGraphWithInterleavedInputs) {
  tg::GraphBuilder b("interleaved");
  tg::TracingScope scope(b);
  auto x = b.input("x", f32({4, 3}));
  auto h = tg::relu(x);
  auto w = b.param("layers.0.attn.q.W", f32({3, 5}));  // added after a node: keeps its value order
  auto y = tg::matmul(h, w);
  auto m = b.input("opt/m-0", f32({3, 5}), InputKind::state);
  auto s = tg::sum(tg::softmax(y, -1), {1}, {.keep_dims = true});
  auto c = tg::clamp(s, 0.1, 1e20);
  auto t = tg::reshape(tg::permute(y, {1, 0}), {20});
  auto k = tg::argmax(y, 1);
  auto z = tg::full({2, 2}, -0.3);
  auto cond = tg::less(x, 0.25);
  auto sel = tg::where(cond, x, tg::exp(x));
  b.output("loss", tg::mean(c));
  b.output("t", t);
  b.output("k", k);
  b.output("z", z);
  b.output("sel", sel);
  b.output("m", m + 1.0);
  const Graph g = b.take();
  EXPECT_NO_THROW(tg::verify(g));
  expect_round_trip(g);
  EXPECT_NE(tg::print_graph(g).find("param %layers.0.attn.q.W: f32[3,5] after %0"), std::string::npos);
}

// Position of the first occurrence of `needle` in `text` as 1-based line and column.
std::pair<std::size_t, std::size_t> where(const std::string& text, const std::string& needle) {
  const std::size_t at = text.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

struct BadText {
  std::string name;
  std::string text;
  std::string at;       // the text the error must point at (its first occurrence)
  std::string message;  // a fragment of the message
};

TEST(TextParser, EveryErrorHasItsPosition) {
  const std::string head = "graph g(%x: f32[2,3], param %w: f32[3,2]) {\n";
  const std::vector<BadText> cases = {
      {"unknown op", head + "  %0 = frobnicate(%x) : f32[2,3]\n  return\n}\n", "frobnicate", "unknown op"},
      {"unknown value", head + "  %0 = neg(%q) : f32[2,3]\n  return\n}\n", "%q", "unknown value %q"},
      {"unknown node", head + "  %0 = neg(%4) : f32[2,3]\n  return\n}\n", "%4", "unknown value %4"},
      {"redefined node", head + "  %0 = neg(%x) : f32[2,3]\n  %0 = neg(%x) : f32[2,3]\n  return\n}\n",
       "%0 = neg(%x) : f32[2,3]\n  return", "redefined value %0"},
      {"redefined input", "graph g(%x: f32[2], %x: f32[2]) {\n  return\n}\n", "%x: f32[2])", "redefined value %x"},
      {"misnumbered node", head + "  %1 = neg(%x) : f32[2,3]\n  return\n}\n", "%1", "expected %0"},
      {"malformed token", head + "  %0 = neg(%x) : f32[2,$]\n  return\n}\n", "$", "expected a dimension"},
      {"unterminated string", head + "  %0 = neg(%x) : f32[2,3] @\"a.cpp:1:2\n  return\n}\n", "\"a.cpp",
       "unterminated string"},
      {"bad dtype", head + "  %0 = neg(%x) : f64[2,3]\n  return\n}\n", "f64", "unknown dtype 'f64'"},
      {"missing attribute", head + "  %0 = sum(%x) {axes=[0]} : f32[3]\n  return\n}\n", "sum",
       "needs attribute 'keep_dims'"},
      {"unknown attribute", head + "  %0 = neg(%x) {axis=1} : f32[2,3]\n  return\n}\n",
       "axis=", "has no attribute 'axis'"},
      {"mistyped attribute", head + "  %0 = sum(%x) {axes=true, keep_dims=false} : f32[]\n  return\n}\n", "true",
       "must be an integer list, got a boolean"},
      {"real for integer", head + "  %0 = softmax(%x) {axis=1.0} : f32[2,3]\n  return\n}\n", "1.0",
       "must be an integer, got a real"},
      {"attribute twice", head + "  %0 = softmax(%x) {axis=1, axis=1} : f32[2,3]\n  return\n}\n", "axis=1}",
       "given twice"},
      {"wrong arity", head + "  %0 = add(%x) : f32[2,3]\n  return\n}\n", "add", "takes 2 input(s), got 1"},
      {"type mismatch", head + "  %0 = matmul(%x, %w) : f32[2,3]\n  return\n}\n", ": f32[2,3]\n  return",
       "differs from the type f32[2,2]"},
      {"rule refuses", head + "  %0 = matmul(%x, %x) : f32[2,3]\n  return\n}\n", "matmul", "op matmul refuses"},
      {"axis out of range", head + "  %0 = softmax(%x) {axis=5} : f32[2,3]\n  return\n}\n", "softmax",
       "op softmax refuses"},
      {"unknown output value", head + "  return y=%nope\n}\n", "%nope", "unknown value %nope"},
      {"output twice", head + "  return y=%x, y=%w\n}\n", "y=%w", "named twice"},
      {"trailing garbage", head + "  return y=%x\n}\nextra\n", "extra", "unexpected text"},
      {"missing brace", head + "  return y=%x\n", "", "expected '}'"},
      {"bad escape", head + "  %0 = neg(%x) : f32[2,3] @\"a\\q\":1:2\n  return\n}\n", "\\q", "unknown escape"},
      {"input after missing node", "graph g(%x: f32[2] after %3) {\n  return\n}\n", "%x", "does not exist"},
      {"input used too early", "graph g(%x: f32[2], %y: f32[2] after %0) {\n  %0 = add(%x, %y) : f32[2]\n  return\n}\n",
       "%y)", "used before its place"},
      {"inputs out of value order", "graph g(%x: f32[2] after %0, %y: f32[2]) {\n  return\n}\n", "%y",
       "comes earlier in value order"},
      {"negative dimension", "graph g(%x: f32[-2]) {\n  return\n}\n", "-2", "negative"},
      {"huge integer", head + "  %0 = softmax(%x) {axis=99999999999999999999} : f32[2,3]\n  return\n}\n", "99999",
       "expected an attribute value"},
  };
  for (const BadText& bad : cases) {
    SCOPED_TRACE(bad.name);
    try {
      tg::parse_graph(bad.text);
      ADD_FAILURE() << "parsed without error:\n" << bad.text;
    } catch (const tg::ParseError& e) {
      EXPECT_NE(std::string(e.what()).find(bad.message), std::string::npos) << e.what();
      if (bad.at.empty()) continue;  // at the end of the text
      const auto [line, column] = where(bad.text, bad.at);
      EXPECT_EQ(e.line(), line) << e.what();
      EXPECT_EQ(e.column(), column) << e.what();
    }
  }
}

TEST(TextParser, ErrorAtEndOfTextPointsPastTheLastLine) {
  try {
    tg::parse_graph("graph g() {\n  return\n");
    ADD_FAILURE();
  } catch (const tg::ParseError& e) {
    EXPECT_EQ(e.line(), 3u);
    EXPECT_EQ(e.column(), 1u);
  }
}

TEST(TextParser, OpsWithoutShapeRuleAreRefusedNotCrashed) {
  for (OpId op : tg::all_ops()) {
    if (tg::op_def(op).shape) continue;
    const std::string text = "graph g() {\n  %0 = " + std::string(tg::op_name(op)) + "() : f32[]\n  return\n}\n";
    EXPECT_THROW(tg::parse_graph(text), tg::ParseError) << text;
  }
}

// Truncations and random byte flips of a valid text: the parser may accept or refuse, but it may
// only ever throw tg::Error (a crash would end the test binary).
TEST(TextParser, FuzzedTextsOnlyThrowTgErrors) {
  tg::GraphBuilder b("fuzz");
  tg::TracingScope scope(b);
  auto x = b.input("x", f32({2, 3}));
  auto w = b.param("l.W", f32({3, 4}));
  auto y = tg::matmul(tg::tanh(x), w);
  b.output("loss", tg::sum(tg::softmax(y, 1), {0}, {.keep_dims = true}));
  b.output("i", tg::argmin(y, 0));
  b.output("c", tg::clamp(y, -0.5, 0.5));
  const std::string text = tg::print_graph(b.graph());

  auto try_parse = [](const std::string& s) {
    try {
      const Graph g = tg::parse_graph(s);
      tg::verify(g);
      EXPECT_TRUE(tg::parse_graph(tg::print_graph(g)) == g) << s;
    } catch (const tg::Error&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << "non-tg exception " << e.what() << " for:\n" << s;
    }
  };
  for (std::size_t n = 0; n <= text.size(); ++n) try_parse(text.substr(0, n));
  std::mt19937 rng(1234);
  const std::string alphabet = "%@\"\\:,=(){}[]#/-.0123456789eafinx \n\t\x01\xff";
  for (int round = 0; round < 3000; ++round) {
    std::string s = text;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f) {
      const std::size_t at = rng() % s.size();
      switch (rng() % 3) {
        case 0:
          s[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          s[at] = static_cast<char>(rng() % 256);
          break;
        default:
          s.erase(at, 1 + rng() % 4);
          break;
      }
      if (s.empty()) s = "g";
    }
    try_parse(s);
  }
}

TEST(TextDot, HasEveryInputNodeAndOutput) {
  const Graph g = hand_built_graph();
  const std::string dot = tg::to_dot(g);
  EXPECT_EQ(dot.rfind("digraph \"g\" {", 0), 0u) << dot;
  EXPECT_NE(dot.find("in0 [shape=box, label=\"x\\nf32[2,3]\"]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("in1 [shape=box, label=\"param w\\nf32[2,3]\"]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n0 [shape=ellipse, label=\"%0 = add\\nf32[2,3]\"]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n1 [shape=ellipse, label=\"%1 = sum\\n{axes=[0,1], keep_dims=false}\\nf32[]\"]"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("in0 -> n0 [label=\"0\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("in1 -> n0 [label=\"1\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n0 -> n1;"), std::string::npos) << dot;
  EXPECT_NE(dot.find("out0 [shape=doubleoctagon, label=\"loss\"]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n1 -> out0;"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n0 -> out1;"), std::string::npos) << dot;
  EXPECT_EQ(dot.substr(dot.size() - 2), "}\n");
}

TEST(TextDot, EscapesQuotes) {
  Graph g("q\"g");
  const auto a = g.add_input("a\"b", InputKind::data, f32({}));
  g.add_output("o\\\"", a);
  const std::string dot = tg::to_dot(g);
  EXPECT_NE(dot.find("digraph \"q\\\"g\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("label=\"a\\\"b\\nf32[]\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("label=\"o\\\\\\\"\""), std::string::npos) << dot;
}

}  // namespace

namespace {

// String attributes (e.g. a loss's reduction) print quoted and read back exactly.
TEST(TextFormat, StringAttributesRoundTrip) {
  tg::Attrs attrs{{"reduction", std::string("me\"an\\")}};
  EXPECT_EQ(attrs.to_string(), "{reduction=\"me\\\"an\\\\\"}");
  EXPECT_EQ(attrs.string("reduction"), "me\"an\\");
  EXPECT_THROW(attrs.integer("reduction"), tg::Error);
}

}  // namespace
