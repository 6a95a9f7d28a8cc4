// Included by elementwise_unary.comp, elementwise_binary.comp and fused_elementwise.comp: the f32
// math of the elementwise families, written once so a fused program computes every element with
// exactly the operations the per-op kernels use.
//
// Every float temporary is `precise` (SPIR-V NoContraction). Without it a compiler may contract
// a * b + c into one fma wherever it sees both, and a fused program shows it far more such pairs
// (across ops) than a per-op kernel (whose operands come from memory): the two would round
// differently. With it each operation rounds on its own, in the written order, in both.
//
// The op codes are the ones the host kernels push (src/vk/kernels/elementwise_*.cpp) and the fusion
// encodes (src/vk/fusion.cpp).

const uint EW_ADD = 0u, EW_SUB = 1u, EW_MUL = 2u, EW_DIV = 3u, EW_MINIMUM = 4u, EW_MAXIMUM = 5u;

const uint EW_NEG = 0u, EW_ABS = 1u, EW_SQUARE = 2u, EW_SQRT = 3u, EW_RSQRT = 4u, EW_EXP = 5u, EW_LOG = 6u;
const uint EW_SIN = 7u, EW_COS = 8u, EW_TANH = 9u, EW_SIGMOID = 10u, EW_RELU = 11u, EW_GELU = 12u;
const uint EW_SILU = 13u, EW_CLAMP = 14u;
// Only the fused kernel uses EW_COPY: a broadcast_to of one element, fused as a copy of its
// (broadcast) input.
const uint EW_COPY = 15u;

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

// The f32 ops of elementwise_binary.comp (the comparisons and where stay there: they are not f32
// results).
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

// The f32 ops of elementwise_unary.comp (its word copy for stop_gradient stays there); lo and hi
// only for clamp.
float ew_unary(uint op, float x, float lo, float hi) {
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
    case EW_CLAMP: r = x < lo ? lo : (x > hi ? hi : x); break;
    case EW_COPY: r = x; break;
  }
  return r;
}
