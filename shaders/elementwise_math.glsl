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

// exp only sees non-positive arguments: no overflow for large |x|.
float ew_stable_sigmoid(float x) {
  precise float r;
  if (x >= 0.0) {
    precise float e = exp(-x);
    r = 1.0 / (1.0 + e);
  } else {
    precise float e = exp(x);
    r = e / (1.0 + e);
  }
  return r;
}

// tanh from exp(-2|x|): never inf/inf, and odd by construction. GLSL's tanh may be computed as
// (e^x - e^-x) / (e^x + e^-x), which overflows to NaN for |x| > ~44 on some drivers.
float ew_stable_tanh(float x) {
  precise float t = exp(-2.0 * abs(x));
  precise float r = (1.0 - t) / (1.0 + t);
  precise float s = x < 0.0 ? -r : r;
  return s;
}

float ew_gelu(float x) {
  precise float u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
  precise float r = 0.5 * x * (1.0 + ew_stable_tanh(u));
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
    case EW_EXP: r = exp(x); break;
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
