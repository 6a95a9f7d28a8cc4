// f16 and bf16 on the Vulkan executor: the cast kernel (shaders/cast.comp, low_precision.glsl) must
// round exactly as the host's conversions (tensorgrad/ir/low_precision.h) for every 16-bit pattern
// and at every rounding boundary of f32 and i32 values, and 16-bit values must reach and leave the
// device as their bits. The ops in 16-bit dtypes (lowered to f32 between casts,
// src/vk/low_precision_lowering.h) are checked against the interpreter in
// precision_vk_ops_test.cpp.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/ir/low_precision.h"
#include "tensorgrad/ir/ops/ids/precision.h"
#include "tensorgrad/vk/error.h"
#include "tensorgrad/vk/executor.h"
#include "vk/low_precision_lowering.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

constexpr float kInf = std::numeric_limits<float>::infinity();

bool is_nan16(std::uint16_t bits, DType dtype) { return (bits & 0x7fffU) > (dtype == DType::f16 ? 0x7c00U : 0x7f80U); }

std::string hex(std::uint32_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

// Collects mismatches and reports how many, with the first few.
class Mismatches {
 public:
  void add(const std::string& what) {
    if (count_++ < 8) first_ += "  " + what + "\n";
  }
  std::size_t count() const { return count_; }
  std::string report() const { return std::to_string(count_) + " mismatches, first:\n" + first_; }

 private:
  std::size_t count_ = 0;
  std::string first_;
};

// A NaN result must be NaN; anything else the expected bits exactly.
void expect_bits16(std::span<const std::uint16_t> got, const std::vector<std::uint16_t>& want, DType dtype,
                   const std::vector<std::uint32_t>& inputs, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  Mismatches bad;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const bool ok = is_nan16(want[i], dtype) ? is_nan16(got[i], dtype) : got[i] == want[i];
    if (!ok) bad.add("input " + hex(inputs[i]) + ": got " + hex(got[i]) + ", want " + hex(want[i]));
  }
  EXPECT_EQ(bad.count(), 0u) << what << ": " << bad.report();
}

void expect_bits32(std::span<const float> got, const std::vector<std::uint32_t>& want,
                   const std::vector<std::uint32_t>& inputs, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  Mismatches bad;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto bits = std::bit_cast<std::uint32_t>(got[i]);
    const bool ok = std::isnan(std::bit_cast<float>(want[i])) ? std::isnan(got[i]) : bits == want[i];
    if (!ok) bad.add("input " + hex(inputs[i]) + ": got " + hex(bits) + ", want " + hex(want[i]));
  }
  EXPECT_EQ(bad.count(), 0u) << what << ": " << bad.report();
}

class PrecisionVk : public testing::SixteenBitVkTest {
 protected:
  TensorMap run(const Graph& graph, const TensorMap& inputs, ProgramOptions options = {}) {
    Program program(ctx_, graph, std::move(options));
    return program.run(inputs);
  }
};

// A graph casting input `x` of `from` to each dtype of `to`, one output per dtype, named by it.
Graph casts_of(DType from, std::int64_t n, std::initializer_list<DType> to) {
  GraphBuilder b("casts_from_" + std::string(dtype_name(from)));
  const Tensor x = b.input("x", {from, {n}});
  for (DType d : to) b.output(std::string(dtype_name(d)), cast(x, d));
  return b.take();
}

