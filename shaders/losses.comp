#version 450
// nll_loss and cross_entropy over the last (class) axis, as src/interp/kernels/losses.cpp: scores
// are `positions` rows of `classes` values, targets one int32 per row.
//   nll_loss:      loss = -scores[row, target]
//   cross_entropy: loss = log(sum_j exp(x_j - m)) + (m - x_target), m the row maximum (NaN elements
//                  never become the maximum, as std::max in the interpreter; the row's loss is NaN
//                  anyway through the sum).
// A target outside [0, classes) is reported through the status word (atomicMin of its row: the
// first bad row whatever the schedule) and never used as an index.
//
// Two row modes, fixed per launch by the host:
//   serial: one invocation per row (nll_loss, and cross_entropy with few classes);
//   group:  one 256-invocation workgroup per row: invocation l folds classes l, l+256, ..., then
//           the fixed two-level combine of REDUCE_GROUP (16 x 16) merges the partials, once for the
//           max and once for the sum of exp.
// reduction "none": rows spread over the grid (grid-stride: invocations in serial mode, workgroups
// in group mode), each writes its own loss.
// reduction "sum"/"mean": ONE workgroup does the whole reduction in this one dispatch, so the
// result is deterministic with no atomics and no second pass: invocation l adds the losses of rows
// l, l+256, l+512, ... in that order (in serial mode it computes them itself; in group mode the
// whole workgroup computes each row and invocation row % 256 adds it), then the same combine adds
// the 256 partials. Both modes therefore add the row losses in the same order.
//
// reduction "sum"/"mean" over more than 256 rows takes two dispatches (src/vk/kernels/losses.cpp):
// the first runs reduction "none" into the node's scratch (rows spread over the grid), the second
// (mode 2, partials) is one workgroup whose invocation l adds the scratch's rows l, l+256, ... and
// combines as above: the same additions in the same order as the one-dispatch form, so the same
// bits, without one workgroup computing every row.
//
// Past kChunkLength (8192) rows the second dispatch is no longer mode 2 but a split sum
// (shaders/reduce_split.comp: chunk partials of the row losses, then their combine).
//
// llvmpipe stops all loops of an invocation after 65535 passes in total (src/vk/kernels/kernels.h).
// The combines are written out (no loop) and the class loops of group mode peel their first
// element, so a group-mode row of at most 256 classes costs one loop pass; the host keeps the
// one-dispatch form to at most 1024 such passes (rows x ceil(classes / 256)) and mode 2 to 32 per
// invocation. GPUs have no such cap.

layout(local_size_x = 256) in;
const uint WG = 256;

layout(push_constant) uniform Push {
  uint op;         // 0 nll_loss, 1 cross_entropy
  uint mode;       // 0 serial, 1 group
  uint reduction;  // 0 none, 1 mean, 2 sum
  uint positions;  // rows
  uint classes;    // extent of the last axis
} pc;

