#version 450
// Elementwise c = a + b over n f32 elements, one invocation per element.

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint n;
} pc;

layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C { float c[]; };

void main() {
  const uint i = gl_GlobalInvocationID.x;
  // The last workgroup runs past n when n is not a multiple of 256.
  if (i < pc.n) {
    c[i] = a[i] + b[i];
  }
}
