#version 450
// The layout family's strided copy (reshape, permute, swap_axes, broadcast_to, and narrow from the
// structure family): out[i] = in[base + sum_d coord_d(i) * stride_d], where coord_d(i) are i's
// row-major coordinates over the (collapsed) output dims and stride_d is the input's element
// stride along output axis d (0 along broadcast axes). One invocation per output element, so the
// result does not depend on scheduling. Buffers hold 32-bit words (f32 bits, or int32 for i32 and
// bool): the copy is raw, so it serves every dtype bit-exactly.

layout(local_size_x = 256) in;

const uint MAX_RANK = 6;
layout(push_constant) uniform Push {
  uint n;     // output elements
  uint rank;  // axes after collapsing, 0..6 (0: a contiguous copy starting at base)
  uint base;  // input element where output element 0 comes from
  uint pad0;
  uint dims[MAX_RANK];
  uint strides[MAX_RANK];
} pc;

layout(std430, set = 0, binding = 0) readonly buffer In { uint inv[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { uint outv[]; };

void main() {
  const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += step) {
    uint src = pc.base;
    if (pc.rank == 0u) {
      src += i;
    } else {
      uint rest = i;
      for (int d = int(pc.rank) - 1; d >= 0; --d) {
        const uint extent = pc.dims[d];
        const uint q = rest / extent;
        src += (rest - q * extent) * pc.strides[d];
        rest = q;
      }
    }
    if (src < uint(inv.length())) outv[i] = inv[src];
  }
}
