// Ops on f16 and bf16 values on the Vulkan executor, against the interpreter in f32 mode
// (interpret with ComputeType::f32), which computes each op in f32 and rounds its 16-bit result
// once when it stores it. The executor lowers such ops to f32 between casts
// (src/vk/low_precision_lowering.h), so where the f32 kernels give the interpreter's bits (the
// correctly rounded elementwise ops) the 16-bit results are the same bits; elsewhere (reductions,
// matmul, transcendental functions) they differ by f32 rounding noise, which rounding to 16 bits
// hides in almost every element. The conversions themselves are checked in precision_vk_test.cpp.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/ir/low_precision.h"
#include "tensorgrad/vk/executor.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using PrecisionVkOps = testing::SixteenBitVkTest;

// Values of `dtype` (bits or f32) spread over [lo, hi), the same for the same seed.
HostTensor random_values(DType dtype, Shape shape, std::uint32_t seed, float lo = -3.f, float hi = 3.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<std::size_t>(num_elements(shape)));
  for (float& x : v) x = dist(rng);
  if (dtype == DType::f32) return HostTensor::f32(std::move(shape), std::move(v));
  return HostTensor::low_precision(dtype, std::move(shape), v);
}

// The bits of element i as stored (16-bit patterns, f32 words, or i32 and bool as integers).
std::uint32_t stored_bits(const HostTensor& t, std::size_t i) {
  switch (t.storage()) {
    case HostStorage::f16:
    case HostStorage::bf16:
      return t.bits16_data()[i];
    case HostStorage::f32:
      return std::bit_cast<std::uint32_t>(t.f32_data()[i]);
    default:
      return static_cast<std::uint32_t>(t.to_i32()[i]);
  }
}

// Every output of `vk` equal to `oracle`'s bit for bit (any NaN equal to any NaN).
void expect_same_bits(const TensorMap& vk, const TensorMap& oracle, const std::string& what) {
  ASSERT_EQ(vk.size(), oracle.size()) << what;
  for (const auto& [name, want] : oracle) {
    const HostTensor& got = vk.at(name);
    ASSERT_EQ(got.type, want.type) << what << " " << name;
    ASSERT_EQ(got.storage(), want.storage()) << what << " " << name;
    std::size_t bad = 0;
    std::string first;
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (stored_bits(got, i) == stored_bits(want, i) || (std::isnan(got.at(i)) && std::isnan(want.at(i)))) continue;
      if (bad++ == 0) {
        first = "element " + std::to_string(i) + ": " + std::to_string(got.at(i)) + " vs " + std::to_string(want.at(i));
      }
    }
    EXPECT_EQ(bad, 0u) << what << " output " << name << ": " << bad << " of " << want.size()
                       << " elements differ; first " << first;
  }
}

// cast(f16 -> f32), then f32 elementwise ops the fused kernel takes as one dispatch, then cast to
// bf16; and the same arithmetic on the f16 values themselves, each op rounding to f16. All of it
// correctly rounded in f32, so both backends give the same bits.
Graph cast_chain(std::int64_t n) {
  GraphBuilder b("cast_chain");
  const Tensor x = b.input("x", {DType::f16, {n}});
  const Tensor y = b.input("y", {DType::bf16, {n}});
  const Tensor a = cast(x, DType::f32);
  const Tensor c = a * a + cast(y, DType::f32);
  b.output("chain", cast(maximum(c - a, neg(a)), DType::bf16));
  b.output("f16_ops", maximum(x * x - x, abs(x)));
  b.output("wide", c);
  return b.take();
}

