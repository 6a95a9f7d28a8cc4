#version 450
#extension GL_EXT_control_flow_attributes : require
// The second dispatch of a split-K matmul (src/vk/kernels/matmul.cpp), also of sum_to_shape's,
// conv2d's and scatter_add's split sums: the first one wrote `splits` partials of each of n
// outputs into scratch as [splits, n]; this one sums them into the output in ascending split
// order, each output by one invocation, so the bits do not depend on scheduling. fp32
// accumulation, like the partials. The split loop steps UNROLL partials at a time (the same
// additions in the same order): llvmpipe ends an invocation's loops after 65535 passes in total
// (src/vk/kernels/kernels.h), and sum_to_shape adds up to 131072 block partials of one output on
// lavapipe.

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint n;       // outputs
  uint splits;  // partials per output
  uint vec4s;   // 1 when n % 4 == 0: every partial starts on a vec4, so elements move four at a time
} pc;

layout(std430, set = 0, binding = 0) readonly buffer Partials { float partials[]; };
layout(std430, set = 0, binding = 0) readonly buffer Partials4 { vec4 partials4[]; };
layout(std430, set = 0, binding = 1) writeonly buffer C { float c[]; };
layout(std430, set = 0, binding = 1) writeonly buffer C4 { vec4 c4[]; };

const uint UNROLL = 32u;  // = kSplitSumUnroll in src/vk/kernels/matmul.cpp

void main() {
  const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (pc.vec4s != 0u) {
    const uint n4 = pc.n / 4u;
    for (uint i = gl_GlobalInvocationID.x; i < n4; i += step) {
      vec4 total = partials4[i];
      uint s = 1u;
      for (; s + UNROLL <= pc.splits; s += UNROLL) {
        [[unroll]] for (uint j = 0u; j < UNROLL; ++j) total += partials4[(s + j) * n4 + i];
      }
      for (; s < pc.splits; ++s) total += partials4[s * n4 + i];
      c4[i] = total;
    }
    return;
  }
  for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += step) {
    float total = partials[i];
    uint s = 1u;
    for (; s + UNROLL <= pc.splits; s += UNROLL) {
      [[unroll]] for (uint j = 0u; j < UNROLL; ++j) total += partials[(s + j) * pc.n + i];
    }
    for (; s < pc.splits; ++s) total += partials[s * pc.n + i];
    c[i] = total;
  }
}
