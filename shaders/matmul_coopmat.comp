#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
// matmul on the matrix units (src/vk/kernels/matmul_units.cpp): C[b] = A[b] B[b], the same launches,
// push constants, bindings, batch groups, transposed reads and split-K ranges as the portable
// kernel (shaders/matmul_common.glsl), with the multiply-adds on 16x16x16 cooperative matrices:
// 16-bit operand parts, f32 accumulators.
//
// Written in GLSL_NV_cooperative_matrix because the project's shader compiler (glslang 12) knows no
// other cooperative matrix syntax; src/vk/spirv_coopmat.cpp rewrites the SPIR-V to
// SPV_KHR_cooperative_matrix when the pipeline is made, and for the bf16 variant also retypes every
// 16-bit float as bf16 (SPV_KHR_bfloat16). The NV types carry no "use", so the shader declares the
// B and accumulator fragments as 16x8 (distinct from A's 16x16) and the rewrite widens them to the
// 16x16 the code is written for: every offset and stride below assumes 16 columns. 16-bit floats
// appear only in shared memory, conversions and fragments, never in arithmetic, as bf16 requires.
//
// SPLIT_TERMS (specialization constant 4): 1 rounds each f32 operand to one 16-bit part, exact for
// operands cast up from that dtype (the planner takes this kernel only for those); 3 (fast) and 6
// (split) split each f32 operand into bf16 parts p0 + p1 + p2 (RNE each; p0 and p1 toward zero near
// the largest float, as the portable kernels' shaders/matmul_split.glsl does) and add the products
// of parts whose weight is at least 2^-16 of the leading one, small first: split a1b1 a2b0 a0b2
// a1b0 a0b1 a0b0, fast a1b0 a0b1 a0b0.
//
// Tile 128x128, K slices staged once per slice into shared memory as 16-bit parts (the next
// slice's f32 loads are in flight during the multiply-adds). Eight subgroups of 32 (the planner
// takes this kernel only on devices whose subgroups are 32 wide) in 2 x 4: each owns 64 rows x 32
// columns of the tile, 4 x 2 accumulators. Interior tiles with vec4 rows store the accumulators
// straight to memory; edge tiles go through a per-subgroup 16x16 staging area and store only
// what lies inside C.

// K slices of 32 (two 16-deep steps per barrier) with one or two parts; split's three parts at 32
// would not fit 48 KB of shared memory, so its slices are 16 deep. SPLIT_TERMS is a specialization
// constant, so BK and everything sized by it are too (folded when the pipeline is made).
#define MATMUL_TILE 128u
#define MATMUL_BK (SPLIT_TERMS == 6u ? 16u : 32u)
#define MATMUL_NO_F32_STAGING
#include "matmul_common.glsl"

const uint LDA = BK + 8u;                  // halves per staged A row (16-byte aligned rows)
const uint LDB = TILE + 8u;                // halves per staged B k row
const uint A_PART = TILE * LDA;            // one part of the A slice
const uint B_PART = BK * LDB;              // one part of the B slice
const uint PARTS = SPLIT_TERMS == 6u ? 3u : (SPLIT_TERMS == 3u ? 2u : 1u);
shared float16_t sh_a[PARTS * A_PART];
shared float16_t sh_b[PARTS * B_PART];
shared float sh_c[8u * 256u];  // per subgroup: one 16x16 accumulator on its way to an edge tile

// The fragment types (see above: B and C are widened to 16 columns by the SPIR-V rewrite).
#define FragA fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define FragB fcoopmatNV<16, gl_ScopeSubgroup, 16, 8>
#define FragC fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>

