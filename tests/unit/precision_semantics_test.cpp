// The 16-bit semantics around cast (the precision family; precision_test.cpp has the op itself):
// scalars take the tensor's dtype, the oracle rounds every stored 16-bit value, HostTensor keeps f16
// and bf16 as their bits and rounds what it is given once, and the text format and DOT carry the
// dtypes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/ir/low_precision.h"
#include "tensorgrad/ir/ops/ids/creation.h"
#include "tensorgrad/ir/ops/ids/precision.h"

namespace tg {
namespace {

// The double just above the bf16 tie between 1 and 1 + 2^-7: one rounding gives 1 + 2^-7, rounding
// through f32 first gives the tie itself and then 1 (even).
constexpr double kAboveBf16Tie = 1 + 0x1p-8 + 0x1p-40;

// The value of the one full node of `graph` (the scalar constant the front-end made).
double constant_of(const Graph& graph, TensorType* type) {
  for (const Node& node : graph.nodes()) {
    if (node.op != op::Full) continue;
    *type = graph.type(node.output);
    return node.attrs.real("value");
  }
  ADD_FAILURE() << "no full node in\n" << print_graph(graph);
  return NAN;
}

TEST(PrecisionSemantics, ScalarsTakeTheTensorsDtypeRoundedOnce) {
  for (DType dtype : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    for (int side = 0; side < 2; ++side) {
      GraphBuilder b("scalar");
      TracingScope scope(b);
      const Tensor x = b.input("x", {dtype, {2}});
      const Tensor y = side == 0 ? x + 0.1 : 0.1 * x;
      EXPECT_EQ(y.dtype(), dtype);
      b.output("y", y);
      TensorType type;
      const double value = constant_of(b.graph(), &type);
      EXPECT_EQ(type.to_string(), std::string(dtype_name(dtype)) + "[]");
      EXPECT_EQ(value, round_to_dtype(0.1, dtype));
      EXPECT_NE(value, 0.1);
      // Both interpreters add the rounded constant and round the sum.
      const HostTensor ones = HostTensor::low_precision(dtype, {2}, std::vector<float>{1.0F, -3.0F});
      for (ComputeType compute : {ComputeType::f64, ComputeType::f32}) {
        const HostTensor out = interpret(b.graph(), {{"x", ones}}, {.compute = compute}).outputs.at("y");
        ASSERT_EQ(out.type.dtype, dtype);
        const double c = round_to_dtype(0.1, dtype);
        EXPECT_EQ(out.at(0), round_to_dtype(side == 0 ? 1 + c : c * 1, dtype));
        EXPECT_EQ(out.at(1), round_to_dtype(side == 0 ? -3 + c : c * -3, dtype));
      }
    }
  }
  // A constant past f16's range is infinity, as the stored value would be.
  GraphBuilder b("big");
  TracingScope scope(b);
  b.output("y", b.input("x", {DType::f16, {}}) * 70000.0);
  TensorType type;
  EXPECT_EQ(constant_of(b.graph(), &type), INFINITY);
}

// The oracle computes each op in double from the stored inputs and rounds the result to its dtype
// when it stores it: the expected values below are that, written out op by op.
TEST(PrecisionSemantics, TheOracleRoundsEveryStoredValueToItsDtype) {
  const std::vector<float> xs = {1.5F, -0.375F, 2.25F, 0.8125F};
  for (DType dtype : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    GraphBuilder b("chain");
    TracingScope scope(b);
    const Tensor x = b.input("x", {dtype, {4}});
    const Tensor e = exp(x);
    const Tensor p = e * x;
    const Tensor s = sum(p);
    b.output("e", e);
    b.output("p", p);
    b.output("r", s / 3.0);
    b.output("wide", sum(cast(e, DType::f32) * cast(x, DType::f32)) / 3.0);
    const auto out = interpret(b.take(), {{"x", HostTensor::low_precision(dtype, {4}, xs)}}).outputs;
    const auto rt = [dtype](double v) { return round_to_dtype(v, dtype); };
    double total = 0;
    double wide_total = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const double ei = rt(std::exp(double{xs[i]}));
      const double pi = rt(ei * xs[i]);
      EXPECT_EQ(out.at("e").at(i), ei) << i;
      EXPECT_EQ(out.at("p").at(i), pi) << i;
      total += pi;
      wide_total += ei * xs[i];
    }
    const double r = rt(rt(total) / rt(3.0));
    EXPECT_EQ(out.at("r").at(0), r);
    // Through f32 the oracle keeps double precision (it never rounds f32 values): no rounding of the
    // products or the sum, and the division by an f32 constant 3 (f32 holds it exactly).
    EXPECT_EQ(out.at("wide").at(0), wide_total / 3.0);
    EXPECT_NE(r, wide_total / 3.0) << "the chain should be one whose 16-bit roundings show";
  }
}

TEST(PrecisionSemantics, HostTensorKeepsBitsAndRoundsOnce) {
  const HostTensor h = HostTensor::low_precision(DType::f16, {4}, std::vector<float>{0.1F, 65520.0F, -0.0F, 1e-8F});
  EXPECT_EQ(h.storage(), HostStorage::f16);
  EXPECT_EQ(host_storage_bytes(HostStorage::f16), 2U);
  EXPECT_EQ(dtype_bytes(DType::bf16), 2U);
  const std::vector<std::uint16_t> want = {f32_to_f16_bits(0.1F), 0x7c00, 0x8000, 0x0000};
  EXPECT_EQ(std::vector<std::uint16_t>(h.bits16_data().begin(), h.bits16_data().end()), want);
  EXPECT_EQ(h.at(0), static_cast<double>(f16_bits_to_f32(want[0])));
  EXPECT_EQ(h.at(1), INFINITY);
  EXPECT_TRUE(std::signbit(h.at(2)));
  EXPECT_EQ(h.to_f32()[0], f16_bits_to_f32(want[0]));
  EXPECT_THROW((void)h.f32_data(), RuntimeError);

  const HostTensor b = HostTensor::from_bits(DType::bf16, {2}, {0x3f80, 0xffc0});
  EXPECT_EQ(b.storage(), HostStorage::bf16);
  EXPECT_EQ(b.at(0), 1.0);
  EXPECT_TRUE(std::isnan(b.at(1)));
  EXPECT_THROW((void)HostTensor::from_bits(DType::bf16, {3}, {0x3f80}), RuntimeError);
  EXPECT_THROW((void)HostTensor::from_bits(DType::f32, {1}, {0x3f80}), RuntimeError);
  EXPECT_THROW((void)HostTensor::low_precision(DType::i32, {1}, std::vector<float>{1.0F}), RuntimeError);

  // set() rounds the double once, to nearest even; a copy keeps its own elements.
  HostTensor c = b;
  c.set(0, kAboveBf16Tie);
  EXPECT_EQ(c.at(0), 1 + 0x1p-7);
  EXPECT_EQ(b.at(0), 1.0) << "writing to a copy changed the original";
  c.set(0, 1 + 0x1p-8);  // the tie itself: to even
  EXPECT_EQ(c.at(0), 1.0);
  HostTensor f = HostTensor::filled({DType::f16, {2}}, 0.1);
  EXPECT_EQ(f.at(1), round_to_dtype(0.1, DType::f16));
  f.set(1, 1e6);
  EXPECT_EQ(f.at(1), INFINITY);
  EXPECT_THROW(f.set(2, 1.0), RuntimeError);

  // Wide values narrowed to their dtype's storage: one rounding from the double.
  const HostTensor wide = HostTensor::of({DType::bf16, {2}}, {kAboveBf16Tie, -3.0});
  const HostTensor narrow = wide.narrowed();
  EXPECT_EQ(narrow.storage(), HostStorage::bf16);
  EXPECT_EQ(narrow.at(0), 1 + 0x1p-7);
  EXPECT_EQ(narrow.at(1), -3.0);
  // An f32 run stores such an input as its dtype's value too, rounded once.
  GraphBuilder g("id");
  TracingScope scope(g);
  g.output("y", cast(g.input("x", {DType::bf16, {2}}), DType::f32));
  const HostTensor y = interpret(g.graph(), {{"x", wide}}, {.compute = ComputeType::f32}).outputs.at("y");
  EXPECT_EQ(y.at(0), 1 + 0x1p-7);
}

Graph low_precision_graph() {
  GraphBuilder b("mixed_precision");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f16, {2, 3}});
  const Tensor w = b.param("w", {DType::bf16, {3}});
  const Tensor h = cast(x, DType::bf16) * w + 0.1;
  b.output("y", cast(sum(cast(h, DType::f32)), DType::f16));
  b.output("z", full({2}, -2.5, DType::bf16));
  return b.take();
}

