// The precision family: cast, on both interpreters, bit for bit against the conversion functions
// (tensorgrad/ir/low_precision.h, themselves checked against an independent reference in
// low_precision_test.cpp); its gradient, the identity cast, the dtypes it refuses; the refusal of
// mixed float dtypes everywhere else; and, for every op the registry lists in the family, the OpDef
// parts, samples that run, and f32 against the oracle. precision_semantics_test.cpp covers the
// 16-bit semantics around the op: scalars, the oracle's stores, HostTensor and the text format.
#include "tensorgrad/ir/ops/ids/precision.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "support/library.h"
#include "support/op_family.h"
#include "support/shape_error.h"
#include "tensorgrad/ir/low_precision.h"

namespace tg {
namespace {

constexpr std::string_view kFamily = "precision";
constexpr ComputeType kComputeTypes[] = {ComputeType::f64, ComputeType::f32};
constexpr DType kLowPrecision[] = {DType::f16, DType::bf16};

std::string compute_name(ComputeType compute) { return compute == ComputeType::f64 ? "interp_f64" : "interp_f32"; }

// Runs y = cast(x, to) for one input tensor and returns y.
HostTensor run_cast(const HostTensor& x, DType to, ComputeType compute) {
  GraphBuilder b("cast");
  TracingScope scope(b);
  b.output("y", cast(b.input("x", x.type), to));
  return interpret(b.take(), {{"x", x}}, {.compute = compute}).outputs.at("y");
}

// Element i of a result as the value it holds: NaN compares as NaN, zeros by their sign.
bool same_value(double got, double want) {
  if (std::isnan(want)) return std::isnan(got);
  return got == want && std::signbit(got) == std::signbit(want);
}

// Expects every element of `got` (dtype `to`) to be `want[i]`, reporting the first few misses with
// the input that produced them; 16-bit results stored as 16 bits are compared as bit patterns.
void expect_elements(const HostTensor& got, DType to, const std::vector<double>& want,
                     const std::vector<std::string>& inputs) {
  ASSERT_EQ(got.type.dtype, to);
  ASSERT_EQ(got.size(), want.size());
  const bool as_bits = got.storage() == HostStorage::f16 || got.storage() == HostStorage::bf16;
  int misses = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    bool ok = same_value(got.at(i), want[i]);
    if (as_bits && !std::isnan(want[i])) {
      ok = got.bits16_data()[i] == f32_to_low_precision_bits(static_cast<float>(want[i]), to);
    }
    if (!ok && ++misses <= 8) {
      ADD_FAILURE() << "element " << i << ": cast of " << inputs[i] << " to " << dtype_name(to) << " gave "
                    << std::hexfloat << got.at(i) << ", expected " << want[i];
    }
  }
  EXPECT_EQ(misses, 0);
}

std::string hex_bits(std::uint32_t bits) {
  char text[12];
  std::snprintf(text, sizeof text, "0x%x", static_cast<unsigned>(bits));
  return text;
}

// Every pattern of each 16-bit dtype (NaNs included) cast to f32 and to the other 16-bit dtype, and
// through f32 back to its own: each result is the conversion functions' value.
TEST(Precision, CastOfEvery16BitPatternMatchesTheConversionFunctions) {
  for (DType from : kLowPrecision) {
    SCOPED_TRACE("from " + std::string(dtype_name(from)));
    const DType other = from == DType::f16 ? DType::bf16 : DType::f16;
    std::vector<std::uint16_t> patterns(0x10000);
    std::vector<std::string> names(patterns.size());
    std::vector<double> as_f32, as_other;
    for (std::uint32_t i = 0; i <= 0xffffU; ++i) {
      patterns[i] = static_cast<std::uint16_t>(i);
      names[i] = std::string(dtype_name(from)) + " " + hex_bits(i);
      const float wide = low_precision_bits_to_f32(patterns[i], from);
      as_f32.push_back(wide);
      as_other.push_back(low_precision_bits_to_f32(f32_to_low_precision_bits(wide, other), other));
    }
    const HostTensor x = HostTensor::from_bits(from, {static_cast<std::int64_t>(patterns.size())}, patterns);
    for (ComputeType compute : kComputeTypes) {
      SCOPED_TRACE(compute_name(compute));
      expect_elements(run_cast(x, DType::f32, compute), DType::f32, as_f32, names);
      expect_elements(run_cast(x, other, compute), other, as_other, names);
      // Through f32 and back is the identity on every pattern but NaN, which stays NaN.
      GraphBuilder b("round_trip");
      TracingScope scope(b);
      b.output("y", cast(cast(b.input("x", x.type), DType::f32), from));
      const HostTensor back = interpret(b.take(), {{"x", x}}, {.compute = compute}).outputs.at("y");
      expect_elements(back, from, as_f32, names);
      if (compute != ComputeType::f32) continue;
      // In f32 mode a 16-bit result is stored as its bits: every non-NaN pattern comes back as it
      // was, a quiet NaN exactly, a signalling one quieted.
      ASSERT_EQ(back.storage(), from == DType::f16 ? HostStorage::f16 : HostStorage::bf16);
      const std::uint32_t exponent = from == DType::f16 ? 0x7c00U : 0x7f80U;
      const std::uint32_t quiet = from == DType::f16 ? 0x200U : 0x40U;
      for (std::uint32_t i = 0; i <= 0xffffU; ++i) {
        const bool signalling_nan = (i & exponent) == exponent && (i & ~exponent & 0x7fffU) != 0 && (i & quiet) == 0;
        ASSERT_EQ(back.bits16_data()[i], signalling_nan ? (i | quiet) : i) << "pattern " << hex_bits(i);
      }
    }
  }
}

// f32 values into f16 and bf16: every rounding boundary of both formats (values, ties, one f32 ulp
// either side) and a fixed-seed sweep of f32 patterns, on both interpreters.
TEST(Precision, CastOfF32ValuesMatchesTheConversionFunctions) {
  std::vector<float> values;
  for (DType dtype : kLowPrecision) {
    for (std::uint32_t bits = 0; bits < 0x7c00U || (dtype == DType::bf16 && bits < 0x7f80U); ++bits) {
      const float v = low_precision_bits_to_f32(static_cast<std::uint16_t>(bits), dtype);
      const float next = low_precision_bits_to_f32(static_cast<std::uint16_t>(bits + 1), dtype);
      for (float point : {v, std::isinf(next) ? v : (v + (next - v) / 2)}) {
        for (float sign : {1.0F, -1.0F}) {
          values.push_back(sign * point);
          values.push_back(std::nextafter(sign * point, std::numeric_limits<float>::infinity()));
          values.push_back(std::nextafter(sign * point, -std::numeric_limits<float>::infinity()));
        }
      }
    }
  }
  values.insert(values.end(), {65519.99F, 65520.0F, -65520.0F, 0x1.ffp127F, std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()});
  std::mt19937 rng(11);
  for (int i = 0; i < (1 << 18); ++i) values.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  std::vector<std::string> names;
  for (float v : values) names.push_back("f32 " + hex_bits(std::bit_cast<std::uint32_t>(v)));
  const HostTensor x = HostTensor::f32({static_cast<std::int64_t>(values.size())}, values);
  for (DType to : kLowPrecision) {
    std::vector<double> want;
    for (float v : values) want.push_back(low_precision_bits_to_f32(f32_to_low_precision_bits(v, to), to));
    for (ComputeType compute : kComputeTypes) {
      SCOPED_TRACE(compute_name(compute));
      expect_elements(run_cast(x, to, compute), to, want, names);
    }
  }
}

// i32 values for the casts from integers: small ones, the f16 overflow edge, ones past 2^24 (where
// f32 rounds) and a fixed-seed sweep of the whole range.
std::vector<std::int32_t> cast_test_ints() {
  std::vector<std::int32_t> ints = {0,     1,      -1,       2047,      2049,    65504,      65519,
                                    65520, -65520, 16777217, -16777217, 1 << 30, 2147483647, -2147483647 - 1};
  std::mt19937 rng(5);
  for (int i = 0; i < 4096; ++i) ints.push_back(static_cast<std::int32_t>(rng()));
  for (int i = -2100; i <= 2100; ++i) ints.push_back(i);
  return ints;
}

// What cast(i32 v, to) holds: one rounding from v's exact value. The oracle keeps f32 values in
// double precision (it never rounds to f32), so its f32 result is v itself.
double cast_of_int(std::int32_t v, DType to, ComputeType compute) {
  if (to == DType::f32 && compute == ComputeType::f64) return static_cast<double>(v);
  return round_to_dtype(static_cast<double>(v), to);
}

// i32 and bool into every float dtype, one rounding from the exact value.
TEST(Precision, CastFromI32AndBoolRoundsOnceFromTheExactValue) {
  const std::vector<std::int32_t> ints = cast_test_ints();
  std::vector<std::string> names;
  for (std::int32_t v : ints) names.push_back("i32 " + std::to_string(v));
  const HostTensor x = HostTensor::i32({static_cast<std::int64_t>(ints.size())}, ints);
  const HostTensor flags = HostTensor::boolean({2}, std::vector<bool>{false, true});
  for (DType to : {DType::f32, DType::f16, DType::bf16}) {
    for (ComputeType compute : kComputeTypes) {
      SCOPED_TRACE(compute_name(compute) + " to " + std::string(dtype_name(to)));
      std::vector<double> want;
      for (std::int32_t v : ints) want.push_back(cast_of_int(v, to, compute));
      expect_elements(run_cast(x, to, compute), to, want, names);
      expect_elements(run_cast(flags, to, compute), to, {0.0, 1.0}, {"false", "true"});
    }
  }
}

// An i32 just above a bf16 tie that f32 would round onto the tie: 2^24 + 2^16 + 1 lies between the
// bf16 neighbours 2^24 and 2^24 + 2^17, nearer the upper one; f32 rounds it to 2^24 + 2^16, the
// tie, which bf16 then rounds to even, 2^24. One rounding gives 2^24 + 2^17.
TEST(Precision, CastFromI32ToBf16DoesNotRoundThroughF32) {
  const std::vector<std::int32_t> ints = {(1 << 24) + (1 << 16) + 1, -((1 << 24) + (1 << 16) + 1),
                                          (1 << 24) + 3 * (1 << 16) - 1, (1 << 24) + (1 << 16)};
  const std::vector<double> want = {0x1.02p24, -0x1.02p24, 0x1.02p24, 0x1p24};
  std::vector<std::string> names;
  for (std::int32_t v : ints) names.push_back("i32 " + std::to_string(v));
  const HostTensor x = HostTensor::i32({static_cast<std::int64_t>(ints.size())}, ints);
  for (ComputeType compute : kComputeTypes) {
    SCOPED_TRACE(compute_name(compute));
    expect_elements(run_cast(x, DType::bf16, compute), DType::bf16, want, names);
  }
}

// The gradient of cast is the cast back: the input's cotangent has the input's dtype and is the
// output's cotangent rounded to it.
TEST(Precision, GradientOfCastIsTheCastBack) {
  GraphBuilder b("net");
  TracingScope scope(b);
  const Tensor x = b.param("x", {DType::f16, {3}});
  const Tensor w = b.param("w", {DType::f32, {3}});
  const Tensor scale = b.input("scale", {DType::f32, {3}});
  // loss = sum(cast(x, f32) * scale) + sum(cast(cast(w, bf16), f32) * scale)
  b.output("loss", sum(cast(x, DType::f32) * scale) + sum(cast(cast(w, DType::bf16), DType::f32) * scale));
  const Graph grad = differentiate(b.take());
  const std::vector<float> scales = {0.1F, -3.3F, 1e-6F};
  const TensorMap feed = {{"x", HostTensor::low_precision(DType::f16, {3}, std::vector<float>{1, 2, 3})},
                          {"w", HostTensor::f32({3}, {1, 2, 3})},
                          {"scale", HostTensor::f32({3}, scales)}};
  for (ComputeType compute : kComputeTypes) {
    SCOPED_TRACE(compute_name(compute));
    const auto out = interpret(grad, feed, {.compute = compute}).outputs;
    const HostTensor& dx = out.at("grad.x");
    const HostTensor& dw = out.at("grad.w");
    ASSERT_EQ(dx.type.to_string(), "f16[3]");
    ASSERT_EQ(dw.type.to_string(), "f32[3]");
    for (std::size_t i = 0; i < 3; ++i) {
      // d/dx: the f32 cotangent scale[i], cast back to f16; d/dw: through bf16, cast back twice.
      EXPECT_EQ(dx.at(i), round_to_dtype(static_cast<double>(scales[i]), DType::f16)) << i;
      EXPECT_EQ(dw.at(i), round_to_dtype(static_cast<double>(scales[i]), DType::bf16)) << i;
    }
  }
  // The rule itself: cast of the cotangent to the input's dtype; nothing for an integer input.
  GraphBuilder g("rule");
  TracingScope rule_scope(g);
  const Tensor h = g.input("h", {DType::bf16, {2}});
  const Tensor y = cast(h, DType::f32);
  const Tensor cot = g.input("g", {DType::f32, {2}});
  const Attrs attrs{{"dtype", DType::f32}};
  const std::vector<Tensor> inputs = {h};
  const auto grads = op_def(op::Cast).grad(GradArgs{inputs, y, cot, attrs});
  ASSERT_EQ(grads.size(), 1U);
  ASSERT_TRUE(grads[0].has_value());
  EXPECT_EQ(grads[0]->type().to_string(), "bf16[2]");
  EXPECT_EQ(g.graph().nodes().back().op, op::Cast);
  const Tensor ints = g.input("i", {DType::i32, {2}});
  const std::vector<Tensor> int_inputs = {ints};
  const auto none = op_def(op::Cast).grad(GradArgs{int_inputs, cast(ints, DType::f32), cot, attrs});
  ASSERT_EQ(none.size(), 1U);
  EXPECT_FALSE(none[0].has_value());
}

TEST(Precision, CastToTheSameDtypeIsTheSameTensorAndNoNode) {
  GraphBuilder b("same");
  TracingScope scope(b);
  for (DType dtype : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::boolean}) {
    const Tensor x = b.input(std::string("x_") + std::string(dtype_name(dtype)), {dtype, {2}});
    const std::size_t nodes = b.graph().nodes().size();
    const Tensor y = cast(x, dtype);
    EXPECT_EQ(y.id(), x.id()) << dtype_name(dtype);
    EXPECT_EQ(b.graph().nodes().size(), nodes) << dtype_name(dtype);
  }
}

