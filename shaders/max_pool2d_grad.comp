#version 450
#extension GL_GOOGLE_include_directive : require
// max_pool2d_grad on NCHW, as a gather so no two invocations write one place: dx at element e of
// plane (n, c) is the sum of g[n,c,i,j] over the windows (i, j) covering e whose argmax is e, added
// in ascending window order (i, then j) from 0, exactly the interpreter's scatter order per
// element. The argmax is recomputed per window as the interpreter picks it
// (max_pool2d_window.glsl), so ties and NaN route the gradient to the same element.
//
// Two modes, fixed per launch by the host from the work per element (covering windows x taps):
//   mode 1: one invocation per input element walks its covering windows (<= 4096 compares in
//           all; lavapipe ends an invocation's loops after 65535 iterations in total).
//   mode 0: one workgroup per input element, each window's argmax found by the whole group.
// Both loop grid-stride over input elements.

layout(local_size_x = 256) in;
const uint WG = 256;

layout(push_constant) uniform Push {
  uint mode;
  uint rows;  // input elements
  int h, w;   // input plane
  int oh, ow;
  int kernel, stride, padding;
  int unused;
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

void main() {
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
