#version 450
#extension GL_GOOGLE_include_directive : require
// randn: element i is Box-Muller (cosine branch) of the first two Philox words drawn at counter i
// under the key (seed, salt), as src/interp/kernels/random.cpp. The words are bit-identical to the
// interpreter's (philox.glsl); the uniforms built from them are exact in float; only the fp32
// log, sqrt and cos round.
//
// GLSL's own log and cos are not used: Vulkan allows cos an absolute error of 2^-11 and log one of
// 2^-21 near 1, far above randn's tolerance on some devices. Instead:
//   log: musl's logf (reduction to [sqrt(2)/2, sqrt(2)], a 4-term polynomial in s^2, s = f/(2+f)),
//        below 1 ulp with IEEE operations, relative accuracy kept for u1 near 1;
//   cos(2 pi u2): u2 = j 2^-24 exactly, so the quadrant (top 2 bits of j) and the fraction within
//        it are exact integers; the fraction is folded to [0, 1/2] of a quadrant (an angle of at
//        most pi/4) and sin or cos of it is a Taylor polynomial (truncation < 1e-10).
// Checked offline over all 2^24 inputs against double (an fp32 emulation of this code): log below
// 0.83 ulp, cos(2 pi u2) within 2.5 * 2^-24 relative. sqrt is GLSL's (correctly rounded on lavapipe,
// a few ulp allowed on GPUs). End to end, tests/vk/vk_random_test.cpp measured at most 3.5 * 2^-24
// relative error against the f64 oracle on lavapipe and on an NVIDIA H100 (about 2 float ulp;
// randn's tolerance class allows 16 ulp of the largest value), and asserts 16 * 2^-24 relative.
//
// mode 1 (tests only) writes the raw Philox words instead: out[i] = word (i & 3) of element i >> 2.

layout(local_size_x = 256) in;
const uint WG = 256;

layout(push_constant) uniform Push {
  uint salt;
  uint count;       // output elements
  uint index_high;  // the high word of the 64-bit element counter: 0 for every graph (see below)
  uint mode;        // 0 randn, 1 raw words
} pc;

layout(std430, set = 0, binding = 0) readonly buffer Seed { int seed[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { uint outv[]; };

#include "philox.glsl"

// Natural log of a positive normal float (musl logf without the special cases).
float log_positive(float x) {
  uint ix = floatBitsToUint(x) + (0x3f800000u - 0x3f3504f3u);
  const float k = float(int(ix >> 23) - 0x7f);
  ix = (ix & 0x007fffffu) + 0x3f3504f3u;
  const float f = uintBitsToFloat(ix) - 1.0;
  const float s = f / (2.0 + f);
  const float z = s * s;
  const float w = z * z;
  const float t1 = w * (4.000097215e-01 + w * 2.427907884e-01);
  const float t2 = z * (6.666666269e-01 + w * 2.849878669e-01);
  const float hfsq = 0.5 * f * f;
  // ln 2 split in two so k * ln2_hi is exact.
  return s * (hfsq + t2 + t1) + k * 9.058000614e-06 - hfsq + f + k * 6.931381226e-01;
}

float sin_quarter(float t) {  // |t| <= pi/4
  const float z = t * t;
  return t + t * z *
                 (-1.666666716e-01 +
                  z * (8.333333768e-03 + z * (-1.984127011e-04 + z * (2.755731884e-06 + z * -2.505210794e-08))));
}

float cos_quarter(float t) {  // |t| <= pi/4
  const float z = t * t;
  return 1.0 +
         z * (-0.5 + z * (4.166666791e-02 + z * (-1.388888923e-03 + z * (2.480158764e-05 + z * -2.755731998e-07))));
}

// cos(2 pi j 2^-24) for j < 2^24: quadrant q = j >> 22, fraction r 2^-22 within it.
float cos_turn(uint j) {
  const uint q = j >> 22;
  const uint r = j & 0x3fffffu;
  const bool upper = r > 0x200000u;  // fold: cos/sin((1 - f) pi/2) = sin/cos(f pi/2)
  const float t = float(upper ? 0x400000u - r : r) * 3.745070387e-07;  // pi / 2^23
  const bool use_sin = ((q & 1u) == 1u) != upper;
  const float v = use_sin ? sin_quarter(t) : cos_quarter(t);
  return (q == 1u || q == 2u) ? -v : v;
}

// philox::box_muller: u1 = ((w0 >> 8) + 1) 2^-24 in (0, 1], u2 = (w1 >> 8) 2^-24 in [0, 1).
float box_muller(uint word0, uint word1) {
  const float u1 = float((word0 >> 8) + 1u) * (1.0 / 16777216.0);
  return sqrt(-2.0 * log_positive(u1)) * cos_turn(word1 >> 8);
}

void main() {
  const uvec2 key = philox_key(seed[0], pc.salt);
  const uint step = gl_NumWorkGroups.x * WG;
  // The counter is 64 bits (low, high) as in the interpreter; the high word is 0 for every graph,
  // since the host refuses outputs of 2^32 or more elements (no device binds such a buffer).
  for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += step) {
    if (pc.mode == 0u) {
      const uvec4 w = philox_draw(key, i, pc.index_high);
      outv[i] = floatBitsToUint(box_muller(w.x, w.y));
    } else {
      const uvec4 w = philox_draw(key, i >> 2, pc.index_high);
      outv[i] = w[i & 3u];
    }
  }
}
