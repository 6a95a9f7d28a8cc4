#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
// conv2d, conv2d_input_grad and conv2d_weight_grad as implicit GEMMs (src/vk/kernels/conv_gemm.cpp),
// NCHW, PyTorch's geometry (src/ir/ops/conv_geometry.h). Per group g (and K range, under split-K)
// one product C[M, NC] = A[M, K] B[K, NC] whose operands are read in place, the im2col columns
// computed from each load's coordinates, never stored:
//   OP 0 conv2d:       y[n, gOg+o, i, j] = sum_{(c,a,b)} w[gOg+o, c, a, b] * x[n, gCg+c, i*sh+a*dh-ph, j*sw+b*dw-pw]
//                      rows o < Og, columns (n, i, j), K (c, a, b) = Cg*KH*KW
//   OP 1 input grad:   dx[n, gCg+c, h, v] = sum_{(o,a,b)} w[gOg+o, c, a, b] * g[n, gOg+o, (h+ph-a*dh)/sh, (v+pw-b*dw)/sw]
//                      over taps landing on whole, in-range output positions (zero otherwise);
//                      rows c < Cg, columns (n, h, v), K (o, a, b) = Og*KH*KW
//   OP 2 weight grad:  dw[gOg+o, c, a, b] = sum_{(n,i,j)} g[n, gOg+o, i, j] * x[n, gCg+c, i*sh+a*dh-ph, j*sw+b*dw-pw]
//                      rows o < Og, columns (c, a, b), K (n, i, j) = N*OH*OW
// Taps outside the image read as zeros. OP is a specialization constant: each op's pipeline keeps
// only its own address arithmetic.
//
// The tiling is matmul_small.comp's, in three shapes chosen by the host from M (conv_gemm.cpp):
// 256 invocations, each 4 rows x 4 columns of every column block, QUADS column quads across
// (specialization constant 1) and BLOCKS column blocks (constant 2), so a tile is
// TILE_M = 4 * 256 / QUADS rows by TILE_N = 4 * QUADS * BLOCKS columns: 64x64 (16, 1), 32x128
// (32, 1: a product of at most 32 rows fills its tile) and 64x128 (16, 2: each A value read from
// shared memory feeds 32 multiply-adds instead of 16). K slices of 16, double-buffered shared
// memory with the next slice prefetched into registers, one barrier per slice: A's item e is row
// e / 4, k quad e % 4; B's is k row e / (QUADS * BLOCKS), column quad e % (QUADS * BLOCKS). Each
// invocation decodes its B columns and its A row once per tile, so a slice costs a k decode and
// four bounds-checked loads per B quad. Every output is accumulated by one invocation in ascending
// k from 0.0 within its K range; under split-K (batches over K ranges of k_range, the last one
// shorter) the ranges' partials land in the node's scratch as [splits, output] and
// matmul_split_sum.comp adds them in range order: deterministic, no atomics. Indices are 32-bit:
// the host refuses what does not fit.

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0u;

#include "conv2d_common.glsl"

layout(constant_id = 1) const uint QUADS = 16u;  // column quads across the invocations: 16 or 32
layout(constant_id = 2) const uint BLOCKS = 1u;  // column blocks per invocation: 1 or 2

const uint ROW_QUADS = 256u / QUADS;              // invocations down the tile, 4 rows each
const uint TILE_M = 4u * ROW_QUADS;
const uint TILE_QUADS = QUADS * BLOCKS;           // column quads of the tile
const uint BK = 16u;
const uint A_ITEMS = TILE_M * BK / 4u;            // A quads per slice: 256 or 128
const uint B_LOADS = BK * TILE_QUADS / 256u;      // B quads each invocation loads per slice: 1, 2
const uint B_ROWS_APART = 256u / TILE_QUADS;      // k rows between one invocation's B quads
shared vec4 sh_A[2][BK][ROW_QUADS + 1u];  // [buffer][k][row / 4], A transposed; padded as matmul's
shared vec4 sh_B[2][BK][TILE_QUADS];      // [buffer][k][column / 4]

// Each slice moves every load's k by BK. Its coordinates are kept as digits and BK's digits added
// with one carry per digit, so no slice divides (decoding B's row and A's k / KA per load took a
// quarter of the loop's instructions): A's digits are (k / KA, k % KA) of radix KA, B's
// conv2d_common.glsl's BDigits.
struct ADigits {
  int block;  // k / KA
  int at;     // k % KA
};
ADigits a_digits(uint k) {
  const int q = int(k) / ka();
  return ADigits(q, int(k) - q * ka());
}
void a_digits_add(inout ADigits d, ADigits step) {
  d.at += step.at;
  if (d.at >= ka()) {
    d.at -= ka();
    ++d.block;
  }
  d.block += step.block;
}

