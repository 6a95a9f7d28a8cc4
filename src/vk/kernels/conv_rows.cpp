// The convolutions' implicit GEMMs on CPU devices (shaders/conv2d_rows.comp): workgroups of 64
// invocations, each one, two or four columns of a block of 8, 16 or 32 rows; no shared memory, no
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

#include "tensorgrad/ir/ops/ids/image.h"
#include "vk/kernels/conv_gemm.h"

namespace tg::vk {

namespace {

// Rows per workgroup (the shader's ROWS): more rows share each loaded B value, fewer waste less
// of a thin product; the fewest of 8, 16 and 32 that cover M.
constexpr std::int64_t kRows = 8;
constexpr std::int64_t kMaxRows = 32;
constexpr std::int64_t kGroupColumns = 64;  // the workgroup size: one or two columns per invocation
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
        four_columns("vulkan", op, "rows_four_columns"),
        grouped("vulkan", op, "rows_grouped") {}
  LaunchPath unsplit, split_k, ragged_k, zero_k, split_sum, partial_rows, two_columns, four_columns, grouped;
};
const RowsPaths kRowsPaths[] = {RowsPaths("conv2d"), RowsPaths("conv2d_input_grad"), RowsPaths("conv2d_weight_grad")};

const SizeThreshold kRowsBlockThreshold{"vulkan", "conv2d_rows", "row_block", kRows};
const SizeThreshold kRowsMaxBlockThreshold{"vulkan", "conv2d_rows", "max_row_block", kMaxRows};
const SizeThreshold kRowsColumnsThreshold{"vulkan", "conv2d_rows", "one_column_per_lane_max", kGroupColumns};
const SizeThreshold kRowsTwoColumnsThreshold{"vulkan", "conv2d_rows", "two_columns_per_lane_max", 2 * kGroupColumns};
const SizeThreshold kRowsFourColumnsThreshold{"vulkan", "conv2d_rows", "four_column_block", 4 * kGroupColumns};
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

// The kernel broadcasts within subgroups of at least 8 invocations (its K blocks).
bool rows_kernel_runs_on(const DeviceInfo& device) {
  return device.compute_subgroup_broadcast && device.subgroup_size >= 8;
}

}  // namespace

KernelLaunch plan_conv_rows(const Graph& graph, const Node& node, ConvRole role) {
  ConvProduct product = conv_product(graph, node, role);
  const RowsPaths& paths = kRowsPaths[static_cast<int>(role)];
  const std::int64_t m = product.m, nc = product.nc, k = product.k, out_size = product.out_size;
  std::int64_t rows = kRows;
  while (rows < m && rows < kMaxRows) rows *= 2;
  const std::uint64_t row_blocks = ceil_div(static_cast<std::uint64_t>(m), static_cast<std::uint64_t>(rows));
  // More columns per invocation, each loaded A value feeding more multiply-adds: one up to 64
  // columns, two up to 128, then four (more spill the accumulators to the stack: measured slower).
  const std::int64_t lane_columns = nc > 2 * kGroupColumns ? 4 : nc > kGroupColumns ? 2 : 1;
  const std::int64_t columns = kGroupColumns * lane_columns;
  const std::uint64_t column_blocks = ceil_div(static_cast<std::uint64_t>(nc), static_cast<std::uint64_t>(columns));
  const std::uint64_t blocks =
      row_blocks * column_blocks * static_cast<std::uint64_t>(std::max<std::int64_t>(product.geometry.groups, 1));
  const std::int64_t k_range = k == 0 ? 0 : rows_k_range(std::max<std::uint64_t>(blocks, 1), k);
  const std::int64_t splits = k == 0 ? 1 : static_cast<std::int64_t>(ceil_div(k, k_range));
  refuse_conv_splits(graph, node, static_cast<std::uint64_t>(out_size), blocks, static_cast<std::uint64_t>(splits));

  ConvGemmPush& push = product.push;
  push.k_range = static_cast<std::uint32_t>(k_range);
  push.tiles_m = static_cast<std::uint32_t>(row_blocks);
  push.tiles_n = static_cast<std::uint32_t>(column_blocks);

  KernelLaunch launch;
  launch.shader = "conv2d_rows";
  launch.specialization = {static_cast<std::uint32_t>(role), static_cast<std::uint32_t>(rows),
                           static_cast<std::uint32_t>(lane_columns)};
  launch.bindings = conv_bindings(graph, node, splits > 1);
  append_pod(launch.push, push);
  launch.group_size = static_cast<std::uint32_t>(kGroupColumns);
  launch.items = out_size == 0 ? 0 : blocks * static_cast<std::uint64_t>(splits) * kGroupColumns;
  // The block loop around the K loop; the row loops are unrolled.
  launch.loop_passes =
      loop_passes(grid_iterations(launch.items, launch.group_size), loop_passes(static_cast<std::uint64_t>(k_range))) +
      8;
  const bool ragged = splits > 1 && k % k_range != 0;
  launch.paths = {k == 0 ? &paths.zero_k : ragged ? &paths.ragged_k : splits > 1 ? &paths.split_k : &paths.unsplit};
  if (m % rows != 0) launch.paths.push_back(&paths.partial_rows);
  if (lane_columns == 2) launch.paths.push_back(&paths.two_columns);
  if (lane_columns == 4) launch.paths.push_back(&paths.four_columns);
  if (product.geometry.grouped()) launch.paths.push_back(&paths.grouped);
  if (splits > 1) {
    launch.scratch_bytes = 4 * static_cast<std::uint64_t>(out_size) * static_cast<std::uint64_t>(splits);
    launch.label = std::string(op_name(node.op)) + " (rows, split-K)";
    launch.then.push_back(
        ordered_sum_of_partials(node.output, static_cast<std::uint64_t>(out_size), static_cast<std::uint64_t>(splits),
                                std::string(op_name(node.op)) + " (rows, split-K sum)", paths.split_sum));
  } else {
    launch.label = std::string(op_name(node.op)) + " (rows)";
  }
  return launch;
}

void route_convolutions(const Graph& graph, const DeviceInfo& device, std::vector<KernelLaunch>& launches) {
  using Kernel = LaunchThresholds::ConvKernel;
  const Kernel forced = launch_thresholds().conv_kernel;
  const bool rows = forced == Kernel::rows || (forced == Kernel::by_device && device.type == DeviceType::cpu);
  if (!rows || !rows_kernel_runs_on(device)) return;
  for (std::size_t n = 0; n < launches.size() && n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    if (launches[n].shader != "conv2d_gemm") continue;
    const ConvRole role = node.op == op::Conv2d            ? ConvRole::forward
                          : node.op == op::Conv2dInputGrad ? ConvRole::input_grad
                                                           : ConvRole::weight_grad;
    launches[n] = plan_conv_rows(graph, node, role);
  }
}

}  // namespace tg::vk
