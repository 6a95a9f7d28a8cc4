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
// `staged` (few outputs of many partials, matmul.cpp's kStagedSum*): a workgroup takes STAGED
// outputs and copies their partials STAGED splits at a time into shared memory with coalesced
// loads, then invocation j < STAGED adds output j's, continuing its running total in split order:
// the same additions, where the plain form's invocations each wait on one load after another.

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint n;       // outputs
  uint splits;  // partials per output
  uint vec4s;   // 1 when n % 4 == 0: every partial starts on a vec4, so elements move four at a time
  uint staged;  // 1: STAGED outputs a workgroup, their partials through shared memory
} pc;

layout(std430, set = 0, binding = 0) readonly buffer Partials { float partials[]; };
layout(std430, set = 0, binding = 0) readonly buffer Partials4 { vec4 partials4[]; };
layout(std430, set = 0, binding = 1) writeonly buffer C { float c[]; };
layout(std430, set = 0, binding = 1) writeonly buffer C4 { vec4 c4[]; };

const uint UNROLL = 32u;  // = kSplitSumUnroll in src/vk/kernels/matmul.cpp
const uint STAGED = 64u;  // = kStagedSumOutputs in src/vk/kernels/matmul.cpp
shared float chunk[STAGED * (STAGED + 1u)];  // [split][output], rows padded: distinct banks per output

void staged_sums() {
  const uint lid = gl_LocalInvocationID.x;
  const uint groups = (pc.n + STAGED - 1u) / STAGED;
  for (uint g = gl_WorkGroupID.x; g < groups; g += gl_NumWorkGroups.x) {
    const uint o0 = g * STAGED;
    float total = 0.0;
    for (uint s0 = 0u; s0 < pc.splits; s0 += STAGED) {
      [[unroll]] for (uint q = 0u; q < STAGED * STAGED / 256u; ++q) {
        const uint e = lid + 256u * q;
        const uint s = s0 + e / STAGED;
        const uint o = o0 + e % STAGED;
        chunk[(e / STAGED) * (STAGED + 1u) + e % STAGED] = s < pc.splits && o < pc.n ? partials[s * pc.n + o] : 0.0;
      }
      barrier();
      if (lid < STAGED) {
        // The first partial starts the total as the plain form's does (not 0.0 + it: -0 stays -0).
        const uint m = min(STAGED, pc.splits - s0);
        uint k = 0u;
        if (s0 == 0u) {
          total = chunk[lid];
          k = 1u;
        }
        for (; k < m; ++k) total += chunk[k * (STAGED + 1u) + lid];
      }
      barrier();  // the next chunk overwrites `chunk`
    }
    if (lid < STAGED && o0 + lid < pc.n) c[o0 + lid] = total;
  }
}

void main() {
  if (pc.staged != 0u) {
    staged_sums();
    return;
  }
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