// Sizes on both sides of the kernels' launch limits: with 2 workgroups of 256 a cast dispatch
// covers 512 elements in one pass and the fused kernel 2048 (a vec4 each), then loops grid-stride;
// odd sizes leave the fused kernel a tail of n % 4.
TEST_F(PrecisionVkOps, AFusedChainAcrossCastsGivesTheInterpretersBits) {
  for (const std::int64_t n : {1, 3, 5, 511, 512, 513, 2048, 2051, 4100}) {
    const Graph g = cast_chain(n);
    const TensorMap in{{"x", random_values(DType::f16, {n}, 1 + static_cast<std::uint32_t>(n))},
                       {"y", random_values(DType::bf16, {n}, 2 + static_cast<std::uint32_t>(n))}};
    const TensorMap oracle = interpret(g, in, {.compute = ComputeType::f32}).outputs;
    for (const std::uint32_t groups : {0u, 2u}) {
      Program fused(ctx_, g, {.max_workgroups = groups});
      Program unfused(ctx_, g, {.fuse_elementwise = false, .max_workgroups = groups});
      const std::string what = "n = " + std::to_string(n) + ", max_workgroups " + std::to_string(groups);
      expect_same_bits(fused.run(in), oracle, what + " fused");
      expect_same_bits(unfused.run(in), oracle, what + " unfused");
      EXPECT_LT(fused.stats().dispatches, unfused.stats().dispatches) << what << ": the f32 ops between casts fuse";
      Program guarded(ctx_, g, {.guard_bytes = 16, .max_workgroups = groups});
      expect_same_bits(guarded.run(in), oracle, what + " with guards");
      EXPECT_TRUE(guarded.check_guards().empty()) << what << ": " << testing::join_lines(guarded.check_guards());
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx_);
}

// 16-bit params stay on the device as their bits: written, updated by a writeback on every run
// (each update rounded to bf16 as the interpreter rounds it), read back; a device output of f16 is
// fetched as its bits; and no kernel writes past a 16-bit value (guard regions intact; odd sizes
// leave half a word of padding).
TEST_F(PrecisionVkOps, ResidentParamsWritebacksAndDeviceOutputsKeepTheirBits) {
  GraphBuilder b("bf16_step");
  const Tensor w = b.param("w", {DType::bf16, {5}});
  const Tensor x = b.input("x", {DType::bf16, {5}});
  b.output("w.new", w - x * 0.1);
  b.output("h", cast(w * x, DType::f16));
  const Graph g = b.take();
  const HostTensor w0 = random_values(DType::bf16, {5}, 21);
  const HostTensor x0 = random_values(DType::bf16, {5}, 22);
  Program program(
      ctx_, g, {.guard_bytes = 16, .resident_params = true, .writebacks = {{"w.new", "w"}}, .device_outputs = {"h"}});
  program.write_input("w", w0);
  EXPECT_EQ(program.read_input("w").bits16_data()[3], w0.bits16_data()[3]);
  HostTensor w_oracle = w0;
  for (int step = 0; step < 3; ++step) {
    const TensorMap oracle = interpret(g, {{"w", w_oracle}, {"x", x0}}, {.compute = ComputeType::f32}).outputs;
    EXPECT_TRUE(program.run({{"x", x0}}).empty()) << "the writeback source and the device output stay on the device";
    expect_same_bits({{"h", program.read_output("h")}}, {{"h", oracle.at("h")}}, "step " + std::to_string(step));
    w_oracle = oracle.at("w.new");
    expect_same_bits({{"w", program.read_input("w")}}, {{"w", w_oracle}}, "step " + std::to_string(step));
  }
  EXPECT_EQ(program.read_output("h").storage(), HostStorage::f16);
  EXPECT_TRUE(program.check_guards().empty()) << testing::join_lines(program.check_guards());
  EXPECT_NO_VALIDATION_MESSAGES(ctx_);
}

// A 16-bit graph's scalar constants are f32 fills cast to bf16 and back to f32 by the lowering:
// the casts of constants are computed once, when the program is built, like the fills, so each run
// dispatches only the work on x: widen, mul, narrow, widen, add, narrow unfused, and widen, one
// fused dispatch (mul, the rounding to bf16 in a register, add), narrow with fusion.
TEST_F(PrecisionVkOps, CastsOfConstantsAreComputedOnce) {
  GraphBuilder b("bf16_constants");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::bf16, {7}});
  b.output("y", x * 0.3 + 1.7);
  const Graph g = b.take();
  const TensorMap in{{"x", random_values(DType::bf16, {7}, 31)}};
  Program program(ctx_, g);
  const TensorMap oracle = interpret(g, in, {.compute = ComputeType::f32}).outputs;
  expect_same_bits(program.run(in), oracle, "first run");
  expect_same_bits(program.run(in), oracle, "second run");
  EXPECT_EQ(program.stats().constants, 6u) << "two fills, each cast to bf16 and back";
  EXPECT_EQ(program.stats().dispatches, 3u);
  Program unfused(ctx_, g, {.fuse_elementwise = false});
  expect_same_bits(unfused.run(in), oracle, "unfused");
  EXPECT_EQ(unfused.stats().constants, 6u);
  EXPECT_EQ(unfused.stats().dispatches, 6u);
  EXPECT_NO_VALIDATION_MESSAGES(ctx_);
}

// The few ops below in each 16-bit dtype, against the interpreter's f32 mode: within one unit in
// the last place of the dtype at every element, and the same bits in nearly all of them (a
// rounding that differed from the interpreter's, e.g. toward zero or half away from zero, would
// differ in a large share). The lead's property suites sweep every op in each dtype.
TEST_F(PrecisionVkOps, OpsIn16BitDtypesMatchTheInterpreter) {
  for (const DType dtype : {DType::f16, DType::bf16}) {
    GraphBuilder b(std::string("ops_") + std::string(dtype_name(dtype)));
    const Tensor x = b.input("x", {dtype, {48, 40}});
    const Tensor w = b.param("w", {dtype, {40, 24}});
    const Tensor gain = b.param("gain", {dtype, {40}});
    b.output("gelu", gelu(x));
    b.output("sum", sum(x, 1));
    b.output("matmul", matmul(x, w));
    b.output("softmax", softmax(x));
    b.output("layer_norm", layer_norm(x, gain, std::nullopt));
    const Graph g = b.take();
    const TensorMap in{{"x", random_values(dtype, {48, 40}, 11)},
                       {"w", random_values(dtype, {40, 24}, 12, -0.5f, 0.5f)},
                       {"gain", random_values(dtype, {40}, 13, 0.5f, 1.5f)}};
    const TensorMap oracle = interpret(g, in, {.compute = ComputeType::f32}).outputs;
    Program program(ctx_, g);
    const TensorMap got = program.run(in);
    for (const auto& [name, want] : oracle) {
      const HostTensor& out = got.at(name);
      ASSERT_EQ(out.type, want.type) << name;
      ASSERT_EQ(out.storage(), want.storage()) << name;
      std::size_t same = 0;
      for (std::size_t i = 0; i < want.size(); ++i) {
        const double v = out.at(i), o = want.at(i);
        // One ulp of the dtype at o's magnitude (its unit roundoff is half of one), plus the f32
        // rounding noise of sums of 40 terms below 10 (an element near zero after cancellation).
        const double bound = 2 * unit_roundoff(dtype) * std::fabs(o) + 40 * 10 * 0x1p-24;
        EXPECT_LE(std::fabs(v - o), bound) << dtype_name(dtype) << " " << name << "[" << i << "]: " << v << " vs " << o;
        same += stored_bits(out, i) == stored_bits(want, i) ? 1 : 0;
      }
      EXPECT_GE(static_cast<double>(same), 0.95 * static_cast<double>(want.size()))
          << dtype_name(dtype) << " " << name << ": only " << same << " of " << want.size() << " elements bit-equal";
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx_);
}

}  // namespace
}  // namespace tg::vk
