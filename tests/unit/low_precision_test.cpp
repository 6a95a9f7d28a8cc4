// The f16 and bf16 conversions (tensorgrad/ir/low_precision.h) bit by bit against a reference
// written here from the formats' definitions alone: each 16-bit pattern's value is decoded with
// ldexp, the positive finite values sorted, and a number rounds to the nearer of its two
// neighbours there (distances compared exactly in long double), a tie to the even pattern. Past the
// largest finite value the next neighbour is the one an unbounded exponent would have (2^16 for f16,
// 2^128 for bf16), which encodes infinity: that is IEEE's overflow rule.
#include "tensorgrad/ir/low_precision.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "support/library.h"

namespace tg {
namespace {

// One 16-bit format: 1 sign bit, `exponent_bits`, `mantissa_bits` (the rest), bias 2^(e-1) - 1.
struct Format {
  DType dtype;
  int exponent_bits;
  int mantissa_bits;

  int bias() const { return (1 << (exponent_bits - 1)) - 1; }
  std::uint16_t exponent_mask() const {
    return static_cast<std::uint16_t>(((1U << exponent_bits) - 1U) << mantissa_bits);
  }
  std::uint16_t mantissa_mask() const { return static_cast<std::uint16_t>((1U << mantissa_bits) - 1U); }
  std::uint16_t infinity() const { return exponent_mask(); }
  std::uint16_t quiet_bit() const { return static_cast<std::uint16_t>(1U << (mantissa_bits - 1)); }
  bool is_nan(std::uint16_t bits) const {
    return (bits & exponent_mask()) == exponent_mask() && (bits & mantissa_mask()) != 0;
  }
};

constexpr Format kF16{DType::f16, 5, 10};
constexpr Format kBf16{DType::bf16, 8, 7};
constexpr Format kFormats[] = {kF16, kBf16};

std::string hex(std::uint16_t bits) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%04x", static_cast<unsigned>(bits));
  return text;
}
std::string hex(float value) {
  char text[12];
  std::snprintf(text, sizeof text, "0x%08x", static_cast<unsigned>(std::bit_cast<std::uint32_t>(value)));
  return text;
}

// The value of a positive pattern (sign bit clear) read from the definition: a subnormal is
// mantissa * 2^(1 - bias - m), a normal (2^m + mantissa) * 2^(exponent - bias - m). The infinity
// pattern decodes as the value an unbounded exponent would give, the overflow neighbour.
double reference_magnitude(std::uint16_t bits, const Format& f) {
  const int exponent = bits >> f.mantissa_bits;
  const int mantissa = bits & f.mantissa_mask();
  if (exponent == 0) return std::ldexp(mantissa, 1 - f.bias() - f.mantissa_bits);
  return std::ldexp((1 << f.mantissa_bits) + mantissa, exponent - f.bias() - f.mantissa_bits);
}

// The positive finite values in pattern order (increasing), then the overflow neighbour.
const std::vector<double>& magnitudes(const Format& f) {
  static const auto build = [](const Format& format) {
    std::vector<double> values;
    for (std::uint32_t bits = 0; bits <= format.infinity(); ++bits) {
      values.push_back(reference_magnitude(static_cast<std::uint16_t>(bits), format));
    }
    return values;
  };
  static const std::vector<double> f16 = build(kF16);
  static const std::vector<double> bf16 = build(kBf16);
  return f.dtype == DType::f16 ? f16 : bf16;
}

// The correctly rounded pattern of a non-NaN number (infinity included), to nearest, ties to even.
std::uint16_t reference_bits(long double value, const Format& f) {
  const auto sign = static_cast<std::uint16_t>(std::signbit(value) ? 0x8000U : 0U);
  const long double magnitude = std::fabs(value);
  const std::vector<double>& table = magnitudes(f);
  if (magnitude >= table.back()) return sign | f.infinity();
  // below: the largest value <= magnitude; above: the next one.
  const auto above = std::upper_bound(table.begin(), table.end(), magnitude,
                                      [](long double m, double v) { return m < static_cast<long double>(v); });
  const auto below_index = static_cast<std::uint16_t>(above - table.begin() - 1);
  const auto above_index = static_cast<std::uint16_t>(below_index + 1);
  const long double to_below = magnitude - table[below_index];
  const long double to_above = table[above_index] - magnitude;
  std::uint16_t chosen = below_index;
  if (to_above < to_below || (to_above == to_below && (above_index & 1U) == 0)) chosen = above_index;
  return sign | chosen;
}

// The reference for a float input: NaN becomes a quiet NaN with the sign and the payload's top
// mantissa bits (the f32 mantissa's highest m bits, quiet bit forced on).
std::uint16_t reference_from_f32(float value, const Format& f) {
  if (!std::isnan(value)) return reference_bits(value, f);
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000U);
  const auto payload = static_cast<std::uint16_t>((bits >> (23 - f.mantissa_bits)) & f.mantissa_mask());
  return sign | f.exponent_mask() | f.quiet_bit() | payload;
}

