#version 450
#extension GL_GOOGLE_include_directive : require
// max_pool2d on NCHW: y[n,c,i,j] = the maximum of the kernel x kernel window at
// (i*stride - padding, j*stride - padding) of plane (n, c), the element picked as the interpreter
// picks it (max_pool2d_window.glsl), so the value is exact.
//
// Two modes, fixed per launch by the host:
//   mode 1: one invocation per output element walks its window (windows of <= 4096 taps; lavapipe
//           ends an invocation's loops after 65535 iterations in total).
//   mode 0: one workgroup per output element for larger windows (group_window_argmax).
// Both loop grid-stride over output elements.

layout(local_size_x = 256) in;
const uint WG = 256;

layout(push_constant) uniform Push {
  uint mode;
  uint rows;  // output elements
  int h, w;   // input plane
  int oh, ow;
  int kernel, stride, padding;
  int unused;
} pc;

layout(std430, set = 0, binding = 0) readonly buffer In { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { float y[]; };

#include "max_pool2d_window.glsl"

float picked(int plane, int best) {
  // -inf is the maximum of a window of padding alone, which only an empty H or W can produce.
  return best == NONE ? uintBitsToFloat(0xff800000u) : x[plane + best];
}

void main() {
  const int out_plane = pc.oh * pc.ow;
  if (pc.mode == 1u) {
    const uint step = gl_NumWorkGroups.x * WG;
    for (uint row = gl_GlobalInvocationID.x; row < pc.rows; row += step) {
      const int r = int(row);
      const int plane = (r / out_plane) * pc.h * pc.w;
      const int i = (r % out_plane) / pc.ow, j = r % pc.ow;
      y[row] = picked(plane, window_argmax(plane, i, j));
    }
    return;
  }

  for (uint row = gl_WorkGroupID.x; row < pc.rows; row += gl_NumWorkGroups.x) {
    const int r = int(row);
    const int plane = (r / out_plane) * pc.h * pc.w;
    const int i = (r % out_plane) / pc.ow, j = r % pc.ow;
    const int best = group_window_argmax(plane, i, j);
    if (gl_LocalInvocationID.x == 0u) y[row] = picked(plane, best);
  }
}
