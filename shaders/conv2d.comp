#version 450
// The convolution family on NCHW tensors, the op chosen by a push constant (uniform per dispatch):
//   op 0 conv2d             y[n,o,i,j]  = sum_{c,a,b} x[n,c,i*s+a-p, j*s+b-p] * w[o,c,a,b]
//   op 1 conv2d_input_grad  dx[n,c,h,v] = sum_{o,a,b} g[n,o,(h+p-a)/s, (v+p-b)/s] * w[o,c,a,b]
//                           over taps landing on whole, in-range output positions
//   op 2 conv2d_weight_grad dw[o,c,a,b] = sum_{n,i,j} g[n,o,i,j] * x[n,c,i*s+a-p, j*s+b-p]
// Every op shares one geometry: image [N,C,H,W], weight [O,C,KH,KW], output grid [N,O,OH,OW].
// Zero padding: taps outside the image are skipped, as in the interpreter.
//
// Three modes, fixed per launch by the host, all deterministic (no atomics, fixed order):
//   mode 1: one invocation per output element, summing its terms in the interpreter's order
//           (conv2d: c, a, b; input grad: o, a, b; weight grad: n, i, j), in fp32. Loops run over
//           in-range taps only, so the iteration count stays near the term count (lavapipe ends an
//           invocation's loops after 65535 iterations in total; the host keeps terms <= 4096).
//   mode 0: one workgroup per output element for long sums: invocation l folds the flat terms
//           l, l+256, ... in increasing order, then a fixed-shape shared-memory tree (128, ..., 1)
//           adds the 256 partials. Workgroups loop grid-stride over output elements.
//   mode 2: the same over chunks of `span` terms (the last one shorter), a workgroup per
//           (chunk, output): the chunk sums land in binding 2, the node's scratch, as [chunks,
//           outputs], and matmul_split_sum.comp adds them in chunk order (two dispatches). For
//           sums too long for one workgroup (a weight gradient over a large image): mode 0 would
//           loop len / 256 times per invocation, past llvmpipe's 65535 loop passes for 2^24 terms.
// Indices are int: the host refuses tensors above 2^31-1 elements and geometry above int range.

layout(local_size_x = 256) in;
const uint WG = 256;

layout(push_constant) uniform Push {
  uint op;
  uint mode;
  uint rows;  // output elements
  uint len;   // terms per output element
  int n, c, h, w;
  int o, oh, ow;
  int kh, kw;
  int stride, padding;
  uint span;  // mode 2: terms per chunk
} pc;

