#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
// attention_grad_kv on the matrix units (src/vk/kernels/attention_units.cpp): [dk | dv] for 64 keys
// per workgroup, looping over the query tiles: with P^T = exp(scale * K Q^T - lse) (keys as rows),
// dv += P^T g and dk += scale * dS^T Q, dS^T = P^T (V g^T - delta). Taken for q, k, v, o, g that
// hold 16-bit values exactly, head_dim and Dv multiples of 16 up to 64.
//
// Precision: K Q^T and V g^T multiply the 16-bit inputs exactly and sum in f32; P, delta and dS
// are f32; P and scale * dS are rounded to the inputs' 16-bit type for their products with g and
// Q (summed in f32).
//
// Four subgroups of 16 keys each (their K and V rows kept as fragments), two lanes per key row, 64
// queries per step; per step the workgroup stages Q and g (16-bit) and each query's lse and
// delta = g . o (f32). dk and dv accumulate in fragments and leave through shared memory.

layout(local_size_x = 128) in;

layout(constant_id = 1) const uint D_BLOCKS = 4;   // head_dim / 16
layout(constant_id = 2) const uint DV_BLOCKS = 4;  // Dv / 16

layout(push_constant) uniform Push {
  uint heads;
  uint tq;
  uint tk;
  uint causal;
  float scale;
  uint k_tiles;  // ceil(tk / 64)
} pc;

layout(std430, set = 0, binding = 0) readonly buffer Q { float q[]; };
layout(std430, set = 0, binding = 1) readonly buffer K { float k[]; };
layout(std430, set = 0, binding = 2) readonly buffer V { float v[]; };
layout(std430, set = 0, binding = 3) readonly buffer O { float o[]; };
layout(std430, set = 0, binding = 4) readonly buffer G { float g[]; };
layout(std430, set = 0, binding = 5) readonly buffer Lse { float lse[]; };
layout(std430, set = 0, binding = 6) writeonly buffer Out { float out_[]; };

#define FragA fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define FragB fcoopmatNV<16, gl_ScopeSubgroup, 16, 8>
#define FragC fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>

const uint TILE = 64u;
const uint MAX_BLOCKS = 4u;
const uint LD = TILE + 8u;
const uint LDS = TILE;

shared float16_t sh_q[TILE * LD];       // K, then V, while their fragments load; then each Q tile
shared float16_t sh_g[TILE * LD];
shared float16_t sh_p[4u * 16u * LD];   // per subgroup: P^T, then scale * dS^T, 16 keys x 64 queries
shared float sh_s[4u * 16u * LDS];      // per subgroup: scores, then V g^T, then dk / dv on the way out
shared float sh_lse[TILE];
shared float sh_delta[TILE];

#define STAGE(dst, src, base, row0, rows, width)                                               \
  {                                                                                            \
    for (uint e = gl_LocalInvocationID.x; e < TILE * (width); e += 128u) {                     \
      const uint sr = e / (width);                                                             \
      const uint sc = e - sr * (width);                                                        \
      const float x = (row0) + sr < (rows) ? src[(base) + ((row0) + sr) * (width) + sc] : 0.0; \
      dst[sr * LD + sc] = float16_t(x);                                                        \
    }                                                                                          \
  }

