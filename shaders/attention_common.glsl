// Shared by the attention shaders (src/vk/kernels/attention.cpp): the push constants, the tile
// sizes (specialization constants 1 and 2; constant 0 is the forward's HAS_V), the shared-memory staging of operand slices and the dot products over a staged slice.
// An #include, not a shader.
//
// A workgroup of 256 invocations works on one tile of TILE rows (queries, or keys for
// attention_grad_kv) and loops over the tiles of the summed axis (keys, or queries) in its chunk.
// Invocation t owns tile row r = t / LANES and, of each TILE x TILE score tile, the columns
// l + LANES * u (l = t % LANES, u < 4); of its output block the columns l + LANES * u (u < 8) of the
// COLS-wide column chunk. Dot products over head_dim run SLICE columns at a time through shared
// memory (zeros past the end), so any head_dim works. Every sum runs in a fixed order: the same
// bits on every run. Loops with constant trip counts are [[unroll]]ed: llvmpipe's loop limit
// (src/vk/kernels/kernels.h) counts only the loops whose trip count comes from the push constants.

#extension GL_EXT_control_flow_attributes : require

layout(local_size_x = 256) in;

const uint WG = 256u;
const uint TILE = 32u;            // rows of a tile, and its keys (or queries) per score tile
const uint LANES = WG / TILE;     // invocations per tile row
// head_dim columns staged per step and output columns per workgroup (a column chunk): 32 and 64,
// or 8 and 8 where the head_dims are at most 8 (src/vk/kernels/attention.cpp picks them; narrow
// tiles skip the zeros of the wide ones).
layout(constant_id = 1) const uint SLICE = 32u;
layout(constant_id = 2) const uint COLS = 64u;
const uint SP = SLICE + 1u;       // padded row of a staged slice (conflict-free column reads)
const uint SCORES = TILE / LANES; // score-tile columns per invocation
const uint OUTS = COLS / LANES;   // output columns per invocation

// Must match AttentionPush in src/vk/kernels/attention.cpp.
layout(push_constant) uniform Push {
  uint heads;            // all leading axes together
  uint tq;               // queries
  uint tk;               // keys
  uint d;                // head_dim of q and k
  uint dv;               // head_dim of v
  uint causal;           // 1: query i sees keys j <= i
  float scale;           // on q . k
  uint row_tiles;        // tiles of the workgroups' own rows (queries; keys for grad_kv)
  uint col_chunks;       // column chunks per row tile
  uint dk_chunks;        // grad_kv: the first dk_chunks column chunks are dk's, the rest dv's
  uint chunks;           // chunks of the summed axis (keys; queries for grad_kv); combine: partials
  uint tiles_per_chunk;  // tiles of the summed axis per chunk
  uint partial;          // 1: write the chunk's partial results to scratch (the output binding)
} pc;

// Two staged slices [TILE][SP] (A rows at 0, B rows at TILE * SP), or one block [TILE][COLS].
const uint SLICES_SIZE = 2u * TILE * SP;
const uint BLOCK_SIZE = TILE * COLS;
shared float sh_stage[SLICES_SIZE > BLOCK_SIZE ? SLICES_SIZE : BLOCK_SIZE];
// A score tile [row][column] (probabilities or score gradients), padded rows.
const uint PP = TILE + 1u;
shared float sh_p[TILE * PP];
// One partial per invocation (LANES per tile row) for the row reductions.
shared float sh_red[WG];
shared float sh_red2[WG];

#define NEG_INF uintBitsToFloat(0xff800000u)

// As std::max(m, v) in the interpreter: a NaN score never becomes the maximum.
float max_fold(float m, float v) { return v > m ? v : m; }

// Stages rows row0 .. row0 + TILE - 1, columns c0 .. c0 + SLICE - 1 of the [rows, width] matrix at
// element `base` of BUF into staged slice `half` (0: A, 1: B); zeros outside the matrix.
// Neighbouring invocations read neighbouring elements of one row.
#define STAGE_SLICE(BUF, half, base, row0, rows, width, c0)                             \
  [[unroll]] for (uint e_ = 0u; e_ < TILE * SLICE / WG; ++e_) {                          \
    const uint i_ = gl_LocalInvocationID.x + WG * e_;                                    \
    const uint r_ = i_ / SLICE;                                                          \
    const uint c_ = i_ % SLICE;                                                          \
    float x_ = 0.0;                                                                      \
    if ((row0) + r_ < (rows) && (c0) + c_ < (width)) {                                   \
      x_ = BUF[(base) + ((row0) + r_) * (width) + (c0) + c_];                            \
    }                                                                                    \
    sh_stage[(half) * TILE * SP + r_ * SP + c_] = x_;                                    \
  }

// Stages rows row0 .. row0 + TILE - 1, columns c0 .. c0 + COLS - 1 of the [rows, width] matrix at
// element `base` of BUF as the block [TILE][COLS]; zeros outside the matrix.
#define STAGE_BLOCK(BUF, base, row0, rows, width, c0)                                    \
  [[unroll]] for (uint e_ = 0u; e_ < TILE * COLS / WG; ++e_) {                           \
    const uint i_ = gl_LocalInvocationID.x + WG * e_;                                    \
    const uint r_ = i_ / COLS;                                                           \
    const uint c_ = i_ % COLS;                                                           \
    float x_ = 0.0;                                                                      \
    if ((row0) + r_ < (rows) && (c0) + c_ < (width)) {                                   \
      x_ = BUF[(base) + ((row0) + r_) * (width) + (c0) + c_];                            \
    }                                                                                    \
    sh_stage[r_ * COLS + c_] = x_;                                                       \
  }

// s[u] += A[r] . B[l + LANES * u] over the staged slices, head_dim columns in ascending order.
void dot_slice(inout float s[SCORES], uint r, uint l) {
  [[unroll]] for (uint c = 0u; c < SLICE; ++c) {
    const float a = sh_stage[r * SP + c];
    [[unroll]] for (uint u = 0u; u < SCORES; ++u) {
      s[u] = fma(a, sh_stage[TILE * SP + (l + LANES * u) * SP + c], s[u]);
    }
  }
}

// Whether query `i` sees key `j` (both inside their tensors).
bool visible(uint i, uint j) { return i < pc.tq && j < pc.tk && (pc.causal == 0u || j <= i); }

// The sum of the LANES partials of tile row r in sh_red (ascending lane order).
float row_sum(uint r) {
  float total = 0.0;
  [[unroll]] for (uint q = 0u; q < LANES; ++q) total += sh_red[r * LANES + q];
  return total;
}
