#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_16bit_storage : require
// cast: every element of the input converted to the output's float dtype (src/vk/kernels/precision.cpp).
// f32, i32 and bool values are 32-bit words; f16 and bf16 values are 16-bit words read and written
// through 16-bit storage (storageBuffer16BitAccess). All conversions are integer bit manipulation
// (low_precision.glsl), rounded once to nearest even exactly as the interpreters round.

layout(local_size_x = 256) in;

// The dtypes as the planner encodes them (precision.cpp's CastDType).
const uint F32 = 0u;
const uint I32 = 1u;
const uint BOOL = 2u;
const uint F16 = 3u;
const uint BF16 = 4u;

layout(constant_id = 0) const uint FROM = 0u;
layout(constant_id = 1) const uint TO = 0u;

layout(push_constant) uniform Push { uint n; } pc;

// Each binding seen as 32-bit and as 16-bit words (aliased descriptors); only the dtype's view is used.
layout(std430, set = 0, binding = 0) readonly buffer In32 { uint in32[]; };
layout(std430, set = 0, binding = 0) readonly buffer In16 { uint16_t in16[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out32 { uint out32[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out16 { uint16_t out16[]; };

#include "low_precision.glsl"

// Significant bits the output keeps: an integer source is rounded to them once, directly.
uint precision_of_output() { return TO == F16 ? 11u : TO == BF16 ? 8u : 24u; }

// Element i as f32 bits: exact for f32, f16, bf16 and bool; an i32 already rounded to the output's
// precision.
uint load_as_f32_bits(uint i) {
  if (FROM == F16) return lp_f16_bits_to_f32_bits(uint(in16[i]));
  if (FROM == BF16) return lp_bf16_bits_to_f32_bits(uint(in16[i]));
  if (FROM == I32) return lp_int_to_f32_bits(int(in32[i]), precision_of_output());
  if (FROM == BOOL) return in32[i] != 0u ? 0x3f800000u : 0u;
  return in32[i];
}

void main() {
  const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += step) {
    const uint bits = load_as_f32_bits(i);
    if (TO == F16) {
      out16[i] = uint16_t(lp_f32_to_f16_bits(bits));
    } else if (TO == BF16) {
      out16[i] = uint16_t(lp_f32_to_bf16_bits(bits));
    } else {
      out32[i] = bits;
    }
  }
}
