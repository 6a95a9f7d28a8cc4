// The GLSL twins of src/ir/low_precision.cpp (tensorgrad/ir/low_precision.h): conversions between
// f32 and the 16-bit float formats on bit patterns held in uints, rounded to nearest even in integer
// arithmetic, so every device rounds exactly as the host does (float16_t conversions and
// packHalf2x16 leave the rounding to the driver). NaN stays NaN (quiet, sign and the payload's top
// bits kept); a value at or past the largest finite value plus half an ulp becomes infinity;
// subnormals are kept (no flush to zero). tests/vk/precision_vk_test.cpp checks them bit by bit
// against the host's.

// `magnitude` with its `drop` (>= 1) low bits rounded away, to nearest even: they come back as
// zeros, and the rounding may carry into one more bit (a power of two).
uint lp_round_low_bits(uint magnitude, uint drop) {
  const uint kept = magnitude >> drop;
  const uint rest = magnitude & ((1u << drop) - 1u);
  const uint half_quantum = 1u << (drop - 1u);
  const bool up = rest > half_quantum || (rest == half_quantum && (kept & 1u) != 0u);
  return (kept + (up ? 1u : 0u)) << drop;
}

uint lp_f32_to_bf16_bits(uint bits) {
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (bits >> 16u) | 0x0040u;  // quiet NaN
  // Adding 0x7fff plus the kept part's lowest bit rounds the dropped 16 bits to nearest even; a
  // carry runs into the exponent, which is how the largest values round up to infinity.
  return (bits + 0x7fffu + ((bits >> 16u) & 1u)) >> 16u;
}

uint lp_f32_to_f16_bits(uint bits) {
  const uint sign = (bits >> 16u) & 0x8000u;
  const uint magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u | ((magnitude >> 13u) & 0x3ffu);  // quiet NaN
  // 65520 (the largest f16 plus half an ulp) and everything above round to infinity.
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;
  if (magnitude >= 0x38800000u) {  // f16 normal range, from 2^-14: rebias 127 -> 15, round 13 bits
    const uint rebiased = magnitude - 0x38000000u;
    return sign | ((rebiased + 0xfffu + ((rebiased >> 13u) & 1u)) >> 13u);
  }
  // Below 2^-14: the value in units of the subnormal quantum 2^-24, rounded to an integer. With the
  // implicit bit, magnitude = significand * 2^(exponent - 150), so value * 2^24 = significand >>
  // (126 - exponent); a shift past 24 leaves less than half a quantum (0), as does an f32 subnormal.
  const uint exponent = magnitude >> 23u;
  if (exponent < 102u) return sign;
  const uint significand = (magnitude & 0x7fffffu) | 0x800000u;
  const uint drop = 126u - exponent;  // 14 .. 24
  return sign | (lp_round_low_bits(significand, drop) >> drop);  // 1024: 2^-14 itself, the smallest normal
}

uint lp_bf16_bits_to_f32_bits(uint bits) { return bits << 16u; }  // exact

uint lp_f16_bits_to_f32_bits(uint bits) {  // exact
  const uint sign = (bits & 0x8000u) << 16u;
  const uint exponent = (bits >> 10u) & 0x1fu;
  const uint mantissa = bits & 0x3ffu;
  if (exponent == 0u) {
    if (mantissa == 0u) return sign;
    // mantissa * 2^-24 = 2^(top - 24) * (mantissa / 2^top): normal in f32, exponent field top + 103.
    const uint top = uint(findMSB(mantissa));
    return sign | ((top + 103u) << 23u) | ((mantissa << (23u - top)) & 0x7fffffu);
  }
  if (exponent == 0x1fu) return sign | 0x7f800000u | (mantissa << 13u);  // inf, NaN
  return sign | ((exponent + 112u) << 23u) | (mantissa << 13u);
}

// An int32 as f32 bits, rounded once from the exact integer to `significant_bits` significant bits
// (24: f32 itself; 11: on to f16; 8: on to bf16), so the narrowing after it is exact (or overflows
// to infinity) and the integer is never rounded twice.
uint lp_int_to_f32_bits(int value, uint significant_bits) {
  const uint sign = value < 0 ? 0x80000000u : 0u;
  uint magnitude = value < 0 ? 0u - uint(value) : uint(value);  // 2^31 for INT_MIN
  if (magnitude >= (1u << 24u)) {
    const uint top = uint(findMSB(magnitude));  // 24 .. 31
    magnitude = lp_round_low_bits(magnitude, top + 1u - significant_bits);
  }
  return sign | floatBitsToUint(float(magnitude));  // exact: at most 24 significant bits
}
