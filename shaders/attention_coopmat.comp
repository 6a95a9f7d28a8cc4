#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
// The forward pass of attention and attention_lse on the matrix units (src/vk/kernels/
// attention_units.cpp): flash attention whose two products run on 16x16x16 cooperative matrices
// with f32 accumulators. Taken only for q, k (and v) that hold 16-bit values exactly (casts up
// from f16 or bf16), head_dim and Dv multiples of 16 up to 64.
//
// Precision: S = Q K^T multiplies the 16-bit inputs exactly and sums in f32, as the f32 kernel
// does; the softmax (running max, exp, running sum) is f32; the probabilities are rounded to the
// inputs' 16-bit type for the P V product (summed in f32), so each term of the output carries one
// more rounding of that type (FlashAttention's contract for 16-bit attention). lse is f32 exactly.
//
// Written in GL_NV_cooperative_matrix and rewritten to SPV_KHR_cooperative_matrix (and bf16) when
// the pipeline is made, like shaders/matmul_coopmat.comp: B and accumulator fragments are declared
// 16x8 and widened to 16x16 by the rewrite; 16-bit floats are only converted, stored and loaded.
//
// A workgroup of four 32-wide subgroups takes 64 query rows of one head (16 per subgroup) and
// walks the key tiles of 64: stage K and V (converted to 16 bits) in shared memory; each subgroup
// multiplies its 16 query rows (kept as fragments) by K^T into a 16x64 f32 score tile, runs the
// online softmax over it (two lanes per row), stores P in 16 bits, multiplies P V into a 16 x Dv
// tile and adds it to its lanes' output registers, rescaled by exp(m_old - m_new) (fragments
// cannot be scaled per row, so the accumulator lives in registers, not in a fragment).

layout(local_size_x = 128) in;

layout(constant_id = 0) const bool HAS_V = true;
layout(constant_id = 1) const uint D_BLOCKS = 4;   // head_dim / 16
layout(constant_id = 2) const uint DV_BLOCKS = 4;  // Dv / 16 (1 without v)

layout(push_constant) uniform Push {
  uint heads;
  uint tq;
  uint tk;
  uint causal;
  float scale;
  uint q_tiles;  // ceil(tq / 64)
} pc;

layout(std430, set = 0, binding = 0) readonly buffer Q { float q[]; };
layout(std430, set = 0, binding = 1) readonly buffer K { float k[]; };
layout(std430, set = 0, binding = 2) readonly buffer V { float v[]; };
layout(std430, set = 0, binding = 3) writeonly buffer Out { float out_[]; };

#define FragA fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define FragB fcoopmatNV<16, gl_ScopeSubgroup, 16, 8>
#define FragC fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>

const uint TILE = 64u;
const uint MAX_BLOCKS = 4u;
const uint LD = TILE + 8u;  // halves per staged row (head_dim <= 64), 16-byte aligned rows
const uint LDS = TILE;      // floats per row of a subgroup's score / output tile
#define NEG_INF uintBitsToFloat(0xFF800000u)

shared float16_t sh_k[TILE * LD];       // Q while the fragments load, then each K tile
shared float16_t sh_v[TILE * LD];
shared float16_t sh_p[4u * 16u * LD];   // per subgroup: 16 rows of probabilities
shared float sh_s[4u * 16u * LDS];      // per subgroup: 16 x 64 scores, then 16 x Dv outputs
shared float sh_pair[128];              // the two lanes of a row exchange their maxima and sums

// Rows [row0, row0 + 64) x columns [0, width) of a [rows, width] matrix at `base`, as 16-bit values
// into `dst` (rows past `rows` as zeros). width is a multiple of 16, at most 64.
#define STAGE(dst, src, base, row0, rows, width)                                  \
  {                                                                               \
    for (uint e = gl_LocalInvocationID.x; e < TILE * (width); e += 128u) {        \
      const uint sr = e / (width);                                                \
      const uint sc = e - sr * (width);                                           \
      const float x = (row0) + sr < (rows) ? src[(base) + ((row0) + sr) * (width) + sc] : 0.0; \
      dst[sr * LD + sc] = float16_t(x);                                           \
    }                                                                             \
  }

float max_or(float a, float b) { return a > b ? a : b; }

