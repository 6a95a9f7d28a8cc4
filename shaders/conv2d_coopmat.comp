#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
// conv2d, conv2d_input_grad and conv2d_weight_grad on the matrix units (src/vk/kernels/conv_units.cpp):
// the implicit GEMMs of shaders/conv2d_gemm.comp (its header gives the three products and their
// layouts; the address arithmetic is conv2d_common.glsl's), with the same push constants, bindings,
// groups and split-K partials ([splits, output] in the node's scratch, summed in range order by
// ordered_sum_of_partials), and the multiply-adds of shaders/matmul_coopmat.comp: 16x16x16
// cooperative matrices, 16-bit operand parts, f32 accumulators.
//
// Written in GLSL_NV_cooperative_matrix (glslang 12 knows no other syntax); src/vk/spirv_coopmat.cpp
// rewrites it to SPV_KHR_cooperative_matrix when the pipeline is made (conv2d_coopmat_f16,
// conv2d_coopmat_bf16; the bf16 variant retypes every 16-bit float as bf16). As in the matmul
// kernel, B and the accumulators are declared 16x8 and widened to 16x16 by the rewrite, and 16-bit
// floats appear only in shared memory, conversions and fragments.
//
// OP (specialization constant 0): 0 forward, 1 input grad, 2 weight grad.
// SPLIT_TERMS (specialization constant 1): 1 one 16-bit part per f32 operand (exact for operands
// cast up from that type, the only ones the planner sends with 1); 3 (fast) and 6 (split) bf16
// parts p0 + p1 + p2 of each operand and the part products of weight at least 2^-8 (fast) or
// 2^-16 (split) of the leading one, smallest first, as matmul_coopmat.comp.
//
// Tile 128x128 of one group's C[M, NC] over one K range; eight subgroups of 32 in 2 x 4, each 64
// rows x 32 columns (4 x 2 accumulators). Each K slice (32 deep; 16 for split's three parts, to fit
// 48 KB) is loaded in f32 one slice ahead, then staged into shared memory as 16-bit parts:
//   A: invocation lid loads k = lid % BK of rows lid / BK + (256 / BK) q: a warp reads a row's
//      consecutive k (consecutive addresses for every op's A), with one k decode per slice;
//   B: invocation lid loads column lid % 128 (decoded once per tile) at k rows
//      (lid / 128) * BK/2 + q, walked by k_step from one decode per slice: a warp reads 32
//      consecutive columns of one k row.
// A 16x16 accumulator whose rows and columns lie inside C and whose 16 columns lie in one output
// plane (vec4-aligned planes, FLAG_VEC_C) is stored straight to memory with the plane as its row
// stride; the others go through a per-subgroup 16x16 staging area and store element by element
// (c_index), only inside C.

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0u;
layout(constant_id = 1) const uint SPLIT_TERMS = 1u;

#include "conv2d_common.glsl"

const uint TILE = 128u;
const uint BK = SPLIT_TERMS == 6u ? 16u : 32u;
const uint LOADS = TILE * BK / 256u;  // f32 values of A (and of B) each invocation loads per slice
const uint A_STEP = 256u / BK;        // rows between an invocation's A loads
const uint LDA = BK + 8u;             // halves per staged A row
const uint LDB = TILE + 8u;           // halves per staged B k row
const uint A_PART = TILE * LDA;
const uint B_PART = BK * LDB;
const uint PARTS = SPLIT_TERMS == 6u ? 3u : (SPLIT_TERMS == 3u ? 2u : 1u);
shared float16_t sh_a[PARTS * A_PART];
shared float16_t sh_b[PARTS * B_PART];
shared float sh_c[8u * 256u];  // per subgroup: one 16x16 accumulator on its way to memory

#define FragA fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define FragB fcoopmatNV<16, gl_ScopeSubgroup, 16, 8>
#define FragC fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>

