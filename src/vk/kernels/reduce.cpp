// Launches of the reduce family (shaders/reduce.comp): sum, mean, max, min over a set of axes and
// argmax, argmin over one axis. Size-1 axes are dropped and adjacent axes of the same kind (kept or
// reduced) merged, as the interpreter does; the shader gets extents and input strides of each kind
// and addresses every output element's slice directly, so no permute is ever materialized.
// Long reductions get one 256-invocation workgroup per output element (strided fp32 partials, then
// a fixed-shape shared-memory tree), many medium ones 32 invocations each (the same with a 32-lane
// tree), short ones one invocation per output element. Rows longer than kChunkLength, when few or
// very long (row_chunks()), and every sum or mean row longer than that, are split across
// workgroups by shaders/reduce_split.comp: chunk partials into the node's scratch, then a combine
// in a fixed order. So no invocation adds more than 32 terms of a sum in sequence; the rest is
// trees and a combine of at most 32 partials (10^6 x 0.1f: within 4e-7). One workgroup per row of
// 2^23 terms looped 32768 times per invocation, past llvmpipe's loop limit (kernels.h), and left
// a GPU with one busy workgroup.
#include "tensorgrad/ir/ops/ids/reduce.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/vk/error.h"
#include "vk/kernels/kernels.h"

