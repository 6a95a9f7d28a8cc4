// Launches of the matmul family (shaders/matmul.comp), torch.matmul's semantics
// (src/ir/ops/matmul_layout.h): [..., M, K] x [K, N] (an rhs without batch dims above 1) with the
// lhs's leading dims folded into M, or one product per output batch, each operand's matrix found
// through up to kBatchGroups merged batch groups (stride 0 where it broadcasts). One workgroup of 256 invocations per
// output tile: 128x128 tiles (the fast path) when M and N reach 128 and there are enough of them to
// occupy the device, else 64x64. The shader decodes (batch, tile row, tile column) from the
// workgroup id and loops grid-stride when the tiles exceed the executor's 65535 groups.
//
// Split-K: a product with few tiles and a long K (a weight gradient X^T dY of a training step has
// one or a few output tiles and K = batch x time) would run on a few of the device's cores while
// the rest idle. Such a product is launched as `splits` batches over consecutive K ranges writing
// partial products to the node's scratch, then matmul_split_sum adds the partials in ascending
// order: two dispatches, deterministic, fp32 throughout (each output is now a sum of `splits`
// ascending partial sums, within the same tolerance class as one ascending sum).
//
// Two shaders, one per tiling: shaders/matmul.comp (128x128 tiles, the fast path) and
// shaders/matmul_small.comp (64x64, double-buffered with a register prefetch like the large one).
// Separate pipelines let the small tiles' registers (16 accumulators) fit several workgroups per
// SM, where a shared shader sized them by the large path's 131, and the large kernel keeps the
// code measured at 37-38 TFLOP/s (W3) untouched.
//
// Transposed operands: plan_matmul_reading() binds an operand's swap_axes input instead of the
// swapped copy and sets the shaders' specialization constants A_T / B_T (src/vk/transpose_absorb.cpp
// decides where). Tiles, splits and the order of the K sum come from the logical shapes alone, so
// the launch gives the same bits as the plain one on the copy. Plain launches set no specialization
// constants: their pipeline is the untransposed kernel alone, which runtime transpose flags had
// slowed (~11% for the large tiles on an H200).
#include "tensorgrad/ir/ops/ids/matmul.h"

#include <algorithm>
#include <limits>

#include "ir/ops/matmul_layout.h"
#include "tensorgrad/ir/error.h"
#include "tensorgrad/vk/error.h"
#include "vk/kernels/kernels.h"
#include "vk/kernels/matmul_units.h"

