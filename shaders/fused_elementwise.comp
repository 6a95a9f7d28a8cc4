#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// A run of elementwise f32 ops over one shape, fused into one dispatch (src/vk/fusion.cpp builds
// the launch). The program is specialization constants, so the driver compiles each distinct
// program into straight-line code: every switch on an op code, every register index and every
// unused input, output or step folds away, and the intermediates live in registers only.
//
// Registers: 0..NUM_INPUTS-1 hold the inputs (a one-element input is broadcast: read once per
// invocation; a periodic input, one whose shape is the output's trailing axes, e.g. a bias [C]
// under [N, C], repeats every pc.period[k] elements, a multiple of 4; a spread input, the
// output's leading axes then 1s, e.g. a row statistic [N, 1] under [N, C], holds one element per
// pc.period[k] output elements, a multiple of 4, so a vec4 reads one word; a channel input, 1s
// then a block of the output's axes then 1s, e.g. a conv bias [1, C, 1, 1] under [N, C, H, W],
// holds one element per pc.period[k] output elements, a multiple of 4, and repeats after its
// element count: output element i reads (i / period) % count; src/vk/fusion_operands.h),
// MAX_INPUTS + s holds step s's result. A step word is
//   op | a << 8 | b << 16 | c << 24
// with op < UNARY a binary-family code (ew_codes.glsl): an ew_binary op or a comparison (of
// registers a, b), or where (of registers a, b and register c); and op >= UNARY an ew_unary code +
// UNARY (of register a; c is its param slot: its real attributes are pc.p0[c] and pc.p1[c]). The
// math is elementwise_math.glsl, as in the per-op kernels, so every element gets the same bits as
// the unfused launches.
//
// Layout: one vec4 of every input and output per invocation (grid-stride past 65535 groups), the
// n % 4 trailing elements as one more, partial vec4. Each vec4 runs the program once per lane, as
// four independent scalar programs.

layout(local_size_x = 256) in;

const uint MAX_INPUTS = 12u;
const uint MAX_OUTPUTS = 4u;
const uint MAX_STEPS = 24u;
const uint MAX_PARAM_SLOTS = 4u;
const uint MAX_CHANNEL_INPUTS = 11u;  // src/vk/fusion.cpp's kMaxChannelInputs
const uint UNARY = 16u;  // src/vk/fusion.cpp's kUnary

layout(constant_id = 0) const uint NUM_STEPS = 0u;
layout(constant_id = 1) const uint NUM_INPUTS = 0u;
layout(constant_id = 2) const uint SCALAR_INPUTS = 0u;  // bit k: input k has one element
layout(constant_id = 3) const uint NUM_OUTPUTS = 0u;
layout(constant_id = 4) const uint OUTPUT_REGS = 0u;  // byte o: the register output o stores
layout(constant_id = 5) const uint P0 = 0u;
layout(constant_id = 6) const uint P1 = 0u;
layout(constant_id = 7) const uint P2 = 0u;
layout(constant_id = 8) const uint P3 = 0u;
layout(constant_id = 9) const uint P4 = 0u;
layout(constant_id = 10) const uint P5 = 0u;
layout(constant_id = 11) const uint P6 = 0u;
layout(constant_id = 12) const uint P7 = 0u;
layout(constant_id = 13) const uint P8 = 0u;
layout(constant_id = 14) const uint P9 = 0u;
layout(constant_id = 15) const uint P10 = 0u;
layout(constant_id = 16) const uint P11 = 0u;
layout(constant_id = 17) const uint P12 = 0u;
layout(constant_id = 18) const uint P13 = 0u;
layout(constant_id = 19) const uint P14 = 0u;
layout(constant_id = 20) const uint P15 = 0u;
layout(constant_id = 21) const uint P16 = 0u;
layout(constant_id = 22) const uint P17 = 0u;
layout(constant_id = 23) const uint P18 = 0u;
layout(constant_id = 24) const uint P19 = 0u;
layout(constant_id = 25) const uint P20 = 0u;
layout(constant_id = 26) const uint P21 = 0u;
layout(constant_id = 27) const uint P22 = 0u;
layout(constant_id = 28) const uint P23 = 0u;
layout(constant_id = 29) const uint PERIODIC_INPUTS = 0u;  // bit k: input k repeats (pc.period[k])
layout(constant_id = 30) const uint SPREAD_INPUTS = 0u;    // bit k: each element of input k spans
                                                           // pc.period[k] output elements
