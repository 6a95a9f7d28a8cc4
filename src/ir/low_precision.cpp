// Rounding to f16 and bf16 (tensorgrad/ir/low_precision.h).
#include "tensorgrad/ir/low_precision.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace tg {

namespace {

constexpr std::uint32_t kF32AbsMask = 0x7fffffffU;
constexpr std::uint32_t kF32Inf = 0x7f800000U;

// Rounds a finite, nonzero double to `precision` significant bits with exponents down to
// `min_exponent` (below it the quantum stays fixed, giving subnormals), to nearest even; past
// `largest` it becomes infinity. The scaling by powers of two is exact, so the one rounding is
// nearbyint's, which is to nearest even in the default rounding mode.
double round_significand(double value, int precision, int min_exponent, double largest) {
  int exponent = 0;
  std::frexp(value, &exponent);  // value = m * 2^exponent, 0.5 <= |m| < 1
  const int quantum_exponent = std::max(exponent - 1, min_exponent) - (precision - 1);
  const double rounded = std::ldexp(std::nearbyint(std::ldexp(value, -quantum_exponent)), quantum_exponent);
  if (std::fabs(rounded) > largest) return std::copysign(std::numeric_limits<double>::infinity(), value);
  return rounded;
}

}  // namespace

std::uint16_t f32_to_bf16_bits(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & kF32AbsMask) > kF32Inf) return static_cast<std::uint16_t>((bits >> 16) | 0x0040U);  // quiet NaN
  // Adding 0x7fff plus the kept part's lowest bit rounds the dropped 16 bits to nearest even; a
  // carry runs into the exponent, which is how the largest values round up to infinity.
  const std::uint32_t rounded = bits + 0x7fffU + ((bits >> 16) & 1U);
  return static_cast<std::uint16_t>(rounded >> 16);
}

std::uint16_t f32_to_f16_bits(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000U);
  const std::uint32_t magnitude = bits & kF32AbsMask;
  if (magnitude > kF32Inf) {  // NaN: quiet, with the payload's top ten bits
    return static_cast<std::uint16_t>(sign | 0x7e00U | ((magnitude >> 13) & 0x3ffU));
  }
  // 65520 is the largest f16 (65504) plus half an ulp: it and everything above round to infinity
  // (the tie goes to the even neighbour, 2^16, which is out of range).
  if (magnitude >= 0x477ff000U) return static_cast<std::uint16_t>(sign | 0x7c00U);
  if (magnitude >= 0x38800000U) {  // f16 normal range, from 2^-14
    // Rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to nearest even.
    const std::uint32_t rebiased = magnitude - 0x38000000U;
    const std::uint32_t rounded = rebiased + 0xfffU + ((rebiased >> 13) & 1U);
    return static_cast<std::uint16_t>(sign | (rounded >> 13));
  }
  // Below 2^-14: a multiple of the subnormal quantum 2^-24. Scaling by 2^24 is exact and the
  // result is below 2^10, so nearbyint's rounding is the only one; 1024 encodes 2^-14 itself.
  const float scaled = std::bit_cast<float>(magnitude) * 0x1p24F;
  return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(std::nearbyint(scaled)));
}

float bf16_bits_to_f32(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

float f16_bits_to_f32(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000U) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fU;
  const std::uint32_t mantissa = bits & 0x3ffU;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in f32
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24F;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1fU) return std::bit_cast<float>(sign | kF32Inf | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112U) << 23) | (mantissa << 13));
}

std::uint16_t f32_to_low_precision_bits(float value, DType dtype) {
  return dtype == DType::f16 ? f32_to_f16_bits(value) : f32_to_bf16_bits(value);
}

float low_precision_bits_to_f32(std::uint16_t bits, DType dtype) {
  return dtype == DType::f16 ? f16_bits_to_f32(bits) : bf16_bits_to_f32(bits);
}

double round_to_dtype(double value, DType dtype) {
  if (!std::isfinite(value) || value == 0.0) return value;
  switch (dtype) {
    case DType::f32:
      return static_cast<double>(static_cast<float>(value));
    case DType::f16:
      return round_significand(value, 11, -14, 65504.0);
    case DType::bf16:
      return round_significand(value, 8, -126, 0x1.fep127);
    case DType::i32:
    case DType::boolean:
      return value;
  }
  return value;
}

float round_to_dtype(float value, DType dtype) {
  if (!is_low_precision(dtype)) return value;
  return low_precision_bits_to_f32(f32_to_low_precision_bits(value, dtype), dtype);
}

}  // namespace tg