TEST(PrecisionSemantics, TheTextFormatRoundTripsDtypesAndCasts) {
  const Graph g = low_precision_graph();
  const std::string text = print_graph(g);
  SCOPED_TRACE(text);
  for (const char* part : {"%x: f16[2,3]", "param %w: bf16[3]", "cast(%x) {dtype=bf16} : bf16[2,3]", ": f16[]"}) {
    EXPECT_NE(text.find(part), std::string::npos) << part;
  }
  const Graph parsed = parse_graph(text);
  EXPECT_TRUE(parsed == g) << print_graph(parsed);
  EXPECT_EQ(print_graph(parsed), text);
  // The 16-bit constant's value survives the text exactly.
  TensorType type;
  EXPECT_EQ(constant_of(parsed, &type), round_to_dtype(0.1, DType::bf16));
  EXPECT_EQ(type.dtype, DType::bf16);
  // Mixed float dtypes in text are refused as in the front-end.
  try {
    (void)parse_graph("graph g(%a: f16[2], %b: bf16[2]) {\n  %0 = add(%a, %b) : f16[2]\n  return y=%0\n}\n");
    ADD_FAILURE() << "a mixed-dtype add parsed";
  } catch (const ParseError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("input 0 is f16 but input 1 is bf16"), std::string::npos) << what;
    EXPECT_NE(what.find("cast"), std::string::npos) << what;
  }
}

TEST(PrecisionSemantics, DotShowsTheDtypes) {
  const std::string dot = to_dot(low_precision_graph());
  for (const char* part : {"f16[2,3]", "bf16[3]", "cast", "dtype=bf16", "f16[]"}) {
    EXPECT_NE(dot.find(part), std::string::npos) << part << " missing from\n" << dot;
  }
}

}  // namespace
}  // namespace tg