layout(constant_id = 31) const uint CHANNEL_INPUTS = 0u;   // bit k: as spread, repeating after
                                                           // pc.channel_size[channel_slot(k)]

layout(push_constant) uniform Push {
  uint n;  // elements of every non-broadcast input and every output
  float p0[MAX_PARAM_SLOTS];  // param slots of the unary steps with real attributes (ew_params)
  float p1[MAX_PARAM_SLOTS];
  uint period[MAX_INPUTS];  // a multiple of 4: a periodic input's elements, or the output elements
                            // each element of a spread or channel input covers
  // The j-th channel input's element count (j: its rank among the channel inputs). A second word
  // per input would not fit the 128 bytes of push constants Vulkan guarantees; 11 do.
  uint channel_size[MAX_CHANNEL_INPUTS];
} pc;

// Bindings 0..11: inputs (unused ones bound to input 0), 12..15: outputs (unused ones bound to
// output 0); scalar and vec4 views of each (aliased descriptors).
#define INPUT(k)                                                                  \
  layout(std430, set = 0, binding = k) readonly buffer In##k { uint in##k[]; }; \
  layout(std430, set = 0, binding = k) readonly buffer In##k##v { uvec4 in##k##v[]; };
#define OUTPUT(o, b)                                                                 \
  layout(std430, set = 0, binding = b) writeonly buffer Out##o { uint out##o[]; }; \
  layout(std430, set = 0, binding = b) writeonly buffer Out##o##v { uvec4 out##o##v[]; };
INPUT(0) INPUT(1) INPUT(2) INPUT(3) INPUT(4) INPUT(5)
INPUT(6) INPUT(7) INPUT(8) INPUT(9) INPUT(10) INPUT(11)
OUTPUT(0, 12) OUTPUT(1, 13) OUTPUT(2, 14) OUTPUT(3, 15)

#include "elementwise_math.glsl"

// Compile-time checks of the step-word layout against the generated codes (an array of size 0
// does not compile): every binary code below UNARY, every unary code + UNARY (EW_COPY, the last,
// included) in the op byte.
const uint BINARY_CODES_BELOW_UNARY[EW_BINARY_CODES <= UNARY ? 1 : 0] = {0u};
const uint UNARY_CODES_FIT_A_BYTE[UNARY + EW_ROUND_BF16 <= 255u ? 1 : 0] = {0u};

uvec4 X[MAX_INPUTS];   // the inputs' words at this position (a broadcast input's word in every lane)
uvec4 Y[MAX_OUTPUTS];  // the outputs' words
float R[MAX_INPUTS + MAX_STEPS];

bool is_scalar(uint k) { return ((SCALAR_INPUTS >> k) & 1u) != 0u; }
bool is_periodic(uint k) { return ((PERIODIC_INPUTS >> k) & 1u) != 0u; }
bool is_spread(uint k) { return ((SPREAD_INPUTS >> k) & 1u) != 0u; }
bool is_channel(uint k) { return ((CHANNEL_INPUTS >> k) & 1u) != 0u; }
// Channel input k's slot in pc.channel_size: the channel inputs below k (a constant once specialized).
uint channel_slot(uint k) { return uint(bitCount(CHANNEL_INPUTS & ((1u << k) - 1u))); }

// Comparisons give 1.0 or 0.0 (a bool the run's where consumes; the host never lets one reach
// memory); where picks b or register c by a != 0.0, copying the value as the per-op kernel copies
// its word.
float step_value(uint word) {
  const uint op = word & 0xFFu;
  const float a = R[(word >> 8u) & 0xFFu];
  const float b = R[(word >> 16u) & 0xFFu];
  const uint c = word >> 24u;
  if (op >= UNARY) return ew_unary(op - UNARY, a, pc.p0[c], pc.p1[c]);
  if (op == EW_WHERE) return a != 0.0 ? b : R[c];
  const uint compared = ew_compare(op, a, b);
  if (compared != EW_NOT_A_COMPARISON) return float(compared);
  return ew_binary(op, a, b);
}