std::uint16_t convert(float value, const Format& f) {
  return f.dtype == DType::f16 ? f32_to_f16_bits(value) : f32_to_bf16_bits(value);
}
float widen(std::uint16_t bits, const Format& f) {
  return f.dtype == DType::f16 ? f16_bits_to_f32(bits) : bf16_bits_to_f32(bits);
}

// Counts and reports (up to a few) mismatches of the f32 -> 16-bit conversion with the reference.
class ConversionChecker {
 public:
  explicit ConversionChecker(const Format& f) : format_(f) {}
  void check(float value) {
    const std::uint16_t got = convert(value, format_);
    const std::uint16_t want = reference_from_f32(value, format_);
    if (got == want) return;
    if (++mismatches_ <= 10) {
      ADD_FAILURE() << dtype_name(format_.dtype) << " of f32 " << hex(value) << " (" << std::hexfloat << value
                    << std::defaultfloat << "): got " << hex(got) << ", the reference " << hex(want);
    }
  }
  int mismatches() const { return mismatches_; }

 private:
  Format format_;
  int mismatches_ = 0;
};

TEST(LowPrecision, EveryPatternWidensToItsValueExactly) {
  for (const Format& f : kFormats) {
    SCOPED_TRACE(std::string(dtype_name(f.dtype)));
    int mismatches = 0;
    for (std::uint32_t i = 0; i <= 0xffffU; ++i) {
      const auto bits = static_cast<std::uint16_t>(i);
      const float got = widen(bits, f);
      const bool negative = (bits & 0x8000U) != 0;
      const auto magnitude_bits = static_cast<std::uint16_t>(bits & 0x7fffU);
      bool ok = false;
      if (f.is_nan(bits)) {
        // NaN: the sign and every mantissa bit carried into the top of the f32 mantissa.
        const std::uint32_t wide = std::bit_cast<std::uint32_t>(got);
        ok = std::isnan(got) && std::signbit(got) == negative &&
             ((wide >> (23 - f.mantissa_bits)) & f.mantissa_mask()) == (bits & f.mantissa_mask()) &&
             (wide & ((1U << (23 - f.mantissa_bits)) - 1U)) == 0;
      } else if (magnitude_bits == f.infinity()) {
        ok = std::isinf(got) && std::signbit(got) == negative;
      } else {
        const double want = reference_magnitude(magnitude_bits, f);
        ok = std::fabs(static_cast<double>(got)) == want && std::signbit(got) == negative;
      }
      if (!ok && ++mismatches <= 10) {
        ADD_FAILURE() << "pattern " << hex(bits) << " widened to " << std::hexfloat << got;
      }
    }
    EXPECT_EQ(mismatches, 0);
  }
}

