// conv2d, conv2d_input_grad and conv2d_weight_grad as implicit GEMMs (shaders/conv2d_gemm.comp):
// per group, one matrix product whose operands the shader reads in place, computing the im2col
// coordinates of every load (the layouts are in the shader's header). The tiling is matmul's small
// one (64x64 tiles, K slices of 16, 256 invocations), so a convolution runs at about the FLOP rate
// of the matmul of the same [M, K] x [K, NC] (bench/vk_ops_bench.cpp's conv cases say how close):
//   conv2d      M = O/groups, NC = N*OH*OW, K = C/groups*KH*KW
//   input grad  M = C/groups, NC = N*H*W,   K = O/groups*KH*KW (taps off the stride grid read 0)
//   weight grad M = O/groups, NC = C/groups*KH*KW, K = N*OH*OW
// Split-K as matmul's: a product with few tiles and a long K (a weight gradient: one to a few
// tiles, K = the batch's pixels) runs as batches over K ranges writing partials into the node's
// scratch, summed in range order by ordered_sum_of_partials (deterministic); and a K range longer
// than kMaxKRange (2048 slices) is split whatever the tiles, for llvmpipe's loop limit.
// Thin products, whose tiles would hold less than 1/kThinTileShare useful outputs (depthwise
// convolutions: M = 1; weight gradients of a few channels), run one invocation per output instead
// (the shader's per_output), their K split into ranges of at most kPerOutputMaxK.
#include "vk/kernels/conv_gemm.h"

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <string>

#include "tensorgrad/ir/ops/ids/image.h"
#include "tensorgrad/vk/error.h"

