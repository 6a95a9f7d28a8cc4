#version 450
// matmul: C[b] = A[b] B[b] for every batch b, A [M, K], B [K, N], C [M, N], all row-major f32.
// With a 2-D rhs the lhs's leading dims are folded into M on the host (batches = 1); batched
// operands pair up per batch (b_batch_stride = K*N), and a shared rhs has b_batch_stride = 0.
//
// Tiled with shared memory and register blocking: a workgroup of 16x16 = 256 invocations computes
// a 64x64 tile of C, each invocation a 4x4 block (rows ty + 16i, columns tx + 16j, so neighbouring
// invocations touch neighbouring columns of B and C). K is walked in slices of 16: every slice of A
// (64x16) and B (16x64) is staged in shared memory by all 256 invocations (4 loads each, zero
// outside the matrices), then each invocation does 16 x 4x4 multiply-adds from shared memory.
// fp32 inputs, fp32 accumulators. Each output is accumulated by one invocation in ascending k
// (the zero padding only adds 0*0 terms past K), so the bits do not depend on scheduling.
// Workgroups loop grid-stride over (batch, tile row, tile column), so any size fits in the
// executor's at most 65535 groups.

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint M;
  uint N;
  uint K;
  uint batches;
  uint tiles_m;         // ceil(M / 64)
  uint tiles_n;         // ceil(N / 64)
  uint a_batch_stride;  // M*K
  uint b_batch_stride;  // K*N, or 0 when every batch shares one rhs
} pc;

layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C { float c[]; };

const uint TILE = 64;
const uint BK = 16;
const uint T = 16;  // invocations per tile side; each owns TILE / T = 4 rows and columns

shared float As[BK][TILE + 1];  // A slice transposed (k-major); +1 spreads the transposing stores over banks
shared float Bs[BK][TILE];

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint tx = lid % T;
  const uint ty = lid / T;
  const uint tiles_per_batch = pc.tiles_m * pc.tiles_n;
  const uint total = tiles_per_batch * pc.batches;

  for (uint tile = gl_WorkGroupID.x; tile < total; tile += gl_NumWorkGroups.x) {
    const uint batch = tile / tiles_per_batch;
    const uint rest = tile - batch * tiles_per_batch;
    const uint row0 = (rest / pc.tiles_n) * TILE;
    const uint col0 = (rest % pc.tiles_n) * TILE;
    const uint a_base = batch * pc.a_batch_stride;
    const uint b_base = batch * pc.b_batch_stride;
    const uint c_base = batch * pc.M * pc.N;

    float acc[4][4];
    for (uint i = 0; i < 4; ++i)
      for (uint j = 0; j < 4; ++j) acc[i][j] = 0.0;

    for (uint k0 = 0; k0 < pc.K; k0 += BK) {
      // Stage A[row0 : row0+64, k0 : k0+16] and B[k0 : k0+16, col0 : col0+64], zero outside.
      for (uint r = 0; r < 4; ++r) {
        const uint e = lid + 256u * r;
        const uint ar = e / BK;  // row within the tile
        const uint ak = e % BK;  // consecutive invocations read consecutive k of one row
        const uint gr = row0 + ar;
        const uint gk = k0 + ak;
        As[ak][ar] = (gr < pc.M && gk < pc.K) ? a[a_base + gr * pc.K + gk] : 0.0;
        const uint bk = e / TILE;
        const uint bc = e % TILE;  // consecutive invocations read consecutive columns
        const uint gbk = k0 + bk;
        const uint gc = col0 + bc;
        Bs[bk][bc] = (gbk < pc.K && gc < pc.N) ? b[b_base + gbk * pc.N + gc] : 0.0;
      }
      barrier();
      for (uint kk = 0; kk < BK; ++kk) {
        float av[4];
        float bv[4];
        for (uint i = 0; i < 4; ++i) av[i] = As[kk][ty + T * i];
        for (uint j = 0; j < 4; ++j) bv[j] = Bs[kk][tx + T * j];
        for (uint i = 0; i < 4; ++i)
          for (uint j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
      }
      barrier();  // the next slice overwrites As/Bs
    }

    for (uint i = 0; i < 4; ++i) {
      const uint gr = row0 + ty + T * i;
      if (gr >= pc.M) continue;
      for (uint j = 0; j < 4; ++j) {
        const uint gc = col0 + tx + T * j;
        if (gc < pc.N) c[c_base + gr * pc.N + gc] = acc[i][j];
      }
    }
  }
}
