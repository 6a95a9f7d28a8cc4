// The split-precision products of the portable matmul kernels (shaders/matmul.comp,
// matmul_small.comp) under SPLIT_TERMS 6 (MatmulPrecision::split) and 3 (fast): the numerics the
// matrix-unit kernel computes with bf16 parts, run as f32 arithmetic on any device, so both modes
// are tested wherever the portable kernel runs (lavapipe included). docs/vulkan.md, "Matmul
// precision (ieee, split, fast)"; tests/unit/matmul_split_arithmetic_test.cpp has the C++ twin.
//
// Each f32 operand x becomes three bf16 parts, each rounded to nearest even:
//   p0 = bf16(x), p1 = bf16(x - p0), p2 = bf16(x - p0 - p1)
// (the subtractions are exact in f32). Where nearest would take a finite x up to infinity (within
// half a bf16 ulp of FLT_MAX) p0 and p1 are rounded toward zero instead: x - p0 stays finite, and
// so does fast's p0 + p1 (nearest would round p1 of FLT_MAX up to p0's ulp, 2^128 in all). For
// |x| >= 2^-110 the parts are exact, x = p0 + p1 + p2; below, bits under bf16's smallest subnormal
// (2^-133) are rounded away: |x - (p0 + p1 + p2)| <= 2^-134.
// A product a*b is replaced by the part products whose weight is at least 2^-16 of the leading
// one, each exact in f32 (8 x 8 significant bits), the small ones summed first, smallest first:
//   split: t = a1b1 + a2b0 + a0b2 + a1b0 + a0b1,  fast: t = a1b0 + a0b1,
// then a0b0 + t, rounded once to f32 like an fp32 product, and added to the f32 accumulator in
// ascending k as the fp32 path adds a*b. split: |a0b0 + t - a*b| <= 3.04 * 2^-24 |a*b| (3.06 near
// FLT_MAX); fast: <= 3.02 * 2^-16 |a*b|. a0b0 may exceed |a*b| by (1 + 2^-8)^2, so a finite product
// within 2^-7 of FLT_MAX may come out infinite.
// An infinite leading product is taken alone: the small terms of an infinite operand are NaN
// (inf - inf) or inf * 0, where fp32's inf * b is inf. So inf, NaN and inf * 0 come out as the
// fp32 products'. Zeros: the parts of -0 are -0, +0, +0, so a product of zeros may be +0 where
// fp32's is -0; the accumulator starts at +0, so the matmul's result does not change.
// Reads SPLIT_TERMS (matmul_common.glsl); callers branch on SPLIT_TERMS != 0, a specialization
// constant, so the fp32 pipelines compile without any of this. No loops (lavapipe's loop-pass
// bookkeeping, src/vk/kernels/kernels.h, counts the kernels' loops as they were).

#include "low_precision.glsl"

// Whether nearest even would round a finite x up to infinity (|x| in [0x7f7f8000, 0x7f800000)): p0
// and p1 are then taken toward zero, so x - p0 stays finite and p0 + p1 does not reach 2^128.
bool split_near_max(float x) { return (floatBitsToUint(x) & 0x7fffffffu) - 0x7f7f8000u < 0x8000u; }

// x rounded to bf16 (to nearest even, lp_f32_to_bf16_bits, or toward zero), as an f32.
float split_bf16_part(float x, bool toward_zero) {
  const uint bits = floatBitsToUint(x);
  return uintBitsToFloat(toward_zero ? bits & 0xffff0000u : lp_bf16_bits_to_f32_bits(lp_f32_to_bf16_bits(bits)));
}

vec4 split_bf16_part4(vec4 x, bvec4 toward_zero) {
  return vec4(split_bf16_part(x.x, toward_zero.x), split_bf16_part(x.y, toward_zero.y),
              split_bf16_part(x.z, toward_zero.z), split_bf16_part(x.w, toward_zero.w));
}

// The parts of four operands: p0 + p1 + p2 = x (fast leaves p2 zero, unused).
struct SplitParts4 {
  vec4 p0;
  vec4 p1;
  vec4 p2;
};

SplitParts4 split_parts4(vec4 x) {
  const bvec4 near_max = bvec4(split_near_max(x.x), split_near_max(x.y), split_near_max(x.z), split_near_max(x.w));
  SplitParts4 s;
  s.p0 = split_bf16_part4(x, near_max);
  const vec4 r1 = x - s.p0;
  s.p1 = split_bf16_part4(r1, near_max);
  s.p2 = SPLIT_TERMS == 6u ? split_bf16_part4(r1 - s.p1, bvec4(false)) : vec4(0.0);
  return s;
}

// The split (fast) product of one operand a, given as its parts, with four operands b.
vec4 split_products(float a0, float a1, float a2, SplitParts4 b) {
  const vec4 lead = a0 * b.p0;
  vec4 small_terms;
  if (SPLIT_TERMS == 6u) {
    small_terms = a1 * b.p1;
    small_terms += a2 * b.p0;
    small_terms += a0 * b.p2;
    small_terms += a1 * b.p0;
    small_terms += a0 * b.p1;
  } else {
    small_terms = a1 * b.p0;
    small_terms += a0 * b.p1;
  }
  return mix(lead + small_terms, lead, isinf(lead));
}
