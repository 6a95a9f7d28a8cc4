// Autodiff on hand-checked graphs: accumulation, broadcasting, stop_gradient, unused params,
// integer values, error cases and call sites of gradient nodes.
#include <gtest/gtest.h>

#include "support/library.h"

namespace tg {
namespace {

TensorMap run64(const Graph& g, const TensorMap& inputs) {
  return interpret(g, inputs, {.compute = ComputeType::f64}).outputs;
}

TEST(Autodiff, CotangentsAccumulateOverEveryUse) {
  GraphBuilder b("square_by_mul");
  TracingScope scope(b);
  Tensor x = b.param("x", {DType::f32, {3}});
  b.output("loss", sum(x * x + x));  // d/dx = 2x + 1
  const Graph g = differentiate(b.take());
  const auto out = run64(g, {{"x", HostTensor::f32({3}, {1.f, -2.f, 0.5f})}});
  EXPECT_EQ(out.at("grad.x").to_f64(), (std::vector<double>{3, -3, 2}));
  EXPECT_DOUBLE_EQ(out.at("loss").at(0), 1 + 4 + 0.25 + 1 - 2 + 0.5);
}

TEST(Autodiff, BroadcastingIsReversedWithSumToShape) {
  GraphBuilder b("bias");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {2, 3}});
  Tensor bias = b.param("bias", {DType::f32, {3}});
  Tensor scale = b.param("scale", {DType::f32, {}});
  b.output("loss", sum((x + bias) * scale));
  const Graph g = differentiate(b.take());
  const auto out = run64(g, {{"x", HostTensor::f32({2, 3}, {1, 2, 3, 4, 5, 6})},
                             {"bias", HostTensor::f32({3}, {0.5f, 0.5f, 0.5f})},
                             {"scale", HostTensor::f32({}, {2})}});
  EXPECT_EQ(out.at("grad.bias").type, (TensorType{DType::f32, {3}}));
  EXPECT_EQ(out.at("grad.bias").to_f64(), (std::vector<double>{4, 4, 4}));
  EXPECT_DOUBLE_EQ(out.at("grad.scale").at(0), 21 + 3);
}

// A grad rule returns a cotangent for every input; those of inputs no param reaches (a constant
// scale, a data input) are dropped with the nodes that made them, so they neither run nor keep the
// forward's values alive. The forward's nodes and value ids stay as they were.
TEST(Autodiff, CotangentsNoParamNeedsLeaveNoNodes) {
  GraphBuilder b("scaled");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {4}});
  Tensor w = b.param("w", {DType::f32, {4}});
  const Tensor scores = exp(w) * x;                // d/dx needs exp(w): nobody asks for it
  b.output("loss", sum(scores * full({4}, 0.5)));  // d/d(0.5) needs scores: nobody asks for it
  const Graph forward = b.take();
  const Graph g = differentiate(forward);
  for (std::size_t n = 0; n < forward.nodes().size(); ++n) EXPECT_EQ(g.nodes()[n], forward.nodes()[n]);
  std::size_t readers_of_scores = 0;
  std::vector<bool> read(g.values().size(), false);
  for (const GraphOutput& o : g.outputs()) read[static_cast<std::size_t>(o.value)] = true;
  for (const Node& node : g.nodes()) {
    for (ValueId in : node.inputs) {
      readers_of_scores += in == scores.id();
      read[static_cast<std::size_t>(in)] = true;
    }
  }
  EXPECT_EQ(readers_of_scores, 1u) << "only the forward's own multiply reads the scores";
  for (std::size_t n = forward.nodes().size(); n < g.nodes().size(); ++n) {
    EXPECT_TRUE(read[static_cast<std::size_t>(g.nodes()[n].output)]) << "gradient node " << n << " feeds nothing";
  }
  const auto out = run64(g, {{"x", HostTensor::f32({4}, {1, 2, 3, 4})}, {"w", HostTensor::f32({4}, {0, 0, 0, 0})}});
  EXPECT_EQ(out.at("grad.w").to_f64(), (std::vector<double>{0.5, 1, 1.5, 2}));
}