// The value of the other lane of this lane's row (lanes 2r and 2r + 1 share row r); through shared
// memory, so the kernel needs no subgroup shuffles.
float partner(float x) {
  const uint lid = gl_LocalInvocationID.x;
  sh_pair[lid] = x;
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  const float other = sh_pair[lid ^ 1u];
  subgroupBarrier();
  return other;
}

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint sg = lid >> 5;
  const uint lane = lid & 31u;
  const uint d = 16u * D_BLOCKS;
  const uint dv = HAS_V ? 16u * DV_BLOCKS : 0u;
  const uint my_row = lane >> 1;   // of the subgroup's 16
  const uint half_ = lane & 1u;    // which 32 score columns (and which half of the outputs)
  const uint out_half = dv / 2u;   // output columns per lane (<= 32)
  const uint key_tiles = (pc.tk + TILE - 1u) / TILE;
  const uint groups = pc.heads * pc.q_tiles;

  for (uint wg = gl_WorkGroupID.x; wg < groups; wg += gl_NumWorkGroups.x) {
    const uint h = wg / pc.q_tiles;
    // Causal: the last query tiles see the most keys; they start first.
    const uint tile_index = wg - h * pc.q_tiles;
    const uint qt = pc.causal != 0u ? pc.q_tiles - 1u - tile_index : tile_index;
    const uint row0 = qt * TILE;
    const uint i = row0 + 16u * sg + my_row;  // this lane's query row

    barrier();  // the previous tile's last reads of sh_k / sh_v are done
    STAGE(sh_k, q, h * pc.tq * d, row0, pc.tq, d)
    barrier();
    FragA qf[MAX_BLOCKS];
    [[unroll]] for (uint b = 0u; b < MAX_BLOCKS; ++b) {
      if (b < D_BLOCKS) coopMatLoadNV(qf[b], sh_k, (16u * sg) * LD + 16u * b, LD, false);
    }

    float m = NEG_INF;
    float l = 0.0;
    float o[32];
    [[unroll]] for (uint c = 0u; c < 32u; ++c) o[c] = 0.0;

    uint kt_end = key_tiles;
    if (pc.causal != 0u) kt_end = min(kt_end, qt + 1u);
    for (uint kt = 0u; kt < kt_end; ++kt) {
      const uint key0 = kt * TILE;
      barrier();  // every subgroup has loaded its Q fragments / read the previous K and V tiles
      STAGE(sh_k, k, h * pc.tk * d, key0, pc.tk, d)
      if (HAS_V) STAGE(sh_v, v, h * pc.tk * dv, key0, pc.tk, dv)
      barrier();

      // S = Q K^T for 16 rows x 64 keys: K^T's 16x16 blocks are K's read column-major.
      [[unroll]] for (uint j = 0u; j < 4u; ++j) {
        FragC acc = FragC(0.0);
        [[unroll]] for (uint b = 0u; b < MAX_BLOCKS; ++b) {
          if (b < D_BLOCKS) {
            FragB kb;
            coopMatLoadNV(kb, sh_k, (16u * j) * LD + 16u * b, LD, true);
            acc = coopMatMulAddNV(qf[b], kb, acc);
          }
        }
        coopMatStoreNV(acc, sh_s, sg * 16u * LDS + 16u * j, LDS, false);
      }
      subgroupMemoryBarrierShared();
      subgroupBarrier();

      // The online softmax of this lane's 32 scores of row i.
      const uint s_at = sg * 16u * LDS + my_row * LDS + 32u * half_;
      float s[32];
      float tile_max = NEG_INF;
      [[unroll]] for (uint c = 0u; c < 32u; ++c) {
        const uint key = key0 + 32u * half_ + c;
        const bool seen = key < pc.tk && (pc.causal == 0u || key <= i);
        s[c] = seen ? pc.scale * sh_s[s_at + c] : NEG_INF;
        tile_max = max_or(tile_max, s[c]);
      }
      tile_max = max_or(tile_max, partner(tile_max));
      const float m_new = max_or(m, tile_max);
      const bool none = m_new == NEG_INF;  // no visible key yet (rows past tq, or causal)
      const float alpha = none ? 1.0 : exp(m - m_new);
      float part = 0.0;
      const uint p_at = (sg * 16u + my_row) * LD + 32u * half_;
      [[unroll]] for (uint c = 0u; c < 32u; ++c) {
        const float p = none ? 0.0 : exp(s[c] - m_new);
        part += p;
        sh_p[p_at + c] = float16_t(p);
      }
      part += partner(part);
      l = l * alpha + part;
      m = m_new;
      if (!HAS_V) continue;
      subgroupMemoryBarrierShared();
      subgroupBarrier();  // P is stored, and every lane is done reading its scores

      // P V for 16 rows x Dv, into the score tile's place.
      [[unroll]] for (uint n = 0u; n < MAX_BLOCKS; ++n) {
        if (n < DV_BLOCKS) {
          FragC acc = FragC(0.0);
          [[unroll]] for (uint j = 0u; j < 4u; ++j) {
            FragA pa;
            FragB vb;
            coopMatLoadNV(pa, sh_p, (sg * 16u) * LD + 16u * j, LD, false);
            coopMatLoadNV(vb, sh_v, (16u * j) * LD + 16u * n, LD, false);
            acc = coopMatMulAddNV(pa, vb, acc);
          }
          coopMatStoreNV(acc, sh_s, sg * 16u * LDS + 16u * n, LDS, false);
        }
      }
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      const uint o_at = sg * 16u * LDS + my_row * LDS + out_half * half_;
      [[unroll]] for (uint c = 0u; c < 32u; ++c) {
        if (c < out_half) o[c] = o[c] * alpha + sh_s[o_at + c];
      }
      subgroupBarrier();  // the output tile is read before the next scores overwrite it
    }

    if (i >= pc.tq) continue;
    if (HAS_V) {
      const uint out_at = (h * pc.tq + i) * dv + out_half * half_;
      [[unroll]] for (uint c = 0u; c < 32u; ++c) {
        if (c < out_half) out_[out_at + c] = o[c] / l;
      }
    } else if (half_ == 0u) {
      out_[h * pc.tq + i] = m + log(l);
    }
  }
}
