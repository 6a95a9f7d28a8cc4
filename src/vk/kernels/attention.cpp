// Launches of the attention family: flash attention forward (attention, attention_lse) and
// backward (attention_grad_q, attention_grad_kv), tiled so that no [Tq, Tk] value or scratch ever
// exists (shaders/attention_*.comp; the tile sizes are in shaders/attention_common.glsl).
//
// Every kernel runs workgroups of 256 invocations over (head, tile of kTile rows of its output,
// column chunk of kColumns output columns, chunk of the summed axis), and inside a workgroup loops
// over the kTile-wide tiles of the summed axis (keys for the forward and dq, queries for dk and dv)
// in its chunk. One chunk writes the output directly. Several chunks write partial results to the
// node's scratch, and a second dispatch merges them in chunk order (the forward's softmax merge,
// shaders/attention_combine.comp; the backward's plain sums, ordered_sum_of_partials): the same
// bits on every run, no atomics. The summed axis splits into chunks
//   - when the workgroups would not occupy a GPU (fewer than kSplitBelowGroups) and it is longer
//     than kMinSplitLength (2 * kMinChunkTiles tiles): up to kSplitBelowGroups workgroups in all,
//     kMinChunkTiles tiles at least per chunk;
//   - and whenever one workgroup's loops would pass kLoopBudget times (llvmpipe's loop limit,
//     kernels.h): a chunk holds at most as many tiles as fit that budget.
// Both rules depend on the shapes alone, so every device computes the same partitions.
//
// Scratch: the forward's chunks keep (m, l) and acc[Dv] per row and chunk, dq's and [dk | dv]'s
// chunks one partial output each: chunks x (output + 2 rows) floats, where chunks <= Tk / 128 for
// occupancy and one chunk per budget's worth of tiles (about 1,300 tiles of 32 keys at head_dim <=
// 32): linear in T at any fixed number of chunks.
#include "tensorgrad/ir/ops/ids/attention.h"

#include <algorithm>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/vk/error.h"
#include "vk/kernels/kernels.h"