namespace tg::vk {

namespace {

constexpr std::int64_t kSmallTile = 64;
constexpr std::int64_t kLargeTile = 128;
constexpr std::uint32_t kGroupSize = 256;
// Workgroups a launch should offer: about two per core of a 132-core H100/H200. Below
// kLargeTileMin large tiles the product takes small ones (4x the workgroups); below kTargetGroups
// a 2-D product splits K, each range at least kMinSplitK long (shorter ranges spend more on
// writing and summing partials than they save), but only when one tile's unsplit K loop is at
// least kMinSplitWork multiply-adds per invocation (16 outputs each for small tiles, 64 for large):
// about 8 us on an H200, below which the second dispatch and its barrier cost what the split saves
// on a device that many tiles already occupy.
constexpr std::uint64_t kTargetGroups = 256;
constexpr std::uint64_t kLargeTileMin = 64;
constexpr std::int64_t kMinSplitK = 64;
constexpr std::int64_t kMinSplitWork = 16384;
// Except for products of at most kFewTiles tiles: their one workgroup per tile leaves the device
// idle while its K loop waits on a load latency per slice, so a K of at least 4 ranges splits
// whatever the work. W1's [64, 256] x [256, 64] weight gradients (one tile) took 14.5 us on an
// H200 unsplit, 6.5-7.3 us in 4 ranges plus 3-4 us for the partial sum.
constexpr std::uint64_t kFewTiles = 16;
// The longest K range one invocation loops over (kMaxSliceLoops K slices of either tiling: 16 K
// per slice for small tiles, 8 for large): past it a 2-D product splits K into ranges of at most
// this, a multiple of 16, the last one shorter (k_last, specialization constant RAGGED_K),
// whatever the tile count. An unsplit K of 2^25 looped 2^21 times per invocation, past llvmpipe's
// 65535 loop passes (kernels.h). Batched products keep one range per batch.
constexpr std::int64_t kMaxSliceLoops = 2048;

// Must match the FLAG_* constants of shaders/matmul_common.glsl.
constexpr std::uint32_t kFlagVecA = 1;   // rows of A start on vec4 boundaries
constexpr std::uint32_t kFlagVecBC = 2;  // N % 4 == 0: rows of C (and of an untransposed B) move as vec4

// Batch groups the shaders decode (BATCH_GROUPS in shaders/matmul_common.glsl): batch dims that
// broadcast differently from their neighbours, after merging. More is refused with a CompileError.
constexpr std::size_t kBatchGroups = 4;

struct MatmulPush {
  std::uint32_t m = 0;
  std::uint32_t n = 0;
  std::uint32_t k = 0;  // per batch: the K range of one split
  std::uint32_t batches = 0;
  std::uint32_t tiles_m = 0;
  std::uint32_t tiles_n = 0;
  std::uint32_t flags = 0;
  std::uint32_t lda = 0;     // A's stored row stride (K, or M when transposed)
  std::uint32_t ldb = 0;     // B's stored row stride (N, or K when transposed); the shader reads it under B_T only
  std::uint32_t k_last = 0;  // the last batch's K range: K, or a shorter last split
  // The batch groups, innermost last; unused ones extent 1, strides 0.
  std::uint32_t batch_extent[kBatchGroups] = {1, 1, 1, 1};
  std::uint32_t a_stride[kBatchGroups] = {};
  std::uint32_t b_stride[kBatchGroups] = {};
};
static_assert(sizeof(MatmulPush) == 88);

constexpr std::uint64_t kSplitSumUnroll = 32;  // = UNROLL in shaders/matmul_split_sum.comp

// The launch's branches. Every dispatch names its tiling first, then its operand layout (folded:
// an rhs without batch dims, the lhs's leading dims folded into M; batched: equal batch dims;
// broadcast_batches: an operand repeated along a batch dim), its K ranges (one; split_k: even ranges over
// `splits` batches; ragged_k: the loop-limit ranges with a shorter last one, RAGGED_K), the
// transposed reads (A_T, B_T) and the vec4 or scalar loads its flags pick.
const LaunchPath kSmallTiles{"vulkan", "matmul", "small_tiles"};
const LaunchPath kLargeTiles{"vulkan", "matmul", "large_tiles"};
const LaunchPath kFolded{"vulkan", "matmul", "folded"};
const LaunchPath kBatched{"vulkan", "matmul", "batched"};
const LaunchPath kBroadcastBatches{"vulkan", "matmul", "broadcast_batches"};  // an operand repeats along a batch dim
const LaunchPath kUnsplit{"vulkan", "matmul", "unsplit"};
const LaunchPath kSplitK{"vulkan", "matmul", "split_k"};
const LaunchPath kRaggedK{"vulkan", "matmul", "ragged_k"};
const LaunchPath kZeroK{"vulkan", "matmul", "zero_k"};  // empty operands, zeros written
const LaunchPath kTransposedLhs{"vulkan", "matmul", "transposed_lhs"};
const LaunchPath kTransposedRhs{"vulkan", "matmul", "transposed_rhs"};
const LaunchPath kVec4A{"vulkan", "matmul", "vec4_a"};
const LaunchPath kScalarA{"vulkan", "matmul", "scalar_a"};
const LaunchPath kVec4BC{"vulkan", "matmul", "vec4_bc"};
const LaunchPath kScalarBC{"vulkan", "matmul", "scalar_bc"};
const LaunchPath kVec4BT{"vulkan", "matmul", "vec4_bt"};      // transposed rhs rows as vec4 (VEC_BT)
const LaunchPath kScalarBT{"vulkan", "matmul", "scalar_bt"};  // transposed rhs read element-wise
const LaunchPath kSplitKSum{"vulkan", "matmul", "split_k_sum"};
// The route (matmul_units.h): the matrix units with f16 or bf16 parts, and the number of part
// products (one per operand for 16-bit operands; fast's 3 and split's 6 for f32 ones), or the
// portable kernel's emulation of fast and split.
const LaunchPath kMatrixUnitsF16{"vulkan", "matmul", "matrix_units_f16"};
const LaunchPath kMatrixUnitsBf16{"vulkan", "matmul", "matrix_units_bf16"};
const LaunchPath kOnePart{"vulkan", "matmul", "one_16bit_part"};
const LaunchPath kFastTerms{"vulkan", "matmul", "fast_terms"};
const LaunchPath kSplitTerms{"vulkan", "matmul", "split_terms"};
// ordered_sum_of_partials' own: whole vec4s of outputs, or one output per invocation.
const LaunchPath kPartialsVec4{"vulkan", "ordered_sum_of_partials", "vec4"};
const LaunchPath kPartialsScalar{"vulkan", "ordered_sum_of_partials", "scalar"};

// Sizes where the launch changes: tile edges, the tiling switch, the split conditions in K (the
// work condition k * tile^2 / 256 >= kMinSplitWork as K per tiling), the loop-limit K ranges, the
// vec4 loads (K, M, N multiples of 4).
const SizeThreshold kSmallTileThreshold{"vulkan", "matmul", "small_tile", kSmallTile};
const SizeThreshold kLargeTileThreshold{"vulkan", "matmul", "large_tile_min_m_n", kLargeTile};
const SizeThreshold kLargeTileMinThreshold{"vulkan", "matmul", "large_tiles_min_tiles", kLargeTileMin};
const SizeThreshold kTargetGroupsThreshold{"vulkan", "matmul", "split_k_below_tiles", kTargetGroups};
const SizeThreshold kFewTilesThreshold{"vulkan", "matmul", "few_tiles", kFewTiles};
const SizeThreshold kMinSplitKThreshold{"vulkan", "matmul", "min_split_k_range", kMinSplitK};
const SizeThreshold kFewTilesKThreshold{"vulkan", "matmul", "few_tiles_split_min_k", 4 * kMinSplitK};
const SizeThreshold kSplitWorkSmallThreshold{"vulkan", "matmul", "split_work_min_k_small_tiles",
                                             kMinSplitWork* kGroupSize / (kSmallTile * kSmallTile)};
const SizeThreshold kSplitWorkLargeThreshold{"vulkan", "matmul", "split_work_min_k_large_tiles",
                                             kMinSplitWork* kGroupSize / (kLargeTile * kLargeTile)};
const SizeThreshold kMaxRangeSmallThreshold{"vulkan", "matmul", "max_k_range_small_tiles", kMaxSliceLoops * 16};
const SizeThreshold kMaxRangeLargeThreshold{"vulkan", "matmul", "max_k_range_large_tiles", kMaxSliceLoops * 8};
const SizeThreshold kKRangeMultipleThreshold{"vulkan", "matmul", "k_range_multiple", 16};
const SizeThreshold kVec4Threshold{"vulkan", "matmul", "vec4_width", 4};
const SizeThreshold kSplitSumUnrollThreshold{"vulkan", "ordered_sum_of_partials", "unrolled_parts",
                                             static_cast<std::int64_t>(kSplitSumUnroll)};

struct SplitSumPush {
  std::uint32_t n = 0;
  std::uint32_t splits = 0;
  std::uint32_t vec4s = 0;
  std::uint32_t staged = 0;
};

// Few outputs of many partials (a bias gradient's 32 outputs of 512 block partials: one chain of
// dependent loads per invocation, 31 us on an H200 with 8 invocations busy) are summed from
// shared memory: a workgroup stages kStagedSumOutputs outputs' partials kStagedSumOutputs splits
// at a time with coalesced loads, then one invocation per output adds them in order. Up to
// kStagedSumMaxOutputs outputs (past that the plain form has enough invocations), from
// kStagedSumMinParts partials, and at most kStagedSumMaxParts (one loop pass per partial, within
// the loop budget of llvmpipe's limit, kernels.h).
constexpr std::uint64_t kStagedSumOutputs = 64;  // = STAGED in shaders/matmul_split_sum.comp
constexpr std::uint64_t kStagedSumMaxOutputs = 1024;
constexpr std::uint64_t kStagedSumMinParts = 64;
constexpr std::uint64_t kStagedSumMaxParts = 2048;
const LaunchPath kPartialsStaged{"vulkan", "ordered_sum_of_partials", "staged"};
const SizeThreshold kStagedSumOutputsThreshold{"vulkan", "ordered_sum_of_partials", "staged_max_outputs",
                                               static_cast<std::int64_t>(kStagedSumMaxOutputs)};
const SizeThreshold kStagedSumMinPartsThreshold{"vulkan", "ordered_sum_of_partials", "staged_min_parts",
                                                static_cast<std::int64_t>(kStagedSumMinParts)};
const SizeThreshold kStagedSumMaxPartsThreshold{"vulkan", "ordered_sum_of_partials", "staged_max_parts",
                                                static_cast<std::int64_t>(kStagedSumMaxParts)};

std::uint64_t tile_count(std::int64_t m, std::int64_t n, std::int64_t batches, std::int64_t tile) {
  return static_cast<std::uint64_t>(((m + tile - 1) / tile) * ((n + tile - 1) / tile) * batches);
}

// The K ranges of a 2-D product with `tiles` output tiles: the most that keep the launch within
// kTargetGroups workgroups, divide K evenly into ranges of at least kMinSplitK, and keep every
// range a multiple of 16 (whole K slices of both tilings, vec4-aligned rows). 1: no split.
std::int64_t choose_splits(std::uint64_t tiles, std::int64_t k) {
  std::int64_t best = 1;
  for (std::int64_t s = 2; static_cast<std::uint64_t>(s) * tiles <= kTargetGroups && k / s >= kMinSplitK; ++s) {
    if (k % s == 0 && (k / s) % 16 == 0) best = s;
  }
  return best;
}

}  // namespace

KernelLaunch plan_matmul_reading(const Graph& graph, const Node& node, MatmulOperand lhs, MatmulOperand rhs) {
  return plan_matmul_routed(graph, node, lhs, rhs, {});
}

KernelLaunch plan_matmul_routed(const Graph& graph, const Node& node, MatmulOperand lhs, MatmulOperand rhs,
                                const MatmulRoute& route) {
  if (lhs.transposed && !matmul_can_read_transposed(graph, node, 0)) {
    throw CompileError("Vulkan kernel for 'matmul': a transposed lhs needs a 2-D lhs or a batched product, got " +
                       graph.type(node.inputs[0]).to_string() + " x " + graph.type(node.inputs[1]).to_string());
  }
  const Shape& a = graph.type(node.inputs[0]).shape;
  const Shape& b = graph.type(node.inputs[1]).shape;
  // Rows: with an rhs without batch dims every leading lhs dim folds into M (counted from the
  // shape, so K = 0 works).
  const MatmulLayout layout = matmul_layout(a, b);
  const std::int64_t m = layout.m;
  const std::int64_t k = layout.k;
  const std::int64_t n = layout.n;
  const std::int64_t batches = layout.batches;
  const bool batched = !layout.folded;
  if (layout.groups.size() > kBatchGroups) {
    throw CompileError("Vulkan kernel for 'matmul': operands " + graph.type(node.inputs[0]).to_string() + " x " +
                       graph.type(node.inputs[1]).to_string() + " need " + std::to_string(layout.groups.size()) +
                       " batch groups after merging dims that broadcast alike, above the " +
                       std::to_string(kBatchGroups) + " the shader supports");
  }

  const std::int64_t largest = std::max({num_elements(a), num_elements(b), batches * m * n, m, n, k});
  if (largest > std::numeric_limits<std::uint32_t>::max()) {
    throw LimitError("Vulkan kernel for 'matmul': operands " + graph.type(node.inputs[0]).to_string() + " x " +
                     graph.type(node.inputs[1]).to_string() + " exceed the shader's 32-bit indexing");
  }

  // The matrix-unit kernel has one tiling, 128x128 with K slices of 16.
  const bool large =
      route.matrix_units || (m >= kLargeTile && n >= kLargeTile &&
                             tile_count(m, n, batches, kLargeTile) >= launch_thresholds().large_tile_min_tiles);
  const std::int64_t tile = large ? kLargeTile : kSmallTile;
  const std::uint64_t tiles = tile_count(m, n, batches, tile);
  const std::int64_t work_per_invocation = tile * tile / kGroupSize * k;
  std::int64_t splits = batches == 1 && tiles < kTargetGroups &&
                                (work_per_invocation >= kMinSplitWork || (tiles <= kFewTiles && k >= 4 * kMinSplitK))
                            ? choose_splits(tiles, k)
                            : 1;
  std::int64_t k_range = k / std::max<std::int64_t>(splits, 1);  // K = 0: one range of 0
  std::int64_t k_last = k_range;
  // A K range too long for one invocation's loops: ranges of at most kMaxSliceLoops slices, the
  // last one shorter. Batched products keep one range (check_loop_limit refuses what is too long).
  const std::int64_t slice = large && !route.matrix_units ? 8 : 16;
  if (batches == 1 && k_range > kMaxSliceLoops * slice) {
    const std::int64_t want = (k + kMaxSliceLoops * slice - 1) / (kMaxSliceLoops * slice);
    k_range = ((k + want - 1) / want + 15) / 16 * 16;
    splits = (k + k_range - 1) / k_range;
    k_last = k - (splits - 1) * k_range;
  }

  MatmulPush push;
  push.m = static_cast<std::uint32_t>(m);
  push.n = static_cast<std::uint32_t>(n);
  push.k = static_cast<std::uint32_t>(splits > 1 ? k_range : k);
  push.k_last = static_cast<std::uint32_t>(splits > 1 ? k_last : k);
  push.batches = static_cast<std::uint32_t>(splits > 1 ? splits : batches);
  push.tiles_m = static_cast<std::uint32_t>((m + tile - 1) / tile);
  push.tiles_n = static_cast<std::uint32_t>((n + tile - 1) / tile);
  if (splits > 1) {
    // The K ranges are the batches: a split's range starts k_range columns further along a stored
    // row, or k_range stored rows further down a transposed operand.
    push.batch_extent[kBatchGroups - 1] = static_cast<std::uint32_t>(splits);
    push.a_stride[kBatchGroups - 1] = static_cast<std::uint32_t>(lhs.transposed ? k_range * m : k_range);
    push.b_stride[kBatchGroups - 1] = static_cast<std::uint32_t>(rhs.transposed ? k_range : k_range * n);
  } else {
    // Right-aligned. A transposed operand is stored [.., K, M] ([.., N, K]): its matrices are as
    // far apart as the logical ones.
    const std::size_t first = kBatchGroups - layout.groups.size();
    for (std::size_t g = 0; g < layout.groups.size(); ++g) {
      push.batch_extent[first + g] = static_cast<std::uint32_t>(layout.groups[g].extent);
      push.a_stride[first + g] = static_cast<std::uint32_t>(layout.groups[g].lhs_stride);
      push.b_stride[first + g] = static_cast<std::uint32_t>(layout.groups[g].rhs_stride);
    }
  }
  push.lda = static_cast<std::uint32_t>(lhs.transposed ? m : k);
  push.ldb = static_cast<std::uint32_t>(rhs.transposed ? k : n);
  // vec4 rows (both tilings): every stored row and batch of A (B and C) starts on a vec4 of its
  // binding.
  const auto all_multiples_of_4 = [](const std::uint32_t(&strides)[kBatchGroups]) {
    return std::all_of(std::begin(strides), std::end(strides), [](std::uint32_t s) { return s % 4 == 0; });
  };
  const bool vec_a = push.lda % 4 == 0 && all_multiples_of_4(push.a_stride);
  const bool vec_bt = rhs.transposed && push.ldb % 4 == 0 && all_multiples_of_4(push.b_stride);
  push.flags = (vec_a ? kFlagVecA : 0u) | (n % 4 == 0 ? kFlagVecBC : 0u);

  KernelLaunch launch;
  launch.shader = !route.matrix_units          ? (large ? "matmul" : "matmul_small")
                  : route.parts == DType::bf16 ? "matmul_coopmat_bf16"
                                               : "matmul_coopmat_f16";
  launch.bindings = {lhs.value, rhs.value, splits > 1 ? kScratch : node.output};
  // K = 0: the operands are empty (a zero-byte binding is invalid) and never read; the shader
  // writes zeros. Bind the output in their slots.
  if (k == 0) launch.bindings = {node.output, node.output, node.output};
  append_pod(launch.push, push);
  // The shaders' specialization constants 0..2: A_T, B_T, VEC_BT (booleans, passed as 32-bit
  // VkBool32), and 3: RAGGED_K, a last K range shorter than the others. Only a transposed or ragged
  // launch sets them: a plain one keeps the shader's defaults (all false), i.e. the untransposed
  // kernel with one K per batch, under the pipeline key of a launch without specialization
  // constants.
  const bool ragged = splits > 1 && k_last != k_range;
  // 4: SPLIT_TERMS, the route's part products, set only off the portable fp32 path.
  const bool routed = route.matrix_units || route.split_terms > 0;
  if (lhs.transposed || rhs.transposed || ragged || routed) {
    launch.specialization = {lhs.transposed ? 1u : 0u, rhs.transposed ? 1u : 0u, vec_bt ? 1u : 0u};
    if (ragged || routed) launch.specialization.push_back(ragged ? 1u : 0u);
    if (routed)
      launch.specialization.push_back(std::max<std::uint32_t>(route.split_terms, route.matrix_units ? 1u : 0u));
  }

  launch.paths = {large ? &kLargeTiles : &kSmallTiles,
                  !batched           ? &kFolded
                  : layout.broadcast ? &kBroadcastBatches
                                     : &kBatched,
                  k == 0       ? &kZeroK
                  : ragged     ? &kRaggedK
                  : splits > 1 ? &kSplitK
                               : &kUnsplit};
  if (k > 0) {
    if (lhs.transposed) launch.paths.push_back(&kTransposedLhs);
    if (rhs.transposed) launch.paths.push_back(&kTransposedRhs);
    launch.paths.push_back(vec_a ? &kVec4A : &kScalarA);
    if (rhs.transposed) launch.paths.push_back(vec_bt ? &kVec4BT : &kScalarBT);
  }
  if (route.matrix_units) launch.paths.push_back(route.parts == DType::bf16 ? &kMatrixUnitsBf16 : &kMatrixUnitsF16);
  if (routed) {
    launch.paths.push_back(route.split_terms == 6 ? &kSplitTerms : route.split_terms == 3 ? &kFastTerms : &kOnePart);
  }
  // C's stores (and an untransposed B's loads) follow FLAG_VEC_BC.
  launch.paths.push_back(n % 4 == 0 ? &kVec4BC : &kScalarBC);

  const std::uint64_t groups = tiles * static_cast<std::uint64_t>(splits);
  if (groups > std::numeric_limits<std::uint32_t>::max()) {
    throw LimitError("Vulkan kernel for 'matmul': " + std::to_string(groups) + " output tiles exceed 32-bit indexing");
  }
  launch.items = groups * kGroupSize;  // 0 when the output is empty: the executor skips the dispatch
  launch.group_size = kGroupSize;
  // The tile loop around the K slice loop; the staging and multiply-add loops are unrolled.
  launch.loop_passes = loop_passes(grid_iterations(launch.items, kGroupSize), loop_passes(ceil_div(push.k, slice)), 1);
  if (splits > 1) {
    const std::uint64_t outputs = static_cast<std::uint64_t>(m * n);
    launch.scratch_bytes = 4 * outputs * static_cast<std::uint64_t>(splits);
    launch.label = "matmul (split-K x" + std::to_string(splits) + ")";
    launch.then.push_back(ordered_sum_of_partials(node.output, outputs, static_cast<std::uint64_t>(splits),
                                                  "matmul (split-K sum)", kSplitKSum));
  }
  return launch;
}

bool matmul_can_read_transposed(const Graph& graph, const Node& node, std::size_t operand) {
  // An rhs without batch dims folds the lhs's leading dims into M: rows of a transposed [..., K, M]
  // lhs would then not be evenly strided, unless there are none.
  const Shape& a = graph.type(node.inputs[0]).shape;
  return operand == 1 || a.size() == 2 || !matmul_layout(a, graph.type(node.inputs[1]).shape).folded;
}

namespace {

KernelLaunch plan_matmul(const Graph& graph, const Node& node) {
  return plan_matmul_reading(graph, node, {node.inputs[0], false}, {node.inputs[1], false});
}

}  // namespace

KernelLaunch ordered_sum_of_partials(ValueId output, std::uint64_t n, std::uint64_t parts, std::string label,
                                     const LaunchPath& path) {
  KernelLaunch sum;
  sum.shader = "matmul_split_sum";
  sum.label = std::move(label);
  sum.bindings = {kScratch, output};
  const bool staged = n <= kStagedSumMaxOutputs && parts >= kStagedSumMinParts && parts <= kStagedSumMaxParts;
  const SplitSumPush push{static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(parts), n % 4 == 0 ? 1u : 0u,
                          staged ? 1u : 0u};
  append_pod(sum.push, push);
  if (staged) {
    sum.items = ceil_div(n, kStagedSumOutputs) * sum.group_size;
    sum.paths = {&path, &kPartialsStaged};
    // Per workgroup: the chunks of kStagedSumOutputs splits, each staged (unrolled) then added one
    // partial a pass; the other variants' loops once.
    sum.loop_passes = loop_passes(grid_iterations(sum.items, sum.group_size),
                                  loop_passes(ceil_div(parts, kStagedSumOutputs)) + loop_passes(parts), 2) +
                      6;
    return sum;
  }
  sum.items = n % 4 == 0 ? n / 4 : n;
  sum.paths = {&path, n % 4 == 0 ? &kPartialsVec4 : &kPartialsScalar};
  // Per output: the partials kSplitSumUnroll a pass, then the tail; the other variant's loops once.
  sum.loop_passes = loop_passes(grid_iterations(sum.items, sum.group_size),
                                loop_passes(parts / kSplitSumUnroll) + loop_passes(kSplitSumUnroll - 1), 2) +
                    4;
  return sum;
}

void register_matmul_kernels(KernelPlanTable& table) { table[static_cast<std::size_t>(op::Matmul)] = plan_matmul; }

}  // namespace tg::vk
