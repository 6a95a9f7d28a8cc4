#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
// matmul: C[b] = A[b] B[b] for every batch b, A [M, K], B [K, N], C [M, N], all row-major f32.
// With an rhs without batch dims the lhs's leading dims are folded into M on the host (batches =
// 1); otherwise each batch finds its A and B through the batch groups (batch_bases, a stride of 0
// where an operand's batch dim broadcasts).
//
// The large tiles, the fast path; outputs below 128x128 and too few large tiles to occupy the
// device go to shaders/matmul_small.comp (64x64 tiles, a pipeline with its own registers). Both
// include matmul_common.glsl (push constants, bindings, the staging of K slices and of C).
// 128x128 tiles, 8x8 per invocation, K slices of 8, workgroups of 256 invocations. Shared memory is
// double-buffered, and the next slice is fetched from global memory into registers while
// the current one is multiplied, so one barrier per slice suffices and the loads' latency
// hides behind 512 multiply-adds. A is stored transposed (k-major), so every inner step
// reads two vec4 of A and two vec4 of B (broadcast / conflict-free) for 64 multiply-adds.
// Rows of A (B, C) move as vec4 when K (N) is a multiple of 4 (flags), else as scalars.
// On an H200 (NVIDIA 580 driver): 131 registers, one workgroup per SM, 37-38 TFLOP/s for
// n = 2048..8192. Tried and dropped: K slices of 16 (39 TFLOP/s, but 42 KB of shared memory,
// above lavapipe's 32 KB), a banded tile order (no gain at BK 8), and a large path without
// the scalar fallback (123 registers, two workgroups per SM, yet 25 TFLOP/s).
// fp32 inputs, fp32 accumulators (SPLIT_TERMS 0). Under SPLIT_TERMS 6 (split) or 3 (fast) each
// product is the sum of products of bf16 parts of its operands (matmul_split.glsl), split from the
// staged values where the multiply-adds read them; the accumulation is the same. Each output is accumulated by one invocation in ascending k
// (the zero padding only adds 0*0 terms past K), so the bits do not depend on scheduling.
// Split-K (products with few output tiles and a long K, e.g. weight gradients): the host launches
// the K ranges as batches (lda = the whole K) writing partial products to scratch, and
// matmul_split_sum.comp adds them in ascending range order. A 2-D product whose K would loop
// too long in one invocation (llvmpipe ends an invocation's loops after 65535 passes) is split the
// same way, its last range shorter when K is not a multiple of the range (k_last, read only under
// the specialization constant RAGGED_K, so other pipelines are compiled as before).
// Workgroups loop grid-stride over (batch, tile row, tile column), so any size fits in the
// executor's at most 65535 groups.
// Transposed operands (A_T, B_T): A stored as [K, M] (row stride lda = M) or B as [N, K] (row
// stride ldb = the whole K), per batch, so the matmul reads the input of a swap_axes of the last
// two axes instead of a materialized copy (src/vk/transpose_absorb.cpp). Only the staging loads
// change (each reads along the stored rows, so neighbouring invocations still read neighbouring
// words); shared memory then holds the same values in the same places, and the multiply-adds run
// in the same order: the same bits as the plain kernel on the copy. A_T, B_T and VEC_BT are
// specialization constants, not push-constant flags: the plain launches pass none, so the driver
// compiles their pipeline to the untransposed kernel alone, with its own shared-memory layout (the
// pads for a transposed B's stores are specialized in only with B_T). As runtime flags they cost
// the plain 128x128 path ~11% on an H200 (W3 n = 4096: 33.5 vs 37.5 TFLOP/s).

#define MATMUL_TILE 128u
#define MATMUL_BK 8u
#include "matmul_common.glsl"
#include "matmul_split.glsl"

// ---- large tiles: 128x128, 8x8 per invocation, BK 8, double-buffered ----
//
// Invocation (tx, ty) = (lid % 16, lid / 16) owns rows {4ty .. 4ty+3, 64+4ty .. 64+4ty+3} and
// columns {4tx .. 4tx+3, 64+4tx .. 64+4tx+3} of the tile: two vec4 of each operand per k step.