namespace tg::vk {

namespace {

constexpr std::int64_t kTile = 64;  // the 64x64 tile's side: thinness and split-K are judged against it
// Products of at most this many rows take 32x128 tiles.
constexpr std::int64_t kNarrowTileMaxRows = 32;
constexpr std::int64_t kSliceK = 16;
constexpr std::uint32_t kGroupSize = 256;
// As matmul.cpp: split K below kTargetGroups workgroups when one tile's K loop is at least
// kMinSplitWork multiply-adds per invocation (K >= 1024), or for at most kFewTiles tiles when K
// holds at least 4 ranges; every range at least kMinSplitK long.
constexpr std::uint64_t kTargetGroups = 256;
constexpr std::int64_t kMinSplitK = 64;
constexpr std::int64_t kMinSplitWork = 16384;
constexpr std::uint64_t kFewTiles = 16;
constexpr std::int64_t kMaxSliceLoops = 2048;
constexpr std::int64_t kMaxKRange = kMaxSliceLoops * kSliceK;

constexpr std::uint32_t kFlagVecA = 1;       // = FLAG_VEC_A in the shader
constexpr std::uint32_t kFlagVecC = 2;       // = FLAG_VEC_C
constexpr std::uint32_t kFlagPerOutput = 4;  // = FLAG_PER_OUTPUT
// Per-output mode: below one useful output in kThinTileShare of the tiles' places; K ranges of at
// most kPerOutputMaxK (a loop pass each, far below llvmpipe's limit), and at most
// kPerOutputMaxItems (output, range) items, so the grid-stride loop stays short.
constexpr std::int64_t kThinTileShare = 8;
constexpr std::int64_t kPerOutputMaxK = 2048;
constexpr std::int64_t kPerOutputMaxItems = std::int64_t{1} << 24;
// A thin product of few outputs and a long K (W7_small's 1->16 weight gradient: 144 outputs, K
// 4096) splits K further, into ranges of at least kPerOutputMinK, until it offers
// kPerOutputTargetItems invocations: 288 of them took 473 us on an H200.
constexpr std::int64_t kPerOutputMinK = 64;
constexpr std::int64_t kPerOutputTargetItems = std::int64_t{1} << 16;

struct OpPaths {
  explicit OpPaths(std::string_view op)
      : unsplit("vulkan", op, "gemm"),
        split_k("vulkan", op, "gemm_split_k"),
        ragged_k("vulkan", op, "gemm_ragged_k"),
        zero_k("vulkan", op, "gemm_zero_k"),
        split_sum("vulkan", op, "gemm_split_k_sum"),
        vec4_a("vulkan", op, "gemm_vec4_a"),
        scalar_a("vulkan", op, "gemm_scalar_a"),
        vec4_c("vulkan", op, "gemm_vec4_c"),
        scalar_c("vulkan", op, "gemm_scalar_c"),
        grouped("vulkan", op, "gemm_grouped"),
        per_output("vulkan", op, "per_output"),
        tile_64x64("vulkan", op, "gemm_tile_64x64"),
        tile_32x128("vulkan", op, "gemm_tile_32x128"),
        tile_64x128("vulkan", op, "gemm_tile_64x128") {}
  LaunchPath unsplit, split_k, ragged_k, zero_k, split_sum, vec4_a, scalar_a, vec4_c, scalar_c, grouped, per_output;
  LaunchPath tile_64x64, tile_32x128, tile_64x128;
};
const OpPaths kPaths[] = {OpPaths("conv2d"), OpPaths("conv2d_input_grad"), OpPaths("conv2d_weight_grad")};

const SizeThreshold kTileThreshold{"vulkan", "conv2d_gemm", "tile", kTile};
const SizeThreshold kNarrowTileThreshold{"vulkan", "conv2d_gemm", "narrow_tile_max_rows", kNarrowTileMaxRows};
const SizeThreshold kSliceThreshold{"vulkan", "conv2d_gemm", "k_slice", kSliceK};
const SizeThreshold kVecThreshold{"vulkan", "conv2d_gemm", "vec4_width", 4};
const SizeThreshold kTargetGroupsThreshold{"vulkan", "conv2d_gemm", "split_k_below_tiles", kTargetGroups};
const SizeThreshold kFewTilesThreshold{"vulkan", "conv2d_gemm", "few_tiles", kFewTiles};
const SizeThreshold kMinSplitKThreshold{"vulkan", "conv2d_gemm", "min_split_k_range", kMinSplitK};
const SizeThreshold kFewTilesKThreshold{"vulkan", "conv2d_gemm", "few_tiles_split_min_k", 4 * kMinSplitK};
const SizeThreshold kSplitWorkThreshold{"vulkan", "conv2d_gemm", "split_work_min_k",
                                        kMinSplitWork* kGroupSize / (kTile * kTile)};
const SizeThreshold kMaxRangeThreshold{"vulkan", "conv2d_gemm", "max_k_range", kMaxKRange};
const SizeThreshold kThinShareThreshold{"vulkan", "conv2d_gemm", "thin_tile_share", kThinTileShare};
const SizeThreshold kPerOutputMaxKThreshold{"vulkan", "conv2d_gemm", "per_output_max_k", kPerOutputMaxK};
const SizeThreshold kPerOutputMinKThreshold{"vulkan", "conv2d_gemm", "per_output_min_k", kPerOutputMinK};
const SizeThreshold kPerOutputTargetThreshold{"vulkan", "conv2d_gemm", "per_output_target_items",
                                              kPerOutputTargetItems};

[[noreturn]] void refuse(const Graph& graph, const Node& node, const std::string& why) {
  std::string types;
  for (ValueId v : node.inputs) types += (types.empty() ? "" : ", ") + graph.type(v).to_string();
  throw LimitError("Vulkan kernel for '" + std::string(op_name(node.op)) + "' on (" + types + "): " + why);
}

constexpr std::int64_t kIntMax = std::numeric_limits<std::int32_t>::max();

std::int64_t round_up(std::int64_t v, std::int64_t to) { return (v + to - 1) / to * to; }

// A tile shape of the shader: `quads` column quads across the invocations (specialization
// constant 1), `blocks` column blocks each (constant 2).
struct TileShape {
  std::int64_t rows = kTile, columns = kTile;
  std::uint32_t quads = 16, blocks = 1;
};

// The K range of each split: K itself (one split), or ranges of a multiple of 16 whose count keeps
// the launch within kTargetGroups workgroups, each at least kMinSplitK long; never above kMaxKRange.
std::int64_t choose_k_range(std::uint64_t tiles, std::int64_t k) {
  std::int64_t range = k;
  const std::int64_t few_tiles_min_k = launch_thresholds().conv_few_tiles_split_min_k;
  const bool worth = k * kTile * kTile / kGroupSize >= kMinSplitWork || (tiles <= kFewTiles && k >= few_tiles_min_k);
  if (tiles < kTargetGroups && worth) {
    const std::int64_t min_range = std::max<std::int64_t>(few_tiles_min_k / 4, kSliceK);
    const std::int64_t splits = std::min<std::int64_t>(static_cast<std::int64_t>(kTargetGroups / tiles), k / min_range);
    if (splits >= 2) range = round_up(ceil_div(k, splits), kSliceK);
  }
  if (range > kMaxKRange) range = round_up(ceil_div(k, ceil_div(k, kMaxKRange)), kSliceK);
  return range;
}

// 32x128 where M fits 32 rows, unless those tiles are too few to fill a GPU and split-K will not
// add workgroups (fewer than kTargetGroups of them and K too short to split); 64x128 where NC
// passes one 64-wide tile; 64x64 otherwise. Measured on an H200 (docs/performance.md): 32x128
// against 64x64 took W7's 32-channel convolutions from about 11 to 13-16 TFLOP/s, its weight
// gradients (3 tiles, K split into ranges) included; 64x128 against 64x64 doubled conv2d's rate at
// M = 64 and lost at M = 16, where half of the 64 rows are empty. A small product (W7_small's
// 16 -> 32 input gradient, K 288: 32 tiles of 32x128) keeps 64x64, twice the workgroups (0.40 of
// the same-shape matmul's rate with 32x128).
TileShape choose_tile(std::int64_t m, std::int64_t nc, std::int64_t k, std::int64_t groups) {
  const TileShape narrow{kNarrowTileMaxRows, 2 * kTile, 32, 1};
  if (m <= kNarrowTileMaxRows) {
    const auto tiles = static_cast<std::uint64_t>(ceil_div(nc, narrow.columns) * groups);
    if (tiles >= kTargetGroups || (k > 0 && choose_k_range(tiles, k) < k)) return narrow;
    return {};
  }
  if (nc > kTile) return {kTile, 2 * kTile, 16, 2};
  return {};
}

}  // namespace

ConvProduct conv_product_of(const ConvGeometry& g, ConvRole role, std::int64_t out_size) {
  ConvProduct p{g};
  const std::int64_t khw = g.kh * g.kw;
  p.m = role == ConvRole::input_grad ? g.c_per_group() : g.o_per_group();
  p.nc = role == ConvRole::forward      ? g.n * g.oh * g.ow
         : role == ConvRole::input_grad ? g.n * g.h * g.w
                                        : g.c_per_group() * khw;
  p.k = role == ConvRole::forward      ? g.c_per_group() * khw
        : role == ConvRole::input_grad ? g.o_per_group() * khw
                                       : g.n * g.oh * g.ow;
  p.out_size = out_size;
  const std::int64_t m = p.m, nc = p.nc, k = p.k;

  // A's rows and blocks of K start on vec4s when the block length (K, KH*KW, OH*OW) is a multiple of
  // 4; C's planes (OH*OW, H*W, the weight's C/groups*KH*KW) likewise.
  const std::int64_t a_block = role == ConvRole::forward ? k : role == ConvRole::input_grad ? khw : g.oh * g.ow;
  const std::int64_t c_plane = role == ConvRole::forward ? g.oh * g.ow : role == ConvRole::input_grad ? g.h * g.w : nc;
  p.vec_a = a_block % 4 == 0;
  p.vec_c = c_plane % 4 == 0;

  const auto i32 = [](std::int64_t v) { return static_cast<std::int32_t>(v); };
  const auto u32 = [](std::int64_t v) { return static_cast<std::uint32_t>(v); };
  ConvGemmPush& push = p.push;
  push.c = i32(g.c), push.h = i32(g.h), push.w = i32(g.w);
  push.o = i32(g.o), push.kh = i32(g.kh), push.kw = i32(g.kw);
  push.oh = i32(g.oh), push.ow = i32(g.ow);
  push.sh = i32(g.stride_h), push.sw = i32(g.stride_w), push.ph = i32(g.pad_h), push.pw = i32(g.pad_w);
  push.dh = i32(g.dil_h), push.dw = i32(g.dil_w);
  push.cg = i32(g.c_per_group()), push.og = i32(g.o_per_group());
  push.m = u32(m), push.nc = u32(nc), push.k = u32(k);
  push.groups = u32(g.groups);
  push.split_stride = u32(out_size);
  return p;
}

ConvProduct conv_product(const Graph& graph, const Node& node, ConvRole role) {
  ConvProduct p = conv_product_of(conv_geometry(role, node.attrs, graph.type(node.inputs[0]).shape,
                                                graph.type(node.inputs[1]).shape, graph.type(node.output).shape),
                                  role, graph.type(node.output).size());
  const ConvGeometry& g = p.geometry;
  const std::int64_t m = p.m, nc = p.nc, k = p.k, out_size = p.out_size;
  // 32-bit indexing: every operand, every coordinate the geometry reaches (padded and dilated
  // extents included) and the products' extents stay below 2^31.
  for (ValueId v : node.inputs) {
    if (graph.type(v).size() > kIntMax) refuse(graph, node, "an operand exceeds the shader's 2^31-1 element indexing");
  }
  if (out_size > kIntMax) refuse(graph, node, "the output exceeds the shader's 2^31-1 element indexing");
  for (std::int64_t e : {g.n,
                         g.c,
                         g.h,
                         g.w,
                         g.o,
                         g.oh,
                         g.ow,
                         g.kh,
                         g.kw,
                         g.stride_h,
                         g.stride_w,
                         m,
                         nc,
                         k,
                         g.h + 2 * g.pad_h,
                         g.w + 2 * g.pad_w,
                         g.dil_h * g.kh,
                         g.dil_w * g.kw,
                         g.oh * g.stride_h + g.dil_h * g.kh,
                         g.ow * g.stride_w + g.dil_w * g.kw}) {
    if (e > kIntMax) refuse(graph, node, "an extent, stride or padded extent exceeds the shader's int range");
  }

  return p;
}

void refuse_conv_splits(const Graph& graph, const Node& node, std::uint64_t out_size, std::uint64_t tiles,
                        std::uint64_t splits) {
  if (out_size * splits > 0xffffffffull || tiles * splits > 0xffffffffull) {
    refuse(graph, node, "more than 2^32-1 split-K partials or tiles for the shader's 32-bit indexing");
  }
}

std::vector<ValueId> conv_bindings(const Graph& graph, const Node& node, bool split) {
  // Bindings: B's operand (x, or g for the input gradient), A's (w, or g for the weight gradient),
  // then the output. An empty operand (K = 0, or an image of no pixels whose taps all fall in the
  // padding) is never read: the output takes its slot, as a zero-byte binding is invalid.
  ValueId b_operand = node.inputs[0];
  ValueId a_operand = node.inputs[1];
  if (graph.type(b_operand).size() == 0) b_operand = node.output;
  if (graph.type(a_operand).size() == 0) a_operand = node.output;
  return {b_operand, a_operand, split ? kScratch : node.output};
}

KernelLaunch plan_conv_gemm(const Graph& graph, const Node& node, ConvRole role) {
  ConvProduct product = conv_product(graph, node, role);
  const ConvGeometry& g = product.geometry;
  const OpPaths& paths = kPaths[static_cast<int>(role)];
  const std::int64_t m = product.m, nc = product.nc, k = product.k, out_size = product.out_size;

  const std::int64_t groups = std::max<std::int64_t>(g.groups, 1);
  const TileShape shape = choose_tile(m, nc, k, groups);
  const std::uint64_t tiles =
      static_cast<std::uint64_t>(ceil_div(m, shape.rows) * ceil_div(nc, shape.columns) * groups);
  // Thin: the places of 64x64 tiles outnumber the outputs kThinTileShare times over.
  const std::uint64_t places = static_cast<std::uint64_t>(ceil_div(m, kTile) * ceil_div(nc, kTile) * groups) *
                               static_cast<std::uint64_t>(kTile * kTile);
  const auto div_up = [](std::int64_t a, std::int64_t b) { return static_cast<std::int64_t>(ceil_div(a, b)); };
  const std::int64_t per_output_splits =
      out_size == 0 ? 1
                    : std::max(div_up(k, kPerOutputMaxK),
                               std::min({div_up(kPerOutputTargetItems, out_size), div_up(k, kPerOutputMinK),
                                         std::max<std::int64_t>(kPerOutputMaxItems / out_size, 1)}));
  const bool per_output = k > 0 && places > static_cast<std::uint64_t>(out_size) * kThinTileShare &&
                          out_size * per_output_splits <= kPerOutputMaxItems;
  const std::int64_t k_range = k == 0 ? 0 : per_output ? ceil_div(k, per_output_splits) : choose_k_range(tiles, k);
  const std::int64_t splits = k == 0 ? 1 : ceil_div(k, k_range);
  refuse_conv_splits(graph, node, static_cast<std::uint64_t>(out_size), tiles, static_cast<std::uint64_t>(splits));

  ConvGemmPush& push = product.push;
  push.k_range = static_cast<std::uint32_t>(k_range);
  push.tiles_m = static_cast<std::uint32_t>(ceil_div(m, shape.rows));
  push.tiles_n = static_cast<std::uint32_t>(ceil_div(nc, shape.columns));
  push.flags = (product.vec_a ? kFlagVecA : 0u) | (product.vec_c ? kFlagVecC : 0u) | (per_output ? kFlagPerOutput : 0u);

  KernelLaunch launch;
  launch.shader = "conv2d_gemm";
  launch.specialization = {static_cast<std::uint32_t>(role), shape.quads, shape.blocks};
  launch.bindings = conv_bindings(graph, node, splits > 1);
  append_pod(launch.push, push);
  launch.group_size = kGroupSize;
  if (per_output) {
    // The output loop around the K loop; the tile path's loops each make one masked pass.
    launch.items = static_cast<std::uint64_t>(out_size) * static_cast<std::uint64_t>(splits);
    launch.loop_passes =
        loop_passes(grid_iterations(launch.items, kGroupSize), loop_passes(static_cast<std::uint64_t>(k_range)), 1) + 8;
  } else {
    launch.items = out_size == 0 ? 0 : tiles * static_cast<std::uint64_t>(splits) * kGroupSize;
    // The tile loop around the K slice loop; the staging and multiply-add loops are unrolled.
    launch.loop_passes =
        loop_passes(grid_iterations(launch.items, kGroupSize), loop_passes(ceil_div(k_range, kSliceK)), 1) + 8;
  }
  const bool ragged = splits > 1 && k % k_range != 0;
  launch.paths = {k == 0 ? &paths.zero_k : ragged ? &paths.ragged_k : splits > 1 ? &paths.split_k : &paths.unsplit};
  if (per_output) {
    launch.paths.push_back(&paths.per_output);
  } else {
    if (k > 0) launch.paths.push_back(product.vec_a ? &paths.vec4_a : &paths.scalar_a);
    launch.paths.push_back(product.vec_c ? &paths.vec4_c : &paths.scalar_c);
    launch.paths.push_back(shape.rows < kTile      ? &paths.tile_32x128
                           : shape.columns > kTile ? &paths.tile_64x128
                                                   : &paths.tile_64x64);
  }
  if (g.grouped()) launch.paths.push_back(&paths.grouped);
  if (splits > 1) {
    launch.scratch_bytes = 4 * static_cast<std::uint64_t>(out_size) * static_cast<std::uint64_t>(splits);
    launch.label = std::string(op_name(node.op)) + " (split-K)";
    launch.then.push_back(ordered_sum_of_partials(node.output, static_cast<std::uint64_t>(out_size),
                                                  static_cast<std::uint64_t>(splits),
                                                  std::string(op_name(node.op)) + " (split-K sum)", paths.split_sum));
  }
  return launch;
}

}  // namespace tg::vk
