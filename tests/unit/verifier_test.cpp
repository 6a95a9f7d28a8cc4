// The verifier: accepts what the builder and the parser make, rejects hand-corrupted graphs with a
// message naming the node, its op, its call site and the problem.
#include <gtest/gtest.h>

#include <string>

#include "support/library.h"
#include "tensorgrad/ir/ops/ids/elementwise_binary.h"
#include "tensorgrad/ir/ops/ids/elementwise_unary.h"
#include "tensorgrad/ir/ops/ids/matmul.h"
#include "tensorgrad/ir/ops/ids/reduce.h"
#include "tensorgrad/ir/ops/ids/softmax.h"

namespace {

using tg::DType;
using tg::Graph;
using tg::InputKind;
using tg::OpId;
namespace op = tg::op;

tg::TensorType f32(tg::Shape shape) { return {DType::f32, std::move(shape)}; }

const tg::SourceLoc kSite{"model.cpp", 42, 9};

// Expects verify() to throw a VerifyError whose message holds every fragment.
void expect_rejected(const Graph& g, std::initializer_list<std::string> fragments) {
  try {
    tg::verify(g);
    ADD_FAILURE() << "verify accepted:\n" << tg::print_graph(g);
  } catch (const tg::VerifyError& e) {
    for (const std::string& fragment : fragments) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
          << "missing '" << fragment << "' in: " << e.what();
    }
  }
}

// x: f32[2,3], w: f32[3,4] and a first good node, so corrupted nodes sit at index 1.
Graph base_graph(tg::ValueId* x, tg::ValueId* w) {
  Graph g("bad");
  *x = g.add_input("x", InputKind::data, f32({2, 3}));
  *w = g.add_input("w", InputKind::param, f32({3, 4}));
  g.add_node(op::Neg, {*x}, {}, f32({2, 3}), {});
  return g;
}

TEST(Verifier, AcceptsBuilderGraphs) {
  tg::GraphBuilder b("ok");
  tg::TracingScope scope(b);
  auto x = b.input("x", f32({2, 3}));
  auto w = b.param("w", f32({3, 4}));
  auto y = tg::softmax(tg::matmul(tg::relu(x), w), 1);
  b.output("loss", tg::mean(y));
  b.output("arg", tg::argmax(y, 1, {.keep_dims = true}));
  b.output("x", x);
  EXPECT_NO_THROW(tg::verify(b.graph()));
  EXPECT_NO_THROW(tg::verify(Graph("empty")));
}

TEST(Verifier, RejectsAWrongRecordedType) {
  tg::ValueId x, w;
  Graph g = base_graph(&x, &w);
  g.add_node(op::Matmul, {x, w}, {}, f32({2, 3}), kSite);
  expect_rejected(g, {"node %1", "matmul", "model.cpp:42:9", "recorded type f32[2,3]", "f32[2,4]"});
}

TEST(Verifier, RejectsAWrongDtype) {
  tg::ValueId x, w;
  Graph g = base_graph(&x, &w);
  g.add_node(op::Less, {x, x}, {}, f32({2, 3}), kSite);  // comparisons give bool
  expect_rejected(g, {"node %1", "less", "bool[2,3]"});
}

TEST(Verifier, RejectsWhatTheShapeRuleRefuses) {
  tg::ValueId x, w;
  Graph g = base_graph(&x, &w);
  g.add_node(op::Matmul, {x, x}, {}, f32({2, 3}), kSite);
  expect_rejected(g, {"node %1", "matmul", "model.cpp:42:9"});
}

TEST(Verifier, RejectsAttributesOffTheSchema) {
  tg::ValueId x, w;
  {
    Graph g = base_graph(&x, &w);
    g.add_node(op::Sum, {x}, {{"axes", std::vector<std::int64_t>{0}}}, f32({3}), kSite);
    expect_rejected(g, {"node %1", "sum", "missing attribute 'keep_dims'"});
  }
  {
    Graph g = base_graph(&x, &w);
    g.add_node(op::Softmax, {x}, {{"axis", 1.0}}, f32({2, 3}), kSite);
    expect_rejected(g, {"node %1", "softmax", "attribute 'axis'", "real"});
  }
  {
    Graph g = base_graph(&x, &w);
    g.add_node(op::Neg, {x}, {{"alpha", std::int64_t{1}}}, f32({2, 3}), kSite);
    expect_rejected(g, {"node %1", "neg", "unknown attribute 'alpha'"});
  }
  {
    Graph g = base_graph(&x, &w);
    g.add_node(op::Softmax, {x}, {{"axis", std::int64_t{7}}}, f32({2, 3}), kSite);
    expect_rejected(g, {"node %1", "softmax", "7"});
  }
}

TEST(Verifier, RejectsWrongArity) {
  tg::ValueId x, w;
  Graph g = base_graph(&x, &w);
  g.add_node(op::Add, {x}, {}, f32({2, 3}), kSite);
  expect_rejected(g, {"node %1", "add", "takes 2 input(s), got 1"});
}

TEST(Verifier, RejectsAnOpIdOutsideTheRegistry) {
  tg::ValueId x, w;
  Graph g = base_graph(&x, &w);
  g.add_node(static_cast<OpId>(tg::kOpIdSpace + 3), {x}, {}, f32({2, 3}), kSite);
  expect_rejected(g, {"node %1", "not in the registry"});
}

TEST(Verifier, NamesAnUnknownCallSite) {
  tg::ValueId x, w;
  Graph g = base_graph(&x, &w);
  g.add_node(op::Exp, {x}, {}, f32({3, 2}), {});
  expect_rejected(g, {"node %1", "exp at <unknown>"});
}

TEST(Verifier, ParsedGraphsVerify) {
  const Graph g = tg::parse_graph(
      "graph g(%x: f32[4], param %w: f32[4]) {\n"
      "  %0 = mul(%x, %w) : f32[4]\n"
      "  %1 = sum(%0) {axes=[0], keep_dims=false} : f32[]\n"
      "  return loss=%1\n"
      "}\n");
  EXPECT_NO_THROW(tg::verify(g));
}

}  // namespace
