#pragma once
// Internal: the Vulkan kernels, one file per op family (the same names as src/interp/kernels).
// A kernel turns one node into a launch: which embedded shader, which values it binds (inputs in
// order, then the output), its push constants and how many items the grid must cover. The
// executor owns buffers, pipelines, descriptor sets and barriers.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensorgrad/ir/graph.h"
#include "tensorgrad/ir/launch_paths.h"
#include "tensorgrad/ir/ops/op_def.h"
#include "tensorgrad/vk/device.h"

namespace tg::vk {

// An index check (embedding, one_hot, take_along_axis, scatter_add, nll_loss, cross_entropy): the
// executor binds ONE more storage buffer after the launch's own bindings, `uint first_bad[]` with one
// word, set to 0xFFFFFFFF before every run. The shader does atomicMin(first_bad[0], e) for every
// flat element e of `input` (an i32 value) outside [0, extent). After the run the executor reads
// the word back and, when it changed, reads that element and throws the interpreter's RuntimeError:
// "<op>: <what> <value> is out of range [0, <extent>) at element <e> (node %n <op>, created at ...)".
// atomicMin keeps the report deterministic (the first bad element, whatever the schedule).
struct IndexCheck {
  ValueId input = -1;
  std::int64_t extent = 0;
  std::string what = "index";  // "index", "target"
};

// A binding of this id names the node's scratch range (KernelLaunch::scratch_bytes), memory private
// to the node's dispatches: e.g. split-K matmul partials, written by the first dispatch and summed by
// the next. The plan gives it the lifetime of the node, so later nodes reuse it.
inline constexpr ValueId kScratch = -2;

struct KernelLaunch {
  std::string shader;             // shaders/<shader>.comp
  std::vector<ValueId> bindings;  // storage buffers 0..k-1: what the kernel reads, then what it writes
  std::size_t writes = 1;         // the last `writes` bindings are written
  std::vector<std::byte> push;    // push constants, a multiple of 4 bytes
  std::uint64_t items = 0;        // invocations needed (the shaders loop grid-stride over them)
  std::uint32_t group_size = 256;
  // Binds the extra status word described above. On a `then` launch it binds the node's word again
  // (same check, for a shader that declares the binding) without adding a check of its own.
  std::optional<IndexCheck> index_check;
  // Values of the shader's specialization constants 0..k-1 (32-bit each). Launches that differ here
  // get different pipelines, which the driver compiles with these values folded in.
  std::vector<std::uint32_t> specialization;
  std::string label;                // what timings() calls the dispatch; empty: the node's op
  std::uint64_t scratch_bytes = 0;  // the node's scratch range (bound as kScratch), on the first launch
  std::vector<KernelLaunch> then;   // more dispatches for the node, recorded in order after this one
  // Values read by this launch that the node itself does not list as inputs (a fused launch reads
  // its group's inputs): the plan keeps them alive until this node runs.
  std::vector<ValueId> extra_reads;
  // Worst-case loop passes of one invocation of this dispatch (see check_loop_limit below), set by
  // the planner from the shapes; 0 only for a launch that records nothing (items == 0).
  std::uint64_t loop_passes = 0;
  // The launch paths this dispatch takes (tensorgrad/ir/launch_paths.h): namespace-scope
  // LaunchPaths of the kernel's files, all hit when the dispatch is recorded. The first is the
  // launch's own path; a fused launch adds one per op it runs inside the fused window. Every
  // launch that records a dispatch names at least one (the executor refuses a launch without).
  std::vector<const LaunchPath*> paths;
};

// ---- lavapipe's loop limit ----
// llvmpipe (lavapipe's shader compiler, Mesa 22.3) counts the passes of all loops of one shader
// invocation together and, after LP_MAX_TGSI_LOOP_ITERATIONS (65535) of them, ends every loop it
// is in: the invocation finishes with a silently wrong result. It runs a SIMD batch of lanes in
// lockstep with execution masks, so a loop inside code that a branch skips still makes one pass,
// and every loop makes one more pass than its iterations (the pass that finds the exit, in which
// its body runs masked). Each planner therefore declares KernelLaunch::loop_passes as an upper
// bound in those terms (loop_passes() below; the loops of modes a launch does not take count once
// each). Planners keep every launch they can far below the limit (kLoopBudget) by splitting long
// loops across workgroups; check_loop_limit refuses the rest on devices that have the limit.
// Measured on lavapipe: one workgroup per row summed 8,385,500 ones right and 8,385,900 wrong,
// 32,757 and 32,758 iterations of a loop whose body held a second loop that a branch skipped (two
// passes each); with that loop unrolled, 256 x 65520 ones summed right and 256 x 65525 wrong (one
// pass each; the launch declares 65546 and 65551 passes: the bound is 11-15 passes high there).
inline constexpr std::uint64_t kLlvmpipeLoopLimit = 65535;
// What the split kernels aim for per invocation: far below the limit.
inline constexpr std::uint64_t kLoopBudget = 4096;
// The executor's cap on one dispatch's workgroups (executor_recording.cpp; Vulkan's minimum
// maxComputeWorkGroupCount[0]): past it, shaders loop grid-stride.
inline constexpr std::uint64_t kMaxGroups = 65535;

// A loop of `iterations` iterations whose body costs `body` passes each time, and its exit pass,
// in which the body runs masked: each of the `nested` loops it holds (at any depth) one pass.
constexpr std::uint64_t loop_passes(std::uint64_t iterations, std::uint64_t body = 0, std::uint64_t nested = 0) {
  return iterations * (1 + body) + 1 + nested;
}
constexpr std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }
// Iterations per invocation (or per workgroup) of a grid-stride loop of a launch of `items`
// invocations in workgroups of `group_size`: 1 until the launch reaches kMaxGroups workgroups.
constexpr std::uint64_t grid_iterations(std::uint64_t items, std::uint32_t group_size) {
  return ceil_div(ceil_div(items, group_size), kMaxGroups);
}
// Passes of a grid-stride loop over the launch's items whose body costs `body` passes and holds
// `nested` loops (e.g. a rank loop for index arithmetic).
constexpr std::uint64_t grid_stride_passes(std::uint64_t items, std::uint32_t group_size, std::uint64_t body = 0,
                                           std::uint64_t nested = 0) {
  return loop_passes(grid_iterations(items, group_size), body, nested);
}
// Passes of the simple kernels (elementwise, layout, structure, the index ops, random): at most two
// grid-stride loops over the launch's items (an index check, the outputs), each around at most one
// loop of up to 8 iterations (axes, inputs; a switch may compile to a loop).
constexpr std::uint64_t simple_kernel_passes(std::uint64_t items, std::uint32_t group_size) {
  return 2 * grid_stride_passes(items, group_size, 2 * loop_passes(8), 2);
}

