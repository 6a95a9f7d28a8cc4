#version 450
// sum_to_shape: each output element is the f32 sum of its preimage in the interpreter's order, so
// the bits match tg::interpret in f32 mode and never depend on scheduling: terms in row-major
// order of the summed axes (the last summed axis fastest); a preimage of at most BLOCK terms is
// summed by one invocation, a longer one by one workgroup whose invocations each sum fixed blocks
// of BLOCK terms, the block partials then added in block order by invocation 0 (the interpreter's
// deterministic_sum). With `staged`, a short preimage is loaded by a workgroup and summed by its
// invocation 0 in the same order. Summed axes are the input's leading extra axes and the axes the target has
// as 1; the host drops extent-1 axes, merges adjacent contiguous ones (keeping the order), and
// right-aligns them in 6 slots (unused slots: extent 1, stride 0).
// Staged modes (short preimages of 32..BLOCK terms, each still added in order by one invocation):
//   1: few outputs, a workgroup per preimage;
//   2: many outputs with general strides, ROWS preimages per workgroup;
//   3: many contiguous rows ([rows, len] -> [rows], LayerNorm's row sums): the workgroup copies
//      its rows (one contiguous stretch of the input) with plain coalesced loads, no index
//      arithmetic per term, then one invocation per row adds it.
// Mode 4 (preimages of more than 2048 blocks, 524288 terms): the first of two dispatches. One
// invocation per (block, output) writes the block's sum to binding 1, the node's scratch, as
// [blocks, n]; matmul_split_sum.comp then adds each output's block sums in block order: the same
// additions as one workgroup per output, whose invocation 0 would otherwise loop over every
// block partial (131072 of them for 2^25 terms, past llvmpipe's loop limit).
// Mode 5 (many contiguous rows of BLOCK+1 .. LONG_ROW_BLOCKS * BLOCK terms: LayerNorm's row sums
// over a width of 768): the one-workgroup-per-output form would leave all but ceil(len/BLOCK) of
// its 256 invocations idle while those few each walk 256 terms of global memory one dependent load
// after another (650 us for [8, 1024, 768] -> [8, 1024, 1] on an H200). Here a workgroup copies
// long_rows() rows, one contiguous stretch, with coalesced loads into shared memory, block by
// block; then one invocation per (row, block) adds its block in order, and one per row adds the
// row's block partials in block order: the same additions as the general form, so the same bits.
// Mode 6 (long preimages of few outputs on GPUs, W7's bias gradients [128, C, 32, 32] -> C): the
// first of two dispatches, writing mode 4's block partials [blocks, n] into scratch, but a
// workgroup copies ROWS blocks side by side into shared memory (consecutive invocations on
// consecutive terms, coalesced where the innermost summed axis is contiguous) and then ROWS
// invocations add one block each, in term order. Mode 4 has each invocation walk its block's 256
// terms one load after another, and a workgroup per output (the general form) leaves most of a
// GPU idle when there are only a few dozen outputs.
//
// No loop here walks the summed axes: the carry is straight-line code and the term loop is
// unrolled by 4, because lavapipe (llvmpipe) ends every loop of an invocation once 65535 loop
// iterations in total have run.

layout(local_size_x = 256) in;

const uint MAX_RANK = 6;
const uint BLOCK = 256u;  // = kSumBlock in src/vk/kernels/layout.cpp
layout(push_constant) uniform Push {
  uint n;         // output elements
  uint out_rank;  // kept axes after collapsing, 0..6
  uint staged;    // 1: a workgroup loads one preimage of at most BLOCK terms, then sums it;
                  // 2: a workgroup loads ROWS of them, then ROWS invocations sum one each;
                  // 3: contiguous rows, a workgroup loads contiguous_rows() of them;
                  // 4: block partials of long preimages into scratch;
                  // 5: contiguous rows longer than BLOCK, long_rows() of them a workgroup;
                  // 6: block partials into scratch, ROWS blocks staged a workgroup
  uint len;       // preimage length (product of sum_dims; 0 when a summed axis is empty)
  uint out_dims[MAX_RANK];
  uint start_strides[MAX_RANK];  // input stride per kept axis
  uint sum_dims[MAX_RANK];       // right-aligned: slot 5 is the innermost summed axis
  uint sum_strides[MAX_RANK];
} pc;