std::vector<std::uint16_t> every_16bit_pattern() {
  std::vector<std::uint16_t> bits(65536);
  for (std::uint32_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<std::uint16_t>(i);
  return bits;
}

TEST_F(PrecisionVk, EveryF16PatternWidensToF32AndNarrowsToBf16) {
  const std::vector<std::uint16_t> bits = every_16bit_pattern();
  const TensorMap out = run(casts_of(DType::f16, 65536, {DType::f32, DType::bf16}),
                            {{"x", HostTensor::from_bits(DType::f16, {65536}, bits)}});
  std::vector<std::uint32_t> inputs, want32;
  std::vector<std::uint16_t> want16;
  for (std::uint16_t h : bits) {
    inputs.push_back(h);
    want32.push_back(std::bit_cast<std::uint32_t>(f16_bits_to_f32(h)));
    want16.push_back(f32_to_bf16_bits(f16_bits_to_f32(h)));
  }
  expect_bits32(out.at("f32").f32_data(), want32, inputs, "f16 -> f32");
  EXPECT_EQ(out.at("bf16").storage(), HostStorage::bf16);
  expect_bits16(out.at("bf16").bits16_data(), want16, DType::bf16, inputs, "f16 -> bf16");
}

TEST_F(PrecisionVk, EveryBf16PatternWidensToF32AndNarrowsToF16) {
  const std::vector<std::uint16_t> bits = every_16bit_pattern();
  const TensorMap out = run(casts_of(DType::bf16, 65536, {DType::f32, DType::f16}),
                            {{"x", HostTensor::from_bits(DType::bf16, {65536}, bits)}});
  std::vector<std::uint32_t> inputs, want32;
  std::vector<std::uint16_t> want16;
  for (std::uint16_t h : bits) {
    inputs.push_back(h);
    want32.push_back(std::bit_cast<std::uint32_t>(bf16_bits_to_f32(h)));
    want16.push_back(f32_to_f16_bits(bf16_bits_to_f32(h)));
  }
  expect_bits32(out.at("f32").f32_data(), want32, inputs, "bf16 -> f32");
  EXPECT_EQ(out.at("f16").storage(), HostStorage::f16);
  expect_bits16(out.at("f16").bits16_data(), want16, DType::f16, inputs, "bf16 -> f16");
}

// f32 bit patterns at every place where rounding to f16 or bf16 decides something, both signs:
// every f16 value and the midpoint to the next (ties, both even and odd below), each ±1 f32 ulp;
// every bf16 value with its tie and the patterns next to both; the overflow thresholds; f32
// subnormals; infinities and NaNs (quiet, signaling, with payloads).
std::vector<std::uint32_t> rounding_boundaries() {
  std::vector<std::uint32_t> out;
  const auto around = [&](float v) {
    out.push_back(std::bit_cast<std::uint32_t>(v));
    out.push_back(std::bit_cast<std::uint32_t>(std::nextafter(v, kInf)));
    out.push_back(std::bit_cast<std::uint32_t>(std::nextafter(v, -kInf)));
  };
  for (std::uint32_t h = 0; h < 0x7c00U; ++h) {
    const float lo = f16_bits_to_f32(static_cast<std::uint16_t>(h));
    const float hi = f16_bits_to_f32(static_cast<std::uint16_t>(h + 1));
    around(lo);
    if (std::isfinite(hi)) around(static_cast<float>((static_cast<double>(lo) + hi) / 2));  // exact in f32
  }
  for (std::uint32_t b = 0; b < 0x7f80U; ++b) {
    const std::uint32_t w = b << 16;
    for (std::uint32_t low : {0x0U, 0x1U, 0x7fffU, 0x8000U, 0x8001U, 0xffffU}) out.push_back(w | low);
  }
  for (float v : {65504.0f, 65519.0f, 65520.0f, 65536.0f, 0x1.fep127f, 0x1.fefffep127f, 0x1.ff0000p127f,
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::denorm_min(), 0x1p-25f, 0x1p-24f, 0x1.8p-24f, 0x1p-14f}) {
    around(v);
  }
  for (std::uint32_t bits : {0x7f800000U, 0x7fc00000U, 0x7f800001U, 0x7f802000U, 0x7fa00000U, 0x7fffffffU, 0x7fc0ffffU,
                             0x7f8fe000U, 0x00000001U, 0x007fffffU, 0x00400000U}) {
    out.push_back(bits);
  }
  const std::size_t positive = out.size();
  for (std::size_t i = 0; i < positive; ++i) out.push_back(out[i] ^ 0x80000000U);
  return out;
}

TEST_F(PrecisionVk, F32ValuesRoundToNearestEvenAtEveryBoundary) {
  const std::vector<std::uint32_t> inputs = rounding_boundaries();
  const auto n = static_cast<std::int64_t>(inputs.size());
  std::vector<float> values;
  std::vector<std::uint16_t> want_f16, want_bf16;
  for (std::uint32_t bits : inputs) {
    values.push_back(std::bit_cast<float>(bits));
    want_f16.push_back(f32_to_f16_bits(values.back()));
    want_bf16.push_back(f32_to_bf16_bits(values.back()));
  }
  const TensorMap out =
      run(casts_of(DType::f32, n, {DType::f16, DType::bf16}), {{"x", HostTensor::f32({n}, std::move(values))}});
  expect_bits16(out.at("f16").bits16_data(), want_f16, DType::f16, inputs, "f32 -> f16");
  expect_bits16(out.at("bf16").bits16_data(), want_bf16, DType::bf16, inputs, "f32 -> bf16");
}

// i32 values where one rounding and two differ: every integer f16 can overflow at (up to ±70000),
// f32's and bf16's ties past 2^24 and their neighbours, the ends of the range, and random ones.
std::vector<std::int32_t> integer_boundaries() {
  std::vector<std::int32_t> out;
  for (std::int32_t i = -70000; i <= 70000; ++i) out.push_back(i);
  for (int top = 24; top <= 30; ++top) {
    for (int keep : {8, 11, 24}) {
      const std::int64_t half = std::int64_t{1} << (top - keep);  // half a quantum at `keep` bits
      for (std::int64_t m :
           {std::int64_t{1} << (keep - 1), (std::int64_t{1} << (keep - 1)) + 1, (std::int64_t{1} << keep) - 1}) {
        const std::int64_t base = m << (top + 1 - keep);
        for (std::int64_t d : {-half - 1, -half, -half + 1, std::int64_t{-1}, std::int64_t{0}, std::int64_t{1},
                               half - 1, half, half + 1}) {
          const std::int64_t v = base + d;
          if (v <= std::numeric_limits<std::int32_t>::max()) {
            out.push_back(static_cast<std::int32_t>(v));
            out.push_back(static_cast<std::int32_t>(-v));
          }
        }
      }
    }
  }
  out.push_back(std::numeric_limits<std::int32_t>::max());
  out.push_back(std::numeric_limits<std::int32_t>::min());
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::int32_t> any(std::numeric_limits<std::int32_t>::min(),
                                                  std::numeric_limits<std::int32_t>::max());
  for (int k = 0; k < 20000; ++k) out.push_back(any(rng));
  return out;
}

TEST_F(PrecisionVk, IntegersRoundOnceToEachFloatDtype) {
  const std::vector<std::int32_t> ints = integer_boundaries();
  const auto n = static_cast<std::int64_t>(ints.size());
  std::vector<std::uint32_t> inputs, want32;
  std::vector<std::uint16_t> want_f16, want_bf16;
  for (std::int32_t i : ints) {
    inputs.push_back(static_cast<std::uint32_t>(i));
    const auto exact = static_cast<double>(i);
    want32.push_back(std::bit_cast<std::uint32_t>(static_cast<float>(exact)));
    want_f16.push_back(f32_to_f16_bits(static_cast<float>(round_to_dtype(exact, DType::f16))));
    want_bf16.push_back(f32_to_bf16_bits(static_cast<float>(round_to_dtype(exact, DType::bf16))));
  }
  const TensorMap out =
      run(casts_of(DType::i32, n, {DType::f32, DType::f16, DType::bf16}), {{"x", HostTensor::i32({n}, ints)}});
  expect_bits32(out.at("f32").f32_data(), want32, inputs, "i32 -> f32");
  expect_bits16(out.at("f16").bits16_data(), want_f16, DType::f16, inputs, "i32 -> f16");
  expect_bits16(out.at("bf16").bits16_data(), want_bf16, DType::bf16, inputs, "i32 -> bf16");
}

TEST_F(PrecisionVk, BoolsBecomeZeroAndOne) {
  const std::vector<bool> values{false, true, true, false, true};
  const TensorMap out = run(casts_of(DType::boolean, 5, {DType::f32, DType::f16, DType::bf16}),
                            {{"x", HostTensor::boolean({5}, values)}});
  const std::vector<std::uint32_t> inputs{0, 1, 1, 0, 1};
  expect_bits32(out.at("f32").f32_data(), {0, 0x3f800000U, 0x3f800000U, 0, 0x3f800000U}, inputs, "bool -> f32");
  expect_bits16(out.at("f16").bits16_data(), {0, 0x3c00, 0x3c00, 0, 0x3c00}, DType::f16, inputs, "bool -> f16");
  expect_bits16(out.at("bf16").bits16_data(), {0, 0x3f80, 0x3f80, 0, 0x3f80}, DType::bf16, inputs, "bool -> bf16");
}

// A 16-bit input given as wide (f64) values is rounded once, from the double, as the interpreters
// store it: 1 + 2^-11 + 2^-40 is above the f16 tie at 1 + 2^-11 but rounds to it in f32.
TEST_F(PrecisionVk, WideInputsRoundOnceToTheirDtype) {
  const std::vector<double> wide{1.0 + 0x1p-11 + 0x1p-40, 1.0 + 0x1p-8 + 0x1p-40, -3.0e5, 1e-9, 0.1, -2.5};
  const auto n = static_cast<std::int64_t>(wide.size());
  for (DType dtype : {DType::f16, DType::bf16}) {
    const Graph g = casts_of(dtype, n, {DType::f32});
    const TensorMap in{{"x", HostTensor::of({dtype, {n}}, wide)}};
    const TensorMap out = run(g, in);
    const TensorMap oracle = interpret(g, in, {.compute = ComputeType::f32}).outputs;
    for (std::size_t i = 0; i < wide.size(); ++i) {
      const auto want = static_cast<float>(round_to_dtype(wide[i], dtype));
      EXPECT_EQ(std::bit_cast<std::uint32_t>(out.at("f32").f32_data()[i]), std::bit_cast<std::uint32_t>(want))
          << dtype_name(dtype) << " element " << i;
      EXPECT_EQ(out.at("f32").at(i), oracle.at("f32").at(i)) << dtype_name(dtype) << " element " << i;
    }
  }
}

class PrecisionVkDevice : public VkTest {};

// Without storageBuffer16BitAccess a graph with a 16-bit value is refused before anything is
// allocated, with an error naming the feature, the dtype and the value; f32 graphs are not affected.
TEST_F(PrecisionVkDevice, GraphsWith16BitValuesNeed16BitStorage) {
  DeviceInfo without = make_context()->info();
  without.storage_buffer_16bit_access = false;
  const Graph g = casts_of(DType::bf16, 8, {DType::f32});
  try {
    (void)plan_memory(g, without);
    ADD_FAILURE() << "a bf16 graph was planned on a device without 16-bit storage";
  } catch (const LimitError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("storageBuffer16BitAccess"), std::string::npos) << message;
    EXPECT_NE(message.find("bf16"), std::string::npos) << message;
    EXPECT_NE(message.find("input 'x'"), std::string::npos) << message;
  }
  EXPECT_NO_THROW((void)plan_memory(casts_of(DType::i32, 8, {DType::f32}), without));
}