// The loop limit of `device`: kLlvmpipeLoopLimit on lavapipe (llvmpipe in its name or driver
// name), none elsewhere. The one place that decides which devices have it.
std::optional<std::uint64_t> device_loop_limit(const DeviceInfo& device);

// Throws tg::Error when a dispatch of `launch` (or of one of its `then` launches) may make more
// loop passes than the device allows, naming the kernel (shader), the op, the node's value, graph
// and call site, the operand shapes, the declared passes and lavapipe's 65535-iteration loop
// limit. Called for every node when a Program is built, before anything is allocated.
void check_loop_limit(const KernelLaunch& launch, const DeviceInfo& device, const Graph& graph, const Node& node);

// Tests only: replaces device_loop_limit()'s answer for every device while it lives (nullopt:
// no limit anywhere). Not thread-safe; one at a time.
class ScopedLoopLimitForTesting {
 public:
  explicit ScopedLoopLimitForTesting(std::optional<std::uint64_t> limit);
  ~ScopedLoopLimitForTesting();
  ScopedLoopLimitForTesting(const ScopedLoopLimitForTesting&) = delete;
  ScopedLoopLimitForTesting& operator=(const ScopedLoopLimitForTesting&) = delete;

 private:
  bool had_previous_;
  std::optional<std::uint64_t> previous_;
};

