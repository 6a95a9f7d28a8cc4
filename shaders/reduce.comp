#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
// The reduce family: sum, mean, max, min over any set of axes and argmax, argmin over one axis,
// the op chosen by a push constant (uniform across the dispatch). No permute is materialized: the
// host merges adjacent axes of the same kind (kept or reduced) and passes, per kind, extents and
// input strides, so an output element's slice is addressed directly.
//
// Three modes, fixed per launch by the host, all deterministic (no atomics, fixed combine order):
//   mode 0: one workgroup per output element. Invocation l folds reduced indices l, l+256, ...
//           in increasing order in fp32, then a fixed-shape shared-memory tree (128, 64, ..., 1)
//           combines the 256 partials; the result never depends on subgroup size or scheduling.
//           Workgroups loop grid-stride over output elements (rows > 65535).
//   mode 1: one invocation per output element, folding its slice sequentially in index order
//           (short reductions, where a workgroup per element would leave most lanes idle).
//   mode 2: SEG (32) invocations per output element, WG / SEG elements per workgroup: lane l folds
//           indices l, l+32, ... in increasing order, then a fixed-shape tree (16, 8, ..., 1)
//           within the segment. For many medium reductions (LayerNorm's row means, softmax's
//           backward row sums: 32 < count <= 1024), where mode 0 spends 8 barriers of a whole
//           workgroup on every element (11-32 us for 4096-16384 rows of 128 on an H200).
// Max/min propagate NaN; argmax/argmin return the first index of the extremum, the first NaN
// winning over everything (as the interpreter and np.argmax). Output words: f32 bits or int32.
// Rows longer than the host's kChunkLength, when few or very long, go to reduce_split.comp
// instead (chunks of a row over several workgroups, then their combine), so mode 0's loop stays
// short: llvmpipe ends an invocation's loops after 65535 passes (src/vk/kernels/kernels.h). For
// the same reason the offset arithmetic below is unrolled over the 6 axis slots: a loop there
// would cost a pass per folded term even where a branch skips it.

layout(local_size_x = 256) in;
const uint WG = 256;
const uint MAX_RANK = 6;

layout(push_constant) uniform Push {
  uint op;
  uint mode;
  uint rows;       // output elements
  uint count;      // reduced elements per output element
  uint kept_rank;  // merged kept axes (row-major order = output order)
  uint red_rank;   // merged reduced axes
  uint pad0;
  uint pad1;
  uint kept_dims[MAX_RANK];
  uint kept_strides[MAX_RANK];
  uint red_dims[MAX_RANK];
  uint red_strides[MAX_RANK];
} pc;

layout(std430, set = 0, binding = 0) readonly buffer In { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { uint outv[]; };

shared float s_val[WG];
shared uint s_idx[WG];

#include "reduce_fold.glsl"

uint kept_offset(uint o) {
  uint off = 0;
  [[unroll]] for (int d = int(MAX_RANK) - 1; d >= 0; --d) {
    if (d < int(pc.kept_rank)) {
      const uint e = pc.kept_dims[d];
      const uint q = o / e;
      off += (o - q * e) * pc.kept_strides[d];
      o = q;
    }
  }
  return off;
}

uint red_offset(uint r) {
  if (pc.red_rank <= 1u) return r * pc.red_strides[0];
  uint off = 0;
  [[unroll]] for (int d = int(MAX_RANK) - 1; d >= 0; --d) {
    if (d < int(pc.red_rank)) {
      const uint e = pc.red_dims[d];
      const uint q = r / e;
      off += (r - q * e) * pc.red_strides[d];
      r = q;
    }
  }
  return off;
}

void write_result(uint row, float v, uint idx) {
  if (pc.op == OP_ARGMAX || pc.op == OP_ARGMIN) {
    outv[row] = idx;
  } else if (pc.op == OP_MEAN) {
    outv[row] = floatBitsToUint(pc.count == 0u ? uintBitsToFloat(0x7fc00000u) : v / float(pc.count));
  } else {
    outv[row] = floatBitsToUint(v);
  }
}

const uint SEG = 32;

void segmented() {
  const uint lid = gl_LocalInvocationID.x;
  const uint lane = lid % SEG;
  const uint per_group = WG / SEG;
  // The loop bound is uniform across the workgroup (barriers inside); a segment past the last
  // element folds nothing and writes nothing.
  for (uint row0 = gl_WorkGroupID.x * per_group; row0 < pc.rows; row0 += gl_NumWorkGroups.x * per_group) {
    const uint row = row0 + lid / SEG;
    float acc = init_value(pc.op);
    uint idx = NONE;
    if (row < pc.rows) {
      const uint base = kept_offset(row);
      for (uint r = lane; r < pc.count; r += SEG) fold(pc.op, acc, idx, x[base + red_offset(r)], r);
    }
    s_val[lid] = acc;
    s_idx[lid] = idx;
    barrier();
    for (uint s = SEG / 2; s > 0; s >>= 1) {
      if (lane < s) {
        float va = s_val[lid];
        uint ia = s_idx[lid];
        fold(pc.op, va, ia, s_val[lid + s], s_idx[lid + s]);
        s_val[lid] = va;
        s_idx[lid] = ia;
      }
      barrier();
    }
    if (lane == 0u && row < pc.rows) write_result(row, s_val[lid], s_idx[lid]);
    barrier();  // s_val is read before the next elements overwrite it
  }
}

void main() {
  if (pc.mode == 2u) {
    segmented();
    return;
  }
  if (pc.mode == 1u) {
    const uint step = gl_NumWorkGroups.x * WG;
    for (uint row = gl_GlobalInvocationID.x; row < pc.rows; row += step) {
      const uint base = kept_offset(row);
      float acc = init_value(pc.op);
      uint idx = NONE;
      for (uint r = 0; r < pc.count; ++r) fold(pc.op, acc, idx, x[base + red_offset(r)], r);
      write_result(row, acc, idx);
    }
    return;
  }

  const uint lid = gl_LocalInvocationID.x;
  for (uint row = gl_WorkGroupID.x; row < pc.rows; row += gl_NumWorkGroups.x) {
    const uint base = kept_offset(row);
    float acc = init_value(pc.op);
    uint idx = NONE;
    for (uint r = lid; r < pc.count; r += WG) fold(pc.op, acc, idx, x[base + red_offset(r)], r);
    s_val[lid] = acc;
    s_idx[lid] = idx;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
      if (lid < s) {
        float va = s_val[lid];
        uint ia = s_idx[lid];
        fold(pc.op, va, ia, s_val[lid + s], s_idx[lid + s]);
        s_val[lid] = va;
        s_idx[lid] = ia;
      }
      barrier();
    }
    if (lid == 0u) write_result(row, s_val[0], s_idx[0]);
    barrier();  // s_val[0] is read before the next row overwrites it
  }
}
