#version 450
// softmax and log_softmax along one axis, numerically stable: the row maximum, then the sum of
// exp(x - max), then the output. A row is (outer o, inner j): element a sits at
// o * length * inner + a * inner + j, so any axis works without a permute.
//
// Three modes, fixed per launch by the host, all deterministic:
//   mode 0: one workgroup per row; invocation l folds elements l, l+256, ... in fp32, then a
//           fixed-shape shared-memory tree (128, 64, ..., 1) combines the partials, once for the
//           max and once for the sum; workgroups loop grid-stride over rows (rows > 65535).
//   mode 1: one invocation per row, three sequential passes (short rows).
//   mode 2: SEG (32) invocations per row, WG / SEG rows per workgroup: the same folds with lanes
//           l, l+32, ... and a 32-lane tree (16, 8, ..., 1) within the segment. For many medium
//           rows (32 < len <= 1024): a workgroup per row spends two 8-level trees of a whole
//           workgroup on every row (44 us for W2's [32, 4, 128, 128] attention on an H200).
// Rows longer than the host's kChunkLength, when few or very long, go to softmax_split.comp
// instead (chunks of a row over several workgroups), so mode 0's three loops stay short: llvmpipe
// ends an invocation's loops after 65535 passes (src/vk/kernels/kernels.h).

layout(local_size_x = 256) in;
const uint WG = 256;

layout(push_constant) uniform Push {
  uint op;      // 0 softmax, 1 log_softmax
  uint mode;
  uint rows;    // outer * inner
  uint len;     // extent of the softmax axis
  uint inner;   // product of the extents after the axis (the element stride along it)
} pc;

layout(std430, set = 0, binding = 0) readonly buffer In { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { float y[]; };

shared float s_part[WG];

// As std::max(m, v) in the interpreter: a NaN element never becomes the maximum (the row's
// outputs are NaN anyway through the sum).
float max_fold(float m, float v) { return v > m ? v : m; }

void write_row(uint base, uint a0, uint step, float m, float total) {
  const float log_total = log(total);
  for (uint a = a0; a < pc.len; a += step) {
    const uint i = base + a * pc.inner;
    const float d = x[i] - m;
    y[i] = pc.op == 1u ? d - log_total : exp(d) / total;
  }
}

const uint SEG = 32;

// Mode 2. Loop bounds are uniform across the workgroup (barriers inside); a segment past the last
// row folds nothing and writes nothing.
void segmented() {
  const float neg_inf = uintBitsToFloat(0xff800000u);
  const uint lid = gl_LocalInvocationID.x;
  const uint lane = lid % SEG;
  const uint first = lid - lane;  // the segment's slot 0 in s_part
  const uint per_group = WG / SEG;
  for (uint row0 = gl_WorkGroupID.x * per_group; row0 < pc.rows; row0 += gl_NumWorkGroups.x * per_group) {
    const uint row = row0 + lid / SEG;
    uint base = 0u;
    float m = neg_inf;
    if (row < pc.rows) {
      const uint o = row / pc.inner;
      base = o * pc.len * pc.inner + (row - o * pc.inner);
      for (uint a = lane; a < pc.len; a += SEG) m = max_fold(m, x[base + a * pc.inner]);
    }
    s_part[lid] = m;
    barrier();
    for (uint s = SEG / 2; s > 0; s >>= 1) {
      if (lane < s) s_part[lid] = max_fold(s_part[lid], s_part[lid + s]);
      barrier();
    }
    m = s_part[first];
    barrier();  // the segment has read its max before s_part is reused

    float total = 0.0;
    if (row < pc.rows) {
      for (uint a = lane; a < pc.len; a += SEG) total += exp(x[base + a * pc.inner] - m);
    }
    s_part[lid] = total;
    barrier();
    for (uint s = SEG / 2; s > 0; s >>= 1) {
      if (lane < s) s_part[lid] = s_part[lid] + s_part[lid + s];
      barrier();
    }
    total = s_part[first];
    barrier();  // the segment has read its sum before the next rows reuse s_part

    if (row < pc.rows) write_row(base, lane, SEG, m, total);
  }
}

void main() {
  const float neg_inf = uintBitsToFloat(0xff800000u);
  if (pc.mode == 2u) {
    segmented();
    return;
  }
  if (pc.mode == 1u) {
    const uint step = gl_NumWorkGroups.x * WG;
    for (uint row = gl_GlobalInvocationID.x; row < pc.rows; row += step) {
      const uint o = row / pc.inner;
      const uint base = o * pc.len * pc.inner + (row - o * pc.inner);
      float m = neg_inf;
      for (uint a = 0; a < pc.len; ++a) m = max_fold(m, x[base + a * pc.inner]);
      float total = 0.0;
      for (uint a = 0; a < pc.len; ++a) total += exp(x[base + a * pc.inner] - m);
      write_row(base, 0u, 1u, m, total);
    }
    return;
  }

  const uint lid = gl_LocalInvocationID.x;
  for (uint row = gl_WorkGroupID.x; row < pc.rows; row += gl_NumWorkGroups.x) {
    const uint o = row / pc.inner;
    const uint base = o * pc.len * pc.inner + (row - o * pc.inner);

    float m = neg_inf;
    for (uint a = lid; a < pc.len; a += WG) m = max_fold(m, x[base + a * pc.inner]);
    s_part[lid] = m;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
      if (lid < s) s_part[lid] = max_fold(s_part[lid], s_part[lid + s]);
      barrier();
    }
    m = s_part[0];
    barrier();  // everyone has read the max before s_part is reused

    float total = 0.0;
    for (uint a = lid; a < pc.len; a += WG) total += exp(x[base + a * pc.inner] - m);
    s_part[lid] = total;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
      if (lid < s) s_part[lid] = s_part[lid] + s_part[lid + s];
      barrier();
    }
    total = s_part[0];
    barrier();  // everyone has read the sum before the next row reuses s_part

    write_row(base, lid, WG, m, total);
  }
}
