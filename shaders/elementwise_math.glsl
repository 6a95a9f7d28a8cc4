// Included by elementwise_unary.comp, elementwise_binary.comp and fused_elementwise.comp: the f32
// math of the elementwise families, written once so a fused program computes every element with
// exactly the operations the per-op kernels use.
//
// Every float temporary is `precise` (SPIR-V NoContraction). Without it a compiler may contract
// a * b + c into one fma wherever it sees both, and a fused program shows it far more such pairs
// (across ops) than a per-op kernel (whose operands come from memory): the two would round
// differently. With it each operation rounds on its own, in the written order, in both.
//
// The op codes EW_<OP> (and EW_COPY) come from ew_codes.glsl, generated from ops.def's TG_EW lines
// (cmake/generate_ops.cmake): the host kernels push the same codes (vk/ew_codes.h in
// src/vk/kernels/elementwise_*.cpp) and the fusion encodes them (src/vk/fusion.cpp). Adding an
// elementwise op adds its code there and a case here (tests/unit/op_codes_test.cpp checks both).
// The codes of the two families overlap: a case belongs in its family's function only.
#include "ew_codes.glsl"
#include "low_precision.glsl"

// exp within a few ulp for every finite x. The built-in exp may be exp2(x * log2(e)) (llvmpipe's
// is): rounding that product costs about |x| / 2 ulp, 14 ulp at x = 88 on lavapipe (issue 13's
// large-magnitude test). Here x = k ln2 + r with k an integer and |r| <= ln2 / 2 (Cody-Waite: ln2
// split in two, the high part of 15 significant bits so k * LN2_HI is exact for |k| < 512, and
// x - k * LN2_HI exact by Sterbenz), so the built-in only sees |r| <= 0.35; 2^k is applied as two
// exact power-of-two factors, so the one rounding at the end also gives subnormals and inf right.
// Past the clamp bounds exp rounds to inf or 0 anyway; the clamp keeps both factors normal. NaN
// fails both comparisons and stays NaN through r.
float ew_exp(float x) {
  precise float xc = x > 100.0 ? 100.0 : (x < -110.0 ? -110.0 : x);
  precise float k = floor(xc * 1.4426950408889634 + 0.5);
  precise float r = (xc - k * 0.693145751953125) - k * 1.428606765330187e-06;
  precise float e = exp(r);
  const int ki = int(k);
  const int k1 = ki / 2;
  const float p1 = uintBitsToFloat(uint(k1 + 127) << 23);
  const float p2 = uintBitsToFloat(uint(ki - k1 + 127) << 23);
  precise float y = (e * p1) * p2;
  return y;
}

// exp only sees non-positive arguments: no overflow for large |x|.
float ew_stable_sigmoid(float x) {
  precise float r;
  if (x >= 0.0) {
    precise float e = ew_exp(-x);
    r = 1.0 / (1.0 + e);
  } else {
    precise float e = ew_exp(x);
    r = e / (1.0 + e);
  }
  return r;
}

// tanh from exp(-2|x|): never inf/inf, and odd by construction. GLSL's tanh may be computed as
// (e^x - e^-x) / (e^x + e^-x), which overflows to NaN for |x| > ~44 on some drivers. Below
// |x| = 0.25, 1 - exp(-2|x|) cancels (tanh(1e-7) came out 1.2e-7, tanh(1e-30) 3e-8): there the
// Taylor series x - x^3/3 + 2x^5/15 - 17x^7/315 + 62x^9/2835 - 1382x^11/155925, whose next term
// is below 3e-10 relative at 0.25. At 0.25 the exp form amplifies exp's error by t / (1 - t) = 1.5.
float ew_stable_tanh(float x) {
  precise float s;
  if (abs(x) < 0.25) {
    precise float z = x * x;
    precise float p = ((((-0.008863235529902197 * z + 0.021869488536155203) * z - 0.05396825396825397) * z +
                        0.13333333333333333) * z - 0.3333333333333333) * z;
    s = x * (1.0 + p);  // not x + x * p: that turns -0 into +0
  } else {
    precise float t = ew_exp(-2.0 * abs(x));
    precise float r = (1.0 - t) / (1.0 + t);
    s = x < 0.0 ? -r : r;
  }
  return s;
}