void b_digits_add(inout BDigits d, BDigits step) {
  d.inner += step.inner;
  if (d.inner >= b_inner_radix()) {
    d.inner -= b_inner_radix();
    ++d.mid;
  }
  d.mid += step.mid;
  if (d.mid >= b_mid_radix()) {
    d.mid -= b_mid_radix();
    ++d.outer;
  }
  d.outer += step.outer;
}
// Four consecutive k from k (a multiple of 4, at digits d) of row r, zero past kend or past M.
vec4 load_a(int base, bool row_in, ADigits d, uint k, uint kend) {
  if (!row_in || k >= kend) return vec4(0.0);
  int kr = d.at;
  int at = base + d.block * sa() + kr;
  if ((pc.flags & FLAG_VEC_A) != 0u) return in_a4[at >> 2];  // KA % 4 == 0: the quad is whole
  vec4 v;
  [[unroll]] for (uint q = 0u; q < 4u; ++q) {
    v[q] = k + q < kend ? in_a[at] : 0.0;
    // Step to the next k: across a block of KA, jump to the next block.
    ++kr;
    ++at;
    if (kr == ka()) {
      kr = 0;
      at += sa() - ka();
    }
  }
  return v;
}

vec4 load_b(BCol cols[4], BDigits d, uint k, uint kend) {
  if (k >= kend) return vec4(0.0);
  const ivec3 kr = b_coords(d);
  return vec4(b_at(cols[0], kr), b_at(cols[1], kr), b_at(cols[2], kr), b_at(cols[3], kr));
}

// Stores this invocation's A quad (when it has one: lid < A_ITEMS) and B quads into buffer buf.
void store_slice(uint buf, uint lid, vec4 av, vec4 bv[B_LOADS]) {
  if (lid < A_ITEMS) {
    const uint rc = lid >> 2;  // A: row lid / 4 of the tile, k quad lid % 4, stored transposed
    const uint kq = (lid & 3u) * 4u;
    [[unroll]] for (uint q = 0u; q < 4u; ++q) sh_A[buf][kq + q][rc >> 2][rc & 3u] = av[q];
  }
  [[unroll]] for (uint l = 0u; l < B_LOADS; ++l) sh_B[buf][lid / TILE_QUADS + l * B_ROWS_APART][lid % TILE_QUADS] = bv[l];
}

// ---- C: the quad of row r from column col (c_index's layout) ----
void store_c(uint split, int g, uint r, uint col, vec4 v) {
  if (r >= pc.M || col >= pc.NC) return;
  if ((pc.flags & FLAG_VEC_C) != 0u) {
    outv4[c_index(split, g, int(r), int(col)) >> 2] = v;  // P % 4 == 0: the quad lies in one plane
    return;
  }
  [[unroll]] for (uint q4 = 0u; q4 < 4u; ++q4) {
    if (col + q4 >= pc.NC) return;
    outv[c_index(split, g, int(r), int(col + q4))] = v[q4];
  }
}

// Thin products (a few rows or columns: depthwise convolutions, a weight gradient of few
// channels) would fill a 64x64 tile with zeros; here one invocation sums one output's K range in
// ascending k, reading A and B element by element with the same address arithmetic.
void per_output() {
  const uint mn = pc.M * pc.NC;
  const uint per_split = pc.groups * mn;
  const uint splits = pc.K == 0u ? 1u : (pc.K + pc.k_range - 1u) / pc.k_range;
  const uint total = per_split * splits;
  const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint item = gl_GlobalInvocationID.x; item < total; item += step) {
    const uint split = item / per_split;
    const uint rest = item - split * per_split;
    const uint gu = rest / mn;
    const uint rc = rest - gu * mn;
    const uint r = rc / pc.NC;
    const uint col = rc - r * pc.NC;
    const int g = int(gu);
    const uint kbeg = split * pc.k_range;
    const uint kend = min(pc.K, kbeg + pc.k_range);
    const BCol bc = b_column(g, col);
    const int a_row = a_base(g, int(r));
    KWalk walk = k_walk(kbeg);
    float acc = 0.0;
    for (uint k = kbeg; k < kend; ++k) {
      acc += in_a[a_row + walk.a_off] * b_at(bc, walk.kc);
      k_step(walk);
    }
    outv[c_index(split, g, int(r), int(col))] = acc;
  }
}

