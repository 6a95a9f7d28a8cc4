// Convolutions on the matrix units (conv_units.h, shaders/conv2d_coopmat.comp). The products are
// conv_gemm.cpp's (conv_product: M, NC, K per group and the push constants); the tiles are the
// matrix-unit matmul's, 128x128 with K slices of 32 (16 under split), so this file has its own
// split-K rule: a weight gradient has few tiles (M = O/groups, NC = C/groups*KH*KW) and a K of
// N*OH*OW, so it splits K into ranges (multiples of 32) until the launch has about kTargetGroups
// workgroups; forward and input-gradient products of a batch have hundreds of tiles and keep one range.
#include "vk/kernels/conv_units.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "tensorgrad/ir/ops/ids/image.h"
#include "vk/kernels/conv_gemm.h"

namespace tg::vk {

namespace {

constexpr std::int64_t kTile = 128;
// Every K range is a multiple of 32: whole slices for BK = 32 (one and two parts) and BK = 16 (split).
constexpr std::int64_t kRangeMultiple = 32;
// Split K when the launch has fewer than kTargetGroups tiles and K is at least kSplitMinK, into at
// most kTargetGroups / tiles ranges of at least kMinRange (8 slices of 32: 8 MFLOP a tile against
// the 64 KB of partials it writes); never a range above kMaxKRange (1024 slices of 32).
constexpr std::uint64_t kTargetGroups = 256;
constexpr std::int64_t kSplitMinK = 1024;
constexpr std::int64_t kMinRange = 256;
constexpr std::int64_t kMaxKRange = 32768;
constexpr std::uint32_t kGroupSize = 256;
constexpr std::uint32_t kFlagPerOutput = 4;  // = FLAG_PER_OUTPUT in conv2d_common.glsl

// Shared memory of the shader at its largest (fast: two parts of a 128 x (32 + 8) A slice and of a
// 32 x (128 + 8) B slice in 16-bit words, and eight 16 x 16 f32 staging tiles): the matmul
// kernel's, which matrix_unit_support() checks; checked here again so the two cannot drift apart.
constexpr std::uint32_t kSharedBytes = 2 * (128 * 40 + 32 * 136) * 2 + 8 * 256 * 4;

struct UnitPaths {
  explicit UnitPaths(std::string_view op)
      : f16("vulkan", op, "matrix_units_f16"),
        bf16("vulkan", op, "matrix_units_bf16"),
        split_terms("vulkan", op, "matrix_units_split_terms"),
        fast_terms("vulkan", op, "matrix_units_fast_terms"),
        split_k("vulkan", op, "matrix_units_split_k"),
        split_sum("vulkan", op, "matrix_units_split_k_sum") {}
  LaunchPath f16, bf16, split_terms, fast_terms, split_k, split_sum;
};
const UnitPaths kPaths[] = {UnitPaths("conv2d"), UnitPaths("conv2d_input_grad"), UnitPaths("conv2d_weight_grad")};

const SizeThreshold kTileThreshold{"vulkan", "conv2d_coopmat", "tile", kTile};
const SizeThreshold kRangeMultipleThreshold{"vulkan", "conv2d_coopmat", "k_range_multiple", kRangeMultiple};
const SizeThreshold kTargetGroupsThreshold{"vulkan", "conv2d_coopmat", "split_k_below_tiles", kTargetGroups};
const SizeThreshold kSplitMinKThreshold{"vulkan", "conv2d_coopmat", "split_min_k", kSplitMinK};
const SizeThreshold kMinRangeThreshold{"vulkan", "conv2d_coopmat", "min_split_k_range", kMinRange};
const SizeThreshold kMaxRangeThreshold{"vulkan", "conv2d_coopmat", "max_k_range", kMaxKRange};
const SizeThreshold kMaxPortableRowsThreshold{"vulkan", "conv2d_coopmat", "portable_max_rows",
                                              ConvUnitsLimits{}.min_rows - 1};
const SizeThreshold kMinColumnsThreshold{"vulkan", "conv2d_coopmat", "min_columns", ConvUnitsLimits{}.min_columns};

std::int64_t round_up(std::int64_t v, std::int64_t to) { return (v + to - 1) / to * to; }

ConvRole role_of(const Node& node) {
  return node.op == op::Conv2d            ? ConvRole::forward
         : node.op == op::Conv2dInputGrad ? ConvRole::input_grad
                                          : ConvRole::weight_grad;
}

}  // namespace

std::int64_t conv_units_k_range(std::uint64_t tiles, std::int64_t k) {
  std::int64_t range = k;
  if (tiles > 0 && tiles < kTargetGroups && k >= kSplitMinK) {
    const std::int64_t splits = std::min<std::int64_t>(static_cast<std::int64_t>(kTargetGroups / tiles), k / kMinRange);
    if (splits >= 2) range = round_up(static_cast<std::int64_t>(ceil_div(k, splits)), kRangeMultiple);
  }
  if (range > kMaxKRange)
    range = round_up(static_cast<std::int64_t>(ceil_div(k, ceil_div(k, kMaxKRange))), kRangeMultiple);
  return range;
}

KernelLaunch plan_conv_units(const Graph& graph, const Node& node, ConvRole role, const MatmulRoute& route) {
  ConvProduct product = conv_product(graph, node, role);
  const ConvGeometry& g = product.geometry;
  const UnitPaths& paths = kPaths[static_cast<int>(role)];
  const std::int64_t m = product.m, nc = product.nc, k = product.k, out_size = product.out_size;

  const std::uint64_t tiles =
      static_cast<std::uint64_t>(ceil_div(m, kTile) * ceil_div(nc, kTile) * std::max<std::int64_t>(g.groups, 1));
  const std::int64_t k_range = k == 0 ? 0 : conv_units_k_range(tiles, k);
  const std::int64_t splits = k == 0 ? 1 : static_cast<std::int64_t>(ceil_div(k, k_range));
  refuse_conv_splits(graph, node, static_cast<std::uint64_t>(out_size), tiles, static_cast<std::uint64_t>(splits));

  ConvGemmPush& push = product.push;
  push.k_range = static_cast<std::uint32_t>(k_range);
  push.tiles_m = static_cast<std::uint32_t>(ceil_div(m, kTile));
  push.tiles_n = static_cast<std::uint32_t>(ceil_div(nc, kTile));
  // Only FLAG_VEC_C is read (direct stores of accumulators within one vec4-aligned plane).
  push.flags = product.vec_c ? 2u : 0u;

  const std::uint32_t terms = std::max<std::uint32_t>(route.split_terms, 1);
  KernelLaunch launch;
  launch.shader = route.parts == DType::bf16 ? "conv2d_coopmat_bf16" : "conv2d_coopmat_f16";
  launch.specialization = {static_cast<std::uint32_t>(role), terms};
  launch.bindings = conv_bindings(graph, node, splits > 1);
  append_pod(launch.push, push);
  launch.group_size = kGroupSize;
  launch.items = out_size == 0 ? 0 : tiles * static_cast<std::uint64_t>(splits) * kGroupSize;
  const std::int64_t slice = terms == 6 ? 16 : 32;
  launch.loop_passes =
      loop_passes(grid_iterations(launch.items, kGroupSize), loop_passes(ceil_div(k_range, slice)), 1) + 8;
  launch.paths = {route.parts == DType::bf16 ? &paths.bf16 : &paths.f16};
  if (terms == 6) launch.paths.push_back(&paths.split_terms);
  if (terms == 3) launch.paths.push_back(&paths.fast_terms);
  if (splits > 1) {
    launch.paths.push_back(&paths.split_k);
    launch.scratch_bytes = 4 * static_cast<std::uint64_t>(out_size) * static_cast<std::uint64_t>(splits);
    launch.label = std::string(op_name(node.op)) + " (units, split-K)";
    launch.then.push_back(
        ordered_sum_of_partials(node.output, static_cast<std::uint64_t>(out_size), static_cast<std::uint64_t>(splits),
                                std::string(op_name(node.op)) + " (units, split-K sum)", paths.split_sum));
  } else {
    launch.label = std::string(op_name(node.op)) + " (units)";
  }
  return launch;
}

void route_convolutions_to_units(const Graph& graph, const DeviceInfo& device, MatmulPrecision precision,
                                 std::vector<KernelLaunch>& launches) {
  const MatrixUnitSupport units = matrix_unit_support(device);
  if ((!units.f16 && !units.bf16) || device.max_compute_shared_memory_size < kSharedBytes) return;
  const ConvUnitsLimits& limits = conv_units_limits();
  for (std::size_t n = 0; n < launches.size() && n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    KernelLaunch& launch = launches[n];
    if (launch.shader != "conv2d_gemm" || graph.type(node.output).dtype != DType::f32) continue;
    // The portable kernel's per-output mode (thin products: depthwise convolutions, a weight
    // gradient of a few channels) stays: a 128x128 tile would be almost all padding.
    ConvGemmPush push;
    if (launch.push.size() != sizeof push) continue;
    std::memcpy(&push, launch.push.data(), sizeof push);
    if ((push.flags & kFlagPerOutput) != 0) continue;
    if (push.k == 0 || static_cast<std::int64_t>(push.m) < limits.min_rows ||
        static_cast<std::int64_t>(push.nc) < limits.min_columns)
      continue;
    const DType b_dtype = exact_operand_dtype(graph, node.inputs[0]);
    const DType a_dtype = exact_operand_dtype(graph, node.inputs[1]);
    const MatmulRoute route = choose_matmul_route(a_dtype == b_dtype ? a_dtype : DType::f32, precision, units);
    if (!route.matrix_units) continue;
    std::vector<ValueId> extra_reads = std::move(launch.extra_reads);
    launch = plan_conv_units(graph, node, role_of(node), route);
    launch.extra_reads = std::move(extra_reads);
  }
}

}  // namespace tg::vk
