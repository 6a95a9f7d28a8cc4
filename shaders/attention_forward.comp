#version 450
// The forward pass of attention and attention_lse (src/vk/kernels/attention.cpp): flash attention,
// the scores never stored. A workgroup takes (head h, query tile qt, column chunk cc of v, key
// chunk) and loops over the key tiles of its chunk: S = scale * Q K^T for the tile (head_dim in
// staged slices), -inf where a key is masked (causal, or past Tk); an online softmax per row keeps
// the running maximum m and sum l, rescaling both l and the output accumulator by
// alpha = exp(m_old - m_new) (1 while no key has been seen: no -inf - -inf); acc += P V.
// Causal: key tiles above the query tile are not visited at all.
//
// One chunk (partial = 0): writes o = acc / l (HAS_V), or lse = m + log l. Several chunks: writes
// the chunk's (m, l) per row and its unnormalized acc to scratch ([chunks][rows][2], then
// [chunks][rows][dv]); shaders/attention_combine.comp merges them in chunk order.
#extension GL_GOOGLE_include_directive : require
#include "attention_common.glsl"

// false: attention_lse (no v: the launch binds k in its place and nothing reads it).
layout(constant_id = 0) const bool HAS_V = true;

layout(std430, set = 0, binding = 0) readonly buffer Q { float q[]; };
layout(std430, set = 0, binding = 1) readonly buffer K { float k[]; };
layout(std430, set = 0, binding = 2) readonly buffer V { float v[]; };
layout(std430, set = 0, binding = 3) writeonly buffer Out { float out_[]; };

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint r = t / LANES;
  const uint l = t % LANES;
  const uint key_tiles = (pc.tk + TILE - 1u) / TILE;
  const uint slices = (pc.d + SLICE - 1u) / SLICE;
  const uint rows = pc.heads * pc.tq;
  const uint groups = pc.heads * pc.row_tiles * pc.col_chunks * pc.chunks;
  for (uint wg = gl_WorkGroupID.x; wg < groups; wg += gl_NumWorkGroups.x) {
    uint rest = wg;
    const uint cc = rest % pc.col_chunks;
    rest /= pc.col_chunks;
    const uint tile_index = rest % pc.row_tiles;
    rest /= pc.row_tiles;
    const uint h = rest % pc.heads;
    const uint chunk = rest / pc.heads;
    // Causal: the last query tiles see the most keys; they go first.
    const uint qt = pc.causal != 0u ? pc.row_tiles - 1u - tile_index : tile_index;
    const uint row0 = qt * TILE;
    const uint i = row0 + r;
    const uint col0 = cc * COLS;
    const uint kt_begin = chunk * pc.tiles_per_chunk;
    uint kt_end = min(kt_begin + pc.tiles_per_chunk, key_tiles);
    if (pc.causal != 0u) kt_end = min(kt_end, qt + 1u);

    float m = NEG_INF;
    float lsum = 0.0;
    float acc[OUTS];
    [[unroll]] for (uint u = 0u; u < OUTS; ++u) acc[u] = 0.0;

    for (uint kt = kt_begin; kt < kt_end; ++kt) {
      const uint key0 = kt * TILE;
      float s[SCORES];
      [[unroll]] for (uint u = 0u; u < SCORES; ++u) s[u] = 0.0;
      for (uint sl = 0u; sl < slices; ++sl) {
        barrier();  // the previous slice (or tile) is read
        STAGE_SLICE(q, 0u, h * pc.tq * pc.d, row0, pc.tq, pc.d, sl * SLICE)
        STAGE_SLICE(k, 1u, h * pc.tk * pc.d, key0, pc.tk, pc.d, sl * SLICE)
        barrier();
        dot_slice(s, r, l);
      }
      float tile_max = NEG_INF;
      [[unroll]] for (uint u = 0u; u < SCORES; ++u) {
        s[u] = visible(i, key0 + l + LANES * u) ? pc.scale * s[u] : NEG_INF;
        tile_max = max_fold(tile_max, s[u]);
      }
      sh_red2[t] = tile_max;
      barrier();  // also: every invocation is done reading the staged slices
      float row_max = NEG_INF;
      [[unroll]] for (uint q = 0u; q < LANES; ++q) row_max = max_fold(row_max, sh_red2[r * LANES + q]);
      const float m_new = max_fold(m, row_max);
      const bool none = m_new == NEG_INF;  // no visible key yet: nothing to rescale
      const float alpha = none ? 1.0 : exp(m - m_new);
      float part = 0.0;
      [[unroll]] for (uint u = 0u; u < SCORES; ++u) {
        const float p = none ? 0.0 : exp(s[u] - m_new);
        sh_p[r * PP + l + LANES * u] = p;
        part += p;
      }
      sh_red[t] = part;
      if (HAS_V) STAGE_BLOCK(v, h * pc.tk * pc.dv, key0, pc.tk, pc.dv, col0)
      barrier();
      lsum = lsum * alpha + row_sum(r);
      m = m_new;
      if (HAS_V) {
        [[unroll]] for (uint u = 0u; u < OUTS; ++u) acc[u] *= alpha;
        [[unroll]] for (uint j = 0u; j < TILE; ++j) {
          const float p = sh_p[r * PP + j];
          [[unroll]] for (uint u = 0u; u < OUTS; ++u) acc[u] = fma(p, sh_stage[j * COLS + l + LANES * u], acc[u]);
        }
      }
    }

    if (i < pc.tq) {
      const uint row = h * pc.tq + i;
      if (pc.partial == 0u) {
        if (HAS_V) {
          [[unroll]] for (uint u = 0u; u < OUTS; ++u) {
            const uint col = col0 + l + LANES * u;
            if (col < pc.dv) out_[row * pc.dv + col] = acc[u] / lsum;
          }
        } else if (l == 0u) {
          out_[row] = m + log(lsum);
        }
      } else {
        const uint at = chunk * rows + row;
        if (cc == 0u && l == 0u) {
          out_[2u * at] = m;
          out_[2u * at + 1u] = lsum;
        }
        if (HAS_V) {
          const uint base = 2u * pc.chunks * rows + at * pc.dv;
          [[unroll]] for (uint u = 0u; u < OUTS; ++u) {
            const uint col = col0 + l + LANES * u;
            if (col < pc.dv) out_[base + col] = acc[u];
          }
        }
      }
    }
    barrier();  // the next workgroup's tiles reuse shared memory
  }
}