// The tanh form x/2 (1 + tanh(u)) as the equal x sigmoid(2u): 1 + tanh(u) cancels for u below
// about -1 (gelu(-9) came out 0 instead of -1.3e-28), sigmoid of a negative argument does not.
float ew_gelu(float x) {
  precise float u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
  precise float r = x * ew_stable_sigmoid(2.0 * u);
  return r;
}

// The f32 ops of the binary family (its comparisons are ew_compare's; where, a word select, stays
// in elementwise_binary.comp and fused_elementwise.comp).
float ew_binary(uint op, float a, float b) {
  precise float r = 0.0;
  switch (op) {
    case EW_ADD: r = a + b; break;
    case EW_SUB: r = a - b; break;
    case EW_MUL: r = a * b; break;
    case EW_DIV: r = a / b; break;
    // NaN in b wins, as in the interpreter (and NaN in a stays since no comparison picks b).
    case EW_MINIMUM: r = (b < a || isnan(b)) ? b : a; break;
    case EW_MAXIMUM: r = (b > a || isnan(b)) ? b : a; break;
  }
  return r;
}

// What ew_compare returns for a code that is not a comparison.
const uint EW_NOT_A_COMPARISON = 2u;

// The comparisons of the binary family (bool results): 1 when it holds, 0 when not (NaN compares
// false), EW_NOT_A_COMPARISON for the family's other codes. The per-op kernel stores the word, the
// fused kernel keeps it as 1.0 / 0.0 for the run's where.
uint ew_compare(uint op, float a, float b) {
  switch (op) {
    case EW_LESS: return a < b ? 1u : 0u;
    case EW_GREATER: return a > b ? 1u : 0u;
    case EW_EQUAL: return a == b ? 1u : 0u;
  }
  return EW_NOT_A_COMPARISON;
}

// The f32 ops of the unary family, and EW_COPY (fusion's broadcast copy; the per-op kernel copies
// stop_gradient's words itself). p0 and p1 are the op's real attributes in its OpDef's order
// (src/vk/kernels/kernels.h, ew_params), 0 for an op without.
float ew_unary(uint op, float x, float p0, float p1) {
  precise float r = x;
  switch (op) {
    // Sign-bit operations, not -x and abs(x): a compiler may move a float negation into the next op
    // (-a * b as a * -b), which keeps every number but not the sign of a NaN.
    case EW_NEG: r = uintBitsToFloat(floatBitsToUint(x) ^ 0x80000000u); break;
    case EW_ABS: r = uintBitsToFloat(floatBitsToUint(x) & 0x7FFFFFFFu); break;
    case EW_SQUARE: r = x * x; break;
    case EW_SQRT: r = sqrt(x); break;
    case EW_RSQRT: r = 1.0 / sqrt(x); break;
    case EW_EXP: r = ew_exp(x); break;
    case EW_LOG: r = log(x); break;
    case EW_SIN: r = sin(x); break;
    case EW_COS: r = cos(x); break;
    case EW_TANH: r = ew_stable_tanh(x); break;
    case EW_SIGMOID: r = ew_stable_sigmoid(x); break;
    case EW_RELU: r = x < 0.0 ? 0.0 : x; break;  // NaN stays NaN
    case EW_GELU: r = ew_gelu(x); break;
    case EW_SILU: r = x * ew_stable_sigmoid(x); break;
    case EW_CLAMP: r = x < p1 ? p1 : (x > p0 ? p0 : x); break;  // p0 = hi, p1 = lo
    case EW_COPY: r = x; break;
    // Fusion's cast of a register to f16 / bf16 (src/vk/fusion.cpp): the cast kernel's rounding
    // (low_precision.glsl), the value kept as the f32 it stands for; the cast back is a copy.
    case EW_ROUND_F16: r = uintBitsToFloat(lp_f16_bits_to_f32_bits(lp_f32_to_f16_bits(floatBitsToUint(x)))); break;
    case EW_ROUND_BF16: r = uintBitsToFloat(lp_bf16_bits_to_f32_bits(lp_f32_to_bf16_bits(floatBitsToUint(x)))); break;
  }
  return r;
}
