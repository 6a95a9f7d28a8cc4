#version 450
// full / zeros / ones: every 32-bit word of the output set to one value (float bits for f32, the
// int32 for i32 and bool), computed on the host.

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint n;
  uint value;
} pc;

layout(std430, set = 0, binding = 0) writeonly buffer Out { uint outv[]; };

void main() {
  const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += step) outv[i] = pc.value;
}
