#version 450
// attention_grad_q (src/vk/kernels/attention.cpp): dq_i = scale * sum_j dS_ij k_j with
// P_ij = exp(s_ij - lse_i) (0 where masked), dP_ij = g_i . v_j, delta_i = g_i . o_i and
// dS_ij = P_ij (dP_ij - delta_i), the scores recomputed per tile and never stored. A workgroup
// takes (head h, query tile qt, column chunk cc of dq, key chunk); delta of its rows first, then
// per key tile S (head_dim slices), dP (slices of v's head_dim), dS into shared memory and
// acc += dS K[:, chunk columns]. One chunk: writes dq; several: the chunk's partial dq to scratch
// as [chunks][rows * d], which shaders/matmul_split_sum.comp sums in chunk order.
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
  const uint key_tiles = (pc.tk + TILE - 1u) / TILE;
  const uint slices = (pc.d + SLICE - 1u) / SLICE;
  const uint v_slices = (pc.dv + SLICE - 1u) / SLICE;
  const uint groups = pc.heads * pc.row_tiles * pc.col_chunks * pc.chunks;
  for (uint wg = gl_WorkGroupID.x; wg < groups; wg += gl_NumWorkGroups.x) {
    uint rest = wg;
    const uint cc = rest % pc.col_chunks;
    rest /= pc.col_chunks;
    const uint tile_index = rest % pc.row_tiles;
    rest /= pc.row_tiles;
    const uint h = rest % pc.heads;
    const uint chunk = rest / pc.heads;
    const uint qt = pc.causal != 0u ? pc.row_tiles - 1u - tile_index : tile_index;
    const uint row0 = qt * TILE;
    const uint i = row0 + r;
    const uint row = h * pc.tq + i;
    const uint col0 = cc * COLS;
    const uint kt_begin = chunk * pc.tiles_per_chunk;
    uint kt_end = min(kt_begin + pc.tiles_per_chunk, key_tiles);
    if (pc.causal != 0u) kt_end = min(kt_end, qt + 1u);

    // delta_i = g_i . o_i: lanes l, l + LANES, ... of the row, then the lanes in order.
    float part = 0.0;
    if (i < pc.tq) {
      for (uint e = l; e < pc.dv; e += LANES) part = fma(g[row * pc.dv + e], o[row * pc.dv + e], part);
    }
    sh_red[t] = part;
    barrier();
    const float delta = row_sum(r);
    const float row_lse = i < pc.tq ? lse[row] : 0.0;

    float acc[OUTS];
    [[unroll]] for (uint u = 0u; u < OUTS; ++u) acc[u] = 0.0;
    for (uint kt = kt_begin; kt < kt_end; ++kt) {
      const uint key0 = kt * TILE;
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
      for (uint sl = 0u; sl < v_slices; ++sl) {
        barrier();
        STAGE_SLICE(g, 0u, h * pc.tq * pc.dv, row0, pc.tq, pc.dv, sl * SLICE)
        STAGE_SLICE(v, 1u, h * pc.tk * pc.dv, key0, pc.tk, pc.dv, sl * SLICE)
        barrier();
        dot_slice(dp, r, l);
      }
      barrier();  // the staged slices are read: the block of k below replaces them
      [[unroll]] for (uint u = 0u; u < SCORES; ++u) {
        const uint j = key0 + l + LANES * u;
        float ds = 0.0;
        if (visible(i, j)) ds = exp(pc.scale * s[u] - row_lse) * (dp[u] - delta);
        sh_p[r * PP + l + LANES * u] = ds;
      }
      STAGE_BLOCK(k, h * pc.tk * pc.d, key0, pc.tk, pc.d, col0)
      barrier();
      [[unroll]] for (uint j = 0u; j < TILE; ++j) {
        const float ds = sh_p[r * PP + j];
        [[unroll]] for (uint u = 0u; u < OUTS; ++u) acc[u] = fma(ds, sh_stage[j * COLS + l + LANES * u], acc[u]);
      }
    }

    if (i < pc.tq) {
      const uint base = (pc.partial != 0u ? chunk * pc.heads * pc.tq * pc.d : 0u) + row * pc.d;
      [[unroll]] for (uint u = 0u; u < OUTS; ++u) {
        const uint col = col0 + l + LANES * u;
        if (col < pc.d) out_[base + col] = pc.scale * acc[u];
      }
    }
    barrier();  // the next workgroup's rows reuse shared memory
  }
}
