#version 450
#extension GL_EXT_control_flow_attributes : require
// sum_to_shape's row form, [rows, cols] -> [cols] (a bias or norm-scale gradient: rows = batch x
// time). With one block of rows this writes the output itself; with more it is the first of two
// dispatches and writes block partials to scratch. Each workgroup takes one block of BLOCK rows of 32 consecutive
// columns: all 256 invocations stage the 256 x 32 tile in shared memory with coalesced loads (every
// load in flight at once), then invocation c < 32 adds its column's terms in row order from 0 and
// writes the block partial to scratch[block][column]. matmul_split_sum.comp then adds the block
// partials in block order: the interpreter's deterministic_sum with 256-term blocks, so the same
// f32 bits as the general sum_to_shape kernel, which gives one workgroup per column and reads each
// column with strided, uncoalesced loads.
//
// 256 x 32 floats are exactly 32 KiB, lavapipe's shared-memory limit; the reads of a row by 32
// invocations are consecutive words, so no padding is needed against bank conflicts.

layout(local_size_x = 256) in;

const uint BLOCK = 256u;  // = kSumBlock in src/vk/kernels/layout.cpp
const uint COLS = 32u;

layout(push_constant) uniform Push {
  uint rows;
  uint cols;
  uint col_chunks;  // ceil(cols / 32)
  uint blocks;      // ceil(rows / 256)
} pc;

layout(std430, set = 0, binding = 0) readonly buffer In { float inv[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Partials { float partials[]; };

shared float tile[BLOCK][COLS];

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint c = lid % COLS;
  const uint r0 = lid / COLS;  // 0..7: the row this invocation stages first
  const uint tiles = pc.blocks * pc.col_chunks;
  for (uint t = gl_WorkGroupID.x; t < tiles; t += gl_NumWorkGroups.x) {
    const uint block = t / pc.col_chunks;
    const uint col = (t % pc.col_chunks) * COLS + c;
    const uint row0 = block * BLOCK;
    const uint len = min(BLOCK, pc.rows - row0);
    // Unrolled: all 32 loads of an invocation are in flight before the first store waits on one
    // (a rolled loop waited a load latency per row: 7-8 us for [256, 64] -> [64] on an H200).
    [[unroll]] for (uint i = 0u; i < BLOCK / 8u; ++i) {
      const uint r = r0 + 8u * i;
      tile[r][c] = (r < len && col < pc.cols) ? inv[(row0 + r) * pc.cols + col] : 0.0;
    }
    barrier();
    if (lid < COLS && col < pc.cols) {
      float acc = 0.0;
      uint r = 0u;
      for (; r + 8u <= len; r += 8u) {
        [[unroll]] for (uint j = 0u; j < 8u; ++j) acc += tile[r + j][lid];
      }
      for (; r < len; ++r) acc += tile[r][lid];
      partials[block * pc.cols + col] = acc;
    }
    barrier();  // the next tile overwrites `tile`
  }
}