// x rounded to bf16's 8 significant bits, to nearest even, kept in a float; toward zero at and
// above 2^128 - 2^119 (so x minus the part stays finite). Infinities stay; NaN stays a quiet NaN.
float bf16_part(float x) {
  const uint bits = floatBitsToUint(x);
  if ((bits & 0x7F800000u) == 0x7F800000u) {
    return uintBitsToFloat((bits & 0xFFFF0000u) | ((bits & 0x007FFFFFu) != 0u ? 0x00400000u : 0u));
  }
  if (abs(x) >= uintBitsToFloat(0x7F7F8000u)) return uintBitsToFloat(bits & 0xFFFF0000u);
  return uintBitsToFloat((bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u);
}

// Stores the parts of x at `at` of A's (or B's) part arrays (matmul_coopmat.comp's store_parts).
void store_parts(bool is_a, uint at, float x) {
  if (PARTS == 1u) {
    if (is_a) sh_a[at] = float16_t(x); else sh_b[at] = float16_t(x);
    return;
  }
  const float p0 = bf16_part(x);
  const bool near_max = abs(x) >= uintBitsToFloat(0x7F7F8000u);
  const float r1 = isinf(x) || isnan(x) ? 0.0 : x - p0;
  const float p1 = near_max ? uintBitsToFloat(floatBitsToUint(r1) & 0xFFFF0000u) : bf16_part(r1);
  if (is_a) {
    sh_a[at] = float16_t(p0);
    sh_a[A_PART + at] = float16_t(p1);
    if (PARTS == 3u) sh_a[2u * A_PART + at] = float16_t(bf16_part(r1 - p1));
  } else {
    sh_b[at] = float16_t(p0);
    sh_b[B_PART + at] = float16_t(p1);
    if (PARTS == 3u) sh_b[2u * B_PART + at] = float16_t(bf16_part(r1 - p1));
  }
}

// A's offset from its row base for k: (k / KA) * SA + k % KA.
int a_offset(uint k) {
  const int kq = int(k) / ka();
  return kq * sa() + int(k) - kq * ka();
}

// Loads this invocation's f32 values of the slice from k0 into na and nb (zero past kend or M):
// A at k = k0 + a_k of its LOADS rows, B in its column at the LOADS k rows from k0 + b_k (one
// decode, then k_step). A macro, so the register arrays stay locals of main.
#define LOAD_SLICE(k0)                                                           \
  {                                                                              \
    const uint ka_ = (k0) + a_k;                                                 \
    const bool ka_in_ = ka_ < kend;                                              \
    const int a_off_ = ka_in_ ? a_offset(ka_) : 0;                               \
    [[unroll]] for (uint q = 0u; q < LOADS; ++q) {                               \
      const uint r = row0 + a_row + A_STEP * q;                                  \
      na[q] = ka_in_ && r < pc.M ? in_a[a_base(g, int(r)) + a_off_] : 0.0;       \
    }                                                                            \
    const uint kb_ = (k0) + b_k;                                                 \
    KWalk walk_ = k_walk(min(kb_, pc.K - 1u));                                   \
    [[unroll]] for (uint q = 0u; q < LOADS; ++q) {                               \
      nb[q] = kb_ + q < kend ? b_at(bc, walk_.kc) : 0.0;                         \
      k_step(walk_);                                                             \
    }                                                                            \
  }

// The part products, smallest first: (part of A, part of B).
const uint TERM_A[6] = uint[6](1u, 2u, 0u, 1u, 0u, 0u);
const uint TERM_B[6] = uint[6](1u, 0u, 2u, 0u, 1u, 0u);

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint warp = lid >> 5;
  const uint lane = lid & 31u;
  const uint warp_row = (warp >> 2) * 64u;  // the subgroup's 64 rows and 32 columns of the tile
  const uint warp_col = (warp & 3u) * 32u;
  const uint first_term = 6u - SPLIT_TERMS;  // split: all six; fast: the last three; else the last
  const uint per_batch = pc.tiles_m * pc.tiles_n;
  const uint batches_per_split = per_batch * pc.groups;
  const uint splits = pc.K == 0u ? 1u : (pc.K + pc.k_range - 1u) / pc.k_range;
  const uint total = batches_per_split * splits;
  const uint a_k = lid % BK;
  const uint a_row = lid / BK;
  const uint b_col = lid % TILE;
  const uint b_k = (lid / TILE) * LOADS;
  const int plane = c_plane();

  for (uint tile = gl_WorkGroupID.x; tile < total; tile += gl_NumWorkGroups.x) {
    const uint split = tile / batches_per_split;
    const uint in_split = tile - split * batches_per_split;
    const uint gu = in_split / per_batch;
    const uint rest = in_split - gu * per_batch;
    const int g = int(gu);
    const uint row0 = (rest / pc.tiles_n) * TILE;
    const uint col0 = (rest % pc.tiles_n) * TILE;
    const uint kbeg = split * pc.k_range;
    const uint kend = min(pc.K, kbeg + pc.k_range);
    const uint slices = (kend - kbeg + BK - 1u) / BK;
    const BCol bc = b_column(g, col0 + b_col);

    FragC acc[4][2];
    [[unroll]] for (uint i = 0; i < 4; ++i) {
      acc[i][0] = FragC(0.0);
      acc[i][1] = FragC(0.0);
    }

    float na[LOADS];
    float nb[LOADS];
    if (slices > 0u) LOAD_SLICE(kbeg);
    for (uint s = 0; s < slices; ++s) {
      [[unroll]] for (uint q = 0u; q < LOADS; ++q) {
        store_parts(true, (a_row + A_STEP * q) * LDA + a_k, na[q]);
        store_parts(false, (b_k + q) * LDB + b_col, nb[q]);
      }
      barrier();
      // The next slice's loads are in flight during the multiply-adds below.
      if (s + 1u < slices) LOAD_SLICE(kbeg + (s + 1u) * BK);
      [[unroll]] for (uint kk = 0; kk < BK; kk += 16u) {
        [[unroll]] for (uint t = first_term; t < 6u; ++t) {
          FragA fa[4];
          FragB fb[2];
          [[unroll]] for (uint i = 0; i < 4; ++i) {
            coopMatLoadNV(fa[i], sh_a, TERM_A[t] * A_PART + (warp_row + 16u * i) * LDA + kk, LDA, false);
          }
          [[unroll]] for (uint j = 0; j < 2; ++j) {
            coopMatLoadNV(fb[j], sh_b, TERM_B[t] * B_PART + kk * LDB + warp_col + 16u * j, LDB, false);
          }
          [[unroll]] for (uint i = 0; i < 4; ++i) {
            [[unroll]] for (uint j = 0; j < 2; ++j) acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
          }
        }
      }
      // Every subgroup has read this slice before the next one is staged over it.
      barrier();
    }

    [[unroll]] for (uint i = 0; i < 4; ++i) {
      [[unroll]] for (uint j = 0; j < 2; ++j) {
        const uint r0 = row0 + warp_row + 16u * i;
        const uint c0 = col0 + warp_col + 16u * j;
        // Uniform in the subgroup: the accumulator's 16 x 16 outputs as rows of one plane.
        const bool direct = (pc.flags & FLAG_VEC_C) != 0u && r0 + 16u <= pc.M && c0 + 16u <= pc.NC &&
                            int(c0) / plane == int(c0 + 15u) / plane;
        if (direct) {
          coopMatStoreNV(acc[i][j], outv, c_index(split, g, int(r0), int(c0)), uint(plane), false);
          continue;
        }
        coopMatStoreNV(acc[i][j], sh_c, warp * 256u, 16u, false);
        subgroupBarrier();
        [[unroll]] for (uint q = 0; q < 8; ++q) {
          const uint at = lane + 32u * q;
          const uint gr = r0 + at / 16u;
          const uint gc = c0 + at % 16u;
          if (gr < pc.M && gc < pc.NC) outv[c_index(split, g, int(gr), int(gc))] = sh_c[warp * 256u + at];
        }
        subgroupBarrier();
      }
    }
  }
}