#define RUN(s) \
  if (s < NUM_STEPS) R[MAX_INPUTS + s] = step_value(P##s);

// Lane c of X through the program into lane c of Y.
void run_lane(uint c) {
  [[unroll]] for (uint k = 0u; k < MAX_INPUTS; ++k) {
    if (k < NUM_INPUTS) R[k] = uintBitsToFloat(X[k][c]);
  }
  RUN(0) RUN(1) RUN(2) RUN(3) RUN(4) RUN(5)
  RUN(6) RUN(7) RUN(8) RUN(9) RUN(10) RUN(11)
  RUN(12) RUN(13) RUN(14) RUN(15) RUN(16) RUN(17)
  RUN(18) RUN(19) RUN(20) RUN(21) RUN(22) RUN(23)
  [[unroll]] for (uint o = 0u; o < MAX_OUTPUTS; ++o) {
    if (o < NUM_OUTPUTS) Y[o][c] = floatBitsToUint(R[(OUTPUT_REGS >> (8u * o)) & 0xFFu]);
  }
}

#define LOAD_SCALAR(k) \
  if (k < NUM_INPUTS && is_scalar(k)) X[k] = uvec4(in##k[0]);
// A spread input's index v / (run / 4) stays below its count; a channel input's wraps around.
#define LOAD4(k)                                                                         \
  if (k < NUM_INPUTS && !is_scalar(k)) {                                                 \
    if (is_periodic(k))                                                                  \
      X[k] = in##k##v[v % (pc.period[k] >> 2u)];                                         \
    else if (is_spread(k))                                                               \
      X[k] = uvec4(in##k[v / (pc.period[k] >> 2u)]);                                     \
    else if (is_channel(k))                                                              \
      X[k] = uvec4(in##k[(v / (pc.period[k] >> 2u)) % pc.channel_size[channel_slot(k)]]); \
    else                                                                                 \
      X[k] = in##k##v[v];                                                                \
  }
// The n % 4 tail never has a periodic, spread or channel input: its output is a whole number of
// periods (runs), each whole vec4s, so n % 4 == 0 whenever one is present. Lanes past n stay 0;
// what the program makes of them is never stored.
#define LOAD_TAIL(k)                                              \
  if (k < NUM_INPUTS && !is_scalar(k)) {                          \
    X[k] = uvec4(0u);                                             \
    for (uint c = 0u; c < tail; ++c) X[k][c] = in##k[4u * v + c]; \
  }
#define STORE4(o) \
  if (o < NUM_OUTPUTS) out##o##v[v] = Y[o];
#define STORE_TAIL(o) \
  if (o < NUM_OUTPUTS)  \
    for (uint c = 0u; c < tail; ++c) out##o[4u * v + c] = Y[o][c];

// One slot is a vec4 of every input and output, the last slot the n % 4 tail when there is one.
// The program appears once, in a loop over the four lanes that is kept a loop: the driver inlines
// every step's op switch before the specialization constants fold it away, and five unrolled
// copies of the program (four lanes and the tail) made lavapipe spend ~0.65 s creating each
// pipeline, most of a fused test's time.
void main() {
  LOAD_SCALAR(0) LOAD_SCALAR(1) LOAD_SCALAR(2) LOAD_SCALAR(3) LOAD_SCALAR(4) LOAD_SCALAR(5)
  LOAD_SCALAR(6) LOAD_SCALAR(7) LOAD_SCALAR(8) LOAD_SCALAR(9) LOAD_SCALAR(10) LOAD_SCALAR(11)
  const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  const uint whole = pc.n / 4u;
  const uint slots = whole + (pc.n % 4u == 0u ? 0u : 1u);
  for (uint v = gl_GlobalInvocationID.x; v < slots; v += step) {
    const uint tail = v < whole ? 4u : pc.n % 4u;
    if (tail == 4u) {
      LOAD4(0) LOAD4(1) LOAD4(2) LOAD4(3) LOAD4(4) LOAD4(5)
      LOAD4(6) LOAD4(7) LOAD4(8) LOAD4(9) LOAD4(10) LOAD4(11)
    } else {
      LOAD_TAIL(0) LOAD_TAIL(1) LOAD_TAIL(2) LOAD_TAIL(3) LOAD_TAIL(4) LOAD_TAIL(5)
      LOAD_TAIL(6) LOAD_TAIL(7) LOAD_TAIL(8) LOAD_TAIL(9) LOAD_TAIL(10) LOAD_TAIL(11)
    }
    [[dont_unroll]] for (uint c = 0u; c < 4u; ++c) run_lane(c);
    if (tail == 4u) {
      STORE4(0) STORE4(1) STORE4(2) STORE4(3)
    } else {
      STORE_TAIL(0) STORE_TAIL(1) STORE_TAIL(2) STORE_TAIL(3)
    }
  }
}
