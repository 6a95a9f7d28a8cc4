#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
// attention_grad_q on the matrix units (src/vk/kernels/attention_units.cpp): dq = scale * dS K with
// dS = P (dP - delta), P = exp(scale * Q K^T - lse), dP = g V^T, delta = g . o per row. Taken for
// q, k, v, o, g that hold 16-bit values exactly, head_dim and Dv multiples of 16 up to 64.
//
// Precision: Q K^T and g V^T multiply the 16-bit inputs exactly and sum in f32; P, delta and dS are
// f32; scale * dS is rounded to the inputs' 16-bit type for the dS K product (summed in f32).
//
// Layout as shaders/attention_coopmat.comp (read its header): four subgroups, 16 query rows each,
// 64-key steps; two lanes per row. dq accumulates in fragments across the key steps (the backward
// rescales nothing), and leaves through shared memory so rows past Tq are not written.

layout(local_size_x = 128) in;

layout(constant_id = 1) const uint D_BLOCKS = 4;   // head_dim / 16
layout(constant_id = 2) const uint DV_BLOCKS = 4;  // Dv / 16

layout(push_constant) uniform Push {
  uint heads;
  uint tq;
  uint tk;
  uint causal;
  float scale;
  uint q_tiles;
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
#define NEG_INF uintBitsToFloat(0xFF800000u)

shared float16_t sh_k[TILE * LD];      // Q, then g, while their fragments load; then each K tile
shared float16_t sh_v[TILE * LD];
shared float16_t sh_ds[4u * 16u * LD];  // per subgroup: 16 rows of scale * dS
shared float sh_s[4u * 16u * LDS];      // per subgroup: dP, then the scores, then dq on its way out
shared float sh_pair[128];

#define STAGE(dst, src, base, row0, rows, width)                                               \
  {                                                                                            \
    for (uint e = gl_LocalInvocationID.x; e < TILE * (width); e += 128u) {                     \
      const uint sr = e / (width);                                                             \
      const uint sc = e - sr * (width);                                                        \
      const float x = (row0) + sr < (rows) ? src[(base) + ((row0) + sr) * (width) + sc] : 0.0; \
      dst[sr * LD + sc] = float16_t(x);                                                        \
    }                                                                                          \
  }

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
  const uint dv = 16u * DV_BLOCKS;
  const uint my_row = lane >> 1;
  const uint half_ = lane & 1u;
  const uint key_tiles = (pc.tk + TILE - 1u) / TILE;
  const uint groups = pc.heads * pc.q_tiles;
  const uint area = sg * 16u * LDS;

  for (uint wg = gl_WorkGroupID.x; wg < groups; wg += gl_NumWorkGroups.x) {
    const uint h = wg / pc.q_tiles;
    const uint tile_index = wg - h * pc.q_tiles;
    const uint qt = pc.causal != 0u ? pc.q_tiles - 1u - tile_index : tile_index;
    const uint row0 = qt * TILE;
    const uint i = row0 + 16u * sg + my_row;
    const bool row_in = i < pc.tq;

    // delta = g . o and lse of this lane's row (f32, from memory).
    float delta = 0.0;
    if (row_in) {
      const uint at = (h * pc.tq + i) * dv + half_ * (dv / 2u);
      for (uint c = 0u; c < dv / 2u; ++c) delta = fma(g[at + c], o[at + c], delta);
    }
    delta += partner(delta);
    const float row_lse = row_in ? lse[h * pc.tq + i] : 0.0;

    barrier();
    STAGE(sh_k, q, h * pc.tq * d, row0, pc.tq, d)
    barrier();
    FragA qf[MAX_BLOCKS];
    [[unroll]] for (uint b = 0u; b < MAX_BLOCKS; ++b) {
      if (b < D_BLOCKS) coopMatLoadNV(qf[b], sh_k, (16u * sg) * LD + 16u * b, LD, false);
    }
    barrier();
    STAGE(sh_k, g, h * pc.tq * dv, row0, pc.tq, dv)
    barrier();
    FragA gf[MAX_BLOCKS];
    [[unroll]] for (uint b = 0u; b < MAX_BLOCKS; ++b) {
      if (b < DV_BLOCKS) coopMatLoadNV(gf[b], sh_k, (16u * sg) * LD + 16u * b, LD, false);
    }
    FragC dq[MAX_BLOCKS];
    [[unroll]] for (uint b = 0u; b < MAX_BLOCKS; ++b) dq[b] = FragC(0.0);

    uint kt_end = key_tiles;
    if (pc.causal != 0u) kt_end = min(kt_end, qt + 1u);
    for (uint kt = 0u; kt < kt_end; ++kt) {
      const uint key0 = kt * TILE;
      barrier();
      STAGE(sh_k, k, h * pc.tk * d, key0, pc.tk, d)
      STAGE(sh_v, v, h * pc.tk * dv, key0, pc.tk, dv)
      barrier();

      // dP = g V^T, then S = Q K^T, each 16 rows x 64 keys through the subgroup's f32 area.
      [[unroll]] for (uint j = 0u; j < 4u; ++j) {
        FragC acc = FragC(0.0);
        [[unroll]] for (uint b = 0u; b < MAX_BLOCKS; ++b) {
          if (b < DV_BLOCKS) {
            FragB vb;
            coopMatLoadNV(vb, sh_v, (16u * j) * LD + 16u * b, LD, true);
            acc = coopMatMulAddNV(gf[b], vb, acc);
          }
        }
        coopMatStoreNV(acc, sh_s, area + 16u * j, LDS, false);
      }
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      const uint at = area + my_row * LDS + 32u * half_;
      float dp[32];
      [[unroll]] for (uint c = 0u; c < 32u; ++c) dp[c] = sh_s[at + c];
      subgroupBarrier();
      [[unroll]] for (uint j = 0u; j < 4u; ++j) {
        FragC acc = FragC(0.0);
        [[unroll]] for (uint b = 0u; b < MAX_BLOCKS; ++b) {
          if (b < D_BLOCKS) {
            FragB kb;
            coopMatLoadNV(kb, sh_k, (16u * j) * LD + 16u * b, LD, true);
            acc = coopMatMulAddNV(qf[b], kb, acc);
          }
        }
        coopMatStoreNV(acc, sh_s, area + 16u * j, LDS, false);
      }
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      const uint ds_at = (sg * 16u + my_row) * LD + 32u * half_;
      [[unroll]] for (uint c = 0u; c < 32u; ++c) {
        const uint key = key0 + 32u * half_ + c;
        const bool seen = row_in && key < pc.tk && (pc.causal == 0u || key <= i);
        const float p = seen ? exp(pc.scale * sh_s[at + c] - row_lse) : 0.0;
        sh_ds[ds_at + c] = float16_t(pc.scale * p * (dp[c] - delta));
      }
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      // dq += (scale dS) K: K's 16-key x 16-column blocks read row-major.
      [[unroll]] for (uint b = 0u; b < MAX_BLOCKS; ++b) {
        if (b < D_BLOCKS) {
          [[unroll]] for (uint j = 0u; j < 4u; ++j) {
            FragA da;
            FragB kb;
            coopMatLoadNV(da, sh_ds, (sg * 16u) * LD + 16u * j, LD, false);
            coopMatLoadNV(kb, sh_k, (16u * j) * LD + 16u * b, LD, false);
            dq[b] = coopMatMulAddNV(da, kb, dq[b]);
          }
        }
      }
    }

    subgroupBarrier();
    [[unroll]] for (uint b = 0u; b < MAX_BLOCKS; ++b) {
      if (b < D_BLOCKS) coopMatStoreNV(dq[b], sh_s, area + 16u * b, LDS, false);
    }
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    if (row_in) {
      const uint out_at = (h * pc.tq + i) * d + half_ * (d / 2u);
      const uint from = area + my_row * LDS + half_ * (d / 2u);
      for (uint c = 0u; c < d / 2u; ++c) out_[out_at + c] = sh_s[from + c];
    }
    subgroupBarrier();
  }
}
