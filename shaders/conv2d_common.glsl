// conv2d_gemm.comp's and conv2d_rows.comp's shared part: push constants, bindings, and the
// implicit GEMM's address arithmetic (the layouts are in conv2d_gemm.comp's header). The includer
// declares the specialization constant OP (0 forward, 1 input grad, 2 weight grad) first.

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

// ---- A: element (row r, k) at a_base(g, r) + (k / KA) * SA + k % KA ----
int khw() { return pc.kh * pc.kw; }
int ka() { return OP == 0u ? int(pc.K) : OP == 1u ? khw() : pc.oh * pc.ow; }
int sa() { return OP == 0u ? 0 : OP == 1u ? pc.cg * khw() : pc.o * pc.oh * pc.ow; }
int a_base(int g, int r) {
  if (OP == 0u) return (g * pc.og + r) * int(pc.K);   // w [O, Cg*KH*KW]
  if (OP == 1u) return g * pc.og * pc.cg * khw() + r * khw();  // w[gOg+o, r, a, b]
  return (g * pc.og + r) * pc.oh * pc.ow;             // g[n, gOg+r, i, j]
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

// The im2col row k of B as mixed-radix digits: forward and input grad (t, a, b) of radices
// (-, KH, KW); weight grad (n, i, j) of (-, OH, OW).
struct BDigits {
  int outer, mid, inner;
};
int b_inner_radix() { return OP == 2u ? pc.ow : pc.kw; }
int b_mid_radix() { return OP == 2u ? pc.oh : pc.kh; }
BDigits b_digits(uint k) {
  const int per_outer = b_inner_radix() * b_mid_radix();
  const int outer = int(k) / per_outer;
  const int rest = int(k) - outer * per_outer;
  const int mid = rest / b_inner_radix();
  return BDigits(outer, mid, rest - mid * b_inner_radix());
}

// The k row's part of B's coordinates: forward (c*H*W, a*dh, b*dw); input grad (o*OH*OW, a*dh,
// b*dw); weight grad (n*C*H*W, i*sh, j*sw).
ivec3 b_coords(BDigits d) {
  if (OP == 2u) return ivec3(d.outer * pc.c * pc.h * pc.w, d.mid * pc.sh, d.inner * pc.sw);
  return ivec3(d.outer * (OP == 0u ? pc.h * pc.w : pc.oh * pc.ow), d.mid * pc.dh, d.inner * pc.dw);
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

// The output index of row r, column col (cn, cp) of a plane of P columns: forward y[cn, gOg+r, cp]
// (P = OH*OW); input grad dx[cn, gCg+r, cp] (P = H*W); weight grad dw[gOg+r, cp] (P = NC, cn = 0).
int c_plane() { return OP == 0u ? pc.oh * pc.ow : OP == 1u ? pc.h * pc.w : int(pc.NC); }
uint c_index(uint split, int g, int r, int col) {
  const int plane = c_plane();
  const int channels = OP == 1u ? pc.c : pc.o;
  const int per_group = OP == 1u ? pc.cg : pc.og;
  const int cn = col / plane;
  return split * pc.split_stride + uint((cn * channels + g * per_group + r) * plane + col - cn * plane);
}

// K walked one k at a time by counters, not by b_digits' and ka()'s divisions per k: llvmpipe divides
// integers lane by lane, which costs more than the multiply-adds. a_off is A's offset from its row
// base, (k / KA) * SA + k % KA; kc is b_coords(b_digits(k)). Forward and input grad step (t, a, b), b fastest;
// weight grad (n, i, j), j fastest.
struct KWalk {
  int kr;  // k % KA
  int a_off;
  ivec3 kc;
  int inner;  // b (or j)
  int outer;  // a (or i)
};

KWalk k_walk(uint k) {
  KWalk w;
  const int kq = int(k) / ka();
  w.kr = int(k) - kq * ka();
  w.a_off = kq * sa() + w.kr;
  const BDigits d = b_digits(k);
  w.kc = b_coords(d);
  w.inner = d.inner;
  w.outer = d.mid;
  return w;
}

void k_step(inout KWalk w) {
  ++w.kr;
  ++w.a_off;
  if (w.kr == ka()) {
    w.kr = 0;
    w.a_off += sa() - ka();
  }
  const bool weight_grad = OP == 2u;
  ++w.inner;
  w.kc.z += weight_grad ? pc.sw : pc.dw;
  if (w.inner == (weight_grad ? pc.ow : pc.kw)) {
    w.inner = 0;
    w.kc.z = 0;
    ++w.outer;
    w.kc.y += weight_grad ? pc.sh : pc.dh;
    if (w.outer == (weight_grad ? pc.oh : pc.kh)) {
      w.outer = 0;
      w.kc.y = 0;
      w.kc.x += weight_grad ? pc.c * pc.h * pc.w : OP == 0u ? pc.h * pc.w : pc.oh * pc.ow;
    }
  }
}
