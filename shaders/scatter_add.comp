#version 450
// scatter_add: out[o, s, j] = sum of updates[o, k, j] over the k with indices[o, k, j] == s, the
// updates and indices viewed as [outer, K, inner] and the output as [outer, size, inner].
//
// A gather, so no float atomics and no two invocations ever write one element: each output
// element scans its whole column of K indices and adds the updates that point at it. The cost:
// every one of the `size` output elements of a column reads all K indices of that column, so
// size * K index reads per column where a scatter needs K (plus the updates that match, K in all).
// Fine for the shapes scatter_add serves (take_along_axis's gradient: K and size both the
// extents of one axis); a sort-by-index formulation would be the next step for huge size * K.
//
// Three modes, fixed per launch by the host, all deterministic:
//   mode 1: one invocation per output element, adding the matches in ascending k: the
//           interpreter's order, so the f32 sums equal the f32 interpreter's bit for bit.
//   mode 0: one workgroup per output element (long K): invocation l adds the matches among
//           k = l, l+256, ... in ascending order, then a fixed-shape shared-memory tree (128, 64,
//           ..., 1) combines the 256 partials. This keeps each invocation's loop count at K/256
//           (llvmpipe silently stops a shader invocation after 65535 loop passes in total).
//   mode 2: the same over chunks of `span` of K (the last one shorter), a workgroup per (chunk,
//           output element): the chunk sums land in binding 2, the node's scratch, as [chunks,
//           outputs], and matmul_split_sum.comp adds them in chunk order. For K too long for one
//           workgroup's loop (mode 0 loops K / 256 times per invocation).
// A separate grid-stride pass over the indices reports any outside [0, size) through the
// executor's status word (atomicMin: the first bad flat element); such an index matches no output
// element, so it is skipped without any out-of-bounds access. The pass also runs when the output
// is empty (size 0), where the interpreter still rejects every index.

layout(local_size_x = 256) in;
const uint WG = 256;

layout(push_constant) uniform Push {
  uint mode;
  uint count;    // index (= update) elements
  uint rows;     // output elements
  uint size;     // the output's extent along the axis
  uint updates;  // K: the updates' extent along the axis (terms per output element, at most)
  uint inner;    // product of the extents after the axis
  uint span;     // mode 2: K per chunk
} pc;

layout(std430, set = 0, binding = 0) readonly buffer Updates { float updates[]; };
layout(std430, set = 0, binding = 1) readonly buffer Indices { int indices[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { float outv[]; };
layout(std430, set = 0, binding = 3) buffer Status { uint first_bad[]; };

shared float s_part[WG];

// The first source element of output element f's column, and the output position s along the axis.
void column_of(uint f, out uint base, out int s) {
  const uint plane = pc.size * pc.inner;
  const uint o = f / plane;
  const uint rest = f - o * plane;
  const uint along = rest / pc.inner;
  base = o * pc.updates * pc.inner + (rest - along * pc.inner);
  s = int(along);
}

// Sum of the matches among k = k0, k0 + k_step, ... < k_end, in ascending k.
float column_sum(uint base, int s, uint k0, uint k_step, uint k_end) {
  float total = 0.0;
  for (uint k = k0; k < k_end; k += k_step) {
    const uint src = base + k * pc.inner;
    if (indices[src] == s) total += updates[src];
  }
  return total;
}

void main() {
  const uint step = gl_NumWorkGroups.x * WG;
  for (uint e = gl_GlobalInvocationID.x; e < pc.count; e += step) {
    const int v = indices[e];
    if (v < 0 || uint(v) >= pc.size) atomicMin(first_bad[0], e);
  }

  if (pc.mode == 1u) {
    for (uint f = gl_GlobalInvocationID.x; f < pc.rows; f += step) {
      uint base;
      int s;
      column_of(f, base, s);
      outv[f] = column_sum(base, s, 0u, 1u, pc.updates);
    }
    return;
  }

  // Modes 0 and 2: item t is chunk t / rows of output element t % rows (mode 0: one chunk).
  const uint lid = gl_LocalInvocationID.x;
  const uint span = pc.mode == 2u ? pc.span : pc.updates;
  const uint parts = pc.mode == 2u ? (pc.updates + span - 1u) / span : 1u;
  const uint items = pc.rows * parts;
  for (uint t = gl_WorkGroupID.x; t < items; t += gl_NumWorkGroups.x) {
    const uint chunk = t / pc.rows;
    uint base;
    int s;
    column_of(t - chunk * pc.rows, base, s);
    s_part[lid] = column_sum(base, s, chunk * span + lid, WG, min(pc.updates, (chunk + 1u) * span));
    barrier();
    for (uint h = WG / 2; h > 0; h >>= 1) {
      if (lid < h) s_part[lid] = s_part[lid] + s_part[lid + h];
      barrier();
    }
    if (lid == 0u) outv[t] = s_part[0];
    barrier();  // s_part[0] is read before the next item reuses s_part
  }
}
