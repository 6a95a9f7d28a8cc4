#version 450
// take_along_axis: out[o, k, i] = x[o, indices[o, k, i], i], x viewed as [outer, x_extent, inner]
// and the indices (the output's shape) as [outer, index_extent, inner]. One invocation per output
// element (grid-stride); 32-bit words are copied, so f32, i32 and bool all move bit-exactly.
// An index outside [0, x_extent) is reported through the executor's status word (atomicMin: the
// first bad flat element) and its output element is written as 0 instead of reading out of bounds.

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint count;         // output (= index) elements
  uint x_extent;      // x's extent along the axis
  uint index_extent;  // the indices' extent along the axis
  uint inner;         // product of the extents after the axis
} pc;

layout(std430, set = 0, binding = 0) readonly buffer X { uint x[]; };
layout(std430, set = 0, binding = 1) readonly buffer Indices { int indices[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { uint outv[]; };
layout(std430, set = 0, binding = 3) buffer Status { uint first_bad[]; };

void main() {
  const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  const uint slab = pc.index_extent * pc.inner;  // output elements per outer position
  for (uint f = gl_GlobalInvocationID.x; f < pc.count; f += step) {
    const int k = indices[f];
    if (k < 0 || uint(k) >= pc.x_extent) {
      atomicMin(first_bad[0], f);
      outv[f] = 0u;
      continue;
    }
    const uint o = f / slab;
    const uint i = f % pc.inner;
    outv[f] = x[(o * pc.x_extent + uint(k)) * pc.inner + i];
  }
}