namespace tg::vk {

namespace {

constexpr std::size_t kMaxRank = 6;
constexpr std::uint32_t kGroupSize = 256;
// cover_rows(): rows at most kSerialLength long run one invocation each; longer ones up to
// kSegmentLength, at least kSegmentRows of them, kSegmentsPerGroup per workgroup (fewer rows keep
// a workgroup's 256 lanes each).
constexpr std::int64_t kSerialLength = 32;
constexpr std::int64_t kSegmentLength = 1024;
constexpr std::int64_t kSegmentRows = 128;
constexpr std::uint64_t kSegmentsPerGroup = 8;  // = WG / SEG in the shaders

// Both shaders' push constants; reduce.comp leaves span and base unused.
struct ReducePush {
  std::uint32_t op = 0;
  std::uint32_t mode = 0;
  std::uint32_t rows = 0;
  std::uint32_t count = 0;
  std::uint32_t kept_rank = 0;
  std::uint32_t red_rank = 0;
  std::uint32_t span = 0;  // reduce_split: chunk terms (mode 0) or the rows' length (combines)
  std::uint32_t base = 0;  // reduce_split: the scratch word where the partials start
  std::uint32_t kept_dims[kMaxRank] = {};
  std::uint32_t kept_strides[kMaxRank] = {};
  std::uint32_t red_dims[kMaxRank] = {};
  std::uint32_t red_strides[kMaxRank] = {};
};
static_assert(sizeof(ReducePush) == 128);

enum ReduceOp : std::uint32_t { sum, mean, max, min, argmax, argmin };

// reduce_split.comp's modes, and the most partials per row its per-invocation combine takes.
enum SplitMode : std::uint32_t { kChunks = 0, kCombineSerial = 1, kCombineGroup = 2 };
constexpr std::uint64_t kSerialCombineParts = 32;
// Passes of the loops a launch of reduce_split.comp does not take (each runs once, masked).
constexpr std::uint64_t kSplitMaskedPasses = 8;
// A shared-memory tree over 256 (or 32) lanes: 8 (5) halvings, counted as a loop.
constexpr std::uint64_t kTreePasses = loop_passes(8);

// Where the row modes (cover_rows), the splits (row_chunks) and the combines change, in terms (or
// rows) of a reduction: shared by reduce, softmax, softmax_causal, scatter_add, conv2d and the
// losses' sums, declared once here.
const SizeThreshold kSerialLengthThreshold{"vulkan", "rows", "row_per_invocation_max_length", kSerialLength};
const SizeThreshold kSegmentLengthThreshold{"vulkan", "rows", "row_segments_max_length", kSegmentLength};
const SizeThreshold kSegmentRowsThreshold{"vulkan", "rows", "row_segments_min_rows", kSegmentRows};
const SizeThreshold kChunkLengthThreshold{"vulkan", "rows", "split_chunk_length", kChunkLength};
const SizeThreshold kSplitBelowRowsThreshold{"vulkan", "rows", "split_below_rows", kSplitBelowRows};
const SizeThreshold kMaxUnsplitThreshold{"vulkan", "rows", "max_unsplit_length", kMaxUnsplitLength};
// A combine takes its partials serially up to kSerialCombineParts chunks of kChunkLength terms.
const SizeThreshold kSerialCombineThreshold{"vulkan", "rows", "serial_combine_max_length",
                                            static_cast<std::int64_t>(kSerialCombineParts) * kChunkLength};

// A split reduction's two dispatches: the chunk partials, then a serial or workgroup combine.
struct SplitPaths {
  explicit SplitPaths(std::string_view kernel, std::string_view prefix)
      : chunks("vulkan", kernel, std::string(prefix) + "chunks"),
        combine_serial("vulkan", kernel, std::string(prefix) + "combine_serial"),
        combine_workgroup("vulkan", kernel, std::string(prefix) + "combine_workgroup") {}
  LaunchPath chunks, combine_serial, combine_workgroup;
};

// Per op: the row modes of one dispatch, or the split.
struct ReducePaths {
  explicit ReducePaths(std::string_view op) : rows(op), split(op, "split_") {}
  RowModePaths rows;
  SplitPaths split;
};
const ReducePaths kSumPaths{"sum"};
const ReducePaths kMeanPaths{"mean"};
const ReducePaths kMaxPaths{"max"};
const ReducePaths kMinPaths{"min"};
const ReducePaths kArgmaxPaths{"argmax"};
const ReducePaths kArgminPaths{"argmin"};
const ReducePaths* const kReducePaths[] = {&kSumPaths, &kMeanPaths,   &kMaxPaths,
                                           &kMinPaths, &kArgmaxPaths, &kArgminPaths};  // by ReduceOp
// append_scratch_sum's own dispatches (after the caller's path).
const SplitPaths kScratchSumPaths{"scratch_sum", ""};

// The chunk pass of a split reduction: `push` describes the rows (op, rows, count, axes) and is
// completed here. Reads binding 0, writes the partials at scratch word `base`.
KernelLaunch chunk_pass(ReducePush push, ValueId input, ValueId output, std::uint64_t parts, std::uint32_t base,
                        const std::string& op, std::vector<const LaunchPath*> paths) {
  push.mode = kChunks;
  push.span = static_cast<std::uint32_t>(kChunkLength);
  push.base = base;
  KernelLaunch launch;
  launch.shader = "reduce_split";
  launch.bindings = {input, kScratch, output};
  launch.writes = 2;
  launch.group_size = kGroupSize;
  launch.items = std::uint64_t{push.rows} * parts * kGroupSize;
  launch.label = op + " (chunks)";
  launch.paths = std::move(paths);
  launch.loop_passes = loop_passes(grid_iterations(launch.items, kGroupSize),
                                   loop_passes(ceil_div(kChunkLength, kGroupSize)) + kTreePasses, 2) +
                       kSplitMaskedPasses;
  append_pod(launch.push, push);
  return launch;
}

// The combine of a split reduction's `parts` partials per row (at scratch word `base`) into the
// output; `length` is the rows' full reduced length (mean's divisor). Names `caller` (when given),
// then the serial or workgroup combine of `paths`.
KernelLaunch combine_pass(ReduceOp op, std::uint32_t rows, std::uint64_t parts, std::uint64_t length,
                          std::uint32_t base, ValueId input, ValueId output, const std::string& name,
                          const LaunchPath* caller, const SplitPaths& paths) {
  ReducePush push;
  push.op = op;
  push.rows = rows;
  push.count = static_cast<std::uint32_t>(parts);
  push.span = static_cast<std::uint32_t>(length);
  push.base = base;
  const bool serial = parts <= launch_thresholds().serial_combine_max_parts;
  push.mode = serial ? kCombineSerial : kCombineGroup;
  KernelLaunch launch;
  launch.shader = "reduce_split";
  launch.bindings = {input, kScratch, output};
  launch.writes = 2;
  launch.group_size = kGroupSize;
  launch.items = std::uint64_t{rows} * (serial ? 1 : kGroupSize);
  launch.label = name + " (chunk combine)";
  if (caller) launch.paths.push_back(caller);
  launch.paths.push_back(serial ? &paths.combine_serial : &paths.combine_workgroup);
  const std::uint64_t per_row = serial ? loop_passes(parts) : loop_passes(ceil_div(parts, kGroupSize)) + kTreePasses;
  launch.loop_passes = loop_passes(grid_iterations(launch.items, kGroupSize), per_row, 2) + kSplitMaskedPasses;
  append_pod(launch.push, push);
  return launch;
}

// A size past the shader's 32-bit indexing (LimitError) or a layout it has no form for (CompileError).
template <typename Refusal = LimitError>
[[noreturn]] void refuse(const Graph& graph, const Node& node, const std::string& why) {
  throw Refusal("Vulkan kernel for '" + std::string(op_name(node.op)) + "' on " +
                graph.type(node.inputs[0]).to_string() + ": " + why);
}

std::uint32_t u32(const Graph& graph, const Node& node, std::int64_t v) {
  if (v < 0 || v > 0xffffffffll) refuse(graph, node, "an extent or stride does not fit 32 bits");
  return static_cast<std::uint32_t>(v);
}

KernelLaunch plan_reduce(const Graph& graph, const Node& node, ReduceOp op) {
  const Shape& shape = graph.type(node.inputs[0]).shape;
  std::vector<bool> reduced(shape.size(), false);
  if (op == argmax || op == argmin) {
    reduced[static_cast<std::size_t>(node.attrs.integer("axis"))] = true;
  } else {
    for (auto a : node.attrs.ints("axes")) reduced[static_cast<std::size_t>(a)] = true;
  }
  if (num_elements(shape) > 0xffffffffll) refuse(graph, node, "more than 2^32-1 elements");

  // Groups of adjacent same-kind axes (size-1 axes dropped); row-major, so a merged group keeps the
  // innermost stride. Argmax's single reduced axis stays one group, so the reduced linear index is
  // the index along the axis.
  struct Group {
    std::int64_t dim, stride;
    bool reduced;
  };
  std::vector<Group> groups;
  const std::vector<std::int64_t> strides = row_major_strides(shape);
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (!groups.empty() && groups.back().reduced == reduced[i]) {
      groups.back().dim *= shape[i];
      groups.back().stride = strides[i];
    } else {
      groups.push_back({shape[i], strides[i], reduced[i]});
    }
  }

