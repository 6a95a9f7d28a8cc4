#version 450
// where_causal over [..., T, T] matrices: y = value where the column is past the row (col > row),
// else x. Element f sits at column f % T of matrix row (f / T) % T. One invocation per element
// (grid-stride); 32-bit words are copied, so x's bits (NaN payloads, denormals) pass unchanged
// and `value` arrives as the f32 bits the host rounded it to.

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint count;  // elements
  uint len;    // T
  uint value;  // the fill, as f32 bits
} pc;

layout(std430, set = 0, binding = 0) readonly buffer In { uint x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { uint y[]; };

void main() {
  const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint f = gl_GlobalInvocationID.x; f < pc.count; f += step) {
    const uint q = f / pc.len;
    const uint col = f - q * pc.len;
    const uint row = q % pc.len;
    y[f] = col > row ? pc.value : x[f];
  }
}
