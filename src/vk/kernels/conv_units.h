#pragma once
// Internal: conv2d, conv2d_input_grad and conv2d_weight_grad on the matrix units
// (shaders/conv2d_coopmat.comp): the implicit GEMMs of conv_gemm.h with the multiply-adds of the
// matrix-unit matmul (matmul_units.h). Routed per node after the matmuls (program_plan.cpp):
//   - operands that are exactly 16-bit values of one dtype (exact_operand_dtype: casts up from f16
//     or bf16) on a device whose units take that dtype: one 16-bit part per operand, exact
//     products summed in f32, whatever MatmulPrecision says;
//   - f32 operands under MatmulPrecision::split or fast on a device with bf16 units: six or three
//     products of bf16 parts (docs/vulkan.md, "Matmul precision");
//   - and only products of at least min_rows rows (M, 33) and min_columns columns (NC, 16) per group, not in
//     the portable kernel's per-output mode (thin products), with K > 0.
// Everything else keeps the portable fp32 kernel (shaders/conv2d_gemm.comp), which is inside both
// split's and fast's bounds.
#include <cstdint>
#include <vector>

#include "ir/ops/conv_geometry.h"
#include "tensorgrad/vk/executor.h"
#include "vk/kernels/kernels.h"
#include "vk/kernels/matmul_units.h"

namespace tg::vk {

// The smallest products the units take (per group): launch_thresholds().conv_units. Rows: more
// than 32, the rows of the portable kernel's 32x128 tiles, which beat the units' 128x128 ones up to
// there (measured on an H200: a forward of M = 16 and 32 rows over NC = 32768 and K = 576 ran in
// 400 us on the portable kernel and 540 us on the units; at M = 64, 740 against 545). Columns: at
// least 16, one fragment. docs/vulkan.md, "Convolutions on matrix units".
using ConvUnitsLimits = LaunchThresholds::ConvUnitsLimits;
inline const ConvUnitsLimits& conv_units_limits() { return launch_thresholds().conv_units; }

// The K range of each split-K partial for a product of `tiles` 128x128 tiles (groups included) and
// K terms: K itself (one range) or a multiple of 32 (the slice depth of every SPLIT_TERMS).
std::int64_t conv_units_k_range(std::uint64_t tiles, std::int64_t k);

// The launch of `node` (role) on the matrix-unit kernel with `route` (route.matrix_units set).
KernelLaunch plan_conv_units(const Graph& graph, const Node& node, ConvRole role, const MatmulRoute& route);

// Replaces the portable tiled launches (shader conv2d_gemm, not in per-output mode) that the rule
// above sends to the units by plan_conv_units' launches.
void route_convolutions_to_units(const Graph& graph, const DeviceInfo& device, MatmulPrecision precision,
                                 std::vector<KernelLaunch>& launches);

}  // namespace tg::vk
