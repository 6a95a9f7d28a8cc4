#version 450
// softmax and log_softmax over long rows split across workgroups (src/vk/kernels/softmax.cpp):
// three dispatches over chunks of `span` elements of each row (the last chunk shorter), a
// workgroup per (row, chunk), workgroups looping grid-stride over them. Rows are laid out as in
// shaders/softmax.comp: row (outer o, inner j), element a at o * len * inner + a * inner + j.
//   mode 0: the chunk's maximum (invocation l folds elements l, l+256, ... then a fixed-shape
//           shared-memory tree) into scratch[r * parts + c];
//   mode 1: the row maximum m from the row's chunk maxima (invocation l folds maxima l, l+256,
//           ..., then the tree: every workgroup of the row computes the same m, in the same
//           order), then the chunk's sum of exp(x - m) into scratch[rows * parts + r * parts + c];
//   mode 2: m as in mode 1 and the row's sum from its chunk sums the same way, then the chunk's
//           outputs, exp(x - m) / sum or (x - m) - log(sum).
// Deterministic (fixed fold orders, no atomics), fp32. A NaN element never becomes the maximum,
// as std::max in the interpreter (the row's outputs are NaN anyway through the sum). Each
// invocation loops about span / 256 + parts / 256 times per chunk, far below llvmpipe's 65535 loop
// passes per invocation (one workgroup per row of 2^25 elements would loop 3 x 131072 times).

layout(local_size_x = 256) in;
const uint WG = 256;

layout(push_constant) uniform Push {
  uint op;     // 0 softmax, 1 log_softmax
  uint mode;   // 0 chunk maxima, 1 chunk sums, 2 outputs
  uint rows;   // outer * inner
  uint len;    // extent of the softmax axis
  uint inner;  // product of the extents after the axis (the element stride along it)
  uint span;   // elements per chunk
  uint parts;  // chunks per row: ceil(len / span)
} pc;

layout(std430, set = 0, binding = 0) readonly buffer In { float x[]; };
layout(std430, set = 0, binding = 1) buffer Scratch { float scratch[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { float y[]; };

shared float s_part[WG];

float max_fold(float m, float v) { return v > m ? v : m; }

// s_part[0..WG), just stored by every invocation, folded into the value every invocation gets
// back; all invocations call these in uniform control flow.
float tree_max() {
  const uint lid = gl_LocalInvocationID.x;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (lid < s) s_part[lid] = max_fold(s_part[lid], s_part[lid + s]);
    barrier();
  }
  const float r = s_part[0];
  barrier();  // every invocation has read slot 0 before s_part is reused
  return r;
}

float tree_sum() {
  const uint lid = gl_LocalInvocationID.x;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (lid < s) s_part[lid] = s_part[lid] + s_part[lid + s];
    barrier();
  }
  const float r = s_part[0];
  barrier();
  return r;
}

void main() {
  const float neg_inf = uintBitsToFloat(0xff800000u);
  const uint lid = gl_LocalInvocationID.x;
  const uint items = pc.rows * pc.parts;
  for (uint t = gl_WorkGroupID.x; t < items; t += gl_NumWorkGroups.x) {
    const uint row = t / pc.parts;
    const uint first = (t - row * pc.parts) * pc.span;
    const uint end = min(pc.len, first + pc.span);
    const uint o = row / pc.inner;
    const uint base = o * pc.len * pc.inner + (row - o * pc.inner);
    const uint maxima = row * pc.parts;                  // the row's chunk maxima
    const uint sums = (pc.rows + row) * pc.parts;        // the row's chunk sums

    float m = neg_inf;
    if (pc.mode == 0u) {
      for (uint a = first + lid; a < end; a += WG) m = max_fold(m, x[base + a * pc.inner]);
    } else {
      for (uint p = lid; p < pc.parts; p += WG) m = max_fold(m, scratch[maxima + p]);
    }
    s_part[lid] = m;
    m = tree_max();
    if (pc.mode == 0u) {
      if (lid == 0u) scratch[t] = m;
      continue;  // uniform: the whole workgroup moves on
    }

    float total = 0.0;
    if (pc.mode == 1u) {
      for (uint a = first + lid; a < end; a += WG) total += exp(x[base + a * pc.inner] - m);
    } else {
      for (uint p = lid; p < pc.parts; p += WG) total += scratch[sums + p];
    }
    s_part[lid] = total;
    total = tree_sum();
    if (pc.mode == 1u) {
      if (lid == 0u) scratch[pc.rows * pc.parts + t] = total;
      continue;
    }

    const float log_total = log(total);
    for (uint a = first + lid; a < end; a += WG) {
      const uint i = base + a * pc.inner;
      const float d = x[i] - m;
      y[i] = pc.op == 1u ? d - log_total : exp(d) / total;
    }
  }
}
