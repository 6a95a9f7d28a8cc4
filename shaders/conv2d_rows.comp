#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_ballot : require
// conv2d, conv2d_input_grad and conv2d_weight_grad as the implicit GEMMs of conv2d_gemm.comp, for
// CPU devices (llvmpipe). llvmpipe (Mesa 22.3) loads a storage buffer value lane by lane, each
// lane's value inserted into the SIMD vector through the stack: about 20 cycles a lane, against one
// for a multiply-add, so the kernel is built to load each value once and use it many times. There
// is no shared memory and no barrier (on a CPU the first is plain memory and the second switches
// between every SIMD batch of the workgroup).
//
// A workgroup owns ROWS rows of C (uniform across it) and WIDTH invocations of one to four (or eight)
// columns each. K goes in blocks of 8: lane l of each subgroup loads A[r][k0 + l % 8] of every row r, a
// useful value per lane, and subgroupBroadcast hands lane j's to all lanes, a register shuffle;
// each lane loads its columns' im2col values of B once per k. Per block that is
// ROWS + 8 * LANE_COLUMNS loads for 8 * ROWS * LANE_COLUMNS multiply-adds per lane. Needs
// subgroups of at least 8 invocations (route_convolutions checks).
//
// Every output is accumulated by one invocation in ascending k from 0.0 within its K range, as in
// conv2d_gemm.comp; under split-K the ranges' partials land in the node's scratch as [splits,
// output] for matmul_split_sum.comp. The grid is flat: item = ((split * groups + g) * row blocks +
// row block) * column blocks + column block, looped over by workgroups.

// The workgroup's width, 8, 16, 32 or 64 invocations (specialization constant 3): conv_rows.cpp
// fits the width and LANE_COLUMNS to NC, so a thin product (NC of 9 or 144) does not run 64-wide
// workgroups of mostly idle lanes, each of which still loads its share of A.
layout(local_size_x_id = 3) in;
layout(constant_id = 0) const uint OP = 0u;

#include "conv2d_common.glsl"

// Rows per workgroup, 8, 16 or 32 (conv_rows.cpp picks the fewest that cover M, up to 32), and
// columns per invocation, 1 to 4 or 8 (each a workgroup width after the last): each loaded A value then
// feeds LANE_COLUMNS multiply-adds, each loaded B value ROWS.
layout(constant_id = 1) const uint ROWS = 8u;
layout(constant_id = 2) const uint LANE_COLUMNS = 1u;
const uint WIDTH = gl_WorkGroupSize.x;
const uint COLUMNS = WIDTH * LANE_COLUMNS;
const uint KBLOCK = 8u;

void main() {
  const uint row_blocks = pc.tiles_m;
  const uint column_blocks = pc.tiles_n;
  const uint per_group = row_blocks * column_blocks;
  const uint per_split = pc.groups * per_group;
  const uint splits = pc.K == 0u ? 1u : (pc.K + pc.k_range - 1u) / pc.k_range;
  const uint total = per_split * splits;
  const uint lane_k = gl_SubgroupInvocationID % KBLOCK;
  for (uint item = gl_WorkGroupID.x; item < total; item += gl_NumWorkGroups.x) {
    const uint split = item / per_split;
    const uint in_split = item - split * per_split;
    const uint gu = in_split / per_group;
    const uint in_group = in_split - gu * per_group;
    const uint row_block = in_group / column_blocks;
    const int g = int(gu);
    const uint row0 = row_block * ROWS;
    const uint col0 = (in_group - row_block * column_blocks) * COLUMNS + gl_LocalInvocationID.x;
    const uint kbeg = split * pc.k_range;
    const uint kend = min(pc.K, kbeg + pc.k_range);

    // Rows past M read row M - 1 (a valid address) and are never stored.
    int a_rows[ROWS];
    [[unroll]] for (uint i = 0u; i < ROWS; ++i) a_rows[i] = a_base(g, int(min(row0 + i, pc.M - 1u)));
    BCol bc[LANE_COLUMNS];
    [[unroll]] for (uint c = 0u; c < LANE_COLUMNS; ++c) bc[c] = b_column(g, col0 + WIDTH * c);
    float acc[ROWS * LANE_COLUMNS];
    [[unroll]] for (uint i = 0u; i < ROWS * LANE_COLUMNS; ++i) acc[i] = 0.0;
    KWalk walk;
    if (kbeg < kend) walk = k_walk(kbeg);  // K = 0 has no blocks of KA to divide by
    for (uint k0 = kbeg; k0 < kend; k0 += KBLOCK) {
      // This lane's k of the block for A: one division per block, not per k.
      const uint k_mine = k0 + lane_k;
      const bool mine_in = k_mine < kend;
      const int kq = int(k_mine) / ka();
      const int a_off = kq * sa() + int(k_mine) - kq * ka();
      float a_mine[ROWS];
      [[unroll]] for (uint i = 0u; i < ROWS; ++i) a_mine[i] = mine_in ? in_a[a_rows[i] + a_off] : 0.0;
      // subgroupBroadcast takes a constant lane: the block's steps are written out (MULTIPLY_ADD_K).
#define MULTIPLY_ADD_K(j)                                                                        \
  if (k0 + j < kend) {                                                                           \
    float b[LANE_COLUMNS];                                                                       \
    [[unroll]] for (uint c = 0u; c < LANE_COLUMNS; ++c) b[c] = b_at(bc[c], walk.kc);             \
    k_step(walk);                                                                                \
    [[unroll]] for (uint i = 0u; i < ROWS; ++i) {                                                \
      const float a = subgroupBroadcast(a_mine[i], j);                                           \
      [[unroll]] for (uint c = 0u; c < LANE_COLUMNS; ++c) acc[i * LANE_COLUMNS + c] += a * b[c]; \
    }                                                                                            \
  }
      MULTIPLY_ADD_K(0u) MULTIPLY_ADD_K(1u) MULTIPLY_ADD_K(2u) MULTIPLY_ADD_K(3u)
      MULTIPLY_ADD_K(4u) MULTIPLY_ADD_K(5u) MULTIPLY_ADD_K(6u) MULTIPLY_ADD_K(7u)
#undef MULTIPLY_ADD_K
    }
    [[unroll]] for (uint c = 0u; c < LANE_COLUMNS; ++c) {
      const uint col = col0 + WIDTH * c;
      if (col >= pc.NC) continue;
      [[unroll]] for (uint i = 0u; i < ROWS; ++i) {
        if (row0 + i < pc.M) outv[c_index(split, g, int(row0 + i), int(col))] = acc[i * LANE_COLUMNS + c];
      }
    }
  }
}
