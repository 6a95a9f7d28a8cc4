#version 450
#extension GL_GOOGLE_include_directive : require
// dropout (inverted): y[i] = keep ? x[i] / (1 - p) : 0, where element i keeps when its uniform
// (w0 >> 8) 2^-24 of the Philox words drawn at counter i under (seed, salt) is >= p, as
// src/interp/kernels/random.cpp. The keep test is an integer comparison of w0 >> 8 with
// ceil(p 2^24), computed by the host in double: exactly the interpreter's double comparison, so the
// kept elements are identical to both interpreters' for every p (no float rounding can flip one).
// 1 - p arrives as the float the interpreter divides by (formed in double, rounded once).

layout(local_size_x = 256) in;
const uint WG = 256;

layout(push_constant) uniform Push {
  uint salt;
  uint count;           // elements
  uint keep_threshold;  // ceil(p 2^24) in [0, 2^24]: keep when (w0 >> 8) >= keep_threshold
  float keep_scale_denominator;
} pc;

layout(std430, set = 0, binding = 0) readonly buffer In { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer Seed { int seed[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { float y[]; };

#include "philox.glsl"

void main() {
  const uvec2 key = philox_key(seed[0], pc.salt);
  const uint step = gl_NumWorkGroups.x * WG;
  // The counter's high word is 0: the host refuses tensors of 2^32 or more elements.
  for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += step) {
    const uint word0 = philox_draw(key, i, 0u).x;
    y[i] = (word0 >> 8) >= pc.keep_threshold ? x[i] / pc.keep_scale_denominator : 0.0;
  }
}
