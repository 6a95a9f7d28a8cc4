#version 450
// The second dispatch of a split-K matmul (src/vk/kernels/matmul.cpp): the first one wrote
// `splits` partial products of C, each over its own consecutive range of K, into scratch as
// [splits, n]; this one sums them into C in ascending split order, each output by one invocation,
// so the bits do not depend on scheduling. fp32 accumulation, like the partials.

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint n;       // elements of C
  uint splits;  // partial products
  uint vec4s;   // 1 when n % 4 == 0: every partial starts on a vec4, so elements move four at a time
} pc;

layout(std430, set = 0, binding = 0) readonly buffer Partials { float partials[]; };
layout(std430, set = 0, binding = 0) readonly buffer Partials4 { vec4 partials4[]; };
layout(std430, set = 0, binding = 1) writeonly buffer C { float c[]; };
layout(std430, set = 0, binding = 1) writeonly buffer C4 { vec4 c4[]; };

void main() {
  const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (pc.vec4s != 0u) {
    const uint n4 = pc.n / 4u;
    for (uint i = gl_GlobalInvocationID.x; i < n4; i += step) {
      vec4 total = partials4[i];
      for (uint s = 1; s < pc.splits; ++s) total += partials4[s * n4 + i];
      c4[i] = total;
    }
    return;
  }
  for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += step) {
    float total = partials[i];
    for (uint s = 1; s < pc.splits; ++s) total += partials[s * pc.n + i];
    c[i] = total;
  }
}
