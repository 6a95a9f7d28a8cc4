// Shared by shaders/matmul.comp (128x128 tiles) and shaders/matmul_small.comp (64x64): the push
// constants, flags, specialization constants and bindings of the matmul launches
// (src/vk/kernels/matmul.cpp), and the staging of one K slice of A and B into double-buffered
// shared memory and of C back to memory. The includer defines MATMUL_TILE (output rows and columns
// per tile) and MATMUL_BK (K per slice) as literals, so each pipeline's sizes are compile-time
// constants.

layout(local_size_x = 256) in;

const uint BATCH_GROUPS = 4u;  // = kBatchGroups in src/vk/kernels/matmul.cpp

layout(push_constant) uniform Push {
  uint M;
  uint N;
  uint K;
  uint batches;
  uint tiles_m;  // ceil(M / TILE)
  uint tiles_n;  // ceil(N / TILE)
  uint flags;    // FLAG_* below
  uint lda;      // A's stored row stride: K, or the whole K of a split-K launch, whose batches are
                 // the K ranges (A's batch stride = K per split, B's = K per split * N); M when A
                 // is stored transposed (A's batch stride = K per split * M)
  uint ldb;      // B_T only: B's stored row stride, the whole K (B's batch stride = K per split
                 // under split-K); an untransposed B's rows are N apart
  uint k_last;   // the K range of the last batch: K, or under split-K the remainder when K is
                 // not a multiple of the range (a long K split for llvmpipe's loop limit)
  // The batch index decomposed over up to BATCH_GROUPS groups (innermost last; unused ones have
  // extent 1): group g's index advances A by a_stride[g] and B by b_stride[g] elements, 0 where
  // that operand is broadcast (src/ir/ops/matmul_layout.h). Split-K: one group, the K ranges.
  uint batch_extent[BATCH_GROUPS];
  uint a_stride[BATCH_GROUPS];
  uint b_stride[BATCH_GROUPS];
} pc;

// The K range of the tile being computed (set_tile_k): pc.K, or under RAGGED_K pc.k_last in the
// last batch. The loads compare against it, so a shorter last range reads zeros past its end.
uint tile_k;

// Must match kFlag* in src/vk/kernels/matmul.cpp.
const uint FLAG_VEC_A = 1u;   // lda and every a_stride % 4 == 0: stored rows of A start on vec4 boundaries
const uint FLAG_VEC_BC = 2u;  // N % 4 == 0: rows of C (and of B when not transposed) start on vec4 boundaries

// Set per launch by src/vk/kernels/matmul.cpp for transposed operands only (the defaults are the
// plain kernel).
layout(constant_id = 0) const bool A_T = false;     // A stored transposed: A[r, k] at a_base + k * lda + r
layout(constant_id = 1) const bool B_T = false;     // B stored transposed: B[k, c] at b_base + c * ldb + k
layout(constant_id = 2) const bool VEC_BT = false;  // B_T, ldb and every b_stride % 4 == 0: its stored rows
                                                    // move as vec4
// Split-K with a shorter last range (k_last): only those launches set it, so every other pipeline
// folds tile_k to pc.K and keeps the code it had before ragged ranges existed.
layout(constant_id = 3) const bool RAGGED_K = false;
// How the multiply-adds compute (src/vk/kernels/matmul.cpp, MatmulPrecision): 0 fp32 products on
// the portable kernels; 3 (fast) and 6 (split) products of bf16 parts of each f32 operand
// (shaders/matmul_split.glsl). The matrix-unit kernel (shaders/matmul_coopmat.comp) reads 1 as
// one 16-bit part per operand.
layout(constant_id = 4) const uint SPLIT_TERMS = 0u;
void set_tile_k(uint batch) { tile_k = (RAGGED_K && batch + 1u == pc.batches) ? pc.k_last : pc.K; }

// Where batch `batch`'s A and B start (C's batch starts at batch * M * N): once per tile, outside
// the K loop.
void batch_bases(uint batch, out uint a_base, out uint b_base) {
  a_base = 0u;
  b_base = 0u;
  [[unroll]] for (int g = int(BATCH_GROUPS) - 1; g >= 0; --g) {
    const uint extent = pc.batch_extent[g];
    const uint i = batch % extent;
    batch /= extent;
    a_base += i * pc.a_stride[g];
    b_base += i * pc.b_stride[g];
  }
}

