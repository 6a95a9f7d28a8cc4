#version 450
#extension GL_EXT_control_flow_attributes : require
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
// The tiling is matmul_small.comp's (64x64 tiles, 4x4 outputs per invocation, K slices of 16,
// double-buffered shared memory with the next slice prefetched into registers, one barrier per
// slice): A's item e is row e / 4, k quad e % 4; B's is k row e / 16, column quad e % 16. Each
// invocation decodes its B columns and its A row once per tile, so a slice costs a k decode and
// four bounds-checked loads per operand. Every output is accumulated by one invocation in ascending
// k from 0.0 within its K range; under split-K (batches over K ranges of k_range, the last one
// shorter) the ranges' partials land in the node's scratch as [splits, output] and
// matmul_split_sum.comp adds them in range order: deterministic, no atomics. Indices are 32-bit:
// the host refuses what does not fit.

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0u;

layout(push_constant) uniform Push {
  int c, h, w;  // image [N, C, H, W]
  int o, kh, kw;
  int oh, ow;
  int sh, sw, ph, pw, dh, dw;
  int cg, og;   // channels per group
  uint M, NC, K;
  uint k_range;  // K per split (a multiple of 16); K when unsplit
  uint groups;
  uint tiles_m, tiles_n;
  uint flags;
  uint split_stride;  // elements between two splits' partials: the output's size
} pc;

const uint FLAG_VEC_A = 1u;  // A's rows and k blocks start on vec4 boundaries: quads load as vec4
const uint FLAG_VEC_C = 2u;  // output planes start on vec4 boundaries: quads store as vec4
const uint FLAG_PER_OUTPUT = 4u;  // thin products: one invocation per output (per_output below)

