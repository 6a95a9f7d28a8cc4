#version 450
// one_hot: out[i * depth + c] = 1.0 where indices[i] == c, else 0.0; one invocation per output
// element (grid-stride), so a row is written by many invocations and no loop runs over depth.
// An index outside [0, depth) leaves its row all zeros (never an out-of-bounds write) and is
// reported through the executor's status word: atomicMin keeps the first bad flat element.

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint count;  // index elements
  uint depth;
} pc;

layout(std430, set = 0, binding = 0) readonly buffer Indices { int indices[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { float outv[]; };
layout(std430, set = 0, binding = 2) buffer Status { uint first_bad[]; };

void main() {
  const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  const uint gid = gl_GlobalInvocationID.x;
  for (uint e = gid; e < pc.count; e += step) {
    const int v = indices[e];
    if (v < 0 || uint(v) >= pc.depth) atomicMin(first_bad[0], e);
  }
  const uint n = pc.count * pc.depth;  // the host refuses products above 2^32-1
  for (uint f = gid; f < n; f += step) {
    const uint i = f / pc.depth;
    const uint c = f - i * pc.depth;
    const int v = indices[i];
    outv[f] = (v >= 0 && uint(v) == c) ? 1.0 : 0.0;
  }
}