  ReducePush push;
  push.op = op;
  std::int64_t rows = 1, count = 1;
  for (const Group& g : groups) {
    std::uint32_t& rank = g.reduced ? push.red_rank : push.kept_rank;
    if (rank >= kMaxRank) refuse<CompileError>(graph, node, "more than 6 alternating kept/reduced axis groups");
    (g.reduced ? push.red_dims : push.kept_dims)[rank] = u32(graph, node, g.dim);
    (g.reduced ? push.red_strides : push.kept_strides)[rank] = u32(graph, node, g.stride);
    ++rank;
    (g.reduced ? count : rows) *= g.dim;
  }
  push.rows = u32(graph, node, rows);
  push.count = u32(graph, node, count);

  const std::string name(op_name(node.op));
  const ReducePaths& paths = *kReducePaths[op];
  // Sums and means longer than a chunk split whatever the row count: one workgroup per row made
  // each invocation add up to 256 terms in sequence (10^6 x 0.1f in rows of 65536: 2.4e-6
  // relative error, 40x PyTorch's); split, no invocation adds more than 32 before a tree.
  const bool sum_like = op == sum || op == mean;
  const std::uint64_t parts = sum_like && count > kChunkLength ? ceil_div(static_cast<std::uint64_t>(count),
                                                                          static_cast<std::uint64_t>(kChunkLength))
                                                               : row_chunks(count, rows);
  if (parts > 1) {
    KernelLaunch launch = chunk_pass(push, node.inputs[0], node.output, parts, 0, name, {&paths.split.chunks});
    const bool arg = op == argmax || op == argmin;
    launch.scratch_bytes = 4 * static_cast<std::uint64_t>(rows) * parts * (arg ? 2 : 1);
    launch.then.push_back(combine_pass(op, push.rows, parts, static_cast<std::uint64_t>(count), 0, node.inputs[0],
                                       node.output, name, nullptr, paths.split));
    return launch;
  }
  KernelLaunch launch;
  launch.shader = "reduce";
  launch.bindings = {node.inputs[0], node.output};
  push.mode = cover_rows(launch, name, count, rows, paths.rows);
  // The offset arithmetic is unrolled: one pass per folded term.
  launch.loop_passes = row_mode_passes(push.mode, count, rows, 1, 1);
  if (graph.type(node.output).size() == 0) launch.items = 0;
  append_pod(launch.push, push);
  return launch;
}

template <ReduceOp Op>
KernelLaunch plan(const Graph& graph, const Node& node) {
  return plan_reduce(graph, node, Op);
}

constexpr std::size_t slot(OpId id) { return static_cast<std::size_t>(id); }

}  // namespace

