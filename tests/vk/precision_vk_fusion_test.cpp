// Elementwise fusion across casts on Vulkan: a chain of ops on bf16 and f16 values, which the
// executor runs as f32 ops between casts (src/vk/low_precision_lowering.h), becomes one fused
// dispatch between the widening of its inputs and the narrowing of its result, each intermediate
// value rounded to its dtype in a register (src/vk/fusion.cpp, fusable_cast), with the bits of the
// unfused program and of the interpreter in f32 mode.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/vk/executor.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using PrecisionVkFusion = testing::SixteenBitVkTest;

HostTensor values(DType dtype, const Shape& shape, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.f, 2.f);
  std::vector<float> v(static_cast<std::size_t>(num_elements(shape)));
  for (float& x : v) x = dist(rng);
  return HostTensor::low_precision(dtype, shape, v);
}

// (gelu(x) * y + x) * 0.75 - y in `dtype`: five ops, each result stored (rounded) in the dtype.
Graph chain(DType dtype, const Shape& shape) {
  GraphBuilder b("chain");
  TracingScope scope(b);
  const Tensor x = b.input("x", {dtype, shape});
  const Tensor y = b.input("y", {dtype, shape});
  b.output("out", (gelu(x) * y + x) * 0.75 - y);
  return b.take();
}

std::vector<std::uint16_t> bits(const HostTensor& t) { return {t.bits16_data().begin(), t.bits16_data().end()}; }

TEST_F(PrecisionVkFusion, AChainOfSixteenBitOpsIsOneDispatchWithTheSameBits) {
  for (DType dtype : {DType::bf16, DType::f16}) {
    for (std::int64_t n : {std::int64_t{1}, std::int64_t{7}, std::int64_t{4096}, std::int64_t{4099}}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " n=" + std::to_string(n));
      const Shape shape{n};
      const Graph g = chain(dtype, shape);
      const TensorMap inputs{{"x", values(dtype, shape, 1)}, {"y", values(dtype, shape, 2)}};
      Program fused(ctx_, g, {.timestamps = true});
      Program unfused(ctx_, g, {.fuse_elementwise = false});
      const HostTensor a = fused.run(inputs).at("out");
      const HostTensor b = unfused.run(inputs).at("out");
      const HostTensor want = interpret(g, inputs, {.compute = ComputeType::f32}).outputs.at("out");
      ASSERT_EQ(a.type.dtype, dtype);
      EXPECT_EQ(bits(a), bits(b)) << "fusion changed a bit";
      EXPECT_EQ(bits(a), bits(want)) << "the fused chain differs from the interpreter";
      // Unfused: x and y widened, each op between casts (5 ops, 4 narrow/widen pairs in between,
      // the constant's cast folded at build), the result narrowed. Fused: the two widenings, one
      // dispatch for the chain with its roundings in registers, the narrowing.
      EXPECT_GE(unfused.stats().dispatches, 14u);
      std::string names;
      for (const DispatchTiming& t : fused.timings()) names += " " + t.op;
      EXPECT_LE(fused.stats().dispatches, 4u) << "the chain did not fuse across its casts:" << names;
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx_);
}

// A 16-bit value the run needs in memory (read by a later non-elementwise op, or returned) is
// narrowed by the cast kernel, not left in a register: the run ends before its narrowing.
TEST_F(PrecisionVkFusion, SixteenBitValuesReadOutsideTheRunAreStored) {
  const Shape shape{8, 16};
  GraphBuilder b("stored");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::bf16, shape});
  const Tensor h = exp(x) * x;  // bf16, returned and read by the sum
  b.output("h", h);
  b.output("s", sum(h, {1}));
  const Graph g = b.take();
  const TensorMap inputs{{"x", values(DType::bf16, shape, 3)}};
  Program fused(ctx_, g);
  const TensorMap got = fused.run(inputs);
  const TensorMap want = interpret(g, inputs, {.compute = ComputeType::f32}).outputs;
  EXPECT_EQ(bits(got.at("h")), bits(want.at("h")));
  EXPECT_EQ(got.at("s").type.dtype, DType::bf16);
  for (std::size_t i = 0; i < 8; ++i) {
    EXPECT_NEAR(got.at("s").at(i), want.at("s").at(i), std::fabs(want.at("s").at(i)) * 0x1p-7) << i;
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx_);
}

}  // namespace
}  // namespace tg::vk
