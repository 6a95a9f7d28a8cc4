#version 450
// The broadcasting elementwise family: add, sub, mul, div, minimum, maximum, less, greater, equal
// (two inputs) and where (three). One shader for the family, the op chosen by a push constant: the
// branch is uniform across the dispatch, so it costs a few scalar instructions per element, and
// the family needs one pipeline instead of ten. Broadcasting happens here: each input has its own
// strides per output axis (0 along broadcast axes), so no broadcast copy is ever materialized.
// Buffers hold 32-bit words: f32 as float bits, i32 and bool as int32 (where copies words, so it
// serves every dtype).

layout(local_size_x = 256) in;

const uint MAX_RANK = 6;
layout(push_constant) uniform Push {
  uint op;
  uint n;       // output elements
  uint rank;    // axes of the (collapsed) output shape, 0..6
  uint flags;   // bit k: input k is read at the output index (same shape, no broadcast)
  uint shape[MAX_RANK];
  uint stride0[MAX_RANK];
  uint stride1[MAX_RANK];
  uint stride2[MAX_RANK];
} pc;

layout(std430, set = 0, binding = 0) readonly buffer In0 { uint in0[]; };
layout(std430, set = 0, binding = 1) readonly buffer In1 { uint in1[]; };
layout(std430, set = 0, binding = 2) readonly buffer In2 { uint in2[]; };
layout(std430, set = 0, binding = 3) writeonly buffer Out { uint outv[]; };

const uint OP_ADD = 0, OP_SUB = 1, OP_MUL = 2, OP_DIV = 3, OP_MINIMUM = 4, OP_MAXIMUM = 5;
const uint OP_LESS = 6, OP_GREATER = 7, OP_EQUAL = 8, OP_WHERE = 9;

uvec3 source_offsets(uint i) {
  uvec3 off = uvec3(0);
  for (int d = int(pc.rank) - 1; d >= 0; --d) {
    const uint extent = pc.shape[d];
    const uint q = i / extent;
    const uint r = i - q * extent;
    i = q;
    off += r * uvec3(pc.stride0[d], pc.stride1[d], pc.stride2[d]);
  }
  return off;
}

void main() {
  const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += step) {
    uvec3 off = (pc.flags == 7u) ? uvec3(i) : source_offsets(i);
    if ((pc.flags & 1u) != 0u) off.x = i;
    if ((pc.flags & 2u) != 0u) off.y = i;
    if ((pc.flags & 4u) != 0u) off.z = i;
    if (pc.op == OP_WHERE) {
      outv[i] = in0[off.x] != 0u ? in1[off.y] : in2[off.z];
      continue;
    }
    const float a = uintBitsToFloat(in0[off.x]);
    const float b = uintBitsToFloat(in1[off.y]);
    float r = 0.0;
    switch (pc.op) {
      case OP_ADD: r = a + b; break;
      case OP_SUB: r = a - b; break;
      case OP_MUL: r = a * b; break;
      case OP_DIV: r = a / b; break;
      // NaN in b wins, as in the interpreter (and NaN in a stays since no comparison picks b).
      case OP_MINIMUM: r = (b < a || isnan(b)) ? b : a; break;
      case OP_MAXIMUM: r = (b > a || isnan(b)) ? b : a; break;
      case OP_LESS: outv[i] = a < b ? 1u : 0u; continue;
      case OP_GREATER: outv[i] = a > b ? 1u : 0u; continue;
      case OP_EQUAL: outv[i] = a == b ? 1u : 0u; continue;
    }
    outv[i] = floatBitsToUint(r);
  }
}