// x rounded to 8 significant bits (bf16's), to nearest even, kept in a float; toward zero at and
// above 2^128 - 2^119, where that would round a finite x up to infinity (so x minus the part stays
// finite). Infinities stay; a NaN stays a (quiet) NaN.
float bf16_part(float x) {
  const uint bits = floatBitsToUint(x);
  if ((bits & 0x7F800000u) == 0x7F800000u) {
    return uintBitsToFloat((bits & 0xFFFF0000u) | ((bits & 0x007FFFFFu) != 0u ? 0x00400000u : 0u));
  }
  if (abs(x) >= uintBitsToFloat(0x7F7F8000u)) return uintBitsToFloat(bits & 0xFFFF0000u);
  return uintBitsToFloat((bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u);
}

// Stores part p of an f32 value x into shared memory at `at` of part array `base`.
void store_parts(bool is_a, uint at, float x) {
  if (PARTS == 1u) {
    if (is_a) sh_a[at] = float16_t(x); else sh_b[at] = float16_t(x);
    return;
  }
  // Near the largest float the second part is also cut toward zero: rounded up it would make
  // p0 + p1 = 2^128. An infinite or NaN x has no lower parts (its products with them would be
  // inf - inf); the matrix units then give NaN where fp32 multiply-adds would give an infinity.
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

// Stages item e of the slice: load_a's and load_b's four values at their tile positions.
void stage(uint e, vec4 av, vec4 bv) {
  [[unroll]] for (uint q = 0; q < 4; ++q) {
    if (A_T) {
      store_parts(true, ((e % VEC) * 4u + q) * LDA + e / VEC, av[q]);
    } else {
      store_parts(true, (e / KQ) * LDA + (e % KQ) * 4u + q, av[q]);
    }
    if (B_T) {
      store_parts(false, ((e % KQ) * 4u + q) * LDB + e / KQ, bv[q]);
    } else {
      store_parts(false, (e / VEC) * LDB + (e % VEC) * 4u + q, bv[q]);
    }
  }
}

const uint LOADS = BK * VEC / 256u;  // vec4 of A (and of B) each invocation fetches per slice
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
  const uint tiles_per_batch = pc.tiles_m * pc.tiles_n;
  const uint total = tiles_per_batch * pc.batches;

  for (uint tile = gl_WorkGroupID.x; tile < total; tile += gl_NumWorkGroups.x) {
    const uint batch = tile / tiles_per_batch;
    const uint rest = tile - batch * tiles_per_batch;
    const uint row0 = (rest / pc.tiles_n) * TILE;
    const uint col0 = (rest % pc.tiles_n) * TILE;
    uint a_base;
    uint b_base;
    batch_bases(batch, a_base, b_base);
    const uint c_base = batch * pc.M * pc.N;
    set_tile_k(batch);
    const uint slices = (tile_k + BK - 1u) / BK;

    FragC acc[4][2];
    [[unroll]] for (uint i = 0; i < 4; ++i) {
      acc[i][0] = FragC(0.0);
      acc[i][1] = FragC(0.0);
    }

    vec4 next_a[LOADS];
    vec4 next_b[LOADS];
    [[unroll]] for (uint r = 0; r < LOADS; ++r) {
      const uint e = lid + 256u * r;
      next_a[r] = slices > 0u ? load_a(a_base, row0, 0u, e) : vec4(0.0);
      next_b[r] = slices > 0u ? load_b(b_base, col0, 0u, e) : vec4(0.0);
    }
    for (uint s = 0; s < slices; ++s) {
      [[unroll]] for (uint r = 0; r < LOADS; ++r) stage(lid + 256u * r, next_a[r], next_b[r]);
      barrier();
      // The next slice's loads are in flight during the multiply-adds below.
      const bool more = s + 1u < slices;
      [[unroll]] for (uint r = 0; r < LOADS; ++r) {
        const uint e = lid + 256u * r;
        next_a[r] = more ? load_a(a_base, row0, (s + 1u) * BK, e) : vec4(0.0);
        next_b[r] = more ? load_b(b_base, col0, (s + 1u) * BK, e) : vec4(0.0);
      }
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

    const bool interior = row0 + TILE <= pc.M && col0 + TILE <= pc.N && (pc.flags & FLAG_VEC_BC) != 0u;
    [[unroll]] for (uint i = 0; i < 4; ++i) {
      [[unroll]] for (uint j = 0; j < 2; ++j) {
        const uint r0 = row0 + warp_row + 16u * i;
        const uint c0 = col0 + warp_col + 16u * j;
        if (interior) {
          coopMatStoreNV(acc[i][j], c, c_base + r0 * pc.N + c0, pc.N, false);
          continue;
        }
        coopMatStoreNV(acc[i][j], sh_c, warp * 256u, 16u, false);
        subgroupBarrier();
        [[unroll]] for (uint q = 0; q < 8; ++q) {
          const uint at = lane + 32u * q;
          const uint gr = r0 + at / 16u;
          const uint gc = c0 + at % 16u;
          if (gr < pc.M && gc < pc.N) c[c_base + gr * pc.N + gc] = sh_c[warp * 256u + at];
        }
        subgroupBarrier();
      }
    }
  }
}
