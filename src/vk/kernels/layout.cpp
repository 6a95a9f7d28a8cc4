// Launches of the layout family: reshape, permute, swap_axes and broadcast_to are one strided copy
// (shaders/layout.comp: per-axis output dims and input strides, up to 6 axes after collapsing);
// sum_to_shape adds each output's preimage in the interpreter's fixed order, so it gives the same
// f32 bits (shaders/sum_to_shape.comp). Data movement copies raw 32-bit words, so it serves every
// dtype.
#include "tensorgrad/ir/ops/ids/layout.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/vk/error.h"
#include "vk/kernels/kernels.h"

namespace tg::vk {

namespace {

constexpr std::size_t kMaxRank = 6;

struct GatherPush {
  std::uint32_t n = 0;
  std::uint32_t rank = 0;
  std::uint32_t base = 0;
  std::uint32_t pad0 = 0;
  std::uint32_t dims[kMaxRank] = {};
  std::uint32_t strides[kMaxRank] = {};
};
static_assert(sizeof(GatherPush) == 64);

struct Axes {
  std::vector<std::int64_t> dims, strides;
};

// The strided copy's two forms: rank 0 after collapsing (one contiguous run) or strided axes.
// reshape is always the former; broadcast_to, fusable, also names its own dispatch.
const LaunchPath kReshape{"vulkan", "reshape", "kernel"};
const LaunchPath kPermuteContiguous{"vulkan", "permute", "contiguous_copy"};
const LaunchPath kPermuteStrided{"vulkan", "permute", "strided_copy"};
const LaunchPath kSwapAxesContiguous{"vulkan", "swap_axes", "contiguous_copy"};
const LaunchPath kSwapAxesStrided{"vulkan", "swap_axes", "strided_copy"};
const LaunchPath kBroadcastOwn{"vulkan", "broadcast_to", "own_kernel"};
const LaunchPath kBroadcastContiguous{"vulkan", "broadcast_to", "contiguous_copy"};
const LaunchPath kBroadcastStrided{"vulkan", "broadcast_to", "strided_copy"};

// sum_to_shape's forms (see sum_to_shape() below): the row form's sum_rows.comp (one block, or
// block partials and their ordered sum), and the modes of sum_to_shape.comp.
const LaunchPath kSumRowBlock{"vulkan", "sum_to_shape", "row_block"};
const LaunchPath kSumRowBlockPartials{"vulkan", "sum_to_shape", "row_block_partials"};
const LaunchPath kSumRowBlockSum{"vulkan", "sum_to_shape", "row_block_sum"};
const LaunchPath kSumSerial{"vulkan", "sum_to_shape", "per_output_serial"};                 // mode 0, short
const LaunchPath kSumGroupBlocks{"vulkan", "sum_to_shape", "per_output_workgroup_blocks"};  // mode 0, long
const LaunchPath kSumStagedOne{"vulkan", "sum_to_shape", "staged_workgroup_per_output"};    // mode 1
const LaunchPath kSumStagedRows{"vulkan", "sum_to_shape", "staged_rows"};                   // mode 2
const LaunchPath kSumContiguousShort{"vulkan", "sum_to_shape", "contiguous_rows_short"};    // mode 3, <= 128
const LaunchPath kSumContiguousLong{"vulkan", "sum_to_shape", "contiguous_rows_long"};      // mode 3, > 128
const LaunchPath kSumBlockPartials{"vulkan", "sum_to_shape", "block_partials"};             // mode 4
const LaunchPath kSumBlockSum{"vulkan", "sum_to_shape", "block_sum"};
const LaunchPath kSumStagedBlockPartials{"vulkan", "sum_to_shape", "staged_block_partials"};  // mode 6
// Mode 6 where the innermost summed axis holds whole blocks: terms read without a decode each.
const LaunchPath kSumStagedWholeBlocks{"vulkan", "sum_to_shape", "staged_whole_blocks"};
const LaunchPath kSumContiguousLongRows{"vulkan", "sum_to_shape", "contiguous_long_rows"};  // mode 5

// Drops extent-1 axes and merges axis d into the one before it where the input continues
// contiguously (stride_prev == stride_d * dim_d); the row-major order of the output is kept.
Axes collapse(const std::vector<std::int64_t>& dims, const std::vector<std::int64_t>& strides) {
  Axes a;
  for (std::size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    if (!a.dims.empty() && a.strides.back() == strides[d] * dims[d]) {
      a.dims.back() *= dims[d];
      a.strides.back() = strides[d];
    } else {
      a.dims.push_back(dims[d]);
      a.strides.push_back(strides[d]);
    }
  }
  return a;
}

std::string too_many_axes(const Graph& graph, const Node& node, std::size_t rank) {
  return "Vulkan kernel for '" + std::string(op_name(node.op)) + "': output " + graph.type(node.output).to_string() +
         " needs " + std::to_string(rank) + " strided axes after collapsing, above the " + std::to_string(kMaxRank) +
         " the shader supports";
}

// out[i] = in[sum_d coord_d(i) * strides[d]] over the output's row-major coordinates.
KernelLaunch gather(const Graph& graph, const Node& node, const std::vector<std::int64_t>& dims,
                    const std::vector<std::int64_t>& strides) {
  const Axes a = collapse(dims, strides);
  GatherPush push;
  push.n = static_cast<std::uint32_t>(graph.type(node.output).size());
  const bool contiguous = a.dims.size() == 1 && a.strides[0] == 1;
  if (!contiguous) {
    if (a.dims.size() > kMaxRank) throw CompileError(too_many_axes(graph, node, a.dims.size()));
    push.rank = static_cast<std::uint32_t>(a.dims.size());
    for (std::size_t d = 0; d < a.dims.size(); ++d) {
      push.dims[d] = static_cast<std::uint32_t>(a.dims[d]);
      push.strides[d] = static_cast<std::uint32_t>(a.strides[d]);
    }
    // rank 0 after collapsing with n elements means every axis had extent 1: a one-word copy.
  }
  KernelLaunch launch;
  launch.shader = "layout";
  launch.bindings = {node.inputs[0], node.output};
  append_pod(launch.push, push);
  launch.items = push.n;
  launch.loop_passes = grid_stride_passes(launch.items, launch.group_size, loop_passes(kMaxRank), 1);  // axis loop
  // The op's paths, by form.
  const bool strided = push.rank > 0;
  switch (node.op) {
    case op::Reshape:
      launch.paths = {&kReshape};
      break;
    case op::Permute:
      launch.paths = {strided ? &kPermuteStrided : &kPermuteContiguous};
      break;
    case op::SwapAxes:
      launch.paths = {strided ? &kSwapAxesStrided : &kSwapAxesContiguous};
      break;
    default:  // broadcast_to
      launch.paths = {&kBroadcastOwn, strided ? &kBroadcastStrided : &kBroadcastContiguous};
      break;
  }
  return launch;
}

KernelLaunch reshape(const Graph& graph, const Node& node) {
  const auto n = graph.type(node.output).size();
  return gather(graph, node, {n}, {1});
}

KernelLaunch permute_by(const Graph& graph, const Node& node, const std::vector<std::int64_t>& perm) {
  const Shape& in = graph.type(node.inputs[0]).shape;
  const std::vector<std::int64_t> in_strides = row_major_strides(in);
  std::vector<std::int64_t> dims, strides;
  for (std::int64_t axis : perm) {
    dims.push_back(in[static_cast<std::size_t>(axis)]);
    strides.push_back(in_strides[static_cast<std::size_t>(axis)]);
  }
  return gather(graph, node, dims, strides);
}

KernelLaunch permute(const Graph& graph, const Node& node) { return permute_by(graph, node, node.attrs.ints("perm")); }

KernelLaunch swap_axes(const Graph& graph, const Node& node) {
  std::vector<std::int64_t> perm(graph.type(node.inputs[0]).shape.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[static_cast<std::size_t>(node.attrs.integer("axis0"))],
            perm[static_cast<std::size_t>(node.attrs.integer("axis1"))]);
  return permute_by(graph, node, perm);
}

// The input is right-aligned against the output; its extent-1 axes (and the missing leading ones)
// get stride 0.
KernelLaunch broadcast_to(const Graph& graph, const Node& node) {
  const Shape& in = graph.type(node.inputs[0]).shape;
  const Shape& out = graph.type(node.output).shape;
  const std::vector<std::int64_t> own = row_major_strides(in);
  std::vector<std::int64_t> dims(out.begin(), out.end()), strides(out.size(), 0);
  const std::size_t lead = out.size() - in.size();
  for (std::size_t d = 0; d < in.size(); ++d) strides[lead + d] = in[d] == 1 ? 0 : own[d];
  return gather(graph, node, dims, strides);
}

struct SumPush {
  std::uint32_t n = 0;
  std::uint32_t out_rank = 0;
  std::uint32_t staged = 0;  // the shader's modes 1-5 (shaders/sum_to_shape.comp); 0: one per output
  std::uint32_t len = 0;
  std::uint32_t out_dims[kMaxRank] = {};
  std::uint32_t start_strides[kMaxRank] = {};
  std::uint32_t sum_dims[kMaxRank] = {1, 1, 1, 1, 1, 1};  // right-aligned; unused slots extent 1, stride 0
  std::uint32_t sum_strides[kMaxRank] = {};
};
static_assert(sizeof(SumPush) == 112);

// Preimages longer than this are summed by a workgroup in blocks of this many terms (the
// interpreter's deterministic_sum block), shorter ones by one invocation: the same order as
// tg::interpret, so the same f32 bits.
constexpr std::int64_t kSumBlock = 256;  // = kSumToShapeBlock in src/interp/kernels/layout.cpp
// From this many rows the row form [rows, cols] -> [cols] stages tiles in shared memory
// (sum_rows.comp): one invocation per column would read them one strided load after another.
constexpr std::int64_t kMinRowsForm = 32;
// Up to this many outputs a short preimage gets a workgroup each (SumPush::staged = 1); more
// outputs share a workgroup kStagedRows at a time (staged = 2).
constexpr std::uint32_t kMaxStagedOutputs = 1024;
constexpr std::uint32_t kStagedRows = 16;  // = ROWS in shaders/sum_to_shape.comp
// Contiguous rows ([rows, len] -> [rows], staged = 3): rows per workgroup, 32 of up to 128 terms,
// else 16 (= contiguous_rows() in shaders/sum_to_shape.comp).
constexpr std::uint32_t kContiguousRowsShort = 32;
constexpr std::uint32_t kContiguousRowsLong = 16;
// Contiguous rows longer than kSumBlock (staged = 5): a workgroup stages whole rows of at most
// this many blocks in all (16 x 257 words, 16 KB: the shared array modes 2 and 3 already declare,
// so several workgroups still fit an SM), kLongRowBlocks / blocks rows of them; rows of up to
// 4096 terms (= LONG_ROW_BLOCKS in shaders/sum_to_shape.comp). Longer rows keep a workgroup each.
constexpr std::uint64_t kLongRowBlocks = 16;
// Preimages of more blocks than this take two dispatches (staged = 4, block partials into scratch,
// then matmul_split_sum): the one-workgroup form's invocation 0 adds every block partial itself,
// 257 loop passes per 256 blocks, which past a few thousand blocks nears llvmpipe's loop limit.
constexpr std::uint64_t kMaxOneDispatchBlocks = 2048;

const SizeThreshold kSumBlockThreshold{"vulkan", "sum_to_shape", "block_terms", kSumBlock};
const SizeThreshold kMinRowsFormThreshold{"vulkan", "sum_to_shape", "staged_min_terms", kMinRowsForm};
const SizeThreshold kStagedOutputsThreshold{"vulkan", "sum_to_shape", "workgroup_per_output_max_outputs",
                                            kMaxStagedOutputs};
const SizeThreshold kStagedRowsThreshold{"vulkan", "sum_to_shape", "staged_rows_per_workgroup", kStagedRows};
const SizeThreshold kContiguousShortThreshold{"vulkan", "sum_to_shape", "contiguous_rows_short_max_terms", 128};
const SizeThreshold kLongRowsThreshold{"vulkan", "sum_to_shape", "contiguous_long_rows_max_terms",
                                       static_cast<std::int64_t>(kLongRowBlocks) * kSumBlock};
const SizeThreshold kOneDispatchBlocksThreshold{"vulkan", "sum_to_shape", "one_dispatch_max_blocks",
                                                static_cast<std::int64_t>(kMaxOneDispatchBlocks)};
const SizeThreshold kOneDispatchTermsThreshold{"vulkan", "sum_to_shape", "one_dispatch_max_terms",
                                               static_cast<std::int64_t>(kMaxOneDispatchBlocks) * kSumBlock};
const SizeThreshold kRowFormColumnsThreshold{"vulkan", "sum_to_shape", "row_block_columns", 32};

// Loop passes of one invocation of sum_to_shape.comp (kernels.h): start_of()'s axis loop, and
// sum_range()'s loop of 4 terms a pass with its tail, for `terms` terms.
constexpr std::uint64_t kStartPasses = loop_passes(kMaxRank);
constexpr std::uint64_t range_passes(std::uint64_t terms) { return loop_passes(terms / 4) + loop_passes(3); }

std::uint64_t sum_to_shape_passes(std::uint32_t staged, std::uint64_t len, std::uint64_t n, std::uint64_t items,
                                  std::uint32_t group_size) {
  const std::uint64_t iterations = grid_iterations(items, group_size);
  // The other modes' loops, one masked pass each: at most every loop of the shader, 35 (mode 5's 6
  // among them).
  const std::uint64_t masked = 35;
  std::uint64_t body = 0;
  if (staged == 5) {
    // Staging 4 words a pass and its tail, a block's terms 4 a pass and its tail, the partials.
    const std::uint64_t blocks = ceil_div(len, kSumBlock);
    const std::uint64_t words = kLongRowBlocks / blocks * len;
    body = loop_passes(ceil_div(words, 4 * std::uint64_t{group_size})) + loop_passes(3) +
           range_passes(static_cast<std::uint64_t>(kSumBlock)) + loop_passes(blocks);
  } else if (staged == 4) {
    body = kStartPasses + range_passes(static_cast<std::uint64_t>(kSumBlock));
  } else if (staged == 6) {
    // ROWS terms staged (a start and a one-term range each), then a block's terms 4 a pass.
    body = loop_passes(kStagedRows, kStartPasses + range_passes(1), 3) +
           range_passes(static_cast<std::uint64_t>(kSumBlock));
  } else if (staged == 2) {
    body = loop_passes(kStagedRows, kStartPasses + range_passes(1), 3) + loop_passes(len);
  } else if (staged == 3) {
    body = loop_passes(ceil_div(kContiguousRowsShort * len, group_size)) + range_passes(len);
  } else if (staged == 1) {
    body = kStartPasses + range_passes(1) + loop_passes(len);
  } else if (len <= static_cast<std::uint64_t>(kSumBlock)) {
    body = kStartPasses + range_passes(len);
  } else {
    const std::uint64_t blocks = ceil_div(len, kSumBlock);
    body = kStartPasses + loop_passes(ceil_div(blocks, group_size),
                                      range_passes(static_cast<std::uint64_t>(kSumBlock)) + loop_passes(group_size), 3);
  }
  (void)n;
  return loop_passes(iterations, body, 6) + masked;
}

// Summed axes: the input's leading extra axes and those the target has as 1 (while the input does
// not). Kept axes: the rest, over the output's row-major coordinates. Both lists collapse without
// changing their order, so the preimage is still added in row-major order of the summed axes.
// `long_form`: how a preimage of more than kSumBlock terms that would take a workgroup per output
// is added instead (route_long_sums): as block partials (staged = 4) or staged block partials
// (staged = 6) at any length; by_length keeps the workgroup up to one_dispatch_max_blocks.
enum class LongForm { by_length, block_partials, staged_block_partials };
KernelLaunch plan_sum_to_shape(const Graph& graph, const Node& node, LongForm long_form) {
  const Shape& in = graph.type(node.inputs[0]).shape;
  const Shape& out = graph.type(node.output).shape;
  const std::vector<std::int64_t> in_strides = row_major_strides(in);
  const std::size_t leading = in.size() - out.size();
  std::vector<std::int64_t> kept_dims, kept_strides, sum_dims, sum_strides;
  for (std::size_t axis = 0; axis < in.size(); ++axis) {
    const bool summed = axis < leading || (out[axis - leading] == 1 && in[axis] != 1);
    if (summed) {
      sum_dims.push_back(in[axis]);
      sum_strides.push_back(in_strides[axis]);
    } else {
      kept_dims.push_back(out[axis - leading]);
      kept_strides.push_back(out[axis - leading] == 1 ? 0 : in_strides[axis]);
    }
  }
  std::int64_t len = 1;
  for (std::int64_t d : sum_dims) len *= d;
  Axes kept = collapse(kept_dims, kept_strides);
  Axes summed = collapse(sum_dims, sum_strides);
  if (len == 0) summed = {};
  const std::size_t rank = std::max(kept.dims.size(), summed.dims.size());
  if (rank > kMaxRank) throw CompileError(too_many_axes(graph, node, rank));

  SumPush push;
  push.n = static_cast<std::uint32_t>(graph.type(node.output).size());
  push.out_rank = static_cast<std::uint32_t>(kept.dims.size());
  push.len = static_cast<std::uint32_t>(len);
  for (std::size_t d = 0; d < kept.dims.size(); ++d) {
    push.out_dims[d] = static_cast<std::uint32_t>(kept.dims[d]);
    push.start_strides[d] = static_cast<std::uint32_t>(kept.strides[d]);
  }
  const std::size_t lead = kMaxRank - summed.dims.size();
  for (std::size_t d = 0; d < summed.dims.size(); ++d) {
    push.sum_dims[lead + d] = static_cast<std::uint32_t>(summed.dims[d]);
    push.sum_strides[lead + d] = static_cast<std::uint32_t>(summed.strides[d]);
  }
  KernelLaunch launch;
  // The row form [rows, cols] -> [cols] (bias gradients): sum_rows.comp's coalesced block sums,
  // straight into the output for one block, else into scratch, and matmul_split_sum adds them in
  // block order (the same bits either way). Short columns stay with the general kernel.
  const bool rows_form = len >= kMinRowsForm && kept.dims.size() == 1 && kept.strides[0] == 1 &&
                         summed.dims.size() == 1 && summed.strides[0] == kept.dims[0];
  if (rows_form) {
    const std::int64_t cols = kept.dims[0];
    const std::int64_t blocks = (len + kSumBlock - 1) / kSumBlock;
    const std::int64_t chunks = (cols + 31) / 32;
    const std::uint32_t rows_push[4] = {static_cast<std::uint32_t>(len), static_cast<std::uint32_t>(cols),
                                        static_cast<std::uint32_t>(chunks), static_cast<std::uint32_t>(blocks)};
    launch.shader = "sum_rows";
    launch.label = "sum_to_shape (row blocks)";
    launch.bindings = {node.inputs[0], blocks == 1 ? node.output : kScratch};
    launch.paths = {blocks == 1 ? &kSumRowBlock : &kSumRowBlockPartials};
    append_pod(launch.push, rows_push);
    launch.items = static_cast<std::uint64_t>(blocks * chunks) * 256;
    // The tile loop: staging is unrolled; a column's rows are added 8 a pass, then the tail.
    launch.loop_passes = grid_stride_passes(launch.items, launch.group_size, loop_passes(32) + loop_passes(7), 2);
    if (blocks == 1) return launch;
    launch.scratch_bytes = 4 * static_cast<std::uint64_t>(blocks * cols);
    launch.then.push_back(ordered_sum_of_partials(node.output, static_cast<std::uint64_t>(cols),
                                                  static_cast<std::uint64_t>(blocks), "sum_to_shape (block sum)",
                                                  kSumRowBlockSum));
    return launch;
  }
  // Few outputs with preimages of kMinRowsForm..kSumBlock terms: a workgroup per output loads the
  // terms at once (one invocation per output would issue its loads one after another: 17 us for
  // [256, 1] -> [1] on an H200, W1's last bias gradient).
  // More outputs: a workgroup loads kStagedRows preimages side by side and kStagedRows invocations
  // add one each (staged = 2; one invocation per output took 21 us for LayerNorm's row sums on an
  // H200).
  // Many contiguous rows ([B, T, C] -> [B, T, 1] with the summed axis innermost): a workgroup
  // copies its rows, one contiguous stretch, with plain coalesced loads (staged = 3; the general
  // staged = 2 computes every term's address from the 6-axis description: 17 us per LayerNorm row
  // sum on an H200).
  // Contiguous rows of kSumBlock + 1 .. kLongRowBlocks * kSumBlock terms (staged = 5; LayerNorm
  // over a width of 768): a workgroup copies whole rows the same way, then one invocation per
  // 256-term block adds it from shared memory and one per row adds the block partials (the general
  // form gave each output a workgroup in which ceil(len / 256) invocations walked global memory,
  // the rest idle: 650 us for [8, 1024, 768] -> [8, 1024, 1] on an H200).
  const bool short_preimage = len >= kMinRowsForm && len <= kSumBlock;
  const bool contiguous_rows =
      kept.dims.size() == 1 && kept.strides[0] == len && summed.dims.size() == 1 && summed.strides[0] == 1;
  push.staged = !short_preimage ? 0u : push.n <= kMaxStagedOutputs ? 1u : contiguous_rows ? 3u : 2u;
  const std::uint64_t blocks = ceil_div(static_cast<std::uint64_t>(len), kSumBlock);
  if (len > kSumBlock && (long_form != LongForm::by_length || blocks > launch_thresholds().one_dispatch_max_blocks)) {
    push.staged = long_form == LongForm::staged_block_partials ? 6 : 4;
  }
  if (len > kSumBlock && blocks <= kLongRowBlocks && contiguous_rows) push.staged = 5;
  launch.shader = "sum_to_shape";
  launch.bindings = {node.inputs[0], node.output};
  append_pod(launch.push, push);
  launch.group_size = 256;
  if (push.staged == 4 || push.staged == 6) {
    const bool staged = push.staged == 6;
    const std::uint64_t partials = std::uint64_t{push.n} * blocks;
    launch.bindings.back() = kScratch;
    launch.label = staged ? "sum_to_shape (staged block partials)" : "sum_to_shape (block partials)";
    launch.items = staged ? ceil_div(partials, kStagedRows) * launch.group_size : partials;
    launch.scratch_bytes = 4 * partials;
    launch.loop_passes =
        sum_to_shape_passes(push.staged, static_cast<std::uint64_t>(len), push.n, launch.items, launch.group_size);
    launch.paths = {staged ? &kSumStagedBlockPartials : &kSumBlockPartials};
    if (staged && push.sum_dims[kMaxRank - 1] % kSumBlock == 0) launch.paths.push_back(&kSumStagedWholeBlocks);
    launch.then.push_back(
        ordered_sum_of_partials(node.output, push.n, blocks, "sum_to_shape (block sum)", kSumBlockSum));
    return launch;
  }
  if (push.staged == 2 || push.staged == 3 || push.staged == 5) {
    const std::uint64_t rows = push.staged == 2   ? kStagedRows
                               : push.staged == 5 ? kLongRowBlocks / blocks
                               : len <= 128       ? kContiguousRowsShort
                                                  : kContiguousRowsLong;
    launch.items = ceil_div(push.n, rows) * launch.group_size;
    if (push.staged == 3) launch.label = "sum_to_shape (contiguous rows)";
    if (push.staged == 5) launch.label = "sum_to_shape (contiguous long rows)";
    launch.paths = {push.staged == 2   ? &kSumStagedRows
                    : push.staged == 5 ? &kSumContiguousLongRows
                    : len <= 128       ? &kSumContiguousShort
                                       : &kSumContiguousLong};
  } else {
    const bool group_per_output = len > kSumBlock || push.staged != 0;
    launch.items = group_per_output ? std::uint64_t{push.n} * launch.group_size : push.n;
    launch.paths = {push.staged == 1 ? &kSumStagedOne : group_per_output ? &kSumGroupBlocks : &kSumSerial};
  }
  launch.loop_passes =
      sum_to_shape_passes(push.staged, static_cast<std::uint64_t>(len), push.n, launch.items, launch.group_size);
  return launch;
}

KernelLaunch sum_to_shape(const Graph& graph, const Node& node) {
  return plan_sum_to_shape(graph, node, LongForm::by_length);
}

constexpr std::size_t slot(OpId id) { return static_cast<std::size_t>(id); }

}  // namespace

// The workgroup per output (staged = 0 past kSumBlock terms) keeps ceil(len / 256) of its 256
// invocations busy, each walking 256 terms, and on llvmpipe runs every SIMD batch of the group
// through the shader's barriers: 3.4 ms for W7_small's [64, 32, 8, 8] -> [1, 32, 1, 1] bias
// gradient. On CPU devices the block partials give each (block, output) its own invocation, no
// barrier, and the same additions in the same order. On GPUs, few outputs (below
// kMaxStagedOutputs) leave most of the device idle under a workgroup each (W7's eight bias
// gradients of 32-64 outputs: 527 us on an H200); their blocks are staged ROWS a workgroup into
// shared memory with coalesced loads instead (staged = 6), again the same additions in order.
void route_long_sums(const Graph& graph, const DeviceInfo& device, std::vector<KernelLaunch>& launches) {
  using LongSums = LaunchThresholds::LongSums;
  const LongSums forced = launch_thresholds().long_sums;
  if (forced == LongSums::workgroup_per_output) return;
  const LongSums choice = forced != LongSums::by_device    ? forced
                          : device.type == DeviceType::cpu ? LongSums::block_partials
                                                           : LongSums::staged_block_partials;
  for (std::size_t n = 0; n < launches.size() && n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    if (node.op != op::SumToShape || launches[n].shader != "sum_to_shape") continue;
    if (launches[n].paths.empty() || launches[n].paths.front() != &kSumGroupBlocks) continue;
    if (choice == LongSums::staged_block_partials && forced == LongSums::by_device &&
        graph.type(node.output).size() >= kMaxStagedOutputs)
      continue;
    std::vector<ValueId> extra_reads = std::move(launches[n].extra_reads);
    launches[n] = plan_sum_to_shape(
        graph, node, choice == LongSums::block_partials ? LongForm::block_partials : LongForm::staged_block_partials);
    launches[n].extra_reads = std::move(extra_reads);
  }
}

void register_layout_kernels(KernelPlanTable& table) {
  table[slot(op::Reshape)] = reshape;
  table[slot(op::Permute)] = permute;
  table[slot(op::SwapAxes)] = swap_axes;
  table[slot(op::BroadcastTo)] = broadcast_to;
  table[slot(op::SumToShape)] = sum_to_shape;
}

}  // namespace tg::vk
