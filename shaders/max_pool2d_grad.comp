#version 450
#extension GL_GOOGLE_include_directive : require
// max_pool2d_grad on NCHW, as a gather so no two invocations write one place: dx at element e of
// plane (n, c) is the sum of g[n,c,i,j] over the windows (i, j) covering e whose argmax is e, added
// in ascending window order (i, then j) from 0, exactly the interpreter's scatter order per
// element. The argmax is recomputed per window as the interpreter picks it
// (max_pool2d_window.glsl), so ties and NaN route the gradient to the same element.
//
// Three modes, fixed per launch by the host (src/vk/kernels/image.cpp):
//   mode 2: windows that do not overlap (stride >= kernel): one invocation per WINDOW finds its
//           argmax once and writes its whole cell (below), so no argmax is found twice.
//   mode 1: one invocation per input element walks its covering windows (<= 4096 compares in
//           all; lavapipe ends an invocation's loops after 65535 iterations in total).
//   mode 0: one workgroup per input element, each window's argmax found by the whole group.
// All loop grid-stride, mode 2 over windows, modes 1 and 0 over input elements.
//
// Mode 2's cells: along each axis window i owns input rows [i*s - p, (i+1)*s - p), except that
// window 0's cell starts at 0 and the last window's ends at H. With s >= k and p <= k/2 every
// window start i*s - p (i >= 1) lies in (0, H), so the cells partition [0, H), and each window's
// taps inside the image lie in its own cell; no other window covers them. Each element of the cell
// is therefore what the gather gives it: 0.0 + g at the window's argmax, 0.0 elsewhere.

layout(local_size_x = 256) in;
const uint WG = 256;

layout(push_constant) uniform Push {
  uint mode;
  uint rows;  // input elements (modes 1, 0) or windows (mode 2)
  int h, w;   // input plane
  int oh, ow;
  int kernel, stride, padding;
  int zero_bits;  // always 0: the +0.0 that mode 2 adds to g, read at run time (see cell_value)
} pc;

layout(std430, set = 0, binding = 0) readonly buffer In { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer Grad { float g[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { float dx[]; };

#include "max_pool2d_window.glsl"

// Windows k (ascending) whose extent [k*s - p, k*s - p + kernel) along one axis covers e:
// returns (first k, one past the last k).
ivec2 covering(int e, int count) {
  const int need = e + pc.padding - pc.kernel + 1;  // k*s >= need
  const int lo = need <= 0 ? 0 : (need + pc.stride - 1) / pc.stride;
  const int hi = min(count - 1, (e + pc.padding) / pc.stride);
  return ivec2(lo, max(lo, hi + 1));
}

// Input element `row`: its place e in its plane, where its plane and its gradient plane start,
// and the windows covering it (rows wi.x..wi.y-1, columns wj.x..wj.y-1).
struct Element {
  int e, plane, g_plane;
  ivec2 wi, wj;
};

Element element(uint row) {
  const int in_plane = pc.h * pc.w;
  const int r = int(row);
  const int p = r / in_plane;
  Element el;
  el.e = r - p * in_plane;
  el.plane = p * in_plane;
  el.g_plane = p * pc.oh * pc.ow;
  el.wi = covering(el.e / pc.w, pc.oh);
  el.wj = covering(el.e % pc.w, pc.ow);
  return el;
}

// The serial and the workgroup gather are separate functions on purpose: llvmpipe (Mesa 22.3)
// returned garbage when a loop whose trip count differs between invocations merely contained a
// call to the barrier-using group_window_argmax behind a branch on the (uniform) mode.
float gathered_serial(uint row) {
  const Element el = element(row);
  float acc = 0.0;
  for (int i = el.wi.x; i < el.wi.y; ++i) {
    for (int j = el.wj.x; j < el.wj.y; ++j) {
      if (window_argmax(el.plane, i, j) == el.e) acc += g[el.g_plane + i * pc.ow + j];
    }
  }
  return acc;
}

// Called by the whole workgroup with the same row.
float gathered_by_group(uint row) {
  const Element el = element(row);
  float acc = 0.0;
  for (int i = el.wi.x; i < el.wi.y; ++i) {
    for (int j = el.wj.x; j < el.wj.y; ++j) {
      if (group_window_argmax(el.plane, i, j) == el.e) acc += g[el.g_plane + i * pc.ow + j];
    }
  }
  return acc;
}

// One axis of a window's cell: [first, end) of the `count` windows' partition of [0, extent).
ivec2 cell(int i, int count, int extent) {
  const int first = i == 0 ? 0 : i * pc.stride - pc.padding;
  const int end = i == count - 1 ? extent : (i + 1) * pc.stride - pc.padding;
  return ivec2(first, end);
}

// What the gather gives the window's argmax: acc = 0.0, then acc += g (so -0.0 becomes +0.0 and a
// NaN stays NaN). The zero comes from a push constant so that no compiler can fold 0.0 + g to g
// (that fold is only valid when signed zeros may be ignored); `precise` keeps the add as written.
float cell_value(float grad) {
  precise float v = intBitsToFloat(pc.zero_bits) + grad;
  return v;
}

// Mode 2: window `row` (flat over planes, window rows, window columns) writes its cell.
void write_cell(uint row) {
  const int r = int(row);
  const int windows = pc.oh * pc.ow;
  const int p = r / windows;
  const int q = r - p * windows;
  const int i = q / pc.ow;
  const int j = q - i * pc.ow;
  const int plane = p * pc.h * pc.w;
  const int best = window_argmax(plane, i, j);
  const float v = cell_value(g[r]);
  const ivec2 rows = cell(i, pc.oh, pc.h);
  const ivec2 cols = cell(j, pc.ow, pc.w);
  for (int ih = rows.x; ih < rows.y; ++ih) {
    const int at_row = ih * pc.w;
    for (int iw = cols.x; iw < cols.y; ++iw) {
      const int at = at_row + iw;
      dx[plane + at] = at == best ? v : 0.0;
    }
  }
}

void main() {
  if (pc.mode == 2u) {
    const uint step = gl_NumWorkGroups.x * WG;
    for (uint row = gl_GlobalInvocationID.x; row < pc.rows; row += step) write_cell(row);
    return;
  }
  if (pc.mode == 1u) {
    const uint step = gl_NumWorkGroups.x * WG;
    for (uint row = gl_GlobalInvocationID.x; row < pc.rows; row += step) dx[row] = gathered_serial(row);
    return;
  }

  for (uint row = gl_WorkGroupID.x; row < pc.rows; row += gl_NumWorkGroups.x) {
    const float acc = gathered_by_group(row);
    if (gl_LocalInvocationID.x == 0u) dx[row] = acc;
  }
}