namespace tg::vk {

namespace {

// Must match shaders/attention_common.glsl.
constexpr std::uint64_t kTile = 32;     // TILE: rows (and summed-axis entries) per tile
constexpr std::uint64_t kSlice = 32;    // SLICE: head_dim columns per staged slice
constexpr std::uint64_t kColumns = 64;  // COLS: output columns per workgroup
// SLICE and COLS where the head_dims they cover are at most kNarrow: the wide tiles would spend
// most of their multiply-adds on zeros (on lavapipe, 6x the time of T = 4096 at head_dim 2).
constexpr std::uint64_t kNarrow = 8;
constexpr std::uint64_t kLanes = 8;  // LANES: invocations per tile row
constexpr std::uint32_t kGroupSize = 256;
// The occupancy split (see the top of the file): a device of about 132 cores wants 256 workgroups;
// a chunk below 4 tiles (128 keys) would spend more on partials than it saves.
constexpr std::uint64_t kSplitBelowGroups = 256;
constexpr std::uint64_t kMinChunkTiles = 4;
constexpr std::uint64_t kMinSplitLength = 2 * kMinChunkTiles * kTile;

const SizeThreshold kTileThreshold{"vulkan", "attention", "tile", static_cast<std::int64_t>(kTile)};
const SizeThreshold kColumnsThreshold{"vulkan", "attention", "column_chunk", static_cast<std::int64_t>(kColumns)};
const SizeThreshold kNarrowThreshold{"vulkan", "attention", "narrow_head_dim", static_cast<std::int64_t>(kNarrow)};
const SizeThreshold kSplitLengthThreshold{"vulkan", "attention", "min_split_length",
                                          static_cast<std::int64_t>(2 * kMinChunkTiles * kTile)};
const SizeThreshold kSplitGroupsThreshold{"vulkan", "attention", "split_below_workgroups",
                                          static_cast<std::int64_t>(kSplitBelowGroups)};

// The tile widths every launch takes (specialization constants SLICE and COLS).
const LaunchPath kNarrowSlices{"vulkan", "attention_tiles", "narrow_slices"};
const LaunchPath kWideSlices{"vulkan", "attention_tiles", "wide_slices"};
const LaunchPath kNarrowColumns{"vulkan", "attention_tiles", "narrow_columns"};
const LaunchPath kWideColumns{"vulkan", "attention_tiles", "wide_columns"};

// The slice width for head_dims up to `dims`, and the column chunk width for outputs up to `cols`
// wide, with the launch paths they take.
struct Widths {
  std::uint64_t slice = kSlice;
  std::uint64_t columns = kColumns;
  Widths(std::uint64_t dims, std::uint64_t cols)
      : slice(dims <= kNarrow ? kNarrow : kSlice), columns(cols <= kNarrow ? kNarrow : kColumns) {}
  std::vector<std::uint32_t> specialization(bool has_v) const {
    return {has_v ? 1u : 0u, static_cast<std::uint32_t>(slice), static_cast<std::uint32_t>(columns)};
  }
  std::vector<const LaunchPath*> paths(const LaunchPath& own) const {
    return {&own, slice == kSlice ? &kWideSlices : &kNarrowSlices,
            columns == kColumns ? &kWideColumns : &kNarrowColumns};
  }
};

// Per op: the one dispatch of one chunk, the chunked dispatch, and the merge after it.
struct AttentionPaths {
  AttentionPaths(std::string_view op, std::string_view chunked_path, std::string_view merge_path)
      : one_chunk("vulkan", op, "one_chunk"), chunked("vulkan", op, chunked_path), merge("vulkan", op, merge_path) {}
  LaunchPath one_chunk;
  LaunchPath chunked;
  LaunchPath merge;
};
const AttentionPaths kForwardPaths{"attention", "key_chunks", "chunk_combine"};
const AttentionPaths kLsePaths{"attention_lse", "key_chunks", "chunk_combine"};
const AttentionPaths kGradQPaths{"attention_grad_q", "key_chunks", "chunk_sum"};
const AttentionPaths kGradKvPaths{"attention_grad_kv", "query_chunks", "chunk_sum"};

// Must match the push constants of shaders/attention_common.glsl and attention_combine.comp.
struct AttentionPush {
  std::uint32_t heads = 0;
  std::uint32_t tq = 0;
  std::uint32_t tk = 0;
  std::uint32_t d = 0;
  std::uint32_t dv = 0;
  std::uint32_t causal = 0;
  float scale = 1;
  std::uint32_t row_tiles = 0;
  std::uint32_t col_chunks = 0;
  std::uint32_t dk_chunks = 0;
  std::uint32_t chunks = 1;
  std::uint32_t tiles_per_chunk = 1;
  std::uint32_t partial = 0;
};
static_assert(sizeof(AttentionPush) == 52);

// The sizes of one node: `heads` problems (all leading axes), q [tq, d], k [tk, d], v [tk, dv].
struct Dims {
  std::uint64_t heads = 0, tq = 0, tk = 0, d = 0, dv = 0;
  bool causal = false;
  float scale = 1;
};

Dims dims_of(const Graph& graph, const Node& node) {
  const Shape& q = graph.type(node.inputs[0]).shape;
  const Shape& k = graph.type(node.inputs[1]).shape;
  Dims dims;
  dims.heads = static_cast<std::uint64_t>(num_elements(Shape(q.begin(), q.end() - 2)));
  dims.tq = static_cast<std::uint64_t>(q[q.size() - 2]);
  dims.d = static_cast<std::uint64_t>(q.back());
  dims.tk = static_cast<std::uint64_t>(k[k.size() - 2]);
  dims.dv = node.inputs.size() > 2 ? static_cast<std::uint64_t>(graph.type(node.inputs[2]).shape.back()) : 0;
  dims.causal = node.attrs.boolean("causal");
  // The front-end rounded the scale to f32, so this cast is exact.
  dims.scale = static_cast<float>(node.attrs.real("scale"));
  return dims;
}

// The shaders index with 32-bit unsigned arithmetic: every value, the scratch and the workgroup
// count must fit.
void require_32_bit(const Graph& graph, const Node& node, std::uint64_t scratch_floats, std::uint64_t groups) {
  std::uint64_t largest = std::max(scratch_floats, groups);
  largest = std::max(largest, static_cast<std::uint64_t>(graph.type(node.output).size()));
  for (ValueId v : node.inputs) largest = std::max(largest, static_cast<std::uint64_t>(graph.type(v).size()));
  if (largest <= std::numeric_limits<std::uint32_t>::max()) return;
  std::string types;
  for (ValueId v : node.inputs) types += (types.empty() ? "" : ", ") + graph.type(v).to_string();
  throw LimitError("Vulkan kernel for '" + std::string(op_name(node.op)) + "' on " + types + " -> " +
                   graph.type(node.output).to_string() +
                   ": more than 2^32-1 elements in one value, its scratch or its workgroups");
}

std::uint32_t u32(std::uint64_t v) { return static_cast<std::uint32_t>(v); }

// Loop passes of one workgroup's work (kernels.h) as a function of the tiles of its chunk.
struct TileLoop {
  std::uint64_t outside = 0;   // loops before the tile loop (passes)
  std::uint64_t per_tile = 0;  // passes of the tile loop's body
  std::uint64_t nested = 0;    // loops inside the tile loop (one masked pass each on exit)
  std::uint64_t passes(std::uint64_t tiles) const { return outside + loop_passes(tiles, per_tile, nested); }
  // The launch's: the grid-stride loop over workgroups around the above (its exit pass runs the
  // tile loop, its nested loops and the one before it masked).
  std::uint64_t launch_passes(std::uint64_t tiles, std::uint64_t grid_iterations = 1) const {
    return loop_passes(grid_iterations, passes(tiles), nested + 2);
  }
};

struct Chunks {
  std::uint64_t count = 1;
  std::uint64_t tiles = 1;  // per chunk
};

// The chunks of a summed axis of `length` entries for a launch of `groups` workgroups before the split
// (see the top of the file).
Chunks choose_chunks(std::uint64_t length, std::uint64_t groups, const TileLoop& loop) {
  const std::uint64_t tiles = ceil_div(length, kTile);
  if (tiles == 0) return {};
  std::uint64_t count = 1;
  if (groups < kSplitBelowGroups && length > kMinSplitLength) {
    count = std::min(ceil_div(kSplitBelowGroups, std::max<std::uint64_t>(groups, 1)), tiles / kMinChunkTiles);
  }
  std::uint64_t per_chunk = ceil_div(tiles, count);
  while (per_chunk > 1 && loop.launch_passes(per_chunk) > kLoopBudget) {
    per_chunk = std::max<std::uint64_t>(1, per_chunk * kLoopBudget / loop.launch_passes(per_chunk));
    while (per_chunk > 1 && loop.launch_passes(per_chunk) > kLoopBudget) --per_chunk;
  }
  return {ceil_div(tiles, per_chunk), per_chunk};
}

AttentionPush push_of(const Dims& dims) {
  AttentionPush push;
  push.heads = u32(dims.heads);
  push.tq = u32(dims.tq);
  push.tk = u32(dims.tk);
  push.d = u32(dims.d);
  push.dv = u32(dims.dv);
  push.causal = dims.causal ? 1u : 0u;
  push.scale = dims.scale;
  return push;
}

// The main dispatch: `groups` workgroups (chunks included), loop passes of `loop` over `tiles`
// tiles per chunk inside a grid-stride loop over the workgroups.
KernelLaunch main_launch(std::string shader, std::vector<ValueId> bindings, const AttentionPush& push,
                         std::uint64_t groups, const TileLoop& loop) {
  KernelLaunch launch;
  launch.shader = std::move(shader);
  launch.bindings = std::move(bindings);
  launch.group_size = kGroupSize;
  launch.items = groups * kGroupSize;
  launch.loop_passes = loop.launch_passes(push.tiles_per_chunk, grid_iterations(launch.items, kGroupSize));
  append_pod(launch.push, push);
  return launch;
}

// attention (has_v) and attention_lse.
KernelLaunch plan_forward(const Graph& graph, const Node& node, bool has_v) {
  const Dims dims = dims_of(graph, node);
  const AttentionPaths& paths = has_v ? kForwardPaths : kLsePaths;
  const std::string name(op_name(node.op));
  AttentionPush push = push_of(dims);
  push.row_tiles = u32(ceil_div(dims.tq, kTile));
  const Widths widths(dims.d, has_v ? dims.dv : 0);
  push.col_chunks = has_v ? u32(ceil_div(dims.dv, widths.columns)) : 1u;
  // Per key tile: the head_dim slice loop (the rest is unrolled).
  const TileLoop loop{0, loop_passes(ceil_div(dims.d, widths.slice)), 1};
  const std::uint64_t groups = dims.heads * push.row_tiles * push.col_chunks;
  const Chunks chunks = choose_chunks(dims.tk, groups, loop);
  push.chunks = u32(chunks.count);
  push.tiles_per_chunk = u32(chunks.tiles);
  const std::uint64_t rows = dims.heads * dims.tq;
  const std::uint64_t scratch = chunks.count > 1 ? chunks.count * rows * (2 + (has_v ? dims.dv : 0)) : 0;
  require_32_bit(graph, node, scratch, groups * chunks.count);
  push.partial = chunks.count > 1 ? 1u : 0u;

  const ValueId v = has_v ? node.inputs[2] : node.inputs[1];  // lse: k in v's place, never read
  const ValueId out = chunks.count > 1 ? kScratch : node.output;
  KernelLaunch launch =
      main_launch("attention_forward", {node.inputs[0], node.inputs[1], v, out}, push, groups * chunks.count, loop);
  launch.specialization = widths.specialization(has_v);
  if (graph.type(node.output).size() == 0) launch.items = 0;
  if (chunks.count == 1) {
    launch.paths = widths.paths(paths.one_chunk);
    return launch;
  }
  launch.paths = widths.paths(paths.chunked);
  launch.label = name + " (key chunks)";
  launch.scratch_bytes = 4 * scratch;

  KernelLaunch combine;
  combine.shader = "attention_combine";
  combine.bindings = {kScratch, node.output};
  combine.group_size = kGroupSize;
  combine.items = static_cast<std::uint64_t>(graph.type(node.output).size());
  combine.specialization = {has_v ? 1u : 0u};
  combine.label = name + " (chunk combine)";
  combine.paths = {&paths.merge};
  // Two loops over the chunks per output element.
  combine.loop_passes = grid_stride_passes(combine.items, kGroupSize, 2 * loop_passes(chunks.count), 2);
  append_pod(combine.push, push);
  launch.then.push_back(std::move(combine));
  return launch;
}

KernelLaunch plan_attention(const Graph& graph, const Node& node) { return plan_forward(graph, node, true); }
KernelLaunch plan_attention_lse(const Graph& graph, const Node& node) { return plan_forward(graph, node, false); }

// attention_grad_q and attention_grad_kv: one launch over q, k, v, o, g, lse, then (several chunks)
// the ordered sum of the chunks' partial outputs.
KernelLaunch finish_backward(const Graph& graph, const Node& node, KernelLaunch launch, const Chunks& chunks,
                             const Widths& widths, const AttentionPaths& paths, const char* chunk_label) {
  const auto outputs = static_cast<std::uint64_t>(graph.type(node.output).size());
  if (outputs == 0) launch.items = 0;
  launch.specialization = widths.specialization(false);
  if (chunks.count == 1) {
    launch.paths = widths.paths(paths.one_chunk);
    return launch;
  }
  const std::string name(op_name(node.op));
  launch.bindings.back() = kScratch;
  launch.scratch_bytes = 4 * chunks.count * outputs;
  launch.label = name + chunk_label;
  launch.paths = widths.paths(paths.chunked);
  launch.then.push_back(
      ordered_sum_of_partials(node.output, outputs, chunks.count, name + " (chunk sum)", paths.merge));
  return launch;
}

std::vector<ValueId> backward_bindings(const Node& node) {
  std::vector<ValueId> bindings(node.inputs.begin(), node.inputs.end());
  bindings.push_back(node.output);
  return bindings;
}

KernelLaunch plan_attention_grad_q(const Graph& graph, const Node& node) {
  const Dims dims = dims_of(graph, node);
  AttentionPush push = push_of(dims);
  push.row_tiles = u32(ceil_div(dims.tq, kTile));
  const Widths widths(std::max(dims.d, dims.dv), dims.d);
  push.col_chunks = u32(ceil_div(dims.d, widths.columns));
  // delta's loop over v's head_dim, then per key tile the slice loops over d and dv.
  const TileLoop loop{loop_passes(ceil_div(dims.dv, kLanes)),
                      loop_passes(ceil_div(dims.d, widths.slice)) + loop_passes(ceil_div(dims.dv, widths.slice)), 2};
  const std::uint64_t groups = dims.heads * push.row_tiles * push.col_chunks;
  const Chunks chunks = choose_chunks(dims.tk, groups, loop);
  push.chunks = u32(chunks.count);
  push.tiles_per_chunk = u32(chunks.tiles);
  push.partial = chunks.count > 1 ? 1u : 0u;
  const std::uint64_t outputs = static_cast<std::uint64_t>(graph.type(node.output).size());
  require_32_bit(graph, node, chunks.count > 1 ? chunks.count * outputs : 0, groups * chunks.count);
  KernelLaunch launch = main_launch("attention_grad_q", backward_bindings(node), push, groups * chunks.count, loop);
  return finish_backward(graph, node, std::move(launch), chunks, widths, kGradQPaths, " (key chunks)");
}

KernelLaunch plan_attention_grad_kv(const Graph& graph, const Node& node) {
  const Dims dims = dims_of(graph, node);
  AttentionPush push = push_of(dims);
  push.row_tiles = u32(ceil_div(dims.tk, kTile));
  const Widths widths(std::max(dims.d, dims.dv), std::max(dims.d, dims.dv));
  push.dk_chunks = u32(ceil_div(dims.d, widths.columns));
  push.col_chunks = push.dk_chunks + u32(ceil_div(dims.dv, widths.columns));
  // Per query tile: delta's loop over v's head_dim and the slice loops over d and dv.
  const TileLoop loop{0,
                      loop_passes(ceil_div(dims.dv, kLanes)) + loop_passes(ceil_div(dims.d, widths.slice)) +
                          loop_passes(ceil_div(dims.dv, widths.slice)),
                      3};
  const std::uint64_t groups = dims.heads * push.row_tiles * push.col_chunks;
  const Chunks chunks = choose_chunks(dims.tq, groups, loop);
  push.chunks = u32(chunks.count);
  push.tiles_per_chunk = u32(chunks.tiles);
  push.partial = chunks.count > 1 ? 1u : 0u;
  const std::uint64_t outputs = static_cast<std::uint64_t>(graph.type(node.output).size());
  require_32_bit(graph, node, chunks.count > 1 ? chunks.count * outputs : 0, groups * chunks.count);
  KernelLaunch launch = main_launch("attention_grad_kv", backward_bindings(node), push, groups * chunks.count, loop);
  return finish_backward(graph, node, std::move(launch), chunks, widths, kGradKvPaths, " (query chunks)");
}

constexpr std::size_t slot(OpId id) { return static_cast<std::size_t>(id); }

}  // namespace

void register_attention_kernels(KernelPlanTable& table) {
  table[slot(op::Attention)] = plan_attention;
  table[slot(op::AttentionLse)] = plan_attention_lse;
  table[slot(op::AttentionGradQ)] = plan_attention_grad_q;
  table[slot(op::AttentionGradKv)] = plan_attention_grad_kv;
}

}  // namespace tg::vk