// ---- launch choices at test scale ----
// Five launch choices switch at sizes CI's random graphs cannot hold: matmul takes large tiles
// from kLargeTileMin (64) tiles of 128x128 (a 1024x1024 output), a split reduction's combine takes
// a workgroup past 32 chunks of 8192 terms (262,144), sum_to_shape takes block partials past 2048
// blocks of 256 terms (524,288), max_pool2d a workgroup per output past 4096 compares (a 65x65
// window), and a convolution of few tiles splits K from 256 terms. They are performance choices:
// both sides compute the values the oracle checks. While a ScopedSmallLaunchThresholdsForTesting
// lives they switch at 1 large tile, 2 chunks, 4 blocks, 8 compares and a K of 32, so the property
// suites run both sides on small graphs.
struct LaunchThresholds {
  std::uint64_t large_tile_min_tiles = 64;
  std::uint64_t serial_combine_max_parts = 32;
  std::uint64_t one_dispatch_max_blocks = 2048;
  std::int64_t serial_pool_max_compares = 4096;  // max_pool2d: one invocation per output up to here
  // conv2d and its gradients (conv_gemm.cpp): a product of at most 16 tiles splits K from here.
  std::int64_t conv_few_tiles_split_min_k = 256;
  // Which kernel the convolutions run (conv_gemm.h's route_convolutions): the device's (row blocks
  // on CPU devices, tiles elsewhere), or one forced everywhere so that one device tests both.
  enum class ConvKernel { by_device, tiles, rows } conv_kernel = ConvKernel::by_device;
  // Which kernel the fp32 matmuls that map onto the row blocks run (conv_gemm.h's
  // route_matmuls_to_rows), chosen and forced as conv_kernel.
  ConvKernel matmul_kernel = ConvKernel::by_device;
  // How sum_to_shape adds preimages longer than a block that would take a workgroup per output
  // (layout.cpp's route_long_sums): the device's way (block partials into scratch on CPU devices;
  // on others staged block partials for fewer than 1024 outputs, else the workgroup), or one forced
  // everywhere (for every output count) so that one device tests each.
  enum class LongSums {
    by_device,
    workgroup_per_output,
    block_partials,
    staged_block_partials
  } long_sums = LongSums::by_device;
  // The smallest products (per group) the convolutions' matrix-unit kernel takes (conv_units.h):
  // more than 32 rows, where the portable kernel's 32x128 tiles stop, and one fragment of columns.
  struct ConvUnitsLimits {
    std::int64_t min_rows = 33;
    std::int64_t min_columns = 16;
  } conv_units;
};
// The thresholds in force (the defaults unless a test scope below lives).
const LaunchThresholds& launch_thresholds();

// Tests only: the small thresholds above while it lives. Not thread-safe; one at a time.
class ScopedSmallLaunchThresholdsForTesting {
 public:
  ScopedSmallLaunchThresholdsForTesting();
  ~ScopedSmallLaunchThresholdsForTesting();
  ScopedSmallLaunchThresholdsForTesting(const ScopedSmallLaunchThresholdsForTesting&) = delete;
  ScopedSmallLaunchThresholdsForTesting& operator=(const ScopedSmallLaunchThresholdsForTesting&) = delete;

 private:
  LaunchThresholds previous_;
};

// Tests only: sets one launch choice of LaunchThresholds (`Member`) while it lives, then restores
// the previous one. Not thread-safe; one of each at a time.
LaunchThresholds& launch_thresholds_for_testing();
template <auto Member>
class ScopedLaunchChoiceForTesting {
 public:
  using Value = std::remove_cvref_t<decltype(std::declval<LaunchThresholds&>().*Member)>;
  explicit ScopedLaunchChoiceForTesting(Value value)
      : previous_(std::exchange(launch_thresholds_for_testing().*Member, value)) {}
  ~ScopedLaunchChoiceForTesting() { launch_thresholds_for_testing().*Member = previous_; }
  ScopedLaunchChoiceForTesting(const ScopedLaunchChoiceForTesting&) = delete;
  ScopedLaunchChoiceForTesting& operator=(const ScopedLaunchChoiceForTesting&) = delete;

