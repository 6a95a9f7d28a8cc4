#version 450
// arange: out[i] = i, as f32 bits or as int32.

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint n;
  uint is_float;
} pc;

layout(std430, set = 0, binding = 0) writeonly buffer Out { uint outv[]; };

void main() {
  const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += step) outv[i] = pc.is_float != 0u ? floatBitsToUint(float(i)) : i;
}
