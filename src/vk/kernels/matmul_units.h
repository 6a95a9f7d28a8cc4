#pragma once
// Which kernel computes each matmul: the portable one (shaders/matmul.comp, matmul_small.comp) or
// the matrix-unit one (shaders/matmul_coopmat.comp), and with how many products of 16-bit parts
// (docs/vulkan.md, "Matmul precision"). The choice depends on three things only: the operands'
// exact dtype (an f32 value cast up from f16 or bf16 holds exactly a 16-bit value), the Program's
// MatmulPrecision, and what the device reports (DeviceInfo::matrix_units) — never its name.
#include <cstdint>
#include <string>
#include <vector>

#include "tensorgrad/vk/executor.h"
#include "vk/kernels/kernels.h"

namespace tg::vk {

// The element types the matrix-unit kernel can run on this device, and why not where it cannot.
struct MatrixUnitSupport {
  bool f16 = false;
  bool bf16 = false;
  std::string why_not;  // empty when both are supported
};
// Pure (tests give it made-up DeviceInfos). The kernel needs a 16x16x16 subgroup shape of that
// element type into f32 (A, B of the type; C and the result f32), 32-wide subgroups (its eight
// subgroups tile 128x128), the Vulkan memory model, shaderFloat16 (f16) or VK_KHR_shader_bfloat16
// (bf16), and its shared memory.
MatrixUnitSupport matrix_unit_support(const DeviceInfo& device);

// How one matmul runs. split_terms: 0 fp32 multiply-adds; 1 one 16-bit part per operand (exact
// for operands cast up from that type); 3 fast; 6 split (bf16 parts, shaders/matmul_coopmat.comp).
struct MatmulRoute {
  bool matrix_units = false;
  DType parts = DType::f32;  // the units' element type: f16 or bf16
  std::uint32_t split_terms = 0;
};
MatmulRoute choose_matmul_route(DType exact_operands, MatmulPrecision precision, const MatrixUnitSupport& units);

// f16 or bf16 when `value` is exactly a value of that type: made by a cast up from it, possibly
// through layout ops that move values without arithmetic (reshape, permute, swap_axes,
// broadcast_to); f32 otherwise.
DType exact_operand_dtype(const Graph& graph, ValueId value);

// The launch of plan_matmul_reading() on the route's kernel (defined in matmul.cpp).
KernelLaunch plan_matmul_routed(const Graph& graph, const Node& node, MatmulOperand lhs, MatmulOperand rhs,
                                const MatmulRoute& route);

// Re-plans every matmul launch (after fusion and absorbed transposes, keeping the operands those
// chose) whose route is not the portable fp32 kernel.
void route_matmuls(const Graph& graph, const DeviceInfo& device, MatmulPrecision precision,
                   std::vector<KernelLaunch>& launches);

}  // namespace tg::vk
