#pragma once
// Conversions between f32/f64 and the 16-bit float formats, rounded to nearest even. Every backend
// rounds through these (or their GLSL twins in shaders/low_precision.glsl), so "the value stored
// as bf16" means one thing everywhere; tests/unit/low_precision_test.cpp checks them bit by bit.
//
// NaN stays NaN (quiet, sign and the payload's top bits kept); a value at or past the largest
// finite value plus half an ulp becomes infinity; subnormals are kept (no flush to zero).
#include <cstdint>

#include "tensorgrad/ir/dtype.h"

namespace tg {

std::uint16_t f32_to_f16_bits(float value);
std::uint16_t f32_to_bf16_bits(float value);
float f16_bits_to_f32(std::uint16_t bits);   // exact
float bf16_bits_to_f32(std::uint16_t bits);  // exact

// The 16-bit pattern of `value` rounded to f16 or bf16 (dtype must be one of them).
std::uint16_t f32_to_low_precision_bits(float value, DType dtype);
float low_precision_bits_to_f32(std::uint16_t bits, DType dtype);

// `value` rounded once to a float dtype, directly from the given precision (no double rounding
// through f32): the oracle's store. i32 and bool values pass unchanged.
double round_to_dtype(double value, DType dtype);
float round_to_dtype(float value, DType dtype);

}  // namespace tg
