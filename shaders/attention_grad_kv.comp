#version 450
// attention_grad_kv (src/vk/kernels/attention.cpp): [dk | dv] per key, dk_j = scale * sum_i dS_ij q_i
// and dv_j = sum_i P_ij g_i, with P_ij = exp(s_ij - lse_i) (0 where masked), dP_ij = g_i . v_j,
// delta_i = g_i . o_i and dS_ij = P_ij (dP_ij - delta_i), the scores recomputed per tile and never
// stored. A workgroup takes (head h, key tile kt, column chunk cc, query chunk); a column chunk is
// COLS columns of dk (cc < dk_chunks) or of dv (the rest), never both, so a dv chunk skips dP. Per
// query tile: delta of its rows (dk chunks), S, dP, then P or dS into shared memory and
// acc += (dS or P)^T [q or g][:, chunk columns]. Causal: query tiles above the key tile (all
// their queries before its first key) are not visited. One chunk: writes the output; several: the
// chunk's partial to scratch as [chunks][tk rows * (d + dv)], summed in chunk order by
// shaders/matmul_split_sum.comp.
#extension GL_GOOGLE_include_directive : require
#include "attention_common.glsl"

layout(std430, set = 0, binding = 0) readonly buffer Q { float q[]; };
layout(std430, set = 0, binding = 1) readonly buffer K { float k[]; };
layout(std430, set = 0, binding = 2) readonly buffer V { float v[]; };
layout(std430, set = 0, binding = 3) readonly buffer O { float o[]; };
layout(std430, set = 0, binding = 4) readonly buffer G { float g[]; };
layout(std430, set = 0, binding = 5) readonly buffer Lse { float lse[]; };
layout(std430, set = 0, binding = 6) writeonly buffer Out { float out_[]; };

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint r = t / LANES;
  const uint l = t % LANES;
  const uint query_tiles = (pc.tq + TILE - 1u) / TILE;
  const uint slices = (pc.d + SLICE - 1u) / SLICE;
  const uint v_slices = (pc.dv + SLICE - 1u) / SLICE;
  const uint width = pc.d + pc.dv;
  const uint groups = pc.heads * pc.row_tiles * pc.col_chunks * pc.chunks;
  for (uint wg = gl_WorkGroupID.x; wg < groups; wg += gl_NumWorkGroups.x) {
    uint rest = wg;
    const uint cc = rest % pc.col_chunks;
    rest /= pc.col_chunks;
    const uint kt = rest % pc.row_tiles;
    rest /= pc.row_tiles;
    const uint h = rest % pc.heads;
    const uint chunk = rest / pc.heads;
    const bool dk_chunk = cc < pc.dk_chunks;
    const uint col0 = (dk_chunk ? cc : cc - pc.dk_chunks) * COLS;
    const uint key0 = kt * TILE;
    uint qt_begin = chunk * pc.tiles_per_chunk;
    const uint qt_end = min(qt_begin + pc.tiles_per_chunk, query_tiles);
    if (pc.causal != 0u) qt_begin = max(qt_begin, kt);

    float acc[OUTS];
    [[unroll]] for (uint u = 0u; u < OUTS; ++u) acc[u] = 0.0;
    for (uint qt = qt_begin; qt < qt_end; ++qt) {
      const uint row0 = qt * TILE;
      const uint i = row0 + r;  // the query row of this invocation's scores
      const uint row = h * pc.tq + i;
      const float row_lse = i < pc.tq ? lse[row] : 0.0;
      float delta = 0.0;
      if (dk_chunk) {
        float part = 0.0;
        if (i < pc.tq) {
          for (uint e = l; e < pc.dv; e += LANES) part = fma(g[row * pc.dv + e], o[row * pc.dv + e], part);
        }
        sh_red[t] = part;
        barrier();
        delta = row_sum(r);
      }
      float s[SCORES];
      float dp[SCORES];
      [[unroll]] for (uint u = 0u; u < SCORES; ++u) {
        s[u] = 0.0;
        dp[u] = 0.0;
      }
      for (uint sl = 0u; sl < slices; ++sl) {
        barrier();
        STAGE_SLICE(q, 0u, h * pc.tq * pc.d, row0, pc.tq, pc.d, sl * SLICE)
        STAGE_SLICE(k, 1u, h * pc.tk * pc.d, key0, pc.tk, pc.d, sl * SLICE)
        barrier();
        dot_slice(s, r, l);
      }
      if (dk_chunk) {
        for (uint sl = 0u; sl < v_slices; ++sl) {
          barrier();
          STAGE_SLICE(g, 0u, h * pc.tq * pc.dv, row0, pc.tq, pc.dv, sl * SLICE)
          STAGE_SLICE(v, 1u, h * pc.tk * pc.dv, key0, pc.tk, pc.dv, sl * SLICE)
          barrier();
          dot_slice(dp, r, l);
        }
      }
      barrier();  // the staged slices are read: the block below replaces them
      [[unroll]] for (uint u = 0u; u < SCORES; ++u) {
        const uint j = key0 + l + LANES * u;
        float w = 0.0;
        if (visible(i, j)) {
          const float p = exp(pc.scale * s[u] - row_lse);
          w = dk_chunk ? p * (dp[u] - delta) : p;
        }
        sh_p[r * PP + l + LANES * u] = w;  // [query][key]
      }
      if (dk_chunk) {
        STAGE_BLOCK(q, h * pc.tq * pc.d, row0, pc.tq, pc.d, col0)
      } else {
        STAGE_BLOCK(g, h * pc.tq * pc.dv, row0, pc.tq, pc.dv, col0)
      }
      barrier();
      // Now invocation t accumulates key row r of the tile.
      [[unroll]] for (uint qi = 0u; qi < TILE; ++qi) {
        const float w = sh_p[qi * PP + r];
        [[unroll]] for (uint u = 0u; u < OUTS; ++u) acc[u] = fma(w, sh_stage[qi * COLS + l + LANES * u], acc[u]);
      }
    }

    const uint key = key0 + r;
    if (key < pc.tk) {
      const uint base = (pc.partial != 0u ? chunk * pc.heads * pc.tk * width : 0u) + (h * pc.tk + key) * width;
      [[unroll]] for (uint u = 0u; u < OUTS; ++u) {
        const uint col = col0 + l + LANES * u;
        if (dk_chunk && col < pc.d) out_[base + col] = pc.scale * acc[u];
        if (!dk_chunk && col < pc.dv) out_[base + pc.d + col] = acc[u];
      }
    }
    barrier();  // the next workgroup's keys reuse shared memory
  }
}
