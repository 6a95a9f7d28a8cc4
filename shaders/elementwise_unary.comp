#version 450
#extension GL_GOOGLE_include_directive : require
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

#include "elementwise_math.glsl"

const uint OP_COPY = 15;  // the f32 ops 0..14 are ew_unary's (elementwise_math.glsl)

void main() {
  const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += step) {
    if (pc.op == OP_COPY) {
      outv[i] = in0[i];
      continue;
    }
    const float r = ew_unary(pc.op, uintBitsToFloat(in0[i]), pc.lo, pc.hi);
    outv[i] = floatBitsToUint(r);
  }
}