layout(std430, set = 0, binding = 0) readonly buffer In { float inv[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { float outv[]; };

shared float partial[256];
shared uint first_term[16];  // mode 6: the first input element of each staged block (ROWS of them)
const uint ROWS = 16u;
// The staged rows, row r at r * (stride) with an odd stride (len + 1 for even len): the summing
// invocations, one per row, then read distinct banks at every step. Mode 2 uses ROWS rows of
// BLOCK + 1; mode 3 up to 32 rows of len + 1 (4128 words = 32 x 129 = 16 x 258); mode 5 up to
// LONG_ROW_BLOCKS blocks of BLOCK + 1 (4112 words).
const uint STAGE_WORDS = 4128u;
shared float stage[STAGE_WORDS];

// Rows per workgroup in mode 3: 32 rows of up to 128 terms, else 16 (= kContiguousRows* in
// src/vk/kernels/layout.cpp).
uint contiguous_rows() { return pc.len <= 128u ? 32u : 16u; }

// Mode 5 stages at most this many blocks a workgroup (= kLongRowBlocks in
// src/vk/kernels/layout.cpp): 16 x 257 words fit `stage`, so rows of up to 4096 terms, and the
// shader's shared memory stays what modes 2 and 3 already need (17.5 KB with `partial`).
const uint LONG_ROW_BLOCKS = 16u;
// Rows per workgroup in mode 5: as many whole rows as LONG_ROW_BLOCKS blocks hold.
uint long_rows(uint blocks) { return LONG_ROW_BLOCKS / blocks; }
// Where mode 5 stages term t of the workgroup's row r: block j = r * blocks + t / BLOCK of the
// workgroup at j * (BLOCK + 1), so the summing invocation j reads bank (j + k) % 32 at step k:
// distinct banks for distinct invocations (a stride of BLOCK would put them all on one bank).
uint long_row_slot(uint r, uint t, uint blocks) {
  return (r * blocks + t / BLOCK) * (BLOCK + 1u) + t % BLOCK;
}

#define D(k) pc.sum_dims[k]
#define S(k) pc.sum_strides[k]
// Adds the term at `off`, then advances (c0..c5, off) to the next term in row-major order.
#define TERM()                                                                     \
  acc += off < size ? inv[off] : 0.0;                                              \
  ++c5; off += S(5);                                                               \
  if (c5 == D(5)) { c5 = 0u; off -= D(5) * S(5); ++c4; off += S(4);                \
    if (c4 == D(4)) { c4 = 0u; off -= D(4) * S(4); ++c3; off += S(3);              \
      if (c3 == D(3)) { c3 = 0u; off -= D(3) * S(3); ++c2; off += S(2);            \
        if (c2 == D(2)) { c2 = 0u; off -= D(2) * S(2); ++c1; off += S(1);          \
          if (c1 == D(1)) { c1 = 0u; off -= D(1) * S(1); ++c0; off += S(0); } } } } }

// Terms [from, to) of the preimage starting at input element `start`, added in order.
float sum_range(uint start, uint from, uint to) {
  const uint size = uint(inv.length());
  uint rest = from;
  const uint c5_ = rest % D(5); rest /= D(5);
  const uint c4_ = rest % D(4); rest /= D(4);
  const uint c3_ = rest % D(3); rest /= D(3);
  const uint c2_ = rest % D(2); rest /= D(2);
  const uint c1_ = rest % D(1); rest /= D(1);
  uint c5 = c5_, c4 = c4_, c3 = c3_, c2 = c2_, c1 = c1_, c0 = rest;
  uint off = start + c0 * S(0) + c1 * S(1) + c2 * S(2) + c3 * S(3) + c4 * S(4) + c5 * S(5);
  float acc = 0.0;
  uint r = from;
  for (; r + 4u <= to; r += 4u) {
    TERM() TERM() TERM() TERM()
  }
  for (; r < to; ++r) {
    TERM()
  }
  return acc;
}

uint start_of(uint o) {
  uint start = 0u;
  for (int d = int(pc.out_rank) - 1; d >= 0; --d) {
    const uint extent = pc.out_dims[d];
    const uint q = o / extent;
    start += (o - q * extent) * pc.start_strides[d];
    o = q;
  }
  return start;
}

void main() {
  if (pc.staged == 4u) {
    // Item i = b * n + o: block b of output o, so outv (the scratch) is [blocks, n].
    const uint blocks = (pc.len + BLOCK - 1u) / BLOCK;
    const uint items = pc.n * blocks;
    const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < items; i += step) {
      const uint b = i / pc.n;
      outv[i] = sum_range(start_of(i - b * pc.n), b * BLOCK, min(pc.len, (b + 1u) * BLOCK));
    }
    return;
  }
  if (pc.staged == 6u) {
    // Item i = b * n + o, as mode 4; the workgroup's items i0 .. i0 + ROWS - 1.
    const uint lid = gl_LocalInvocationID.x;
    const uint blocks = (pc.len + BLOCK - 1u) / BLOCK;
    const uint items = pc.n * blocks;
    // Where the innermost summed axis holds whole blocks (W7's H*W = 1024 of stride 1), a block's
    // consecutive terms lie S(5) apart: invocation r < ROWS finds its item's first term, and every
    // invocation reads term lid of each item at first + lid * S(5), without decoding the term's
    // coordinates (sum_range's divisions per term cost more than the loads: 470 us for W7's
    // eight bias gradients on an H200).
    const bool whole_blocks = D(5) % BLOCK == 0u;
    for (uint i0 = gl_WorkGroupID.x * ROWS; i0 < items; i0 += gl_NumWorkGroups.x * ROWS) {
      if (whole_blocks) {
        if (lid < ROWS) {
          const uint i = min(i0 + lid, items - 1u);
          const uint b = i / pc.n;
          const uint start = start_of(i - b * pc.n);
          // The first term's offset: block b starts at term b * BLOCK, in row b * BLOCK / D(5).
          uint rest = b * BLOCK;
          const uint c5 = rest % D(5); rest /= D(5);
          const uint c4 = rest % D(4); rest /= D(4);
          const uint c3 = rest % D(3); rest /= D(3);
          const uint c2 = rest % D(2); rest /= D(2);
          const uint c1 = rest % D(1); rest /= D(1);
          first_term[lid] = start + rest * S(0) + c1 * S(1) + c2 * S(2) + c3 * S(3) + c4 * S(4) + c5 * S(5);
        }
        barrier();
        for (uint r = 0u; r < ROWS; ++r) {
          // Every block here is whole (len is a multiple of D(5), so of BLOCK).
          stage[r * (BLOCK + 1u) + lid] = i0 + r < items ? inv[first_term[r] + lid * S(5)] : 0.0;
        }
      } else {
        for (uint r = 0u; r < ROWS; ++r) {
          const uint i = i0 + r;
          const uint b = i / pc.n;
          const uint t = b * BLOCK + lid;
          stage[r * (BLOCK + 1u) + lid] = i < items && t < pc.len ? sum_range(start_of(i - b * pc.n), t, t + 1u) : 0.0;
        }
      }
      barrier();
      // Invocation r adds item r's block from 0.0 in term order (sum_range's order and bits).
      if (lid < ROWS && i0 + lid < items) {
        const uint i = i0 + lid;
        const uint terms = min(BLOCK, pc.len - (i / pc.n) * BLOCK);
        const uint at = lid * (BLOCK + 1u);
        float acc = 0.0;
        uint k = 0u;
        for (; k + 4u <= terms; k += 4u) {
          acc += stage[at + k];
          acc += stage[at + k + 1u];
          acc += stage[at + k + 2u];
          acc += stage[at + k + 3u];
        }
        for (; k < terms; ++k) acc += stage[at + k];
        outv[i] = acc;
      }
      barrier();  // the next items overwrite `stage`
    }
    return;
  }
  if (pc.len <= BLOCK && pc.staged == 2u) {
    // Many outputs with preimages of 32..BLOCK terms (LayerNorm's row sums, [B, T, C] -> [B, T, 1]):
    // one invocation per output would load its terms one after another, a cache line each. The
    // workgroup loads ROWS preimages side by side (consecutive invocations, consecutive terms),
    // then invocation r adds preimage r in order (same bits).
    const uint lid = gl_LocalInvocationID.x;
    for (uint o0 = gl_WorkGroupID.x * ROWS; o0 < pc.n; o0 += gl_NumWorkGroups.x * ROWS) {
      for (uint r = 0u; r < ROWS; ++r) {
        const uint o = o0 + r;
        stage[r * (BLOCK + 1u) + lid] = (o < pc.n && lid < pc.len) ? sum_range(start_of(o), lid, lid + 1u) : 0.0;
      }
      barrier();
      if (lid < ROWS && o0 + lid < pc.n) {
        float total = 0.0;
        for (uint k = 0u; k < pc.len; ++k) total += stage[lid * (BLOCK + 1u) + k];
        outv[o0 + lid] = total;
      }
      barrier();
    }
    return;
  }
  if (pc.staged == 5u) {
    const uint lid = gl_LocalInvocationID.x;
    const uint blocks = (pc.len + BLOCK - 1u) / BLOCK;
    const uint rows = long_rows(blocks);
    for (uint o0 = gl_WorkGroupID.x * rows; o0 < pc.n; o0 += gl_NumWorkGroups.x * rows) {
      const uint here = min(rows, pc.n - o0);
      const uint words = here * pc.len;
      const uint first = o0 * pc.len;
      // Word e of the stretch is term t of row r. Each step moves e by BLOCK < len, so t wraps
      // past the row's end at most once a step: no division per word. Four loads are issued
      // before their stores, so each invocation has four in flight.
      uint e = lid, r = 0u, t = lid;
#define NEXT_WORD() e += BLOCK; t += BLOCK; if (t >= pc.len) { t -= pc.len; ++r; }
      for (; e + 3u * BLOCK < words;) {
        const float v0 = inv[first + e];
        const float v1 = inv[first + e + BLOCK];
        const float v2 = inv[first + e + 2u * BLOCK];
        const float v3 = inv[first + e + 3u * BLOCK];
        stage[long_row_slot(r, t, blocks)] = v0; NEXT_WORD()
        stage[long_row_slot(r, t, blocks)] = v1; NEXT_WORD()
        stage[long_row_slot(r, t, blocks)] = v2; NEXT_WORD()
        stage[long_row_slot(r, t, blocks)] = v3; NEXT_WORD()
      }
      for (; e < words;) {
        stage[long_row_slot(r, t, blocks)] = inv[first + e]; NEXT_WORD()
      }
#undef NEXT_WORD
      barrier();
      // Invocation j adds block j % blocks of row j / blocks, from 0.0 in term order (sum_range's
      // order: a block of -0.0 gives +0.0 there too).
      if (lid < here * blocks) {
        const uint at = lid * (BLOCK + 1u);
        const uint terms = min(BLOCK, pc.len - (lid % blocks) * BLOCK);
        float acc = 0.0;
        uint k = 0u;
        for (; k + 4u <= terms; k += 4u) {
          acc += stage[at + k];
          acc += stage[at + k + 1u];
          acc += stage[at + k + 2u];
          acc += stage[at + k + 3u];
        }
        for (; k < terms; ++k) acc += stage[at + k];
        partial[lid] = acc;
      }
      barrier();
      // The block partials in block order, from 0.0, as the general form's invocation 0 adds them.
      // The next rows' copy may already write `stage` (read only before the barrier above);
      // `partial` is rewritten only after the next copy's barrier.
      if (lid < here) {
        float total = 0.0;
        for (uint b = 0u; b < blocks; ++b) total += partial[lid * blocks + b];
        outv[o0 + lid] = total;
      }
    }
    return;
  }
  if (pc.staged == 3u) {
    // Rows o0 .. o0 + rows - 1 are input words o0 * len .. (o0 + rows) * len - 1: copied with
    // consecutive invocations on consecutive words, then invocation r adds row r in order.
    const uint lid = gl_LocalInvocationID.x;
    const uint rows = contiguous_rows();
    const uint stride = pc.len | 1u;  // odd: distinct banks for the summing invocations
    for (uint o0 = gl_WorkGroupID.x * rows; o0 < pc.n; o0 += gl_NumWorkGroups.x * rows) {
      const uint words = min(rows, pc.n - o0) * pc.len;
      const uint first = o0 * pc.len;
      for (uint e = lid; e < words; e += 256u) {
        const uint r = e / pc.len;
        stage[r * stride + (e - r * pc.len)] = inv[first + e];
      }
      barrier();
      if (lid < rows && o0 + lid < pc.n) {
        const uint at = lid * stride;
        float total = 0.0;
        uint k = 0u;
        for (; k + 4u <= pc.len; k += 4u) {
          total += stage[at + k];
          total += stage[at + k + 1u];
          total += stage[at + k + 2u];
          total += stage[at + k + 3u];
        }
        for (; k < pc.len; ++k) total += stage[at + k];
        outv[o0 + lid] = total;
      }
      barrier();  // the next rows overwrite `stage`
    }
    return;
  }
  if (pc.len <= BLOCK && pc.staged == 1u) {
    // Few outputs with long preimages (the bias gradient of a one-column layer: [256, 1] -> [1]):
    // one invocation would wait on its loads one after another. The workgroup loads the terms in
    // parallel, then invocation 0 adds them in the same order (same bits).
    const uint lid = gl_LocalInvocationID.x;
    for (uint o = gl_WorkGroupID.x; o < pc.n; o += gl_NumWorkGroups.x) {
      partial[lid] = lid < pc.len ? sum_range(start_of(o), lid, lid + 1u) : 0.0;
      barrier();
      if (lid == 0u) {
        float total = 0.0;
        for (uint k = 0u; k < pc.len; ++k) total += partial[k];
        outv[o] = total;
      }
      barrier();
    }
    return;
  }
  if (pc.len <= BLOCK) {
    const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint o = gl_GlobalInvocationID.x; o < pc.n; o += step) outv[o] = sum_range(start_of(o), 0u, pc.len);
    return;
  }
  // One workgroup per output (uniform control flow around the barriers).
  const uint lid = gl_LocalInvocationID.x;
  const uint blocks = (pc.len + BLOCK - 1u) / BLOCK;
  for (uint o = gl_WorkGroupID.x; o < pc.n; o += gl_NumWorkGroups.x) {
    const uint start = start_of(o);
    float total = 0.0;
    for (uint b0 = 0u; b0 < blocks; b0 += 256u) {
      const uint b = b0 + lid;
      partial[lid] = b < blocks ? sum_range(start, b * BLOCK, min(pc.len, (b + 1u) * BLOCK)) : 0.0;
      barrier();
      if (lid == 0u) {
        const uint m = min(256u, blocks - b0);
        for (uint k = 0u; k < m; ++k) total += partial[k];
      }
      barrier();
    }
    if (lid == 0u) outv[o] = total;
  }
}