// conv2d: (x, w); conv2d_input_grad: (g, w); conv2d_weight_grad: (x, g).
layout(std430, set = 0, binding = 0) readonly buffer InA { float in_a[]; };
layout(std430, set = 0, binding = 1) readonly buffer InB { float in_b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { float outv[]; };

const uint OP_CONV = 0, OP_INPUT_GRAD = 1, OP_WEIGHT_GRAD = 2;

shared float s_part[WG];

// The output element's 4-D coordinates, outermost first.
ivec4 decode(uint row) {
  ivec4 dims;
  if (pc.op == OP_CONV) dims = ivec4(pc.n, pc.o, pc.oh, pc.ow);
  else if (pc.op == OP_INPUT_GRAD) dims = ivec4(pc.n, pc.c, pc.h, pc.w);
  else dims = ivec4(pc.o, pc.c, pc.kh, pc.kw);
  // One division per axis (remainders by multiply-subtract): integer division is slow on CPUs.
  const int r = int(row);
  const int q3 = r / dims.w;
  const int q2 = q3 / dims.z;
  const int q1 = q2 / dims.y;
  return ivec4(q1, q2 - q1 * dims.y, q3 - q2 * dims.z, r - q3 * dims.w);
}

int x_at(int n, int c, int ih, int iw) { return ((n * pc.c + c) * pc.h + ih) * pc.w + iw; }
int w_at(int o, int c, int a, int b) { return ((o * pc.c + c) * pc.kh + a) * pc.kw + b; }
int g_at(int n, int o, int i, int j) { return ((n * pc.o + o) * pc.oh + i) * pc.ow + j; }

// First k >= 0 with k*s + off >= 0.
int first_inside(int off) { return off >= 0 ? 0 : (-off + pc.stride - 1) / pc.stride; }
// One past the last k < count with k*s + off < extent.
int end_inside(int off, int extent, int count) {
  const int last = extent - 1 - off;
  return last < 0 ? 0 : min(count, last / pc.stride + 1);
}

// ---- mode 1: the interpreter's order ----

float conv_serial(ivec4 at) {  // at = (n, o, i, j)
  const int row0 = at.z * pc.stride - pc.padding;
  const int col0 = at.w * pc.stride - pc.padding;
  const int a_lo = max(0, -row0), a_hi = min(pc.kh, pc.h - row0);
  const int b_lo = max(0, -col0), b_hi = min(pc.kw, pc.w - col0);
  float acc = 0.0;
  for (int c = 0; c < pc.c; ++c) {
    for (int a = a_lo; a < a_hi; ++a) {
      const int xr = x_at(at.x, c, row0 + a, col0);
      const int wr = w_at(at.y, c, a, 0);
      for (int b = b_lo; b < b_hi; ++b) acc += in_a[xr + b] * in_b[wr + b];
    }
  }
  return acc;
}

// Taps a (ascending) of one axis reaching element `e` from a whole output position t/s < count:
// a = e + p - t with t >= 0 a multiple of s. Returns (first a, one past the last a); step s.
ivec2 transposed_taps(int e, int k, int count) {
  const int top = e + pc.padding;  // a = top - t
  const int lo = max(0, top - (count - 1) * pc.stride);
  const int hi = min(k - 1, top);
  if (lo > hi) return ivec2(0, 0);
  const int first = lo + (top - lo) % pc.stride;
  return ivec2(first, first <= hi ? hi + 1 : first);
}

float input_grad_serial(ivec4 at) {  // at = (n, c, h, v)
  const ivec2 ra = transposed_taps(at.z, pc.kh, pc.oh);
  const ivec2 rb = transposed_taps(at.w, pc.kw, pc.ow);
  const int top_h = at.z + pc.padding, top_w = at.w + pc.padding;
  float acc = 0.0;
  for (int o = 0; o < pc.o; ++o) {
    for (int a = ra.x; a < ra.y; a += pc.stride) {
      const int gr = g_at(at.x, o, (top_h - a) / pc.stride, 0);
      for (int b = rb.x; b < rb.y; b += pc.stride) {
        acc += in_a[gr + (top_w - b) / pc.stride] * in_b[w_at(o, at.y, a, b)];
      }
    }
  }
  return acc;
}

float weight_grad_serial(ivec4 at) {  // at = (o, c, a, b)
  const int off_h = at.z - pc.padding, off_w = at.w - pc.padding;
  const int i_lo = first_inside(off_h), i_hi = end_inside(off_h, pc.h, pc.oh);
  const int j_lo = first_inside(off_w), j_hi = end_inside(off_w, pc.w, pc.ow);
  float acc = 0.0;
  for (int n = 0; n < pc.n; ++n) {
    for (int i = i_lo; i < i_hi; ++i) {
      const int gr = g_at(n, at.x, i, 0);
      const int xr = x_at(n, at.y, i * pc.stride + off_h, off_w);
      for (int j = j_lo; j < j_hi; ++j) acc += in_b[gr + j] * in_a[xr + j * pc.stride];
    }
  }
  return acc;
}

// ---- mode 0: flat term r of an output element (0 for a tap outside the image) ----

float term(ivec4 at, int r) {
  if (pc.op == OP_CONV) {
    const int c = r / (pc.kh * pc.kw);
    const int rest = r - c * pc.kh * pc.kw;
    const int a = rest / pc.kw, b = rest - a * pc.kw;
    const int ih = at.z * pc.stride + a - pc.padding, iw = at.w * pc.stride + b - pc.padding;
    if (ih < 0 || ih >= pc.h || iw < 0 || iw >= pc.w) return 0.0;
    return in_a[x_at(at.x, c, ih, iw)] * in_b[w_at(at.y, c, a, b)];
  }
  if (pc.op == OP_INPUT_GRAD) {
    const int o = r / (pc.kh * pc.kw);
    const int rest = r - o * pc.kh * pc.kw;
    const int a = rest / pc.kw, b = rest - a * pc.kw;
    const int t = at.z + pc.padding - a, u = at.w + pc.padding - b;
    if (t < 0 || u < 0 || t % pc.stride != 0 || u % pc.stride != 0) return 0.0;
    const int i = t / pc.stride, j = u / pc.stride;
    if (i >= pc.oh || j >= pc.ow) return 0.0;
    return in_a[g_at(at.x, o, i, j)] * in_b[w_at(o, at.y, a, b)];
  }
  const int n = r / (pc.oh * pc.ow);
  const int rest = r - n * pc.oh * pc.ow;
  const int i = rest / pc.ow, j = rest - i * pc.ow;
  const int ih = i * pc.stride + at.z - pc.padding, iw = j * pc.stride + at.w - pc.padding;
  if (ih < 0 || ih >= pc.h || iw < 0 || iw >= pc.w) return 0.0;
  return in_b[g_at(n, at.x, i, j)] * in_a[x_at(n, at.y, ih, iw)];
}

void main() {
  if (pc.mode == 1u) {
    const uint step = gl_NumWorkGroups.x * WG;
    for (uint row = gl_GlobalInvocationID.x; row < pc.rows; row += step) {
      const ivec4 at = decode(row);
      float v;
      if (pc.op == OP_CONV) v = conv_serial(at);
      else if (pc.op == OP_INPUT_GRAD) v = input_grad_serial(at);
      else v = weight_grad_serial(at);
      outv[row] = v;
    }
    return;
  }

  // Modes 0 and 2: item t is chunk t / rows of output t % rows (mode 0: one chunk, t = the output).
  const uint lid = gl_LocalInvocationID.x;
  const uint span = pc.mode == 2u ? pc.span : pc.len;
  const uint parts = pc.mode == 2u ? (pc.len + span - 1u) / span : 1u;
  const uint items = pc.rows * parts;
  for (uint t = gl_WorkGroupID.x; t < items; t += gl_NumWorkGroups.x) {
    const uint chunk = t / pc.rows;
    const ivec4 at = decode(t - chunk * pc.rows);
    const uint end = min(pc.len, (chunk + 1u) * span);
    float acc = 0.0;
    for (uint r = chunk * span + lid; r < end; r += WG) acc += term(at, int(r));
    s_part[lid] = acc;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
      if (lid < s) s_part[lid] = s_part[lid] + s_part[lid + s];
      barrier();
    }
    if (lid == 0u) outv[t] = s_part[0];
    barrier();  // s_part[0] is read before the next item overwrites it
  }
}