// Scalar and vec4 views of the same bindings (aliased descriptors).
layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 0) readonly buffer A4 { vec4 a4[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 1) readonly buffer B4 { vec4 b4[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C { float c[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C4 { vec4 c4[]; };

// ---- staging ----

const uint TILE = MATMUL_TILE;  // output rows and columns per tile
const uint BK = MATMUL_BK;      // K per slice
const uint VEC = TILE / 4u;     // vec4 per tile row
const uint KQ = BK / 4u;        // vec4 per row of the A slice

// The matrix-unit kernel stages 16-bit parts in shared memory of its own and reuses only the loads.
#ifndef MATMUL_NO_F32_STAGING
// Item e of a slice, e < BK * VEC: 256 per operand in both tilings (one per invocation).
// One vec4 of padding per k row of A: the transposing stores of a warp cover 32 / KQ rows of KQ k
// quads; with the pad, k quads land 16 banks apart, so the large tiles' 32 stores hit 32 banks and
// the small tiles' at most two share one.
const uint PAD = 1;
shared vec4 sh_A[2][BK][VEC + PAD];  // [buffer][k][row / 4], A transposed
// A plain B's slice lands as whole vec4 rows, conflict-free unpadded; a transposed B's stores
// transpose like A's and take A's pad.
const uint PAD_B = B_T ? PAD : 0u;
shared vec4 sh_B[2][BK][VEC + PAD_B];  // [buffer][k][column / 4]
#endif  // MATMUL_NO_F32_STAGING

// Item e of a slice's A share: row e / KQ of the tile, k quad e % KQ (neighbouring invocations
// read neighbouring 16 bytes of one row); zero outside the matrix. A stored transposed: k row
// e / VEC, row quad e % VEC (the slice is BK stored rows of TILE words).
vec4 load_a(uint a_base, uint row0, uint k0, uint e) {
  if (A_T) {
    const uint gk = k0 + e / VEC;
    const uint gr = row0 + (e % VEC) * 4u;
    if (gk >= tile_k) return vec4(0.0);
    const uint at = a_base + gk * pc.lda + gr;
    if ((pc.flags & FLAG_VEC_A) != 0u) return gr < pc.M ? a4[at >> 2] : vec4(0.0);  // M % 4 == 0
    vec4 v;
    [[unroll]] for (uint q = 0; q < 4; ++q) v[q] = gr + q < pc.M ? a[at + q] : 0.0;
    return v;
  }
  const uint gr = row0 + e / KQ;
  const uint gk = k0 + (e % KQ) * 4u;
  if (gr >= pc.M) return vec4(0.0);
  const uint at = a_base + gr * pc.lda + gk;
  if ((pc.flags & FLAG_VEC_A) != 0u) return gk < tile_k ? a4[at >> 2] : vec4(0.0);
  vec4 v;
  [[unroll]] for (uint q = 0; q < 4; ++q) v[q] = gk + q < tile_k ? a[at + q] : 0.0;
  return v;
}

// Item e of a slice's B share: k row e / VEC, column quad e % VEC. B stored transposed: column
// e / KQ, k quad e % KQ (like A's rows).
vec4 load_b(uint b_base, uint col0, uint k0, uint e) {
  if (B_T) {
    const uint gc = col0 + e / KQ;
    const uint gk = k0 + (e % KQ) * 4u;
    if (gc >= pc.N) return vec4(0.0);
    const uint at = b_base + gc * pc.ldb + gk;
    if (VEC_BT) return gk < tile_k ? b4[at >> 2] : vec4(0.0);  // K % 4 == 0
    vec4 v;
    [[unroll]] for (uint q = 0; q < 4; ++q) v[q] = gk + q < tile_k ? b[at + q] : 0.0;
    return v;
  }
  const uint gk = k0 + e / VEC;
  const uint gc = col0 + (e % VEC) * 4u;
  if (gk >= tile_k) return vec4(0.0);
  const uint at = b_base + gk * pc.N + gc;
  if ((pc.flags & FLAG_VEC_BC) != 0u) return gc < pc.N ? b4[at >> 2] : vec4(0.0);
  vec4 v;
  [[unroll]] for (uint q = 0; q < 4; ++q) v[q] = gc + q < pc.N ? b[at + q] : 0.0;
  return v;
}

#ifndef MATMUL_NO_F32_STAGING
// Stores what load_a and load_b fetched for item e: a row's k quad is spread over four k rows
// (transposing), a k row's quad lands whole; a transposed operand's items swap the two forms.
void store_slice(uint buf, uint e, vec4 av, vec4 bv) {
  const uint rc = e / KQ;  // row (column) of a k-quad item
  const uint kq = (e % KQ) * 4u;
  if (A_T) {
    sh_A[buf][e / VEC][e % VEC] = av;
  } else {
    [[unroll]] for (uint q = 0; q < 4; ++q) sh_A[buf][kq + q][rc >> 2][rc & 3u] = av[q];
  }
  if (B_T) {
    [[unroll]] for (uint q = 0; q < 4; ++q) sh_B[buf][kq + q][rc >> 2][rc & 3u] = bv[q];
  } else {
    sh_B[buf][e / VEC][e % VEC] = bv;
  }
}

#endif  // MATMUL_NO_F32_STAGING

void store_c(uint c_base, uint gr, uint gc, vec4 v) {
  if (gr >= pc.M || gc >= pc.N) return;
  const uint at = c_base + gr * pc.N + gc;
  if ((pc.flags & FLAG_VEC_BC) != 0u) {
    c4[at >> 2] = v;  // N % 4 == 0, so gc < N means the whole vec4 is inside the row
    return;
  }
  [[unroll]] for (uint q = 0; q < 4; ++q)
    if (gc + q < pc.N) c[at + q] = v[q];
}

