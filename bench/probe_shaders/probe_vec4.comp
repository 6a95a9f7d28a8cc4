#version 450
#extension GL_EXT_control_flow_attributes : require
// The leanest streaming c = a + b (or c = a with -DCOPY): float vec4 words, no op switch, no
// aliased scalar views, no tail. The probe varies the launch through specialization constants so
// one source covers every shape it times, and the qualifiers through -DRESTRICT, because
// `restrict` is the one thing that lets a compiler reorder the loads of one vec4 past the store of
// another (the repo found 4 vec4 per invocation slower without it).
//
// Requires n % 4 == 0 (the host checks).

layout(local_size_x_id = 0) in;
// vec4 words per invocation; invocation i of a group handles i, i + WG, i + 2 WG, ... inside its
// group's block of WG * VPI words, so every load instruction of a warp is fully coalesced.
layout(constant_id = 1) const uint VPI = 1;
// true: 1-D grid, each invocation strides by the whole grid (the repo kernel's loop);
// false: one block per group, the group's index linearized from a 2-D grid (no loop).
layout(constant_id = 2) const bool GRID_STRIDE = false;

layout(push_constant) uniform Push {
  uint op;  // unused; the push range is shared with the repo kernel's layout
  uint n;   // floats
} pc;

#ifdef RESTRICT
#define QUAL restrict
#else
#define QUAL
#endif

// Bindings 0, 1 and 3 as in the repo kernel (2 is its unused third operand).
layout(std430, set = 0, binding = 0) QUAL readonly buffer A { vec4 a[]; };
layout(std430, set = 0, binding = 1) QUAL readonly buffer B { vec4 b[]; };
layout(std430, set = 0, binding = 3) QUAL writeonly buffer C { vec4 c[]; };

#ifdef COPY
#define LOAD_B(v) vec4(0.0)
#define COMBINE(x, y) (x)
#else
#define LOAD_B(v) b[v]
#define COMBINE(x, y) ((x) + (y))
#endif

void main() {
  const uint n4 = pc.n / 4u;
  if (GRID_STRIDE) {
    const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint v = gl_GlobalInvocationID.x; v < n4; v += step) c[v] = COMBINE(a[v], LOAD_B(v));
    return;
  }
  const uint group = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  const uint base = group * (gl_WorkGroupSize.x * VPI) + gl_LocalInvocationID.x;
  if (VPI == 1u) {
    if (base < n4) c[base] = COMBINE(a[base], LOAD_B(base));
    return;
  }
  // All loads before any store: without `restrict` the compiler may not hoist a later load above
  // an earlier store itself, and then the invocation has one load in flight instead of VPI.
  vec4 ra[VPI];
  vec4 rb[VPI];
  [[unroll]] for (uint k = 0u; k < VPI; ++k) {
    const uint v = base + k * gl_WorkGroupSize.x;
    ra[k] = v < n4 ? a[v] : vec4(0.0);
    rb[k] = v < n4 ? LOAD_B(v) : vec4(0.0);
  }
  [[unroll]] for (uint k = 0u; k < VPI; ++k) {
    const uint v = base + k * gl_WorkGroupSize.x;
    if (v < n4) c[v] = COMBINE(ra[k], rb[k]);
  }
}