void main() {
  if ((pc.flags & FLAG_PER_OUTPUT) != 0u) {
    per_output();
    return;
  }
  const uint lid = gl_LocalInvocationID.x;
  const uint tx = lid % QUADS;
  const uint ty = lid / QUADS;
  const uint per_batch = pc.tiles_m * pc.tiles_n;
  const uint batches_per_split = per_batch * pc.groups;
  const uint splits = pc.K == 0u ? 1u : (pc.K + pc.k_range - 1u) / pc.k_range;
  const uint total = batches_per_split * splits;

  for (uint tile = gl_WorkGroupID.x; tile < total; tile += gl_NumWorkGroups.x) {
    const uint split = tile / batches_per_split;
    const uint in_split = tile - split * batches_per_split;
    const uint gu = in_split / per_batch;
    const uint rest = in_split - gu * per_batch;
    const int g = int(gu);
    const uint row0 = (rest / pc.tiles_n) * TILE_M;
    const uint col0 = (rest % pc.tiles_n) * (4u * TILE_QUADS);
    const uint kbeg = split * pc.k_range;
    const uint kend = min(pc.K, kbeg + pc.k_range);
    const uint slices = (kend - kbeg + BK - 1u) / BK;

    // This invocation's A row (item lid: row lid / 4, when lid < A_ITEMS) and B columns (column
    // quad lid % TILE_QUADS, the same for each of its B loads).
    const uint a_row = row0 + (lid >> 2);
    const bool a_in = lid < A_ITEMS && a_row < pc.M;
    const int a_at = a_base(g, int(min(a_row, pc.M - 1u)));
    const uint a_k = (lid & 3u) * 4u;
    const uint b_k = lid / TILE_QUADS;
    BCol cols[4];
    [[unroll]] for (uint q = 0u; q < 4u; ++q) cols[q] = b_column(g, col0 + (lid % TILE_QUADS) * 4u + q);

    vec4 acc[BLOCKS][4];
    [[unroll]] for (uint b = 0u; b < BLOCKS; ++b) {
      [[unroll]] for (uint i = 0u; i < 4u; ++i) acc[b][i] = vec4(0.0);
    }

    // The digits of this invocation's A k and B k rows at the range's start, and of one slice;
    // only where K > 0 (an empty output image makes the weight gradient's radices 0).
    ADigits a_d = ADigits(0, 0);
    ADigits a_step = ADigits(0, 0);
    BDigits b_d[B_LOADS];
    BDigits b_step = BDigits(0, 0, 0);
    vec4 next_a = vec4(0.0);
    vec4 next_b[B_LOADS];
    [[unroll]] for (uint l = 0u; l < B_LOADS; ++l) {
      b_d[l] = BDigits(0, 0, 0);
      next_b[l] = vec4(0.0);
    }
    if (slices > 0u) {
      a_d = a_digits(kbeg + a_k);
      a_step = a_digits(BK);
      [[unroll]] for (uint l = 0u; l < B_LOADS; ++l) b_d[l] = b_digits(kbeg + b_k + l * B_ROWS_APART);
      b_step = b_digits(BK);
      next_a = load_a(a_at, a_in, a_d, kbeg + a_k, kend);
      [[unroll]] for (uint l = 0u; l < B_LOADS; ++l) {
        next_b[l] = load_b(cols, b_d[l], kbeg + b_k + l * B_ROWS_APART, kend);
      }
      store_slice(0u, lid, next_a, next_b);
    }
    barrier();
    for (uint s = 0u; s < slices; ++s) {
      const uint buf = s & 1u;
      const bool more = s + 1u < slices;
      const uint k1 = kbeg + (s + 1u) * BK;
      if (more) {
        a_digits_add(a_d, a_step);
        next_a = load_a(a_at, a_in, a_d, k1 + a_k, kend);
        [[unroll]] for (uint l = 0u; l < B_LOADS; ++l) {
          b_digits_add(b_d[l], b_step);
          next_b[l] = load_b(cols, b_d[l], k1 + b_k + l * B_ROWS_APART, kend);
        }
      }
      [[unroll]] for (uint kk = 0u; kk < BK; ++kk) {
        const vec4 av = sh_A[buf][kk][ty];
        [[unroll]] for (uint b = 0u; b < BLOCKS; ++b) {
          const vec4 bv = sh_B[buf][kk][tx + b * QUADS];
          [[unroll]] for (uint i = 0u; i < 4u; ++i) acc[b][i] += av[i] * bv;
        }
      }
      if (more) store_slice(buf ^ 1u, lid, next_a, next_b);
      barrier();
    }

    [[unroll]] for (uint b = 0u; b < BLOCKS; ++b) {
      [[unroll]] for (uint i = 0u; i < 4u; ++i) {
        store_c(split, g, row0 + 4u * ty + i, col0 + 4u * (tx + b * QUADS), acc[b][i]);
      }
    }
  }
}