 private:
  Value previous_;
};
// The convolutions' kernel, the matmuls' kernel (tiles or row blocks), how sum_to_shape adds
// long preimages, and the convolutions' matrix-unit limits (e.g. {1, 1}: every eligible product on
// the units; a huge one: none).
using ScopedConvKernelForTesting = ScopedLaunchChoiceForTesting<&LaunchThresholds::conv_kernel>;
using ScopedMatmulKernelForTesting = ScopedLaunchChoiceForTesting<&LaunchThresholds::matmul_kernel>;
using ScopedLongSumsForTesting = ScopedLaunchChoiceForTesting<&LaunchThresholds::long_sums>;
using ScopedConvUnitsLimitsForTesting = ScopedLaunchChoiceForTesting<&LaunchThresholds::conv_units>;

// sum_to_shape's launches of preimages longer than a block as launch_thresholds().long_sums says:
// block partials into scratch (CPU devices) or staged block partials (few outputs on other
// devices), then their ordered sum: the bits of the workgroup per output (layout.cpp).
void route_long_sums(const Graph& graph, const DeviceInfo& device, std::vector<KernelLaunch>& launches);

// The second dispatch of a split reduction (shaders/matmul_split_sum.comp): `output`[i] = the sum of
// the node's scratch [parts, n] over the parts in ascending order (split-K matmul partials,
// sum_to_shape's block partials, conv2d's and scatter_add's chunk sums), 32 partials a loop pass.
// `path` is the caller's (e.g. vulkan/matmul/split_k_sum), listed before the helper's own
// (vec4 or scalar partial rows). Defined in matmul.cpp.
KernelLaunch ordered_sum_of_partials(ValueId output, std::uint64_t n, std::uint64_t parts, std::string label,
                                     const LaunchPath& path);

// Long rows split across workgroups (reduce, softmax, the losses' sums): a row longer than
// kChunkLength terms is cut into chunks of kChunkLength, a workgroup each, when the rows are too
// few to occupy a device (fewer than kSplitBelowRows) or longer than kMaxUnsplitLength (where one
// workgroup per row would loop kMaxUnsplitLength / 256 times per invocation). Returns the chunks
// per row; 1: no split. Defined in reduce.cpp.
inline constexpr std::int64_t kChunkLength = 8192;
inline constexpr std::int64_t kSplitBelowRows = 256;
inline constexpr std::int64_t kMaxUnsplitLength = 65536;
std::uint64_t row_chunks(std::int64_t length, std::int64_t rows);

// Appends to `launch.then` the split sum (mean: divided by `count`) of `count` f32 values at the
// start of the node's scratch into the one-element `output` (shaders/reduce_split.comp: chunk
// partials after the values, then their combine). Returns the scratch bytes the values and the
// partials need. For a scratch vector too long for one workgroup's loops (the losses' sums).
// `path` is the caller's, listed on both dispatches before the helper's own (chunks, and a serial
// or workgroup combine). Defined in reduce.cpp.
std::uint64_t append_scratch_sum(KernelLaunch& launch, ValueId output, std::uint64_t count, bool mean,
                                 const std::string& op, const LaunchPath& path);

// A matmul operand as a launch reads it: `value` holds the operand itself, or (transposed) the
// operand with its last two axes swapped: [..., K, M] for the lhs, [..., N, K] for the rhs.
struct MatmulOperand {
  ValueId value = -1;
  bool transposed = false;
};

// The launch of matmul `node` reading its operands from `lhs` and `rhs` (the plain launch reads
// node.inputs untransposed). Tiles, K splits and the accumulation order depend on the node's
// shapes only, so the result has the same bits either way. Defined in matmul.cpp; throws for a
// transposed lhs where matmul_can_read_transposed() is false.
KernelLaunch plan_matmul_reading(const Graph& graph, const Node& node, MatmulOperand lhs, MatmulOperand rhs);