// This lane's half of `cols` values of one output row, from the subgroup's f32 area.
void write_rows(bool key_in, uint out_at, uint from, uint cols, uint half_) {
  if (!key_in) return;
  for (uint c = 0u; c < cols / 2u; ++c) out_[out_at + half_ * (cols / 2u) + c] = sh_s[from + half_ * (cols / 2u) + c];
}

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint sg = lid >> 5;
  const uint lane = lid & 31u;
  const uint d = 16u * D_BLOCKS;
  const uint dv = 16u * DV_BLOCKS;
  const uint my_row = lane >> 1;
  const uint half_ = lane & 1u;
  const uint q_tiles = (pc.tq + TILE - 1u) / TILE;
  const uint groups = pc.heads * pc.k_tiles;
  const uint area = sg * 16u * LDS;
  const uint width = d + dv;

  for (uint wg = gl_WorkGroupID.x; wg < groups; wg += gl_NumWorkGroups.x) {
    const uint h = wg / pc.k_tiles;
    // Causal: the first key tiles see the most queries; they start first.
    const uint kt = wg - h * pc.k_tiles;
    const uint key0 = kt * TILE;
    const uint j = key0 + 16u * sg + my_row;  // this lane's key
    const bool key_in = j < pc.tk;

    barrier();
    STAGE(sh_q, k, h * pc.tk * d, key0, pc.tk, d)
    barrier();
    FragA kf[MAX_BLOCKS];
    [[unroll]] for (uint b = 0u; b < MAX_BLOCKS; ++b) {
      if (b < D_BLOCKS) coopMatLoadNV(kf[b], sh_q, (16u * sg) * LD + 16u * b, LD, false);
    }
    barrier();
    STAGE(sh_q, v, h * pc.tk * dv, key0, pc.tk, dv)
    barrier();
    FragA vf[MAX_BLOCKS];
    [[unroll]] for (uint b = 0u; b < MAX_BLOCKS; ++b) {
      if (b < DV_BLOCKS) coopMatLoadNV(vf[b], sh_q, (16u * sg) * LD + 16u * b, LD, false);
    }
    FragC dk[MAX_BLOCKS];
    FragC dvf[MAX_BLOCKS];
    [[unroll]] for (uint b = 0u; b < MAX_BLOCKS; ++b) {
      dk[b] = FragC(0.0);
      dvf[b] = FragC(0.0);
    }

    // Causal: queries before key0 see none of these keys.
    const uint qt_begin = pc.causal != 0u ? kt : 0u;
    for (uint qt = qt_begin; qt < q_tiles; ++qt) {
      const uint qrow0 = qt * TILE;
      barrier();
      STAGE(sh_q, q, h * pc.tq * d, qrow0, pc.tq, d)
      STAGE(sh_g, g, h * pc.tq * dv, qrow0, pc.tq, dv)
      if (lid < TILE) {
        const uint i = qrow0 + lid;
        float delta = 0.0;
        if (i < pc.tq) {
          const uint at = (h * pc.tq + i) * dv;
          for (uint c = 0u; c < dv; ++c) delta = fma(g[at + c], o[at + c], delta);
        }
        sh_delta[lid] = delta;
        sh_lse[lid] = i < pc.tq ? lse[h * pc.tq + i] : 0.0;
      }
      barrier();

      // S^T = K Q^T: 16 keys x 64 queries; Q^T's blocks are Q's read column-major.
      [[unroll]] for (uint n = 0u; n < 4u; ++n) {
        FragC acc = FragC(0.0);
        [[unroll]] for (uint b = 0u; b < MAX_BLOCKS; ++b) {
          if (b < D_BLOCKS) {
            FragB qb;
            coopMatLoadNV(qb, sh_q, (16u * n) * LD + 16u * b, LD, true);
            acc = coopMatMulAddNV(kf[b], qb, acc);
          }
        }
        coopMatStoreNV(acc, sh_s, area + 16u * n, LDS, false);
      }
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      const uint at = area + my_row * LDS + 32u * half_;
      const uint p_at = (sg * 16u + my_row) * LD + 32u * half_;
      float p[32];
      [[unroll]] for (uint c = 0u; c < 32u; ++c) {
        const uint qi = 32u * half_ + c;
        const uint i = qrow0 + qi;
        const bool seen = key_in && i < pc.tq && (pc.causal == 0u || j <= i);
        p[c] = seen ? exp(pc.scale * sh_s[at + c] - sh_lse[qi]) : 0.0;
        sh_p[p_at + c] = float16_t(p[c]);
      }
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      // dv += P^T g; then dP^T = V g^T into the score area.
      [[unroll]] for (uint b = 0u; b < MAX_BLOCKS; ++b) {
        if (b < DV_BLOCKS) {
          [[unroll]] for (uint n = 0u; n < 4u; ++n) {
            FragA pa;
            FragB gb;
            coopMatLoadNV(pa, sh_p, (sg * 16u) * LD + 16u * n, LD, false);
            coopMatLoadNV(gb, sh_g, (16u * n) * LD + 16u * b, LD, false);
            dvf[b] = coopMatMulAddNV(pa, gb, dvf[b]);
          }
        }
      }
      [[unroll]] for (uint n = 0u; n < 4u; ++n) {
        FragC acc = FragC(0.0);
        [[unroll]] for (uint b = 0u; b < MAX_BLOCKS; ++b) {
          if (b < DV_BLOCKS) {
            FragB gb;
            coopMatLoadNV(gb, sh_g, (16u * n) * LD + 16u * b, LD, true);
            acc = coopMatMulAddNV(vf[b], gb, acc);
          }
        }
        coopMatStoreNV(acc, sh_s, area + 16u * n, LDS, false);
      }
      subgroupMemoryBarrierShared();
      subgroupBarrier();  // also: P^T has been read by the dv products
      [[unroll]] for (uint c = 0u; c < 32u; ++c) {
        const uint qi = 32u * half_ + c;
        sh_p[p_at + c] = float16_t(pc.scale * p[c] * (sh_s[at + c] - sh_delta[qi]));
      }
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      // dk += (scale dS^T) Q.
      [[unroll]] for (uint b = 0u; b < MAX_BLOCKS; ++b) {
        if (b < D_BLOCKS) {
          [[unroll]] for (uint n = 0u; n < 4u; ++n) {
            FragA da;
            FragB qb;
            coopMatLoadNV(da, sh_p, (sg * 16u) * LD + 16u * n, LD, false);
            coopMatLoadNV(qb, sh_q, (16u * n) * LD + 16u * b, LD, false);
            dk[b] = coopMatMulAddNV(da, qb, dk[b]);
          }
        }
      }
    }

    // [dk | dv] rows through the subgroup's area (16 x 64 floats: dk, then dv).
    subgroupBarrier();
    [[unroll]] for (uint b = 0u; b < MAX_BLOCKS; ++b) {
      if (b < D_BLOCKS) coopMatStoreNV(dk[b], sh_s, area + 16u * b, LDS, false);
    }
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    write_rows(key_in, (h * pc.tk + j) * width, area + my_row * LDS, d, half_);
    subgroupBarrier();
    [[unroll]] for (uint b = 0u; b < MAX_BLOCKS; ++b) {
      if (b < DV_BLOCKS) coopMatStoreNV(dvf[b], sh_s, area + 16u * b, LDS, false);
    }
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    write_rows(key_in, (h * pc.tk + j) * width + d, area + my_row * LDS, dv, half_);
    subgroupBarrier();
  }
}