// The lowering leaves an f32 graph as it is; a 16-bit one keeps its interface, and only casts
// touch its 16-bit values.
TEST(PrecisionVkLowering, OnlyCastsTouch16BitValuesAndTheInterfaceStays) {
  GraphBuilder plain("plain");
  const Tensor a = plain.input("a", {DType::f32, {3}});
  plain.output("y", gelu(a) + a);
  EXPECT_EQ(lower_low_precision(plain.graph()), plain.graph());

  GraphBuilder b("mixed");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f16, {2, 3}});
  const Tensor w = b.param("w", {DType::f16, {3, 4}});
  const Tensor y = matmul(gelu(x), w) + full({4}, 0.5, DType::f16);
  b.output("y", y);
  b.output("n", argmax(y, 1));
  b.output("z", cast(y, DType::bf16));
  const Graph lowered = lower_low_precision(b.graph());
  ASSERT_EQ(lowered.inputs().size(), b.graph().inputs().size());
  for (std::size_t i = 0; i < lowered.inputs().size(); ++i) {
    EXPECT_EQ(lowered.inputs()[i].name, b.graph().inputs()[i].name);
    EXPECT_EQ(lowered.inputs()[i].kind, b.graph().inputs()[i].kind);
    EXPECT_EQ(lowered.type(lowered.inputs()[i].value), b.graph().type(b.graph().inputs()[i].value));
  }
  ASSERT_EQ(lowered.outputs().size(), b.graph().outputs().size());
  for (std::size_t i = 0; i < lowered.outputs().size(); ++i) {
    EXPECT_EQ(lowered.outputs()[i].name, b.graph().outputs()[i].name);
    EXPECT_EQ(lowered.type(lowered.outputs()[i].value), b.graph().type(b.graph().outputs()[i].value));
  }
  for (const Node& node : lowered.nodes()) {
    if (node.op == op::Cast) continue;
    EXPECT_FALSE(is_low_precision(lowered.type(node.output).dtype)) << op_name(node.op);
    for (ValueId v : node.inputs) EXPECT_FALSE(is_low_precision(lowered.type(v).dtype)) << op_name(node.op);
  }
}

}  // namespace
}  // namespace tg::vk