// Whether operand 0 (lhs) or 1 (rhs) of matmul `node` may be read transposed: always the rhs; the
// lhs when it is 2-D or the product is batched (a 2-D rhs folds a higher-rank lhs's leading dims
// into M, which a transposed layout does not allow).
bool matmul_can_read_transposed(const Graph& graph, const Node& node, std::size_t operand);

// The launch followed by its `then` launches, in recording order.
std::vector<const KernelLaunch*> launch_steps(const KernelLaunch& launch);

// The row modes of shaders/reduce.comp, softmax.comp and softmax_causal.comp (their push constant
// `mode`; WG 256 and SEG 32 there): rows of at most 32 terms run one invocation each (1); rows of
// up to 1024 terms, at least 128 of them, a 32-invocation segment each, 8 per workgroup (2, "row
// segments": a workgroup per row would spend a whole workgroup's 8-level tree on 128 terms); the
// rest a workgroup each (0). Sets launch.items for `rows` rows (workgroups of 256) and labels a
// segmented launch "<op> (row segments)"; sets launch.paths to the mode's path of `paths` (one
// set per kernel or op: vulkan/<kernel>/row_per_invocation, row_segments, workgroup_per_row);
// returns the mode. Defined in reduce.cpp.
struct RowModePaths {
  explicit RowModePaths(std::string_view kernel)
      : per_invocation("vulkan", kernel, "row_per_invocation"),
        segments("vulkan", kernel, "row_segments"),
        workgroup("vulkan", kernel, "workgroup_per_row") {}
  LaunchPath per_invocation;  // mode 1
  LaunchPath segments;        // mode 2
  LaunchPath workgroup;       // mode 0
};
std::uint32_t cover_rows(KernelLaunch& launch, std::string_view op, std::int64_t length, std::int64_t rows,
                         const RowModePaths& paths);

// Loop passes of one invocation of the row modes above over `rows` rows of `length` terms, with
// `loops` loops over a row's terms (reduce 1, softmax 3) and `trees` shared-memory trees per row
// (reduce 1, softmax 2), and the loops of the modes not taken. Defined in reduce.cpp.
std::uint64_t row_mode_passes(std::uint32_t mode, std::int64_t length, std::int64_t rows, std::uint64_t loops,
                              std::uint64_t trees);

// The storage buffers a launch's dispatch binds: its own, and the status word of an index check.
inline std::size_t binding_count(const KernelLaunch& launch) {
  return launch.bindings.size() + (launch.index_check ? 1 : 0);
}

using KernelPlanFn = KernelLaunch (*)(const Graph& graph, const Node& node);
using KernelPlanTable = std::array<KernelPlanFn, kOpIdSpace>;  // indexed by OpId value

// ---- elementwise op params ----
// An elementwise op's attributes (its OpDef's attrs, all of AttrKind::real, in OpDef order) reach
// the shaders as floats p0 and p1: the unary family kernel pushes them, a fused step takes a param
// slot of the fused kernel's push constants (clamp: p0 = hi, p1 = lo). Defined in
// elementwise_unary.cpp.
inline constexpr std::size_t kMaxEwParams = 2;
struct EwParams {
  std::array<float, kMaxEwParams> values{};  // unused ones 0
  std::size_t count = 0;
};
// How many params `op` has; throws tg::Error naming the op and the attribute when one is not real
// or there are more than kMaxEwParams (the family kernels check every TG_EW op when the table is
// built).
std::size_t ew_param_count(OpId op);
// `node`'s params, in order.
EwParams ew_params(const Node& node);

// One registration function per TG_FAMILY line of ops.def (the generated families.inc), defined in
// src/vk/kernels/<family>.cpp; table.cpp calls them all. A new family needs only its file: without
// it the library does not link, and the linker names the function.
#define TG_FAMILY(name) void register_##name##_kernels(KernelPlanTable& table);
#include "tensorgrad/ir/ops/families.inc"
#undef TG_FAMILY

const KernelPlanTable& kernel_plan_table();

template <class T>
void append_pod(std::vector<std::byte>& out, const T& value) {
  const auto* p = reinterpret_cast<const std::byte*>(&value);
  out.insert(out.end(), p, p + sizeof(T));
}

}  // namespace tg::vk