TEST(Precision, CastToIntegerOrBoolIsAShapeError) {
  GraphBuilder b("refused");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f16, {2}});
  const std::size_t nodes = b.graph().nodes().size();
  for (DType to : {DType::i32, DType::boolean}) {
    test::expect_shape_error_at([&] { (void)cast(x, to); }, "cast",
                                "casts to a float dtype (f32, f16 or bf16), got " + std::string(dtype_name(to)),
                                "precision_test.cpp");
  }
  EXPECT_EQ(b.graph().nodes().size(), nodes) << "a refused cast left a node";
}

// Float inputs of two dtypes are refused by every float_generic op, naming both dtypes and cast.
TEST(Precision, MixedFloatDtypesAreAShapeErrorNamingBothAndCast) {
  GraphBuilder b("mixed");
  TracingScope scope(b);
  const Tensor h = b.input("h", {DType::f16, {2, 2}});
  const Tensor bh = b.input("bh", {DType::bf16, {2, 2}});
  const Tensor f = b.input("f", {DType::f32, {2, 2}});
  const Tensor c = b.input("c", {DType::boolean, {2, 2}});
  const auto expect_mix = [](const std::function<void()>& trace, std::string_view op, std::string_view first,
                             std::string_view second) {
    const std::string rule =
        "is " + std::string(first) + " but input 1 is " + std::string(second) + "; tensorgrad never promotes";
    test::expect_shape_error_at(trace, op, rule, "precision_test.cpp");
    test::expect_shape_error_at(trace, op, "cast(x, DType::" + std::string(first) + ")", "precision_test.cpp");
  };
  expect_mix([&] { (void)add(h, bh); }, "add", "f16", "bf16");
  expect_mix([&] { (void)(bh * h); }, "mul", "bf16", "f16");
  expect_mix([&] { (void)matmul(f, bh); }, "matmul", "f32", "bf16");
  expect_mix([&] { (void)less(h, f); }, "less", "f16", "f32");
  // where: the condition is bool, the branches are inputs 1 and 2.
  test::expect_shape_error_at([&] { (void)where(c, h, f); }, "where", "input 1 is f16 but input 2 is f32",
                              "precision_test.cpp");
  // The same dtype on both sides is fine, and keeps it.
  EXPECT_EQ(add(h, h).dtype(), DType::f16);
  EXPECT_EQ(matmul(bh, bh).dtype(), DType::bf16);
  EXPECT_EQ(where(c, bh, bh).dtype(), DType::bf16);
  EXPECT_EQ(less(h, h).dtype(), DType::boolean);
}

// ---- registry ----

TEST(PrecisionRegistry, EveryPartIsPresent) {
  for (OpId id : test::expect_family_defs(kFamily, 7, 60)) {
    const OpDef& def = op_def(id);
    SCOPED_TRACE(std::string(def.name));
    EXPECT_EQ(def.dtypes, DTypeRule::explicit_dtypes) << "cast chooses its result dtype itself";
    EXPECT_TRUE(def.differentiable);
  }
}

TEST(PrecisionRegistry, F32RunsMatchTheOracleWithinTheToleranceClass) {
  test::expect_family_runs_match_oracle(kFamily, 7, 40);
}

}  // namespace
}  // namespace tg
