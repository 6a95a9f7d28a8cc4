#version 450
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_control_flow_attributes : require
// The streaming c = a + b of probe_vec4.comp (or, with -DSCALAR, of probe_scalar.comp) with its
// operands reached through buffer device addresses instead of descriptors: the push constants carry
// the three 64-bit addresses and n, and no descriptor set is bound. Same launch parameters, same
// specialization constants, same order of loads and stores, so a pair of variants differs only in
// how the operands are addressed.
//
// Each address is computed as base + index * word size in 64-bit integers rather than by indexing
// an array member of the reference: an access chain's index is a signed 32-bit value, which would
// wrap at 2^31 floats (8 GiB), and past 4 GiB is what device addresses are for.

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint VPI = 1;  // words per invocation (vec4 form only)
layout(constant_id = 2) const bool GRID_STRIDE = false;

#ifdef SCALAR
#define WORD float
#define WORD_BYTES 4
#else
#define WORD vec4
#define WORD_BYTES 16
#endif

// One word per reference; the alignment lets the compiler issue one 16-byte load per vec4.
layout(buffer_reference, std430, buffer_reference_align = WORD_BYTES) readonly buffer In { WORD v; };
layout(buffer_reference, std430, buffer_reference_align = WORD_BYTES) writeonly buffer Out { WORD v; };

layout(push_constant) uniform Push {
  uint64_t a, b, c;  // device addresses of the operands (bytes)
  uint n;            // floats
} pc;

WORD load(uint64_t base, uint i) { return In(base + uint64_t(i) * WORD_BYTES).v; }
void store(uint i, WORD value) { Out(pc.c + uint64_t(i) * WORD_BYTES).v = value; }

void main() {
#ifdef SCALAR
  const uint words = pc.n;
#else
  const uint words = pc.n / 4u;  // requires n % 4 == 0 (the host checks)
#endif
  if (GRID_STRIDE) {
    const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint v = gl_GlobalInvocationID.x; v < words; v += step) store(v, load(pc.a, v) + load(pc.b, v));
    return;
  }
  const uint group = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  const uint base = group * (gl_WorkGroupSize.x * VPI) + gl_LocalInvocationID.x;
  if (VPI == 1u) {
    if (base < words) store(base, load(pc.a, base) + load(pc.b, base));
    return;
  }
  // All loads before any store, as in probe_vec4.comp, so VPI loads are in flight at once.
  WORD ra[VPI];
  WORD rb[VPI];
  [[unroll]] for (uint k = 0u; k < VPI; ++k) {
    const uint v = base + k * gl_WorkGroupSize.x;
    ra[k] = v < words ? load(pc.a, v) : WORD(0.0);
    rb[k] = v < words ? load(pc.b, v) : WORD(0.0);
  }
  [[unroll]] for (uint k = 0u; k < VPI; ++k) {
    const uint v = base + k * gl_WorkGroupSize.x;
    if (v < words) store(v, ra[k] + rb[k]);
  }
}
