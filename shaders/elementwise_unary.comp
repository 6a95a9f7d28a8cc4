#version 450
// The unary elementwise family over contiguous f32 values, the op chosen by a push constant (a
// uniform branch: one pipeline for the family). stop_gradient copies 32-bit words untouched, so
// it serves i32 and bool values too (and never flushes denormal bit patterns).

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint op;
  uint n;
  float lo;  // clamp
  float hi;
} pc;

layout(std430, set = 0, binding = 0) readonly buffer In0 { uint in0[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { uint outv[]; };

const uint OP_NEG = 0, OP_ABS = 1, OP_SQUARE = 2, OP_SQRT = 3, OP_RSQRT = 4, OP_EXP = 5, OP_LOG = 6;
const uint OP_SIN = 7, OP_COS = 8, OP_TANH = 9, OP_SIGMOID = 10, OP_RELU = 11, OP_GELU = 12;
const uint OP_SILU = 13, OP_CLAMP = 14, OP_COPY = 15;

// exp only sees non-positive arguments: no overflow for large |x|.
float stable_sigmoid(float x) {
  if (x >= 0.0) return 1.0 / (1.0 + exp(-x));
  const float e = exp(x);
  return e / (1.0 + e);
}

// tanh from exp(-2|x|): never inf/inf, and odd by construction. GLSL's tanh may be computed as
// (e^x - e^-x) / (e^x + e^-x), which overflows to NaN for |x| > ~44 on some drivers.
float stable_tanh(float x) {
  const float t = exp(-2.0 * abs(x));
  const float r = (1.0 - t) / (1.0 + t);
  return x < 0.0 ? -r : r;
}

void main() {
  const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += step) {
    if (pc.op == OP_COPY) {
      outv[i] = in0[i];
      continue;
    }
    const float x = uintBitsToFloat(in0[i]);
    float r = x;
    switch (pc.op) {
      case OP_NEG: r = -x; break;
      case OP_ABS: r = abs(x); break;
      case OP_SQUARE: r = x * x; break;
      case OP_SQRT: r = sqrt(x); break;
      case OP_RSQRT: r = 1.0 / sqrt(x); break;
      case OP_EXP: r = exp(x); break;
      case OP_LOG: r = log(x); break;
      case OP_SIN: r = sin(x); break;
      case OP_COS: r = cos(x); break;
      case OP_TANH: r = stable_tanh(x); break;
      case OP_SIGMOID: r = stable_sigmoid(x); break;
      case OP_RELU: r = x < 0.0 ? 0.0 : x; break;  // NaN stays NaN
      case OP_GELU: {
        const float u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
        r = 0.5 * x * (1.0 + stable_tanh(u));
        break;
      }
      case OP_SILU: r = x * stable_sigmoid(x); break;
      case OP_CLAMP: r = x < pc.lo ? pc.lo : (x > pc.hi ? pc.hi : x); break;
    }
    outv[i] = floatBitsToUint(r);
  }
}
