#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
// matmul's small tiles (src/vk/kernels/matmul.cpp): C[b] = A[b] B[b] like shaders/matmul.comp, for
// outputs below 128x128, where matmul.comp's 128x128 tiles would mostly compute padding, and for
// too few large tiles to occupy the device (W2's [4096, 512] x [512, 128], W1's weight gradients).
// A shader of its own, so its pipeline's registers (16 accumulators) are not sized by the large
// tiles' 131 and several workgroups share an SM; the interface and the slice staging are
// matmul.comp's (matmul_common.glsl, with this tiling's sizes).
//
// 64x64 tiles, 4x4 outputs per invocation, K slices of 16, workgroups of 256 invocations. Staged
// like matmul.comp's large tiles: double-buffered shared memory, the next K slice fetched from
// global memory into registers while the current one is multiplied, one barrier per slice. A slice
// of each operand is 256 vec4, one per invocation; A is stored transposed (k-major), so every k
// step reads one vec4 of A (broadcast within a warp) and one of B (16 consecutive vec4 per warp).
// Rows of A (B, C) move as vec4 when K (N) is a multiple of 4 (flags), else as scalars. Shared
// memory: 16896 bytes (17408 with B_T).
// fp32 inputs, fp32 accumulators (SPLIT_TERMS 0; under 6 or 3 each product is the sum of products
// of bf16 parts, matmul_split.glsl, as in matmul.comp). Each output is accumulated by one
// invocation in ascending k from 0.0 (the zero padding only adds 0*0 terms past K), so the bits are those of matmul.comp and of
// one ascending loop `acc += a * b`. Split-K launches (batches = K ranges, lda = the whole K),
// transposed operands (A_T, B_T, VEC_BT, as in matmul.comp) and the grid-stride loop over tiles
// work as there.

#define MATMUL_TILE 64u
#define MATMUL_BK 16u
#include "matmul_common.glsl"
#include "matmul_split.glsl"

// ---- small tiles: 64x64, 4x4 per invocation, BK 16 ----
//
// Invocation (tx, ty) = (lid % 16, lid / 16) owns rows 4ty .. 4ty+3 and columns 4tx .. 4tx+3 of
// the tile: one vec4 of each operand per k step (a warp reads two vec4 of A, broadcast, and 16
// consecutive vec4 of B).

void small_tiles() {
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

    vec4 acc[4];  // [row 4ty+i]: columns 4tx .. 4tx+3
    [[unroll]] for (uint i = 0; i < 4; ++i) acc[i] = vec4(0.0);

    if (slices > 0) store_slice(0, lid, load_a(a_base, row0, 0, lid), load_b(b_base, col0, 0, lid));
    barrier();
    for (uint s = 0; s < slices; ++s) {
      const uint buf = s & 1u;
      // Fetch the next slice now; its loads are in flight during the multiply-adds below.
      const bool more = s + 1 < slices;
      const vec4 next_a = more ? load_a(a_base, row0, (s + 1) * BK, lid) : vec4(0.0);
      const vec4 next_b = more ? load_b(b_base, col0, (s + 1) * BK, lid) : vec4(0.0);
      [[unroll]] for (uint kk = 0; kk < BK; ++kk) {
        const vec4 av = sh_A[buf][kk][ty];
        const vec4 bv = sh_B[buf][kk][tx];
        if (SPLIT_TERMS == 0u) {
          [[unroll]] for (uint i = 0; i < 4; ++i) acc[i] += av[i] * bv;
        } else {
          // split / fast: bf16 parts of the values as they are used (matmul_split.glsl).
          const SplitParts4 sa = split_parts4(av);
          const SplitParts4 sb = split_parts4(bv);
          [[unroll]] for (uint i = 0; i < 4; ++i) acc[i] += split_products(sa.p0[i], sa.p1[i], sa.p2[i], sb);
        }
      }
      // The other buffer was last read in slice s-1, which every invocation finished before the
      // barrier that ended it; one barrier per slice then orders these stores before their reads.
      if (more) store_slice(buf ^ 1u, lid, next_a, next_b);
      barrier();
    }

    [[unroll]] for (uint i = 0; i < 4; ++i) store_c(c_base, row0 + 4u * ty + i, col0 + 4u * tx, acc[i]);
  }
}


void main() { small_tiles(); }
