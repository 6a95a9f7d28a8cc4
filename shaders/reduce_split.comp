#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
// The reduce family's long rows split across workgroups (src/vk/kernels/reduce.cpp), two
// dispatches, deterministic (no atomics, every fold in a fixed order), fp32:
//   mode 0, chunks: row r's reduced terms are cut into chunks of `span` (the last one shorter), a
//           workgroup per (row, chunk), workgroups looping grid-stride over them. Invocation l
//           folds the chunk's terms l, l+256, ... in increasing order, a fixed-shape shared-memory
//           tree (128, 64, ..., 1) combines the 256 partials, and the chunk's partial value lands
//           in scratch[base + r * parts + c] (for argmax/argmin its index, an index into the whole
//           row, at scratch[base + rows * parts + r * parts + c]). Mean folds a sum.
//   mode 1, combine, one invocation per row: folds the row's `count` partials in ascending chunk
//           order (few partials per row);
//   mode 2, combine, one workgroup per row: invocation l folds partials l, l+256, ... in
//           ascending order, then the same tree (many partials).
// The combines write the result: f32 bits, a mean divided by `span` (the rows' full length), or
// the int32 index. Argmax/argmin keep reduce.comp's rules exactly (first NaN, else the extremum,
// ties to the smaller index: a total order, so chunking cannot change the element picked); max and
// min propagate NaN; a sum or mean adds in a different order than one workgroup per row (within
// the same tolerance class).
// The chunk pass reads `x` through the same merged kept/reduced axes as reduce.comp; the losses'
// sums bind their scratch there (rows 1, one contiguous axis) and put the partials after it
// (`base`). Every invocation loops at most span / 256 times per chunk (32 for the host's chunks of
// 8192) and count / 256 per combined row, far below llvmpipe's 65535 loop passes per invocation.

layout(local_size_x = 256) in;
const uint WG = 256;
const uint MAX_RANK = 6;

layout(push_constant) uniform Push {
  uint op;
  uint mode;       // 0 chunks, 1 combine per invocation, 2 combine per workgroup
  uint rows;       // output elements
  uint count;      // chunks: the rows' reduced length; combines: partials per row
  uint kept_rank;  // chunks: merged kept axes (row-major order = output order)
  uint red_rank;   // chunks: merged reduced axes
  uint span;       // chunks: terms per chunk; combines: the rows' reduced length (mean's divisor)
  uint base;       // the scratch word where the partials start
  uint kept_dims[MAX_RANK];
  uint kept_strides[MAX_RANK];
  uint red_dims[MAX_RANK];
  uint red_strides[MAX_RANK];
} pc;

layout(std430, set = 0, binding = 0) readonly buffer In { float x[]; };
layout(std430, set = 0, binding = 1) buffer Scratch { uint scratch[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { uint outv[]; };

shared float s_val[WG];
shared uint s_idx[WG];

#include "reduce_fold.glsl"

// As in reduce.comp, unrolled (no loop passes per term).
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

// Combines s_val/s_idx[0..WG), just stored by every invocation, into slot 0 with a fixed-shape
// tree; all invocations call it in uniform control flow.
void tree() {
  const uint lid = gl_LocalInvocationID.x;
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
}

void write_result(uint row, float v, uint idx) {
  if (is_arg_op(pc.op)) {
    outv[row] = idx;
  } else if (pc.op == OP_MEAN) {
    outv[row] = floatBitsToUint(pc.span == 0u ? uintBitsToFloat(0x7fc00000u) : v / float(pc.span));
  } else {
    outv[row] = floatBitsToUint(v);
  }
}

void chunks() {
  const uint lid = gl_LocalInvocationID.x;
  const uint parts = (pc.count + pc.span - 1u) / pc.span;
  const uint items = pc.rows * parts;
  for (uint t = gl_WorkGroupID.x; t < items; t += gl_NumWorkGroups.x) {
    const uint row = t / parts;
    const uint first = (t - row * parts) * pc.span;
    const uint end = min(pc.count, first + pc.span);
    const uint at = kept_offset(row);
    float acc = init_value(pc.op);
    uint idx = NONE;
    for (uint r = first + lid; r < end; r += WG) fold(pc.op, acc, idx, x[at + red_offset(r)], r);
    s_val[lid] = acc;
    s_idx[lid] = idx;
    tree();
    if (lid == 0u) {
      scratch[pc.base + t] = floatBitsToUint(s_val[0]);
      if (is_arg_op(pc.op)) scratch[pc.base + items + t] = s_idx[0];
    }
    barrier();  // slot 0 is read before the next chunk overwrites it
  }
}

// Partial p of row `row` (the combines: count = partials per row).
float part_value(uint row, uint p) { return uintBitsToFloat(scratch[pc.base + row * pc.count + p]); }
uint part_index(uint row, uint p) {
  return is_arg_op(pc.op) ? scratch[pc.base + (pc.rows + row) * pc.count + p] : NONE;
}

void main() {
  if (pc.mode == 0u) {
    chunks();
    return;
  }
  if (pc.mode == 1u) {
    const uint step = gl_NumWorkGroups.x * WG;
    for (uint row = gl_GlobalInvocationID.x; row < pc.rows; row += step) {
      float acc = init_value(pc.op);
      uint idx = NONE;
      for (uint p = 0; p < pc.count; ++p) fold(pc.op, acc, idx, part_value(row, p), part_index(row, p));
      write_result(row, acc, idx);
    }
    return;
  }
  const uint lid = gl_LocalInvocationID.x;
  for (uint row = gl_WorkGroupID.x; row < pc.rows; row += gl_NumWorkGroups.x) {
    float acc = init_value(pc.op);
    uint idx = NONE;
    for (uint p = lid; p < pc.count; p += WG) fold(pc.op, acc, idx, part_value(row, p), part_index(row, p));
    s_val[lid] = acc;
    s_idx[lid] = idx;
    tree();
    if (lid == 0u) write_result(row, s_val[0], s_idx[0]);
    barrier();  // slot 0 is read before the next row overwrites it
  }
}
