#version 450
// The second dispatch of a forward attention (or attention_lse) split into key chunks
// (src/vk/kernels/attention.cpp): merges the chunks' partial (m, l, acc) of
// shaders/attention_forward.comp in chunk order, one output element per invocation:
//   M = max_c m_c, w_c = exp(m_c - M) (0 for a chunk that saw no key: m_c = -inf),
//   L = sum_c l_c w_c, o = sum_c acc_c w_c / L, lse = M + log L.
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x = 256) in;

layout(constant_id = 0) const bool HAS_V = true;

// Must match AttentionPush in src/vk/kernels/attention.cpp (the fields read here).
layout(push_constant) uniform Push {
  uint heads;
  uint tq;
  uint tk;
  uint d;
  uint dv;
  uint causal;
  float scale;
  uint row_tiles;
  uint col_chunks;
  uint dk_chunks;
  uint chunks;
  uint tiles_per_chunk;
  uint partial;
} pc;

layout(std430, set = 0, binding = 0) readonly buffer Partials { float part[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { float out_[]; };

#define NEG_INF uintBitsToFloat(0xff800000u)

float max_fold(float m, float v) { return v > m ? v : m; }

void main() {
  const uint rows = pc.heads * pc.tq;
  const uint width = HAS_V ? pc.dv : 1u;
  const uint items = rows * width;
  const uint acc_base = 2u * pc.chunks * rows;
  for (uint e = gl_GlobalInvocationID.x; e < items; e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint row = e / width;
    const uint col = e % width;
    float m = NEG_INF;
    for (uint c = 0u; c < pc.chunks; ++c) m = max_fold(m, part[2u * (c * rows + row)]);
    float total = 0.0;
    float o = 0.0;
    for (uint c = 0u; c < pc.chunks; ++c) {
      const uint at = c * rows + row;
      const float mc = part[2u * at];
      const float w = mc == NEG_INF ? 0.0 : exp(mc - m);
      total += part[2u * at + 1u] * w;
      if (HAS_V) o += part[acc_base + at * pc.dv + col] * w;
    }
    out_[e] = HAS_V ? o / total : m + log(total);
  }
}