const uint LOADS = BK * VEC / 256;  // vec4 of A (and of B) each invocation fetches per slice

void large_tiles() {
  const uint lid = gl_LocalInvocationID.x;
  const uint tx = lid & 15u;
  const uint ty = lid >> 4;
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
    const uint slices = (tile_k + BK - 1) / BK;

    vec4 acc[8][2];  // [row i][column half]: rows 4ty+i (i < 4) and 64+4ty+i-4, columns 4tx+.. and 64+4tx+..
    [[unroll]] for (uint i = 0; i < 8; ++i) {
      acc[i][0] = vec4(0.0);
      acc[i][1] = vec4(0.0);
    }

    if (slices > 0) {
      [[unroll]] for (uint r = 0; r < LOADS; ++r) {
        const uint e = lid + 256u * r;
        store_slice(0, e, load_a(a_base, row0, 0, e), load_b(b_base, col0, 0, e));
      }
    }
    barrier();
    for (uint s = 0; s < slices; ++s) {
      const uint buf = s & 1u;
      // Fetch the next slice now; its loads are in flight during the multiply-adds below.
      const bool more = s + 1 < slices;
      vec4 next_a[LOADS];
      vec4 next_b[LOADS];
      [[unroll]] for (uint r = 0; r < LOADS; ++r) {
        const uint e = lid + 256u * r;
        next_a[r] = more ? load_a(a_base, row0, (s + 1) * BK, e) : vec4(0.0);
        next_b[r] = more ? load_b(b_base, col0, (s + 1) * BK, e) : vec4(0.0);
      }
      [[unroll]] for (uint kk = 0; kk < BK; ++kk) {
        const vec4 a_lo = sh_A[buf][kk][ty];
        const vec4 a_hi = sh_A[buf][kk][ty + 16u];
        const vec4 b_lo = sh_B[buf][kk][tx];
        const vec4 b_hi = sh_B[buf][kk][tx + 16u];
        if (SPLIT_TERMS == 0u) {
          const float av[8] = float[8](a_lo.x, a_lo.y, a_lo.z, a_lo.w, a_hi.x, a_hi.y, a_hi.z, a_hi.w);
          [[unroll]] for (uint i = 0; i < 8; ++i) {
            acc[i][0] += av[i] * b_lo;
            acc[i][1] += av[i] * b_hi;
          }
        } else {
          // split / fast: bf16 parts of the values as they are used (matmul_split.glsl).
          const SplitParts4 sa_lo = split_parts4(a_lo);
          const SplitParts4 sa_hi = split_parts4(a_hi);
          const SplitParts4 sb_lo = split_parts4(b_lo);
          const SplitParts4 sb_hi = split_parts4(b_hi);
          [[unroll]] for (uint i = 0; i < 8; ++i) {
            const SplitParts4 sa = i < 4 ? sa_lo : sa_hi;
            const uint q = i & 3u;
            acc[i][0] += split_products(sa.p0[q], sa.p1[q], sa.p2[q], sb_lo);
            acc[i][1] += split_products(sa.p0[q], sa.p1[q], sa.p2[q], sb_hi);
          }
        }
      }
      // The other buffer was last read in slice s-1, which every invocation finished before the
      // barrier that ended it; one barrier per slice then orders these stores before their reads.
      if (more) {
        [[unroll]] for (uint r = 0; r < LOADS; ++r) store_slice(buf ^ 1u, lid + 256u * r, next_a[r], next_b[r]);
      }
      barrier();
    }

    [[unroll]] for (uint i = 0; i < 8; ++i) {
      const uint gr = row0 + (i < 4 ? 4u * ty + i : 64u + 4u * ty + (i - 4u));
      store_c(c_base, gr, col0 + 4u * tx, acc[i][0]);
      store_c(c_base, gr, col0 + 64u + 4u * tx, acc[i][1]);
    }
  }
}

void main() { large_tiles(); }
