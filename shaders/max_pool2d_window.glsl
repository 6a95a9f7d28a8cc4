// Included by max_pool2d.comp and max_pool2d_grad.comp (local size 256): the argmax of one pooling
// window within an H x W plane, picked as the interpreter's window_argmax picks it, so the forward
// value and the element the gradient is routed to agree with it exactly: the first NaN in row-major
// window order, else the first maximum (ties go to the earlier element); padded taps are never
// chosen. The includer declares the push constants `pc` (h, w, kernel, stride, padding) and the
// input buffer `x`.

const int NONE = -1;  // a window with no element inside the image (only with an empty H or W)

shared float s_val[256];
shared int s_idx[256];

// The window's taps inside the image: plane rows [lo.x, hi.x), columns [lo.y, hi.y).
struct Taps {
  ivec2 lo;
  ivec2 hi;
};

Taps window_taps(int i, int j) {
  const ivec2 start = ivec2(i, j) * pc.stride - pc.padding;
  Taps t;
  t.lo = max(start, ivec2(0));
  t.hi = min(start + pc.kernel, ivec2(pc.h, pc.w));
  return t;
}

// Whether the element (vb, ib) beats the current pick (va, ia): NONE loses, the first NaN wins,
// else the strictly larger value, ties to the smaller flat index (= earlier in window order).
bool arg_takes(float va, int ia, float vb, int ib) {
  if (ib == NONE) return false;
  if (ia == NONE) return true;
  const bool na = isnan(va), nb = isnan(vb);
  if (na || nb) return (na && nb) ? ib < ia : nb;
  if (vb == va) return ib < ia;
  return vb > va;
}

// One invocation walks the window in row-major order with the interpreter's comparison. Returns
// the flat index within the plane starting at `plane`.
int window_argmax(int plane, int i, int j) {
  const Taps t = window_taps(i, j);
  int best = NONE;
  float m = 0.0;
  for (int ih = t.lo.x; ih < t.hi.x; ++ih) {
    for (int iw = t.lo.y; iw < t.hi.y; ++iw) {
      const int at = ih * pc.w + iw;
      const float v = x[plane + at];
      if (best == NONE || v > m || (isnan(v) && !isnan(m))) {
        best = at;
        m = v;
      }
    }
  }
  return best;
}

// The whole workgroup (every invocation must call it, with the same arguments): invocation l folds
// taps l, l+256, ... of the window, then a fixed-shape shared-memory tree combines the picks.
// arg_takes is a total order, so the result is the serial walk's.
int group_window_argmax(int plane, int i, int j) {
  const Taps t = window_taps(i, j);
  const int cols = max(t.hi.y - t.lo.y, 0);
  const int count = max(t.hi.x - t.lo.x, 0) * cols;
  const int lid = int(gl_LocalInvocationID.x);
  int best = NONE;
  float m = 0.0;
  for (int q = lid; q < count; q += 256) {
    const int row = q / cols;
    const int at = (t.lo.x + row) * pc.w + t.lo.y + (q - row * cols);
    const float v = x[plane + at];
    if (arg_takes(m, best, v, at)) {
      best = at;
      m = v;
    }
  }
  s_val[lid] = m;
  s_idx[lid] = best;
  barrier();
  for (int s = 128; s > 0; s >>= 1) {
    if (lid < s && arg_takes(s_val[lid], s_idx[lid], s_val[lid + s], s_idx[lid + s])) {
      s_val[lid] = s_val[lid + s];
      s_idx[lid] = s_idx[lid + s];
    }
    barrier();
  }
  const int result = s_idx[0];
  barrier();  // every invocation has read the pick before the next call overwrites it
  return result;
}
