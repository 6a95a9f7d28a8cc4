#version 450
#extension GL_EXT_control_flow_attributes : require
// matmul: C[b] = A[b] B[b] for every batch b, A [M, K], B [K, N], C [M, N], all row-major f32.
// With a 2-D rhs the lhs's leading dims are folded into M on the host (batches = 1); batched
// operands pair up per batch (b_batch_stride = K*N), and a shared rhs has b_batch_stride = 0.
//
// The large tiles, the fast path; outputs below 128x128 and too few large tiles to occupy the
// device go to shaders/matmul_small.comp (64x64 tiles, a pipeline with its own registers).
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
// fp32 inputs, fp32 accumulators. Each output is accumulated by one invocation in ascending k
// (the zero padding only adds 0*0 terms past K), so the bits do not depend on scheduling.
// Split-K (products with few output tiles and a long K, e.g. weight gradients): the host launches
// the K ranges as batches (lda = the whole K) writing partial products to scratch, and
// matmul_split_sum.comp adds them in ascending range order.
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

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint M;
  uint N;
  uint K;
  uint batches;
  uint tiles_m;         // ceil(M / 128)
  uint tiles_n;         // ceil(N / 128)
  uint a_batch_stride;  // M*K
  uint b_batch_stride;  // K*N, or 0 when every batch shares one rhs
  uint flags;           // FLAG_* below
  uint lda;             // A's stored row stride: K, or the whole K of a split-K launch, whose batches
                        // are the K ranges (a_batch_stride = K per split, b_batch_stride = K per split
                        // * N); M when A is stored transposed (a_batch_stride = K per split * M)
  uint ldb;             // B_T only: B's stored row stride, the whole K (b_batch_stride = K per split
                        // under split-K); an untransposed B's rows are N apart
} pc;

// Must match kFlag* in src/vk/kernels/matmul.cpp (the same as matmul_small.comp's).
const uint FLAG_VEC_A = 1u;   // lda and a_batch_stride % 4 == 0: stored rows of A start on vec4 boundaries
const uint FLAG_VEC_BC = 2u;  // N % 4 == 0: rows of C (and of B when not transposed) start on vec4 boundaries

// Set per launch by src/vk/kernels/matmul.cpp for transposed operands only (the defaults are the
// plain kernel).
layout(constant_id = 0) const bool A_T = false;     // A stored transposed: A[r, k] at a_base + k * lda + r
layout(constant_id = 1) const bool B_T = false;     // B stored transposed: B[k, c] at b_base + c * ldb + k
layout(constant_id = 2) const bool VEC_BT = false;  // B_T, ldb and b_batch_stride % 4 == 0: its stored rows
                                                    // move as vec4