std::uint32_t cover_rows(KernelLaunch& launch, std::string_view op, std::int64_t length, std::int64_t rows,
                         const RowModePaths& paths) {
  const auto count = static_cast<std::uint64_t>(rows);
  launch.group_size = kGroupSize;
  if (length <= kSerialLength) {
    launch.items = count;
    launch.paths = {&paths.per_invocation};
    return 1;
  }
  if (length <= kSegmentLength && rows >= kSegmentRows) {
    launch.items = (count + kSegmentsPerGroup - 1) / kSegmentsPerGroup * kGroupSize;
    launch.label = std::string(op) + " (row segments)";
    launch.paths = {&paths.segments};
    return 2;
  }
  launch.items = count * kGroupSize;
  launch.paths = {&paths.workgroup};
  return 0;
}

std::uint64_t row_mode_passes(std::uint32_t mode, std::int64_t length, std::int64_t rows, std::uint64_t loops,
                              std::uint64_t trees) {
  const auto len = static_cast<std::uint64_t>(std::max<std::int64_t>(length, 0));
  const auto count = static_cast<std::uint64_t>(std::max<std::int64_t>(rows, 0));
  // The modes not taken: their row loops, term loops and trees run once each, masked.
  const std::uint64_t masked = 3 * (2 + loops + trees);
  const std::uint64_t per_row = [&] {
    if (mode == 1) return loops * loop_passes(len);
    if (mode == 2) return loops * loop_passes(ceil_div(len, kGroupSize / kSegmentsPerGroup)) + trees * kTreePasses;
    return loops * loop_passes(ceil_div(len, kGroupSize)) + trees * kTreePasses;
  }();
  const std::uint64_t items = mode == 1   ? count
                              : mode == 2 ? ceil_div(count, kSegmentsPerGroup) * kGroupSize
                                          : count * kGroupSize;
  return loop_passes(grid_iterations(items, kGroupSize), per_row, loops + trees) + masked;
}

std::uint64_t row_chunks(std::int64_t length, std::int64_t rows) {
  if (length <= kChunkLength || (rows >= kSplitBelowRows && length <= kMaxUnsplitLength)) return 1;
  return ceil_div(static_cast<std::uint64_t>(length), static_cast<std::uint64_t>(kChunkLength));
}

std::uint64_t append_scratch_sum(KernelLaunch& launch, ValueId output, std::uint64_t count, bool mean,
                                 const std::string& op, const LaunchPath& path) {
  ReducePush push;
  push.op = mean ? ReduceOp::mean : ReduceOp::sum;
  push.rows = 1;
  push.count = static_cast<std::uint32_t>(count);
  push.red_rank = 1;
  push.red_dims[0] = push.count;
  push.red_strides[0] = 1;
  const std::uint64_t parts = ceil_div(count, static_cast<std::uint64_t>(kChunkLength));
  const auto base = static_cast<std::uint32_t>(count);
  launch.then.push_back(chunk_pass(push, kScratch, output, parts, base, op, {&path, &kScratchSumPaths.chunks}));
  launch.then.push_back(combine_pass(mean ? ReduceOp::mean : ReduceOp::sum, 1, parts, count, base, kScratch, output, op,
                                     &path, kScratchSumPaths));
  return 4 * (count + parts);
}

void register_reduce_kernels(KernelPlanTable& table) {
  table[slot(op::Sum)] = plan<sum>;
  table[slot(op::Mean)] = plan<mean>;
  table[slot(op::Max)] = plan<max>;
  table[slot(op::Min)] = plan<min>;
  table[slot(op::Argmax)] = plan<argmax>;
  table[slot(op::Argmin)] = plan<argmin>;
}

}  // namespace tg::vk