TEST(Autodiff, StopGradientAndUnusedParamsGetZeros) {
  GraphBuilder b("stopped");
  TracingScope scope(b);
  Tensor w = b.param("w", {DType::f32, {2}});
  b.param("unused", {DType::f32, {2, 2}});
  b.output("loss", sum(stop_gradient(w) * w));  // d/dw = w (the stopped factor is a constant)
  const Graph g = differentiate(b.take());
  const auto out = run64(g, {{"w", HostTensor::f32({2}, {3, -1})}, {"unused", HostTensor::f32({2, 2}, {1, 2, 3, 4})}});
  EXPECT_EQ(out.at("grad.w").to_f64(), (std::vector<double>{3, -1}));
  EXPECT_EQ(out.at("grad.unused").to_f64(), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(out.at("grad.unused").type, (TensorType{DType::f32, {2, 2}}));
}

TEST(Autodiff, IntegerValuesCarryNoGradient) {
  GraphBuilder b("argmax_path");
  TracingScope scope(b);
  Tensor x = b.param("x", {DType::f32, {4}});
  Tensor i = argmax(x);  // i32: the path through it is cut
  b.output("loss", sum(x) + sum(where(equal(x, max(x)), x, 0.f)) * 0.f);
  b.output("index", i);
  const Graph g = differentiate(b.take());
  verify(g);
  const auto out = run64(g, {{"x", HostTensor::f32({4}, {1, 5, 2, 0})}});
  EXPECT_EQ(out.at("grad.x").to_f64(), (std::vector<double>{1, 1, 1, 1}));
  EXPECT_EQ(out.at("index").at(0), 1);
}

TEST(Autodiff, RejectsBadRequests) {
  GraphBuilder b("bad");
  TracingScope scope(b);
  Tensor x = b.param("x", {DType::f32, {2}});
  Tensor idx = b.input("idx", {DType::i32, {2}});
  b.output("vector", x * 2.f);
  b.output("loss", sum(x));
  b.output("idx_out", idx);
  const Graph g = b.take();
  EXPECT_THROW(differentiate(g, {.loss = "nope"}), Error);
  EXPECT_THROW(differentiate(g, {.loss = "vector"}), Error);
  EXPECT_THROW(differentiate(g, {.loss = "loss", .wrt = {"idx"}}), Error);
  EXPECT_THROW(differentiate(g, {.loss = "loss", .wrt = {"missing"}}), Error);
  try {
    differentiate(g, {.loss = "vector"});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f32[2]"), std::string::npos) << e.what();
  }
}

TEST(Autodiff, GradientNodesPointAtTheForwardCall) {
  GraphBuilder b("located");
  TracingScope scope(b);
  Tensor x = b.param("x", {DType::f32, {2}});
  const auto line = __LINE__ + 1;
  Tensor y = tanh(x);
  b.output("loss", sum(y));
  const Graph g = differentiate(b.take());
  bool found = false;
  for (std::size_t n = 2; n < g.nodes().size(); ++n) {  // nodes after tanh and sum
    if (g.nodes()[n].loc.line == line) found = true;
  }
  EXPECT_TRUE(found) << print_graph(g);
}

TEST(Autodiff, SecondOrderGradientsComeFromDifferentiatingAgain) {
  GraphBuilder b("cube");
  TracingScope scope(b);
  Tensor x = b.param("x", {DType::f32, {}});
  b.output("loss", x * x * x);  // first derivative 3x^2, second 6x
  Graph first = differentiate(b.take());
  // Turn the first derivative into the loss of a second differentiation.
  GraphBuilder b2("cube_grad");
  b2.mutable_graph() = first;
  Graph second = differentiate(b2.take(), {.loss = "grad.x", .wrt = {"x"}, .grad_prefix = "grad2."});
  const auto out = run64(second, {{"x", HostTensor::f32({}, {2})}});
  EXPECT_DOUBLE_EQ(out.at("grad.x").at(0), 12);
  EXPECT_DOUBLE_EQ(out.at("grad2.x").at(0), 12);
}

}  // namespace
}  // namespace tg