TEST(LowPrecision, EveryPatternSurvivesTheRoundTripThroughF32) {
  for (const Format& f : kFormats) {
    SCOPED_TRACE(std::string(dtype_name(f.dtype)));
    int mismatches = 0;
    for (std::uint32_t i = 0; i <= 0xffffU; ++i) {
      const auto bits = static_cast<std::uint16_t>(i);
      const std::uint16_t back = convert(widen(bits, f), f);
      // A quiet NaN comes back as it was; a signalling one comes back quieted, nothing else changed.
      const auto want = static_cast<std::uint16_t>(f.is_nan(bits) ? bits | f.quiet_bit() : bits);
      if (back != want && ++mismatches <= 10) {
        ADD_FAILURE() << "pattern " << hex(bits) << " came back as " << hex(back) << ", expected " << hex(want);
      }
      if (!f.is_nan(bits)) {
        EXPECT_EQ(round_to_dtype(widen(bits, f), f.dtype), widen(bits, f)) << hex(bits);
      }
    }
    EXPECT_EQ(mismatches, 0);
  }
}

// Every rounding boundary of the 16-bit format as f32 numbers: each representable value and each
// midpoint between neighbours (an exact tie: f32 holds both formats' midpoints), one f32 ulp either
// side of each, both signs; the overflow neighbour's midpoint is the overflow threshold.
TEST(LowPrecision, EveryRoundingBoundaryAndTieMatchesTheReference) {
  for (const Format& f : kFormats) {
    SCOPED_TRACE(std::string(dtype_name(f.dtype)));
    ConversionChecker checker(f);
    const std::vector<double>& table = magnitudes(f);
    int ties = 0;
    for (std::size_t i = 0; i + 1 < table.size(); ++i) {
      const double midpoint = (table[i] + table[i + 1]) / 2;
      const auto tie = static_cast<float>(midpoint);
      ASSERT_EQ(static_cast<double>(tie), midpoint) << "the midpoint must be an f32 number";
      ++ties;
      for (const float point : {static_cast<float>(table[i]), tie}) {
        for (const float sign : {1.0F, -1.0F}) {
          const float x = sign * point;
          checker.check(x);
          checker.check(std::nextafter(x, std::numeric_limits<float>::infinity()));
          checker.check(std::nextafter(x, -std::numeric_limits<float>::infinity()));
        }
      }
    }
    EXPECT_EQ(ties, f.infinity());
    EXPECT_EQ(checker.mismatches(), 0);
  }
}

