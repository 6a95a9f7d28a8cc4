#version 450
#extension GL_GOOGLE_include_directive : require
// The unary elementwise family over contiguous f32 values, the op chosen by a push constant (a
// uniform branch: one pipeline for the family; the codes are ew_codes.glsl's). stop_gradient
// (EW_COPY) copies 32-bit words untouched, so it serves i32 and bool values too (and never flushes
// denormal bit patterns).

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint op;
  uint n;
  float p0;  // the op's real attributes (ew_unary)
  float p1;
} pc;

layout(std430, set = 0, binding = 0) readonly buffer In0 { uint in0[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { uint outv[]; };

#include "elementwise_math.glsl"

void main() {
  const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += step) {
    if (pc.op == EW_COPY) {
      outv[i] = in0[i];
      continue;
    }
    const float r = ew_unary(pc.op, uintBitsToFloat(in0[i]), pc.p0, pc.p1);
    outv[i] = floatBitsToUint(r);
  }
}
