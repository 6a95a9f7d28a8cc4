#version 450
// The structure family's concat and pad. The output is viewed as [outer, total, inner] around the
// op's axis; the axis is cut into segments [lo_k, lo_{k+1}), segment k coming from input k (whose
// axis extent is dims[k]); positions in no segment are zero (pad's border). concat binds its inputs
// to bindings 0..count-1 (at most 8; unused slots repeat input 0), pad one segment. One invocation
// per output element; the copy is of raw 32-bit words, so it serves every dtype bit-exactly.

layout(local_size_x = 256) in;

const uint MAX_INPUTS = 8;
layout(push_constant) uniform Push {
  uint n;      // output elements
  uint inner;  // product of the dims after the axis (>= 1)
  uint total;  // output extent along the axis
  uint count;  // segments, 1..8
  uint lo[MAX_INPUTS + 1];  // segment k covers axis positions [lo[k], lo[k+1]) of the output
  uint dims[MAX_INPUTS];    // input k's extent along the axis
} pc;

layout(std430, set = 0, binding = 0) readonly buffer In0 { uint in0[]; };
layout(std430, set = 0, binding = 1) readonly buffer In1 { uint in1[]; };
layout(std430, set = 0, binding = 2) readonly buffer In2 { uint in2[]; };
layout(std430, set = 0, binding = 3) readonly buffer In3 { uint in3[]; };
layout(std430, set = 0, binding = 4) readonly buffer In4 { uint in4[]; };
layout(std430, set = 0, binding = 5) readonly buffer In5 { uint in5[]; };
layout(std430, set = 0, binding = 6) readonly buffer In6 { uint in6[]; };
layout(std430, set = 0, binding = 7) readonly buffer In7 { uint in7[]; };
layout(std430, set = 0, binding = 8) writeonly buffer Out { uint outv[]; };

uint load(uint k, uint idx) {
  switch (k) {
    case 0u: return idx < uint(in0.length()) ? in0[idx] : 0u;
    case 1u: return idx < uint(in1.length()) ? in1[idx] : 0u;
    case 2u: return idx < uint(in2.length()) ? in2[idx] : 0u;
    case 3u: return idx < uint(in3.length()) ? in3[idx] : 0u;
    case 4u: return idx < uint(in4.length()) ? in4[idx] : 0u;
    case 5u: return idx < uint(in5.length()) ? in5[idx] : 0u;
    case 6u: return idx < uint(in6.length()) ? in6[idx] : 0u;
    default: return idx < uint(in7.length()) ? in7[idx] : 0u;
  }
}

void main() {
  const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += step) {
    const uint row = i / pc.inner;
    const uint j = i - row * pc.inner;
    const uint o = row / pc.total;
    const uint t = row - o * pc.total;
    uint word = 0u;
    for (uint k = 0u; k < pc.count && k < MAX_INPUTS; ++k) {
      if (t >= pc.lo[k] && t < pc.lo[k + 1u]) {
        word = load(k, (o * pc.dims[k] + (t - pc.lo[k])) * pc.inner + j);
        break;
      }
    }
    outv[i] = word;
  }
}
