// The convolutions' implicit GEMMs on CPU devices (shaders/conv2d_rows.comp): workgroups of 8 to 64
// invocations, each one to four columns of a block of 8, 16 or 32 rows; no shared memory, no
// barriers.
// llvmpipe runs the tiled kernel (conv_gemm.cpp) at 0.1-0.4 GFLOP/s: its shared memory is plain
// memory on a CPU, its barriers switch between all SIMD batches of a workgroup, and its A loads are
// gathers; here A's loads are uniform across a workgroup (docs/performance.md has the figures).
// The product's layouts and checks are conv_gemm.cpp's (conv_product).
//
// Split-K: K ranges of at most kRowsMaxK (llvmpipe's loop limit: one pass per k), and more of them
// while the launch has fewer than kRowsTargetGroups workgroups (CPU devices run one per thread),
// each range at least kRowsMinK long; the partials are summed in range order as matmul's.
#include <algorithm>
#include <string>

#include "ir/ops/matmul_layout.h"
#include "tensorgrad/ir/ops/ids/image.h"
#include "tensorgrad/ir/ops/ids/matmul.h"
#include "vk/kernels/conv_gemm.h"

namespace tg::vk {

namespace {

// Rows per workgroup (the shader's ROWS): more rows share each loaded B value, fewer waste less
// of a thin product; the fewest of 8, 16 and 32 that cover M.
constexpr std::int64_t kRows = 8;
constexpr std::int64_t kMaxRows = 32;
// The workgroup's width (the shader's local size) and columns per invocation: rows_shape picks
// them to fit NC.
constexpr std::int64_t kMinWidth = 8;  // one subgroup of llvmpipe's 8 lanes (the K block's broadcast)
constexpr std::int64_t kMaxWidth = 64;
// Columns per invocation: 1 to 4, or 8 where ROWS x 8 accumulators fit kMaxAccumulators (blocks
// of 8 or 16 rows); more accumulators spill to the stack, which measured slower.
constexpr std::int64_t kLaneColumnChoices[] = {8, 4, 3, 2, 1};
constexpr std::int64_t kMaxLaneColumns = kLaneColumnChoices[0];
constexpr std::int64_t kMaxAccumulators = 128;
// A SIMD batch of 8 lanes loads a value in about 8 x 15 cycles on llvmpipe (lane by lane), and
// runs a multiply-add for all 8 in about one.
constexpr std::int64_t kBatchLoadCycles = 120;
constexpr std::int64_t kRowsMaxK = 2048;
constexpr std::int64_t kRowsMinK = 256;
constexpr std::int64_t kRowsTargetGroups = 64;

struct RowsPaths {
  explicit RowsPaths(std::string_view op)
      : unsplit("vulkan", op, "rows"),
        split_k("vulkan", op, "rows_split_k"),
        ragged_k("vulkan", op, "rows_ragged_k"),
        zero_k("vulkan", op, "rows_zero_k"),
        split_sum("vulkan", op, "rows_split_k_sum"),
        partial_rows("vulkan", op, "rows_partial_block"),
        two_columns("vulkan", op, "rows_two_columns"),
        three_columns("vulkan", op, "rows_three_columns"),
        four_columns("vulkan", op, "rows_four_columns"),
        eight_columns("vulkan", op, "rows_eight_columns"),
        narrow_group("vulkan", op, "rows_narrow_group"),
        grouped("vulkan", op, "rows_grouped") {}
  LaunchPath unsplit, split_k, ragged_k, zero_k, split_sum, partial_rows, two_columns, three_columns, four_columns,
      eight_columns, narrow_group, grouped;
};
const RowsPaths kRowsPaths[] = {RowsPaths("conv2d"), RowsPaths("conv2d_input_grad"), RowsPaths("conv2d_weight_grad")};

const SizeThreshold kRowsBlockThreshold{"vulkan", "conv2d_rows", "row_block", kRows};
const SizeThreshold kRowsMaxBlockThreshold{"vulkan", "conv2d_rows", "max_row_block", kMaxRows};
const SizeThreshold kRowsMinWidthThreshold{"vulkan", "conv2d_rows", "narrowest_group", kMinWidth};
const SizeThreshold kRowsMaxWidthThreshold{"vulkan", "conv2d_rows", "widest_group", kMaxWidth};
const SizeThreshold kRowsWidestBlockThreshold{"vulkan", "conv2d_rows", "widest_column_block",
                                              kMaxWidth* kMaxLaneColumns};
const SizeThreshold kRowsMaxKThreshold{"vulkan", "conv2d_rows", "max_k_range", kRowsMaxK};
const SizeThreshold kRowsMinKThreshold{"vulkan", "conv2d_rows", "split_min_k_range", 2 * kRowsMinK};
const SizeThreshold kRowsTargetThreshold{"vulkan", "conv2d_rows", "split_k_below_groups", kRowsTargetGroups};

// One range when K fits kRowsMaxK and the launch has workgroups enough; else ranges of equal
// length (the last shorter), at least kRowsMinK each where K allows.
std::int64_t rows_k_range(std::uint64_t blocks, std::int64_t k) {
  std::int64_t splits = static_cast<std::int64_t>(ceil_div(static_cast<std::uint64_t>(k), kRowsMaxK));
  if (blocks < static_cast<std::uint64_t>(kRowsTargetGroups)) {
    const auto wanted = static_cast<std::int64_t>(ceil_div(kRowsTargetGroups, blocks));
    splits = std::max(splits, std::min(wanted, k / kRowsMinK));
  }
  return static_cast<std::int64_t>(ceil_div(static_cast<std::uint64_t>(k), static_cast<std::uint64_t>(splits)));
}

// Whether launches take the row blocks: CPU devices do unless a test forces the tiles, other
// devices only when a test forces them; either way the kernel broadcasts within subgroups of at
// least 8 invocations (its K blocks).
bool rows_chosen(LaunchThresholds::ConvKernel forced, const DeviceInfo& device) {
  using Kernel = LaunchThresholds::ConvKernel;
  const bool wanted = forced == Kernel::rows || (forced == Kernel::by_device && device.type == DeviceType::cpu);
  return wanted && device.compute_subgroup_broadcast && device.subgroup_size >= 8;
}

// How a product splits into workgroups: rows per block, the width and columns per invocation,
// blocks, K ranges.
struct RowsShape {
  std::int64_t rows = kRows;
  std::int64_t width = kMaxWidth;
  std::int64_t lane_columns = 1;
  std::uint64_t row_blocks = 0, column_blocks = 0, blocks = 0;
  std::int64_t k_range = 0, splits = 1;
};

RowsShape rows_shape(const ConvProduct& product) {
  RowsShape s;
  const std::int64_t m = product.m, nc = product.nc, k = product.k;
  while (s.rows < m && s.rows < kMaxRows) s.rows *= 2;
  s.row_blocks = ceil_div(static_cast<std::uint64_t>(m), static_cast<std::uint64_t>(s.rows));
  // The width and columns per invocation of the least time per k: every invocation of a block
  // (columns past NC too) loads ROWS / 8 values of A and one of B per column, lane by lane, and
  // runs ROWS multiply-adds per column. More columns per invocation feed each loaded A value to
  // more multiply-adds; blocks that overhang NC less waste less. Ties keep the wider groups.
  std::int64_t best_cost = 0;
  for (std::int64_t width = kMaxWidth; width >= kMinWidth; width /= 2) {
    for (const std::int64_t lanes : kLaneColumnChoices) {
      if (s.rows * lanes > kMaxAccumulators) continue;
      const auto blocks = static_cast<std::int64_t>(ceil_div(std::max<std::int64_t>(nc, 1), width * lanes));
      const std::int64_t cost =
          blocks * (width / kMinWidth) * (kBatchLoadCycles * (s.rows / kMinWidth + lanes) + s.rows * lanes);
      if (best_cost == 0 || cost < best_cost) {
        best_cost = cost;
        s.width = width;
        s.lane_columns = lanes;
      }
    }
  }
  const std::int64_t columns = s.width * s.lane_columns;
  s.column_blocks = ceil_div(static_cast<std::uint64_t>(nc), static_cast<std::uint64_t>(columns));
  s.blocks =
      s.row_blocks * s.column_blocks * static_cast<std::uint64_t>(std::max<std::int64_t>(product.geometry.groups, 1));
  s.k_range = k == 0 ? 0 : rows_k_range(std::max<std::uint64_t>(s.blocks, 1), k);
  s.splits = k == 0 ? 1 : static_cast<std::int64_t>(ceil_div(k, s.k_range));
  return s;
}

// The launch of `product` in `shape`, reading B and A from bindings[0] and [1] and writing
// bindings[2] (the node's scratch when split); `op` names the labels.
KernelLaunch rows_launch(ConvProduct product, const RowsShape& shape, ConvRole role, const RowsPaths& paths,
                         const std::string& op, std::vector<ValueId> bindings, ValueId output) {
  ConvGemmPush& push = product.push;
  push.k_range = static_cast<std::uint32_t>(shape.k_range);
  push.tiles_m = static_cast<std::uint32_t>(shape.row_blocks);
  push.tiles_n = static_cast<std::uint32_t>(shape.column_blocks);
  const std::int64_t k = product.k, out_size = product.out_size, splits = shape.splits;

  KernelLaunch launch;
  launch.shader = "conv2d_rows";
  launch.specialization = {static_cast<std::uint32_t>(role), static_cast<std::uint32_t>(shape.rows),
                           static_cast<std::uint32_t>(shape.lane_columns), static_cast<std::uint32_t>(shape.width)};
  launch.bindings = std::move(bindings);
  append_pod(launch.push, push);
  launch.group_size = static_cast<std::uint32_t>(shape.width);
  launch.items =
      out_size == 0 ? 0 : shape.blocks * static_cast<std::uint64_t>(splits) * static_cast<std::uint64_t>(shape.width);
  // The block loop around the K loop; the row loops are unrolled.
  launch.loop_passes = loop_passes(grid_iterations(launch.items, launch.group_size),
                                   loop_passes(static_cast<std::uint64_t>(shape.k_range))) +
                       8;
  const bool ragged = splits > 1 && k % shape.k_range != 0;
  launch.paths = {k == 0 ? &paths.zero_k : ragged ? &paths.ragged_k : splits > 1 ? &paths.split_k : &paths.unsplit};
  if (product.m % shape.rows != 0) launch.paths.push_back(&paths.partial_rows);
  if (shape.lane_columns == 2) launch.paths.push_back(&paths.two_columns);
  if (shape.lane_columns == 3) launch.paths.push_back(&paths.three_columns);
  if (shape.lane_columns == 4) launch.paths.push_back(&paths.four_columns);
  if (shape.lane_columns == 8) launch.paths.push_back(&paths.eight_columns);
  if (shape.width < kMaxWidth) launch.paths.push_back(&paths.narrow_group);
  if (product.geometry.grouped()) launch.paths.push_back(&paths.grouped);
  if (splits > 1) {
    launch.scratch_bytes = 4 * static_cast<std::uint64_t>(out_size) * static_cast<std::uint64_t>(splits);
    launch.label = op + " (rows, split-K)";
    launch.then.push_back(ordered_sum_of_partials(output, static_cast<std::uint64_t>(out_size),
                                                  static_cast<std::uint64_t>(splits), op + " (rows, split-K sum)",
                                                  paths.split_sum));
  } else {
    launch.label = op + " (rows)";
  }
  return launch;
}

}  // namespace

KernelLaunch plan_conv_rows(const Graph& graph, const Node& node, ConvRole role) {
  const ConvProduct product = conv_product(graph, node, role);
  const RowsShape shape = rows_shape(product);
  refuse_conv_splits(graph, node, static_cast<std::uint64_t>(product.out_size), shape.blocks,
                     static_cast<std::uint64_t>(shape.splits));
  return rows_launch(product, shape, role, kRowsPaths[static_cast<int>(role)], std::string(op_name(node.op)),
                     conv_bindings(graph, node, shape.splits > 1), node.output);
}

void route_convolutions(const Graph& graph, const DeviceInfo& device, std::vector<KernelLaunch>& launches) {
  if (!rows_chosen(launch_thresholds().conv_kernel, device)) return;
  for (std::size_t n = 0; n < launches.size() && n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    if (launches[n].shader != "conv2d_gemm") continue;
    const ConvRole role = node.op == op::Conv2d            ? ConvRole::forward
                          : node.op == op::Conv2dInputGrad ? ConvRole::input_grad
                                                           : ConvRole::weight_grad;
    launches[n] = plan_conv_rows(graph, node, role);
  }
}

// ---- matmuls as 1x1 convolutions ----
// A matmul C[M, N] = A[M, K] B[K, N] is a 1x1 convolution of one image of height 1 and width N
// (B stored [K, N] is the image [1, K, 1, N], C the output [1, M, 1, N]): A B is the forward product
// with A as the weight [M, K, 1, 1]; A Bt (B stored [N, K]) the weight gradient of the image
// [1, N, 1, K] by the output gradient A [1, M, 1, K]; At B (A stored [K, M]) the input gradient of
// B [1, K, 1, N] through the weight [K, M, 1, 1]. Equal batches are the groups: batch b's matrices
// are group b's channels. llvmpipe runs the tiled matmul at 0.2-0.4 GFLOP/s for the reasons above,
// the row blocks at 3-4 (docs/performance.md). Each output is still one ascending fp32 sum per K
// range, the ranges' partials summed in order; the ranges are the row blocks' own.

namespace {

const RowsPaths kMatmulRowsPaths("matmul");
const LaunchPath kMatmulRowsTransposedLhs{"vulkan", "matmul", "rows_transposed_lhs"};
const LaunchPath kMatmulRowsTransposedRhs{"vulkan", "matmul", "rows_transposed_rhs"};

constexpr std::int64_t kRowsIntMax = 0x7fffffff;

// The geometry of the matmul `layout` as a convolution of `role`, over `groups` equal batches.
ConvGeometry matmul_geometry(const MatmulLayout& layout, ConvRole role, std::int64_t groups) {
  ConvGeometry g;
  g.n = 1, g.h = 1, g.oh = 1, g.kh = 1, g.kw = 1;
  g.groups = groups;
  const std::int64_t m = layout.m, k = layout.k, n = layout.n;
  switch (role) {
    case ConvRole::forward:  // image B [1, K, 1, N], weight A [M, K, 1, 1]
      g.c = groups * k, g.w = n, g.o = groups * m, g.ow = n;
      break;
    case ConvRole::weight_grad:  // image B [1, N, 1, K], output gradient A [1, M, 1, K]
      g.c = groups * n, g.w = k, g.o = groups * m, g.ow = k;
      break;
    case ConvRole::input_grad:  // output gradient B [1, K, 1, N], weight A [K, M, 1, 1]
      g.c = groups * m, g.w = n, g.o = groups * k, g.ow = n;
      break;
  }
  return g;
}

}  // namespace

void route_matmuls_to_rows(const Graph& graph, const DeviceInfo& device, std::vector<KernelLaunch>& launches) {
  if (!rows_chosen(launch_thresholds().matmul_kernel, device)) return;
  for (std::size_t n = 0; n < launches.size() && n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    KernelLaunch& launch = launches[n];
    // The portable fp32 kernel only: part products (a fifth specialization constant) and the
    // matrix units keep their kernels.
    if (node.op != op::Matmul || (launch.shader != "matmul" && launch.shader != "matmul_small")) continue;
    if (launch.specialization.size() > 4 || launch.bindings.size() < 3) continue;
    const auto spec = [&](std::size_t i) { return launch.specialization.size() > i && launch.specialization[i] != 0; };
    const MatmulLayout layout = matmul_layout(graph.type(node.inputs[0]).shape, graph.type(node.inputs[1]).shape);
    // K = 0 binds the output in the operands' slots (nothing is read): any form writes the zeros.
    const bool empty_k = layout.k == 0;
    const bool lhs_t = !empty_k && spec(0), rhs_t = !empty_k && spec(1);
    const ValueId lhs = empty_k ? node.output : launch.bindings[0];
    const ValueId rhs = empty_k ? node.output : launch.bindings[1];
    if (lhs_t && rhs_t) continue;  // At Bt has no convolution form
    if (graph.type(node.output).dtype != DType::f32 || graph.type(lhs).dtype != DType::f32 ||
        graph.type(rhs).dtype != DType::f32) {
      continue;
    }
    // One product, or equal batches whose matrices follow one another (one group, no broadcast).
    std::int64_t groups = 1;
    if (!layout.folded && !layout.groups.empty()) {
      const MatmulLayout::Group& batch = layout.groups.front();
      if (layout.broadcast || layout.groups.size() > 1 || batch.lhs_stride != layout.m * layout.k ||
          batch.rhs_stride != layout.k * layout.n) {
        continue;
      }
      groups = layout.batches;
    }
    if (groups == 0 || layout.m == 0 || layout.n == 0) continue;  // no output: no dispatch either way
    // The row blocks index with 32-bit ints.
    if (groups * layout.m * layout.k > kRowsIntMax || groups * layout.k * layout.n > kRowsIntMax ||
        groups * layout.m * layout.n > kRowsIntMax) {
      continue;
    }
    const ConvRole role = lhs_t ? ConvRole::input_grad : rhs_t ? ConvRole::weight_grad : ConvRole::forward;
    const ConvProduct product =
        conv_product_of(matmul_geometry(layout, role, groups), role, groups * layout.m * layout.n);
    const RowsShape shape = rows_shape(product);
    const auto splits = static_cast<std::uint64_t>(shape.splits);
    if (static_cast<std::uint64_t>(product.out_size) * splits > 0xffffffffull ||
        shape.blocks * splits * static_cast<std::uint64_t>(shape.width) > 0xffffffffull) {
      continue;
    }
    std::vector<ValueId> extra_reads = std::move(launch.extra_reads);
    launch = rows_launch(product, shape, role, kMatmulRowsPaths, "matmul",
                         {rhs, lhs, shape.splits > 1 ? kScratch : node.output}, node.output);
    launch.extra_reads = std::move(extra_reads);
    if (lhs_t) launch.paths.push_back(&kMatmulRowsTransposedLhs);
    if (rhs_t) launch.paths.push_back(&kMatmulRowsTransposedRhs);
  }
}

}  // namespace tg::vk