// The named cases spelled out (the reference agrees with each, checked above and here).
TEST(LowPrecision, NamedCasesRoundAsIEEESays) {
  const float inf = std::numeric_limits<float>::infinity();
  // Ties go to the even neighbour, both ways: 1 + 2^-11 lies between 1 (even) and 1 + 2^-10 (odd).
  EXPECT_EQ(f32_to_f16_bits(1.0F + 0x1p-11F), 0x3c00);
  EXPECT_EQ(f32_to_f16_bits(1.0F + 3 * 0x1p-11F), 0x3c02);  // between 0x3c01 (odd) and 0x3c02 (even)
  EXPECT_EQ(f32_to_f16_bits(std::nextafter(1.0F + 0x1p-11F, 2.0F)), 0x3c01);
  EXPECT_EQ(f32_to_f16_bits(std::nextafter(1.0F + 3 * 0x1p-11F, 0.0F)), 0x3c01);
  EXPECT_EQ(f32_to_bf16_bits(1.0F + 0x1p-8F), 0x3f80);
  EXPECT_EQ(f32_to_bf16_bits(1.0F + 3 * 0x1p-8F), 0x3f82);
  EXPECT_EQ(f32_to_bf16_bits(std::nextafter(1.0F + 0x1p-8F, 2.0F)), 0x3f81);
  // f16 subnormals: the smallest is 2^-24; half of it is a tie that goes to 0 (even), anything
  // above half rounds up; 1.5 quanta is a tie that goes to 2 (even).
  EXPECT_EQ(f32_to_f16_bits(0x1p-24F), 0x0001);
  EXPECT_EQ(f32_to_f16_bits(0x1p-25F), 0x0000);
  EXPECT_EQ(f32_to_f16_bits(-0x1p-25F), 0x8000);
  EXPECT_EQ(f32_to_f16_bits(std::nextafter(0x1p-25F, 1.0F)), 0x0001);
  EXPECT_EQ(f32_to_f16_bits(3 * 0x1p-25F), 0x0002);
  EXPECT_EQ(f32_to_f16_bits(std::nextafter(0x1p-14F, 0.0F)), 0x0400);  // rounds up to the smallest normal
  EXPECT_EQ(f32_to_f16_bits(0x3ffp-24F), 0x03ff);                      // the largest subnormal
  EXPECT_EQ(f32_to_bf16_bits(0x1p-133F), 0x0001);
  EXPECT_EQ(f32_to_bf16_bits(0x1p-134F), 0x0000);
  EXPECT_EQ(f32_to_bf16_bits(std::nextafter(0x1p-134F, 1.0F)), 0x0001);
  // f16 overflow: 65504 is the largest; up to 65520 (exclusive) rounds to it, 65520 is the tie with
  // 2^16 (even), which is out of range: infinity.
  EXPECT_EQ(f32_to_f16_bits(65504.0F), 0x7bff);
  EXPECT_EQ(f32_to_f16_bits(65519.99F), 0x7bff);
  EXPECT_EQ(f32_to_f16_bits(std::nextafter(65520.0F, 0.0F)), 0x7bff);
  EXPECT_EQ(f32_to_f16_bits(65520.0F), 0x7c00);
  EXPECT_EQ(f32_to_f16_bits(-65520.0F), 0xfc00);
  EXPECT_EQ(f32_to_f16_bits(1e10F), 0x7c00);
  // bf16 overflow: the largest is 0x1.fep127 (0x7f7f); 0x1.ffp127 is the tie with 2^128: infinity.
  EXPECT_EQ(f32_to_bf16_bits(0x1.fep127F), 0x7f7f);
  EXPECT_EQ(f32_to_bf16_bits(std::nextafter(0x1.ffp127F, 0.0F)), 0x7f7f);
  EXPECT_EQ(f32_to_bf16_bits(0x1.ffp127F), 0x7f80);
  EXPECT_EQ(f32_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(f32_to_bf16_bits(-std::numeric_limits<float>::max()), 0xff80);
  // Infinities, signed zeros and NaN (quiet, sign kept).
  EXPECT_EQ(f32_to_f16_bits(inf), 0x7c00);
  EXPECT_EQ(f32_to_f16_bits(-inf), 0xfc00);
  EXPECT_EQ(f32_to_bf16_bits(inf), 0x7f80);
  EXPECT_EQ(f32_to_bf16_bits(-inf), 0xff80);
  EXPECT_EQ(f32_to_f16_bits(-0.0F), 0x8000);
  EXPECT_EQ(f32_to_bf16_bits(-0.0F), 0x8000);
  EXPECT_EQ(f32_to_f16_bits(0.0F), 0x0000);
  EXPECT_EQ(f32_to_f16_bits(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(f32_to_f16_bits(-std::numeric_limits<float>::denorm_min()), 0x8000);
  const float quiet = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(f32_to_f16_bits(quiet), 0x7e00);
  EXPECT_EQ(f32_to_f16_bits(-quiet), 0xfe00);
  EXPECT_EQ(f32_to_bf16_bits(quiet), 0x7fc0);
  EXPECT_EQ(f32_to_bf16_bits(-quiet), 0xffc0);
  // A signalling NaN whose payload sits only in the dropped low bits still comes out a NaN.
  const float low_payload = std::bit_cast<float>(0x7f800001U);
  EXPECT_EQ(f32_to_f16_bits(low_payload), 0x7e00);
  EXPECT_EQ(f32_to_bf16_bits(low_payload), 0x7fc0);
  EXPECT_EQ(f32_to_bf16_bits(std::bit_cast<float>(0xff800001U)), 0xffc0);
}

// 2^22 f32 patterns drawn uniformly from all 2^32 (every exponent, NaNs included), per format.
TEST(LowPrecision, RandomF32PatternsMatchTheReference) {
  for (const Format& f : kFormats) {
    SCOPED_TRACE(std::string(dtype_name(f.dtype)));
    ConversionChecker checker(f);
    std::mt19937 rng(20261128);
    for (int i = 0; i < (1 << 22); ++i) checker.check(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
    EXPECT_EQ(checker.mismatches(), 0);
  }
}

// The f32 patterns whose magnitude lies in the format's range, so every draw meets a real rounding
// decision (a uniform draw over all 2^32 mostly lands far outside f16's range).
TEST(LowPrecision, RandomF32ValuesInRangeMatchTheReference) {
  for (const Format& f : kFormats) {
    SCOPED_TRACE(std::string(dtype_name(f.dtype)));
    ConversionChecker checker(f);
    const std::uint32_t largest = std::bit_cast<std::uint32_t>(static_cast<float>(magnitudes(f).back()));
    std::mt19937 rng(7);
    std::uniform_int_distribution<std::uint32_t> magnitude(0, largest);
    for (int i = 0; i < (1 << 22); ++i) {
      const std::uint32_t sign = (i & 1) ? 0x80000000U : 0U;
      checker.check(std::bit_cast<float>(sign | magnitude(rng)));
    }
    EXPECT_EQ(checker.mismatches(), 0);
  }
}

// round_to_dtype(double) is one rounding straight from the double. Rounding through f32 first would
// differ where the double lies within half an f32 ulp of a 16-bit tie: f32 would put it exactly on
// the tie, which then goes to even, while the double is nearer one side.
TEST(LowPrecision, RoundToDtypeFromDoubleRoundsOnce) {
  struct Case {
    double value;
    DType dtype;
    double expected;
  };
  const Case cases[] = {
      // 1 + 2^-8 is the bf16 tie between 1 (even) and 1 + 2^-7; just above it rounds up.
      {1 + 0x1p-8 + 0x1p-40, DType::bf16, 1 + 0x1p-7},
      {1 + 0x1p-8 - 0x1p-40, DType::bf16, 1.0},
      {1 + 0x1p-8, DType::bf16, 1.0},
      // 1 + 3 * 2^-8 is the tie between 1 + 2^-7 (odd) and 1 + 2^-6 (even); just below rounds down.
      {1 + 3 * 0x1p-8 - 0x1p-40, DType::bf16, 1 + 0x1p-7},
      {1 + 3 * 0x1p-8, DType::bf16, 1 + 0x1p-6},
      {-(1 + 0x1p-8 + 0x1p-40), DType::bf16, -(1 + 0x1p-7)},
      {1 + 0x1p-11 + 0x1p-40, DType::f16, 1 + 0x1p-10},
      {1 + 0x1p-11 - 0x1p-40, DType::f16, 1.0},
      {1 + 3 * 0x1p-11 - 0x1p-40, DType::f16, 1 + 0x1p-10},
      // Subnormal ties and just past them.
      {0x1p-25, DType::f16, 0.0},
      {0x1p-25 + 0x1p-60, DType::f16, 0x1p-24},
      {0x1p-134, DType::bf16, 0.0},
      {0x1p-134 + 0x1p-170, DType::bf16, 0x1p-133},
      {1e-300, DType::f16, 0.0},
      // Overflow: below the threshold the largest finite value, at and past it infinity.
      {65520 - 0x1p-30, DType::f16, 65504},
      {65520, DType::f16, INFINITY},
      {-65520, DType::f16, -INFINITY},
      {0x1.ffp127 - 0x1p80, DType::bf16, 0x1.fep127},
      {0x1.ffp127, DType::bf16, INFINITY},
      {1e300, DType::bf16, INFINITY},
      // f32: the ordinary float rounding; i32 and bool pass.
      {1 + 0x1p-30, DType::f32, 1.0},
      {1.5, DType::i32, 1.5},
      {0.5, DType::boolean, 0.5},
  };
  for (const Case& c : cases) {
    const double got = round_to_dtype(c.value, c.dtype);
    EXPECT_EQ(got, c.expected) << std::hexfloat << c.value << " to " << dtype_name(c.dtype) << " gave " << got;
  }
  // The reference agrees with the hand-written bf16 and f16 cases.
  for (const Case& c : cases) {
    if (!is_low_precision(c.dtype)) continue;
    const Format& f = c.dtype == DType::f16 ? kF16 : kBf16;
    const std::uint16_t bits = reference_bits(c.value, f);
    const double value = (bits & 0x7fffU) == f.infinity() ? INFINITY : reference_magnitude(bits & 0x7fffU, f);
    EXPECT_EQ((bits & 0x8000U) ? -value : value, c.expected) << std::hexfloat << c.value;
  }
  EXPECT_EQ(std::signbit(round_to_dtype(-0.0, DType::f16)), true);
  EXPECT_EQ(std::signbit(round_to_dtype(-1e-300, DType::bf16)), true);
  EXPECT_TRUE(std::isnan(round_to_dtype(std::nan(""), DType::f16)));
  EXPECT_EQ(round_to_dtype(-INFINITY, DType::bf16), -INFINITY);
}

// Random doubles near every kind of boundary: a random pattern's value or a midpoint, moved by a
// random amount far below an f32 ulp (where rounding through f32 would lose it) or up to one 16-bit
// ulp, against the reference computed from the double itself.
TEST(LowPrecision, RoundToDtypeFromRandomDoublesMatchesTheReference) {
  for (const Format& f : kFormats) {
    SCOPED_TRACE(std::string(dtype_name(f.dtype)));
    const std::vector<double>& table = magnitudes(f);
    std::mt19937_64 rng(42);
    std::uniform_int_distribution<std::size_t> index(0, table.size() - 2);
    std::uniform_real_distribution<double> unit(-1, 1);
    int mismatches = 0;
    for (int i = 0; i < (1 << 20); ++i) {
      const std::size_t k = index(rng);
      const double gap = table[k + 1] - table[k];
      const double base = (i & 2) ? (table[k] + table[k + 1]) / 2 : table[k];
      const double offset = (i & 4) ? unit(rng) * gap * 0x1p-30 : unit(rng) * gap;
      const double value = ((i & 1) ? -1 : 1) * (base + offset);
      const std::uint16_t bits = reference_bits(value, f);
      const double magnitude = (bits & 0x7fffU) == f.infinity() ? INFINITY : reference_magnitude(bits & 0x7fffU, f);
      const double want = (bits & 0x8000U) ? -magnitude : magnitude;
      const double got = round_to_dtype(value, f.dtype);
      if (!(got == want && std::signbit(got) == std::signbit(want)) && ++mismatches <= 10) {
        ADD_FAILURE() << std::hexfloat << value << " rounded to " << got << ", the reference " << want;
      }
    }
    EXPECT_EQ(mismatches, 0);
  }
}

// The float overload and the dispatching helpers are the bit functions composed.
TEST(LowPrecision, FloatOverloadAndDispatchersAgreeWithTheBitFunctions) {
  std::mt19937 rng(3);
  for (int i = 0; i < (1 << 16); ++i) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
    if (std::isnan(x)) continue;
    EXPECT_EQ(f32_to_low_precision_bits(x, DType::f16), f32_to_f16_bits(x));
    EXPECT_EQ(f32_to_low_precision_bits(x, DType::bf16), f32_to_bf16_bits(x));
    const float h = round_to_dtype(x, DType::f16);
    const float b = round_to_dtype(x, DType::bf16);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(h), std::bit_cast<std::uint32_t>(f16_bits_to_f32(f32_to_f16_bits(x))));
    EXPECT_EQ(std::bit_cast<std::uint32_t>(b), std::bit_cast<std::uint32_t>(bf16_bits_to_f32(f32_to_bf16_bits(x))));
    // From a double holding the float exactly, one rounding gives the same value.
    EXPECT_EQ(round_to_dtype(static_cast<double>(x), DType::f16), static_cast<double>(h));
    EXPECT_EQ(round_to_dtype(static_cast<double>(x), DType::bf16), static_cast<double>(b));
    EXPECT_EQ(std::bit_cast<std::uint32_t>(round_to_dtype(x, DType::f32)), std::bit_cast<std::uint32_t>(x));
  }
  EXPECT_EQ(low_precision_bits_to_f32(0x3c00, DType::f16), 1.0F);
  EXPECT_EQ(low_precision_bits_to_f32(0x3f80, DType::bf16), 1.0F);
}

}  // namespace
}  // namespace tg
