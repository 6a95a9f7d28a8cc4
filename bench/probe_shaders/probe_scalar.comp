#version 450
// The textbook streaming add: one float per invocation, no loop, the group index linearized from
// a 2-D grid (2^26 floats need 2^18 groups of 256, past the 65535 limit of one axis). If this
// matches the vec4 kernels, vector width is not what limits the repo kernel.

layout(local_size_x_id = 0) in;

layout(push_constant) uniform Push {
  uint op;  // unused; the push range is shared with the repo kernel's layout
  uint n;   // floats
} pc;

layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 3) writeonly buffer C { float c[]; };

void main() {
  const uint group = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  const uint i = group * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  if (i < pc.n) c[i] = a[i] + b[i];
}
