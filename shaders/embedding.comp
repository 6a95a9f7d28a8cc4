#version 450
// embedding: out[i * width + c] = table[indices[i] * width + c]; one invocation per output element
// (grid-stride), copying 32-bit words so every bit pattern (NaN payloads, denormals) moves intact.
// A separate grid-stride pass over the indices reports any outside [0, rows) through the
// executor's status word (atomicMin: the first bad flat element); that pass also runs when the
// output is empty (width 0), as the interpreter still checks every index then. A bad index's
// output row is written as zeros, so nothing is read out of bounds.

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint count;  // index elements
  uint rows;   // V, the table's first extent
  uint width;  // D, the table's second extent
} pc;

layout(std430, set = 0, binding = 0) readonly buffer Table { uint table[]; };
layout(std430, set = 0, binding = 1) readonly buffer Indices { int indices[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { uint outv[]; };
layout(std430, set = 0, binding = 3) buffer Status { uint first_bad[]; };

void main() {
  const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  const uint gid = gl_GlobalInvocationID.x;
  for (uint e = gid; e < pc.count; e += step) {
    const int v = indices[e];
    if (v < 0 || uint(v) >= pc.rows) atomicMin(first_bad[0], e);
  }
  const uint n = pc.count * pc.width;  // the output's elements (the host refuses above 2^32-1)
  for (uint f = gid; f < n; f += step) {
    const uint i = f / pc.width;
    const uint c = f - i * pc.width;
    const int v = indices[i];
    outv[f] = (v >= 0 && uint(v) < pc.rows) ? table[uint(v) * pc.width + c] : 0u;
  }
}
