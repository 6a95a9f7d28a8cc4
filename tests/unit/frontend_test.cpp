// The tracing front-end as a user meets it: trace-time shape errors that point at the user's line,
// operators that build the right nodes with the right call sites, scalar operands, and tensors of
// two graphs that must not mix (creation ops and their tracing scopes: creation_test.cpp).
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "support/library.h"
#include "tensorgrad/ir/ops/ids/creation.h"
#include "tensorgrad/ir/ops/ids/elementwise_binary.h"
#include "tensorgrad/ir/ops/ids/elementwise_unary.h"

namespace {

using tg::DType;
using tg::OpId;
namespace op = tg::op;

// Runs `trace`, which must throw a ShapeError, and returns it.
tg::ShapeError shape_error_from(const std::function<void()>& trace) {
  try {
    trace();
  } catch (const tg::ShapeError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a ShapeError";
  return tg::ShapeError("", {}, "", {});
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string here(int line) { return "frontend_test.cpp:" + std::to_string(line); }

const tg::Node& producer(const tg::Tensor& t) {
  const tg::Graph& g = t.builder().graph();
  return g.node(g.value(t.id()).producer);
}

TEST(FrontendErrors, ShapeErrorNamesOpInputsRuleAndCallSite) {
  tg::GraphBuilder b;
  auto x = b.input("x", {DType::f32, {2, 3}});
  const int line = __LINE__ + 1;  // the next line
  const auto error = shape_error_from([&] { (void)tg::reshape(x, {4, 2}); });
  const std::string what = error.what();
  EXPECT_TRUE(contains(what, "reshape(f32[2,3])")) << what;
  EXPECT_TRUE(contains(what, "changes the element count: 6 vs 8")) << what;
  EXPECT_TRUE(contains(what, here(line))) << what;
  EXPECT_EQ(error.location().line, static_cast<std::uint32_t>(line));
  EXPECT_EQ(error.op(), "reshape");
}

TEST(FrontendErrors, BroadcastErrorFromAnOperatorPointsAtTheExpression) {
  tg::GraphBuilder b;
  auto x = b.input("x", {DType::f32, {2, 3}});
  auto y = b.input("y", {DType::f32, {4}});
  const int line = __LINE__ + 1;  // the next line
  const auto error = shape_error_from([&] { (void)(x + y); });
  const std::string what = error.what();
  EXPECT_TRUE(contains(what, "add(f32[2,3], f32[4])")) << what;
  EXPECT_TRUE(contains(what, "do not broadcast")) << what;
  EXPECT_TRUE(contains(what, here(line))) << what;
}

TEST(FrontendErrors, DtypeErrorNamesTheOpAndTheLine) {
  tg::GraphBuilder b;
  auto i = b.input("i", {DType::i32, {3}});
  const int line = __LINE__ + 1;  // the next line
  const auto error = shape_error_from([&] { (void)tg::exp(i); });
  const std::string what = error.what();
  EXPECT_TRUE(contains(what, "exp(i32[3])")) << what;
  EXPECT_TRUE(contains(what, here(line))) << what;
}

TEST(FrontendOperators, BuildTheRightOpsWithTheirCallSites) {
  tg::GraphBuilder b;
  auto a = b.input("a", {DType::f32, {2, 3}});
  auto c = b.input("c", {DType::f32, {3}});

  const int add_line = __LINE__ + 1;  // the next line
  auto sum = a + c;
  EXPECT_EQ(producer(sum).op, op::Add);
  EXPECT_EQ(producer(sum).loc.line, static_cast<std::uint32_t>(add_line));
  EXPECT_TRUE(contains(producer(sum).loc.file, "frontend_test.cpp"));
  EXPECT_EQ(sum.shape(), (tg::Shape{2, 3}));

  const int mul_line = __LINE__ + 1;  // the next line
  auto doubled = a * 2.f;
  const tg::Node& mul = producer(doubled);
  EXPECT_EQ(mul.op, op::Mul);
  EXPECT_EQ(mul.loc.line, static_cast<std::uint32_t>(mul_line));
  EXPECT_EQ(mul.inputs.at(0), a.id());
  // The scalar became a 0-d f32 full node at the same call site.
  const tg::Node& two = b.graph().node(b.graph().value(mul.inputs.at(1)).producer);
  EXPECT_EQ(two.op, op::Full);
  EXPECT_EQ(two.attrs.real("value"), 2.0);
  EXPECT_EQ(b.graph().type(two.output), (tg::TensorType{DType::f32, {}}));
  EXPECT_EQ(two.loc.line, static_cast<std::uint32_t>(mul_line));

  const int sub_line = __LINE__ + 1;  // the next line
  auto rsub = 2.f - a;
  const tg::Node& sub = producer(rsub);
  EXPECT_EQ(sub.op, op::Sub);
  EXPECT_EQ(sub.loc.line, static_cast<std::uint32_t>(sub_line));
  EXPECT_EQ(b.graph().node(b.graph().value(sub.inputs.at(0)).producer).op, op::Full);
  EXPECT_EQ(sub.inputs.at(1), a.id());

  const int neg_line = __LINE__ + 1;  // the next line
  auto negated = -a;
  EXPECT_EQ(producer(negated).op, op::Neg);
  EXPECT_EQ(producer(negated).loc.line, static_cast<std::uint32_t>(neg_line));

  const int div_line = __LINE__ + 1;  // the next line
  auto halved = a / 2;
  EXPECT_EQ(producer(halved).op, op::Div);
  EXPECT_EQ(producer(halved).loc.line, static_cast<std::uint32_t>(div_line));
}

TEST(FrontendOperators, ComputeWhatTheySay) {
  tg::GraphBuilder b;
  auto x = b.input("x", {DType::f32, {3}});
  b.output("y", (2.f - x) * x + -x);
  const tg::Graph g = b.take();
  for (auto compute : {tg::ComputeType::f64, tg::ComputeType::f32}) {
    const auto y = tg::interpret(g, {{"x", tg::HostTensor::f32({3}, {1.f, -2.f, 0.5f})}}, {.compute = compute});
    const std::vector<double> expected{(2 - 1.0) * 1 - 1, (2 + 2.0) * -2 + 2, (2 - 0.5) * 0.5 - 0.5};
    EXPECT_EQ(y.outputs.at("y").to_f64(), expected);
  }
}

TEST(FrontendScopes, ScalarOperandsJoinTheirTensorsGraphWithoutAScope) {
  tg::GraphBuilder b;
  auto x = b.input("x", {DType::f32, {2}});
  auto y = x * 3.0;
  EXPECT_EQ(&y.builder(), &b);
  EXPECT_EQ(b.graph().nodes().size(), 2u);  // full + mul
}

TEST(FrontendScopes, TensorsOfTwoGraphsDoNotMix) {
  tg::GraphBuilder first("first");
  tg::GraphBuilder second("second");
  auto a = first.input("a", {DType::f32, {2}});
  auto c = second.input("c", {DType::f32, {2}});
  const int line = __LINE__ + 1;  // the next line
  const auto error = shape_error_from([&] { (void)(a + c); });
  EXPECT_TRUE(contains(error.what(), "another graph")) << error.what();
  EXPECT_TRUE(contains(error.what(), here(line))) << error.what();
  EXPECT_THROW(second.output("a", a), tg::Error);
  EXPECT_TRUE(first.graph().nodes().empty());
  EXPECT_TRUE(second.graph().nodes().empty());
}

}  // namespace