// conv2d: (x, w); input grad: (g, w); weight grad: (x, g). B reads binding 0, A binding 1.
layout(std430, set = 0, binding = 0) readonly buffer InB { float in_b[]; };
layout(std430, set = 0, binding = 1) readonly buffer InA { float in_a[]; };
layout(std430, set = 0, binding = 1) readonly buffer InA4 { vec4 in_a4[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { float outv[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out4 { vec4 outv4[]; };

const uint TILE = 64u;
const uint BK = 16u;
const uint VEC = TILE / 4u;
shared vec4 sh_A[2][BK][VEC + 1u];  // [buffer][k][row / 4], A transposed; padded as matmul's
shared vec4 sh_B[2][BK][VEC];       // [buffer][k][column / 4]

// ---- A: element (row r, k) at a_base(g, r) + (k / KA) * SA + k % KA ----
int khw() { return pc.kh * pc.kw; }
int ka() { return OP == 0u ? int(pc.K) : OP == 1u ? khw() : pc.oh * pc.ow; }
int sa() { return OP == 0u ? 0 : OP == 1u ? pc.cg * khw() : pc.o * pc.oh * pc.ow; }
int a_base(int g, int r) {
  if (OP == 0u) return (g * pc.og + r) * int(pc.K);   // w [O, Cg*KH*KW]
  if (OP == 1u) return g * pc.og * pc.cg * khw() + r * khw();  // w[gOg+o, r, a, b]
  return (g * pc.og + r) * pc.oh * pc.ow;             // g[n, gOg+r, i, j]
}

// Four consecutive k from k (a multiple of 4) of row r, zero past kend or past M.
vec4 load_a(int base, bool row_in, uint k, uint kend) {
  if (!row_in || k >= kend) return vec4(0.0);
  const int kq = int(k) / ka();
  int kr = int(k) - kq * ka();
  int at = base + kq * sa() + kr;
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

// ---- B: the im2col element (k, column) ----
// Per column, decoded once per tile: forward and weight grad keep the column's x offset and its
// first tap's row and column (ih0, iw0); input grad keeps g's offset and h + ph, v + pw.
struct BCol {
  int base;
  int r0;
  int c0;
  bool valid;
};

BCol b_column(int g, uint col) {
  BCol bc;
  bc.valid = col < pc.NC;
  const int q = int(min(col, pc.NC - 1u));
  if (OP == 0u) {  // (n, i, j)
    const int plane = pc.oh * pc.ow;
    const int n = q / plane;
    const int ij = q - n * plane;
    const int i = ij / pc.ow;
    const int j = ij - i * pc.ow;
    bc.base = (n * pc.c + g * pc.cg) * pc.h * pc.w;
    bc.r0 = i * pc.sh - pc.ph;
    bc.c0 = j * pc.sw - pc.pw;
  } else if (OP == 1u) {  // (n, h, v)
    const int plane = pc.h * pc.w;
    const int n = q / plane;
    const int hv = q - n * plane;
    const int hh = hv / pc.w;
    bc.base = (n * pc.o + g * pc.og) * pc.oh * pc.ow;
    bc.r0 = hh + pc.ph;
    bc.c0 = hv - hh * pc.w + pc.pw;
  } else {  // (c, a, b)
    const int c = q / khw();
    const int ab = q - c * khw();
    const int a = ab / pc.kw;
    bc.base = (g * pc.cg + c) * pc.h * pc.w;
    bc.r0 = a * pc.dh - pc.ph;
    bc.c0 = (ab - a * pc.kw) * pc.dw - pc.pw;
  }
  return bc;
}

// The k row's part of B's coordinates: forward (c*H*W, a*dh, b*dw); input grad (o*OH*OW, a*dh,
// b*dw); weight grad (n*C*H*W, i*sh, j*sw).
ivec3 b_row(uint k) {
  const int kk = int(k);
  if (OP == 2u) {
    const int plane = pc.oh * pc.ow;
    const int n = kk / plane;
    const int ij = kk - n * plane;
    const int i = ij / pc.ow;
    return ivec3(n * pc.c * pc.h * pc.w, i * pc.sh, (ij - i * pc.ow) * pc.sw);
  }
  const int t = kk / khw();
  const int ab = kk - t * khw();
  const int a = ab / pc.kw;
  const int plane = OP == 0u ? pc.h * pc.w : pc.oh * pc.ow;
  return ivec3(t * plane, a * pc.dh, (ab - a * pc.kw) * pc.dw);
}

float b_at(BCol bc, ivec3 kr) {
  if (!bc.valid) return 0.0;
  if (OP == 1u) {
    const int ti = bc.r0 - kr.y;
    const int tj = bc.c0 - kr.z;
    if (ti < 0 || tj < 0) return 0.0;
    // Stride 1 (the common case) needs no division, which llvmpipe runs lane by lane.
    const int i = pc.sh == 1 ? ti : ti / pc.sh;
    const int j = pc.sw == 1 ? tj : tj / pc.sw;
    if (i * pc.sh != ti || j * pc.sw != tj || i >= pc.oh || j >= pc.ow) return 0.0;
    return in_b[bc.base + kr.x + i * pc.ow + j];
  }
  const int ih = bc.r0 + kr.y;
  const int iw = bc.c0 + kr.z;
  if (ih < 0 || ih >= pc.h || iw < 0 || iw >= pc.w) return 0.0;
  return in_b[bc.base + kr.x + ih * pc.w + iw];
}

vec4 load_b(BCol cols[4], uint k, uint kend) {
  if (k >= kend) return vec4(0.0);
  const ivec3 kr = b_row(k);
  return vec4(b_at(cols[0], kr), b_at(cols[1], kr), b_at(cols[2], kr), b_at(cols[3], kr));
}

void store_slice(uint buf, uint e, vec4 av, vec4 bv) {
  const uint rc = e >> 2;  // A: row e / 4 of the tile, k quad e % 4, stored transposed
  const uint kq = (e & 3u) * 4u;
  [[unroll]] for (uint q = 0u; q < 4u; ++q) sh_A[buf][kq + q][rc >> 2][rc & 3u] = av[q];
  sh_B[buf][e / VEC][e % VEC] = bv;
}

// ---- C: row r, column col = (cn, cp) of a plane of P columns ----
// forward: y[cn, gOg+r, cp] (P = OH*OW); input grad: dx[cn, gCg+r, cp] (P = H*W); weight grad:
// dw[gOg+r, cp] (P = NC, cn = 0).
void store_c(uint split, int g, uint r, uint col, vec4 v) {
  if (r >= pc.M || col >= pc.NC) return;
  const int plane = OP == 0u ? pc.oh * pc.ow : OP == 1u ? pc.h * pc.w : int(pc.NC);
  const int channels = OP == 1u ? pc.c : pc.o;
  const int per_group = OP == 1u ? pc.cg : pc.og;
  const int q = int(col);
  const int cn = q / plane;
  const int cp = q - cn * plane;
  const uint at = split * pc.split_stride + uint(((cn * channels + g * per_group + int(r)) * plane) + cp);
  if ((pc.flags & FLAG_VEC_C) != 0u) {
    outv4[at >> 2] = v;  // P % 4 == 0: the quad lies in one plane
    return;
  }
  [[unroll]] for (uint q4 = 0u; q4 < 4u; ++q4) {
    if (col + q4 >= pc.NC) return;
    const int qq = q + int(q4);
    const int n2 = qq / plane;
    outv[split * pc.split_stride + uint(((n2 * channels + g * per_group + int(r)) * plane) + qq - n2 * plane)] = v[q4];
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
    const int kq = int(kbeg) / ka();
    int kr = int(kbeg) - kq * ka();
    int at = a_base(g, int(r)) + kq * sa() + kr;
    // B's k coordinates advance by counters, not by b_row's divisions per k: llvmpipe divides
    // integers lane by lane, which cost more than the multiply-adds. Forward and input grad step
    // (t, a, b), b fastest; weight grad (n, i, j), j fastest.
    ivec3 kc = b_row(kbeg);
    const bool weight_grad = OP == 2u;
    const int inner_n = weight_grad ? pc.ow : pc.kw;
    const int outer_n = weight_grad ? pc.oh : pc.kh;
    const int inner_step = weight_grad ? pc.sw : pc.dw;
    const int outer_step = weight_grad ? pc.sh : pc.dh;
    const int block = weight_grad ? pc.c * pc.h * pc.w : OP == 0u ? pc.h * pc.w : pc.oh * pc.ow;
    int inner = kc.z / inner_step;
    int outer = kc.y / outer_step;
    float acc = 0.0;
    for (uint k = kbeg; k < kend; ++k) {
      acc += in_a[at] * b_at(bc, kc);
      ++kr;
      ++at;
      if (kr == ka()) {
        kr = 0;
        at += sa() - ka();
      }
      ++inner;
      kc.z += inner_step;
      if (inner == inner_n) {
        inner = 0;
        kc.z = 0;
        ++outer;
        kc.y += outer_step;
        if (outer == outer_n) {
          outer = 0;
          kc.y = 0;
          kc.x += block;
        }
      }
    }
    const int plane = OP == 0u ? pc.oh * pc.ow : OP == 1u ? pc.h * pc.w : int(pc.NC);
    const int channels = OP == 1u ? pc.c : pc.o;
    const int per_group = OP == 1u ? pc.cg : pc.og;
    const int cn = int(col) / plane;
    const int cp = int(col) - cn * plane;
    outv[split * pc.split_stride + uint((cn * channels + g * per_group + int(r)) * plane + cp)] = acc;
  }
}

void main() {
  if ((pc.flags & FLAG_PER_OUTPUT) != 0u) {
    per_output();
    return;
  }
  const uint lid = gl_LocalInvocationID.x;
  const uint tx = lid & 15u;
  const uint ty = lid >> 4;
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
    const uint row0 = (rest / pc.tiles_n) * TILE;
    const uint col0 = (rest % pc.tiles_n) * TILE;
    const uint kbeg = split * pc.k_range;
    const uint kend = min(pc.K, kbeg + pc.k_range);
    const uint slices = (kend - kbeg + BK - 1u) / BK;

    // This invocation's A row (item lid: row lid / 4) and B columns (column quad lid % 16).
    const uint a_row = row0 + (lid >> 2);
    const bool a_in = a_row < pc.M;
    const int a_at = a_base(g, int(min(a_row, pc.M - 1u)));
    const uint a_k = (lid & 3u) * 4u;
    const uint b_k = lid / VEC;
    BCol cols[4];
    [[unroll]] for (uint q = 0u; q < 4u; ++q) cols[q] = b_column(g, col0 + (lid % VEC) * 4u + q);

    vec4 acc[4];
    [[unroll]] for (uint i = 0u; i < 4u; ++i) acc[i] = vec4(0.0);

    if (slices > 0u) store_slice(0u, lid, load_a(a_at, a_in, kbeg + a_k, kend), load_b(cols, kbeg + b_k, kend));
    barrier();
    for (uint s = 0u; s < slices; ++s) {
      const uint buf = s & 1u;
      const bool more = s + 1u < slices;
      const uint k1 = kbeg + (s + 1u) * BK;
      const vec4 next_a = more ? load_a(a_at, a_in, k1 + a_k, kend) : vec4(0.0);
      const vec4 next_b = more ? load_b(cols, k1 + b_k, kend) : vec4(0.0);
      [[unroll]] for (uint kk = 0u; kk < BK; ++kk) {
        const vec4 av = sh_A[buf][kk][ty];
        const vec4 bv = sh_B[buf][kk][tx];
        [[unroll]] for (uint i = 0u; i < 4u; ++i) acc[i] += av[i] * bv;
      }
      if (more) store_slice(buf ^ 1u, lid, next_a, next_b);
      barrier();
    }

    [[unroll]] for (uint i = 0u; i < 4u; ++i) store_c(split, g, row0 + 4u * ty + i, col0 + 4u * tx, acc[i]);
  }
}