// Scalar and vec4 views of the same bindings (aliased descriptors).
layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 0) readonly buffer A4 { vec4 a4[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 1) readonly buffer B4 { vec4 b4[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C { float c[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C4 { vec4 c4[]; };

// ---- large tiles: 128x128, 8x8 per invocation, BK 8, double-buffered ----
//
// Invocation (tx, ty) = (lid % 16, lid / 16) owns rows {4ty .. 4ty+3, 64+4ty .. 64+4ty+3} and
// columns {4tx .. 4tx+3, 64+4tx .. 64+4tx+3} of the tile: two vec4 of each operand per k step.

const uint L_TILE = 128;
const uint L_BK = 8;
const uint L_VEC = L_TILE / 4;      // vec4 per tile row
const uint L_KQ = L_BK / 4;         // vec4 per row of the A slice
const uint L_LOADS = L_BK * L_VEC / 256;  // vec4 of A (and of B) each invocation fetches per slice
const uint L_PAD = 1;  // one vec4 of padding per k row: with BK 8 the transposing stores of a warp's
                       // two k halves land 16 banks apart, so its 32 stores hit 32 banks

shared vec4 l_As[2][L_BK][L_VEC + L_PAD];  // [buffer][k][row / 4], A transposed
// A plain B's slice lands as whole vec4 rows, conflict-free unpadded; a transposed B's stores
// transpose like A's and take A's pad.
const uint L_PAD_B = B_T ? L_PAD : 0u;
shared vec4 l_Bs[2][L_BK][L_VEC + L_PAD_B];  // [buffer][k][column / 4]

// Item e of a slice's A share: row e / L_KQ of the tile, k quad e % L_KQ (neighbouring invocations
// read neighbouring 16 bytes of one row); zero outside the matrix. A stored transposed: k row
// e / L_VEC, row quad e % L_VEC (the slice is 8 stored rows of 128 words).
vec4 load_a(uint a_base, uint row0, uint k0, uint e) {
  if (A_T) {
    const uint gk = k0 + e / L_VEC;
    const uint gr = row0 + (e % L_VEC) * 4u;
    if (gk >= pc.K) return vec4(0.0);
    const uint at = a_base + gk * pc.lda + gr;
    if ((pc.flags & FLAG_VEC_A) != 0u) return gr < pc.M ? a4[at >> 2] : vec4(0.0);  // M % 4 == 0
    vec4 v;
    [[unroll]] for (uint q = 0; q < 4; ++q) v[q] = gr + q < pc.M ? a[at + q] : 0.0;
    return v;
  }
  const uint gr = row0 + e / L_KQ;
  const uint gk = k0 + (e % L_KQ) * 4u;
  if (gr >= pc.M) return vec4(0.0);
  const uint at = a_base + gr * pc.lda + gk;
  if ((pc.flags & FLAG_VEC_A) != 0u) return gk < pc.K ? a4[at >> 2] : vec4(0.0);
  vec4 v;
  [[unroll]] for (uint q = 0; q < 4; ++q) v[q] = gk + q < pc.K ? a[at + q] : 0.0;
  return v;
}

// Item e of a slice's B share: k row e / 32, column quad e % 32. B stored transposed: column
// e / L_KQ, k quad e % L_KQ (like A's rows).
vec4 load_b(uint b_base, uint col0, uint k0, uint e) {
  if (B_T) {
    const uint gc = col0 + e / L_KQ;
    const uint gk = k0 + (e % L_KQ) * 4u;
    if (gc >= pc.N) return vec4(0.0);
    const uint at = b_base + gc * pc.ldb + gk;
    if (VEC_BT) return gk < pc.K ? b4[at >> 2] : vec4(0.0);  // K % 4 == 0
    vec4 v;
    [[unroll]] for (uint q = 0; q < 4; ++q) v[q] = gk + q < pc.K ? b[at + q] : 0.0;
    return v;
  }
  const uint gk = k0 + e / L_VEC;
  const uint gc = col0 + (e % L_VEC) * 4u;
  if (gk >= pc.K) return vec4(0.0);
  const uint at = b_base + gk * pc.N + gc;
  if ((pc.flags & FLAG_VEC_BC) != 0u) return gc < pc.N ? b4[at >> 2] : vec4(0.0);
  vec4 v;
  [[unroll]] for (uint q = 0; q < 4; ++q) v[q] = gc + q < pc.N ? b[at + q] : 0.0;
  return v;
}

// Stores what load_a and load_b fetched for item e: a row's k quad is spread over four k rows
// (transposing), a k row's quad lands whole; a transposed operand's items swap the two forms.
void store_slice(uint buf, uint e, vec4 av, vec4 bv) {
  const uint rc = e / L_KQ;  // row (column) of a k-quad item
  const uint kq = (e % L_KQ) * 4u;
  if (A_T) {
    l_As[buf][e / L_VEC][e % L_VEC] = av;
  } else {
    [[unroll]] for (uint q = 0; q < 4; ++q) l_As[buf][kq + q][rc >> 2][rc & 3u] = av[q];
  }
  if (B_T) {
    [[unroll]] for (uint q = 0; q < 4; ++q) l_Bs[buf][kq + q][rc >> 2][rc & 3u] = bv[q];
  } else {
    l_Bs[buf][e / L_VEC][e % L_VEC] = bv;
  }
}

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

void large_tiles() {
  const uint lid = gl_LocalInvocationID.x;
  const uint tx = lid & 15u;
  const uint ty = lid >> 4;
  const uint tiles_per_batch = pc.tiles_m * pc.tiles_n;
  const uint total = tiles_per_batch * pc.batches;
  const uint slices = (pc.K + L_BK - 1) / L_BK;

  for (uint tile = gl_WorkGroupID.x; tile < total; tile += gl_NumWorkGroups.x) {
    const uint batch = tile / tiles_per_batch;
    const uint rest = tile - batch * tiles_per_batch;
    const uint row0 = (rest / pc.tiles_n) * L_TILE;
    const uint col0 = (rest % pc.tiles_n) * L_TILE;
    const uint a_base = batch * pc.a_batch_stride;
    const uint b_base = batch * pc.b_batch_stride;
    const uint c_base = batch * pc.M * pc.N;

    vec4 acc[8][2];  // [row i][column half]: rows 4ty+i (i < 4) and 64+4ty+i-4, columns 4tx+.. and 64+4tx+..
    [[unroll]] for (uint i = 0; i < 8; ++i) {
      acc[i][0] = vec4(0.0);
      acc[i][1] = vec4(0.0);
    }

    if (slices > 0) {
      [[unroll]] for (uint r = 0; r < L_LOADS; ++r) {
        const uint e = lid + 256u * r;
        store_slice(0, e, load_a(a_base, row0, 0, e), load_b(b_base, col0, 0, e));
      }
    }
    barrier();
    for (uint s = 0; s < slices; ++s) {
      const uint buf = s & 1u;
      // Fetch the next slice now; its loads are in flight during the multiply-adds below.
      const bool more = s + 1 < slices;
      vec4 next_a[L_LOADS];
      vec4 next_b[L_LOADS];
      [[unroll]] for (uint r = 0; r < L_LOADS; ++r) {
        const uint e = lid + 256u * r;
        next_a[r] = more ? load_a(a_base, row0, (s + 1) * L_BK, e) : vec4(0.0);
        next_b[r] = more ? load_b(b_base, col0, (s + 1) * L_BK, e) : vec4(0.0);
      }
      [[unroll]] for (uint kk = 0; kk < L_BK; ++kk) {
        const vec4 a_lo = l_As[buf][kk][ty];
        const vec4 a_hi = l_As[buf][kk][ty + 16u];
        const vec4 b_lo = l_Bs[buf][kk][tx];
        const vec4 b_hi = l_Bs[buf][kk][tx + 16u];
        const float av[8] = float[8](a_lo.x, a_lo.y, a_lo.z, a_lo.w, a_hi.x, a_hi.y, a_hi.z, a_hi.w);
        [[unroll]] for (uint i = 0; i < 8; ++i) {
          acc[i][0] += av[i] * b_lo;
          acc[i][1] += av[i] * b_hi;
        }
      }
      // The other buffer was last read in slice s-1, which every invocation finished before the
      // barrier that ended it; one barrier per slice then orders these stores before their reads.
      if (more) {
        [[unroll]] for (uint r = 0; r < L_LOADS; ++r) store_slice(buf ^ 1u, lid + 256u * r, next_a[r], next_b[r]);
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