layout(std430, set = 0, binding = 0) readonly buffer Scores { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer Targets { int targets[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { float outv[]; };
layout(std430, set = 0, binding = 3) buffer Status { uint first_bad[]; };

const uint OP_NLL = 0, OP_CROSS_ENTROPY = 1;
const uint MODE_SERIAL = 0, MODE_GROUP = 1, MODE_PARTIALS = 2;
const uint REDUCTION_NONE = 0, REDUCTION_MEAN = 1, REDUCTION_SUM = 2;

shared float s_part[WG];

float max_fold(float m, float v) { return v > m ? v : m; }

// The row's target, or -1 when it is out of range (reported by the invocation that `reports`).
int checked_target(uint row, bool reports) {
  const int t = targets[row];
  if (t < 0 || uint(t) >= pc.classes) {
    if (reports) atomicMin(first_bad[0], row);
    return -1;
  }
  return t;
}

float serial_loss(uint row) {
  const int t = checked_target(row, true);
  if (t < 0) return 0.0;  // the run throws; the value is never seen
  const uint base = row * pc.classes;
  if (pc.op == OP_NLL) return -x[base + uint(t)];
  float m = uintBitsToFloat(0xff800000u);  // -inf
  for (uint j = 0; j < pc.classes; ++j) m = max_fold(m, x[base + j]);
  float total = 0.0;
  for (uint j = 0; j < pc.classes; ++j) total += exp(x[base + j] - m);
  return log(total) + (m - x[base + uint(t)]);
}

// Combines the 256 invocations' values in a fixed order that depends only on the workgroup size:
// invocations 0..15 fold 16 values each in index order, then every invocation folds the 16 group
// results in order, so the result is in every invocation. Two barriers (a binary tree needs eight;
// on lavapipe the barriers are most of a workgroup row's time). All 256 invocations must call it
// in uniform control flow; two calls may follow each other directly: s_part is last read before
// the second barrier, and s_group is rewritten only after the next call's first barrier, which
// every invocation reaches after its final reads. The folds are written out, not looped (llvmpipe
// caps an invocation's loop iterations, and a workgroup row repeats this).
shared float s_group[16];

// r = COMBINE(r, ARRAY[BASE + i]) for i = 1..15, in order.
#define FOLD16(COMBINE, ARRAY, BASE)                                                                  \
  r = COMBINE(r, ARRAY[BASE + 1u]);  r = COMBINE(r, ARRAY[BASE + 2u]);  r = COMBINE(r, ARRAY[BASE + 3u]);  \
  r = COMBINE(r, ARRAY[BASE + 4u]);  r = COMBINE(r, ARRAY[BASE + 5u]);  r = COMBINE(r, ARRAY[BASE + 6u]);  \
  r = COMBINE(r, ARRAY[BASE + 7u]);  r = COMBINE(r, ARRAY[BASE + 8u]);  r = COMBINE(r, ARRAY[BASE + 9u]);  \
  r = COMBINE(r, ARRAY[BASE + 10u]); r = COMBINE(r, ARRAY[BASE + 11u]); r = COMBINE(r, ARRAY[BASE + 12u]); \
  r = COMBINE(r, ARRAY[BASE + 13u]); r = COMBINE(r, ARRAY[BASE + 14u]); r = COMBINE(r, ARRAY[BASE + 15u]);

// The body of a reduce function of one float argument `v`.
#define REDUCE_GROUP(COMBINE)                \
  const uint lid = gl_LocalInvocationID.x;   \
  s_part[lid] = v;                           \
  barrier();                                 \
  if (lid < 16u) {                           \
    float r = s_part[16u * lid];             \
    FOLD16(COMBINE, s_part, 16u * lid)       \
    s_group[lid] = r;                        \
  }                                          \
  barrier();                                 \
  float r = s_group[0];                      \
  FOLD16(COMBINE, s_group, 0u)               \
  return r;

float add_fold(float a, float b) { return a + b; }

float group_max(float v) { REDUCE_GROUP(max_fold) }

float group_sum(float v) { REDUCE_GROUP(add_fold) }

// Cross-entropy of one row by the whole workgroup (uniform control flow: every invocation calls it
// with the same row).
float group_loss(uint row) {
  const uint lid = gl_LocalInvocationID.x;
  const int t = checked_target(row, lid == 0u);
  const uint base = row * pc.classes;
  float m = uintBitsToFloat(0xff800000u);
  if (lid < pc.classes) m = max_fold(m, x[base + lid]);
  for (uint a = lid + WG; a < pc.classes; a += WG) m = max_fold(m, x[base + a]);
  m = group_max(m);
  float total = lid < pc.classes ? exp(x[base + lid] - m) : 0.0;
  for (uint a = lid + WG; a < pc.classes; a += WG) total += exp(x[base + a] - m);
  total = group_sum(total);
  if (t < 0) return 0.0;  // the run throws; the value is never seen
  return log(total) + (m - x[base + uint(t)]);
}

void main() {
  const uint lid = gl_LocalInvocationID.x;
  if (pc.reduction == REDUCTION_NONE) {
    if (pc.mode == MODE_SERIAL) {
      const uint step = gl_NumWorkGroups.x * WG;
      for (uint row = gl_GlobalInvocationID.x; row < pc.positions; row += step) outv[row] = serial_loss(row);
      return;
    }
    for (uint row = gl_WorkGroupID.x; row < pc.positions; row += gl_NumWorkGroups.x) {
      const float loss = group_loss(row);
      if (lid == 0u) outv[row] = loss;
    }
    return;
  }

  if (gl_WorkGroupID.x != 0u) return;  // the host launches one workgroup; uniform per workgroup
  float partial = 0.0;
  if (pc.mode == MODE_PARTIALS) {
    for (uint row = lid; row < pc.positions; row += WG) partial += x[row];  // x: the row losses
  } else if (pc.mode == MODE_SERIAL) {
    for (uint row = lid; row < pc.positions; row += WG) partial += serial_loss(row);
  } else {
    for (uint row = 0; row < pc.positions; ++row) {
      const float loss = group_loss(row);
      if ((row & (WG - 1u)) == lid) partial += loss;
    }
  }
  const float total = group_sum(partial);
  if (lid != 0u) return;
  if (pc.reduction == REDUCTION_SUM) {
    outv[0] = total;
  } else {
    // The mean of no rows is NaN, as in the interpreter (0 / 0), written out rather than trusting
    // the device's 0 / 0.
    outv[0] = pc.positions == 0u ? uintBitsToFloat(0x7fc00000u) : total / float(pc.positions);
  }
}
