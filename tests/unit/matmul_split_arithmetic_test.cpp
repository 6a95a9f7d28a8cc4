// The arithmetic of MatmulPrecision::split and ::fast (shaders/matmul_split.glsl; docs/vulkan.md,
// "Matmul precision (ieee, split, fast)") on the host, from a C++ twin of the shader written here:
// the three bf16 parts of an f32 value and their sum (exact for |x| >= 2^-110, within 2^-134
// below), the error bounds of the six-term (split) and three-term (fast) products, the largest
// finite values (the leading part must not round up to infinity) and inf, NaN and signed zeros.
// tests/vk/matmul_precision_split_test.cpp runs the shader itself against the f64 oracle.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>

namespace tg {
namespace {

constexpr double kU = 0x1p-24;  // f32's unit roundoff
// The bounds of the header comment of shaders/matmul_split.glsl. split: the omitted products
// a1b2 + a2b1 + a2b2 <= (2^-8 2^-16 + 2^-16 2^-8 + 2^-32) |ab| = (2 + 2^-8) u |ab|; the four
// additions of the small terms (each at most (2^-7 + 3 2^-16)(1 + 2^-8) |ab| in magnitude) add at
// most 4 u 2^-6.9 |ab| < 2^-4.9 u |ab|; the final rounding of a0b0 + t adds u (1 + 2^-20) |ab|:
// c = 3 + 2^-8 + 2^-4.9 + 2^-20 < 3.04. Where p0 and p1 are truncated (|x| >= 2^128 - 2^119)
// |p1| < 2^120 <= 2^-8 (1 + 2^-8) |x| and |p2| < 2^112 <= 2^-16 (1 + 2^-8) |x|: c < 3.06. fast: the omitted a1b1 + a0b2
// + a2b0 + a1b2 + a2b1 + a2b2 <= (2^-16 + 2 (1 + 2^-8) 2^-16 + 2^-23) |ab| < 3.01 2^-16 |ab|, plus the two roundings (<
// 2^-23 = 2^-7 2^-16): 3.02.
constexpr double kSplitBound = 3.04 * kU;
constexpr double kSplitBoundTruncated = 3.06 * kU;
constexpr double kFastBound = 3.02 * 0x1p-16;

// split_near_max, and lp_f32_to_bf16_bits (shaders/low_precision.glsl) in split_bf16_part.
bool near_max(float x) { return (std::bit_cast<std::uint32_t>(x) & 0x7fffffffu) - 0x7f7f8000u < 0x8000u; }

float bf16_part(float x, bool toward_zero) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  if (toward_zero) return std::bit_cast<float>(bits & 0xffff0000u);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return std::bit_cast<float>(((bits >> 16) | 0x0040u) << 16);  // quiet NaN
  return std::bit_cast<float>(((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16) << 16);
}

struct Parts {
  float p0 = 0, p1 = 0, p2 = 0;
};

Parts split(float x) {
  Parts s;
  const bool toward_zero = near_max(x);
  s.p0 = bf16_part(x, toward_zero);
  const float r1 = x - s.p0;
  s.p1 = bf16_part(r1, toward_zero);
  s.p2 = bf16_part(r1 - s.p1, false);
  return s;
}

// split_products for one product: terms 6 (split) or 3 (fast), in the shader's order.
float split_product(float a, float b, int terms) {
  const Parts x = split(a);
  const Parts y = split(b);
  const float lead = x.p0 * y.p0;
  float small;
  if (terms == 6) {
    small = x.p1 * y.p1;
    small += x.p2 * y.p0;
    small += x.p0 * y.p2;
    small += x.p1 * y.p0;
    small += x.p0 * y.p1;
  } else {
    small = x.p1 * y.p0;
    small += x.p0 * y.p1;
  }
  return std::isinf(lead) ? lead : lead + small;
}

bool is_bf16(float x) { return (std::bit_cast<std::uint32_t>(x) & 0xffffu) == 0; }

// A random f32 with a uniform exponent in [lo, hi] and random mantissa and sign.
float random_float(std::mt19937& rng, int lo, int hi) {
  std::uniform_int_distribution<std::uint32_t> mantissa(0, (1u << 23) - 1);
  std::uniform_int_distribution<int> exponent(lo, hi);
  const std::uint32_t sign = (rng() & 1u) << 31;
  return std::bit_cast<float>(sign | (static_cast<std::uint32_t>(exponent(rng) + 127) << 23) | mantissa(rng));
}

TEST(MatmulSplitArithmetic, PartsAreBf16AndSumExactlyToNormalValuesDownTo2PowMinus110) {
  std::mt19937 rng(7);
  int checked = 0;
  for (int e = -110; e <= 127; ++e) {
    for (int i = 0; i < 2000; ++i) {
      const float x = random_float(rng, e, e);
      const Parts s = split(x);
      ASSERT_TRUE(is_bf16(s.p0) && is_bf16(s.p1) && is_bf16(s.p2)) << x;
      // The sum in double is exact (the parts' bits lie within 53 of each other).
      ASSERT_EQ(static_cast<double>(s.p0) + s.p1 + s.p2, static_cast<double>(x)) << std::hexfloat << x;
      if ((std::bit_cast<std::uint32_t>(x) & 0x7fffffffu) >= 0x7f7f8000u) continue;  // p0 truncated
      ASSERT_LE(std::fabs(s.p1), 0x1p-8 * std::fabs(x)) << std::hexfloat << x;
      ASSERT_LE(std::fabs(s.p2), 0x1p-16 * std::fabs(x)) << std::hexfloat << x;
      ++checked;
    }
  }
  EXPECT_GT(checked, 237 * 2000);
}

TEST(MatmulSplitArithmetic, BelowTwoPowMinus110TheLowBitsUnderBf16sSmallestSubnormalAreRoundedAway) {
  std::mt19937 rng(8);
  int inexact = 0;
  for (int e = -126; e < -110; ++e) {
    for (int i = 0; i < 2000; ++i) {
      const float x = random_float(rng, e, e);
      const Parts s = split(x);
      const double error = std::fabs(static_cast<double>(s.p0) + s.p1 + s.p2 - x);
      ASSERT_LE(error, 0x1p-134) << std::hexfloat << x;
      if (error > 0) ++inexact;
    }
  }
  // f32 subnormals too (bits from 2^-149).
  for (std::uint32_t bits : {0x00000001u, 0x00012345u, 0x007fffffu}) {
    const float x = std::bit_cast<float>(bits);
    const Parts s = split(x);
    EXPECT_LE(std::fabs(static_cast<double>(s.p0) + s.p1 + s.p2 - x), 0x1p-134) << std::hexfloat << x;
  }
  EXPECT_GT(inexact, 1000) << "the claim that small values lose bits would be vacuous";
}

TEST(MatmulSplitArithmetic, SplitProductIsWithin3Point04UlpsAndFastWithin3Point02Times2PowMinus16) {
  std::mt19937 rng(9);
  double worst_split = 0, worst_fast = 0;
  for (int i = 0; i < 400000; ++i) {
    // Products well inside the normal range, so no part product underflows.
    const float a = random_float(rng, -40, 40);
    const float b = random_float(rng, -40, 40);
    const double exact = static_cast<double>(a) * b;
    const double split_error = std::fabs(split_product(a, b, 6) - exact) / std::fabs(exact);
    const double fast_error = std::fabs(split_product(a, b, 3) - exact) / std::fabs(exact);
    ASSERT_LE(split_error, kSplitBound) << std::hexfloat << a << " * " << b;
    ASSERT_LE(fast_error, kFastBound) << std::hexfloat << a << " * " << b;
    worst_split = std::max(worst_split, split_error);
    worst_fast = std::max(worst_fast, fast_error);
  }
  std::printf("largest relative error of one product: split %.3g u, fast %.3g 2^-16\n", worst_split / kU,
              worst_fast / 0x1p-16);
  // The modes differ: fast is well above fp32's rounding, split close to it.
  EXPECT_GT(worst_fast, 0x1p-18);
  EXPECT_LT(worst_split, 0x1p-21);
}

TEST(MatmulSplitArithmetic, LargestFiniteValuesSplitWithoutOverflow) {
  const float max = std::numeric_limits<float>::max();
  std::mt19937 rng(10);
  for (std::uint32_t bits = 0x7f7f8000u; bits <= 0x7f7fffffu; bits += 0x1fu) {  // past RNE's overflow edge
    for (const float x : {std::bit_cast<float>(bits), -std::bit_cast<float>(bits)}) {
      const Parts s = split(x);
      ASSERT_TRUE(std::isfinite(s.p0) && std::isfinite(s.p1) && std::isfinite(s.p2)) << std::hexfloat << x;
      ASSERT_TRUE(std::isfinite(s.p0 + s.p1)) << "fast's two parts overflow: " << std::hexfloat << x;
      ASSERT_EQ(static_cast<double>(s.p0) + s.p1 + s.p2, static_cast<double>(x)) << std::hexfloat << x;
      for (const float y : {random_float(rng, -20, -2), 1.0f, -1.0f}) {  // finite products
        const double exact = static_cast<double>(x) * y;
        ASSERT_LE(std::fabs(split_product(x, y, 6) - exact), kSplitBoundTruncated * std::fabs(exact))
            << std::hexfloat << x << " * " << y;
        ASSERT_LE(std::fabs(split_product(x, y, 3) - exact), kFastBound * std::fabs(exact))
            << std::hexfloat << x << " * " << y;
      }
    }
  }
  const Parts s = split(max);
  EXPECT_EQ(s.p0, std::bit_cast<float>(0x7f7f0000u));  // toward zero: RNE would give infinity
  EXPECT_EQ(s.p1, std::bit_cast<float>(0x7b7f0000u));  // toward zero: RNE would give 2^120 = ulp(p0)
  EXPECT_EQ(split_product(max, 0.5f, 6), max * 0.5f);
  EXPECT_EQ(split_product(max, 1.0f, 6), max);
  EXPECT_EQ(split_product(-max, 1.0f, 6), -max);
}

TEST(MatmulSplitArithmetic, ProductsWithinTwoPowMinus7OfTheLargestFloatMayOverflow) {
  // The documented limit: the leading product a0 b0 may exceed |ab| by (1 + 2^-8)^2, so a finite
  // product that close to FLT_MAX can come out infinite (fp32 multiply-adds give it finite).
  const float a = std::bit_cast<float>(0x5f7f8000u);  // 2^63 (2 - 2^-8): p0 rounds up to 2^64
  const float b = a;                                  // a b = 2^128 - 2^120 + 2^110, finite; a0 b0 = 2^128
  const double exact = static_cast<double>(a) * b;
  ASSERT_LT(exact, static_cast<double>(std::numeric_limits<float>::max()));
  EXPECT_TRUE(std::isinf(split_product(a, b, 6)));
  EXPECT_GT(exact, static_cast<double>(std::numeric_limits<float>::max()) / ((1 + 0x1p-8) * (1 + 0x1p-8)));
}

TEST(MatmulSplitArithmetic, InfNanAndZerosComeOutAsFp32Products) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int terms : {6, 3}) {
    SCOPED_TRACE(terms);
    // The other operand's low parts are zero (1, 2) or not (1.1): inf * 0 in the small terms.
    for (const float y : {1.0f, 2.0f, 1.1f, -3.3f, 1e30f, 1e-30f}) {
      EXPECT_EQ(split_product(inf, y, terms), inf * y);
      EXPECT_EQ(split_product(y, -inf, terms), y * -inf);
      EXPECT_TRUE(std::isnan(split_product(nan, y, terms)));
      EXPECT_TRUE(std::isnan(split_product(y, nan, terms)));
    }
    EXPECT_EQ(split_product(inf, inf, terms), inf);
    EXPECT_EQ(split_product(-inf, inf, terms), -inf);
    EXPECT_TRUE(std::isnan(split_product(inf, 0.0f, terms)));
    EXPECT_TRUE(std::isnan(split_product(-0.0f, inf, terms)));
    EXPECT_EQ(split_product(0.0f, 3.5f, terms), 0.0f);
    EXPECT_EQ(split_product(-0.0f, 3.5f, terms), 0.0f);  // +0 or -0; the accumulator starts at +0
    EXPECT_FALSE(std::signbit(0.0f + split_product(-0.0f, 3.5f, terms)));
  }
  const Parts z = split(-0.0f);
  EXPECT_TRUE(std::signbit(z.p0));
  EXPECT_EQ(z.p1, 0.0f);
  EXPECT_EQ(z.p2, 0.0f);
}

}  // namespace
}  // namespace tg
