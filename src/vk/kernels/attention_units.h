#pragma once
// Which kernel computes each attention op (attention, attention_lse, attention_grad_q,
// attention_grad_kv): the portable flash kernels (shaders/attention_forward.comp, ...) or the
// matrix-unit ones (shaders/attention_coopmat.comp, attention_coopmat_grad_q.comp,
// attention_coopmat_grad_kv.comp). Like
// the matmul's choice (matmul_units.h) it depends only on the operands' exact dtype (values cast up
// from f16 or bf16), their sizes and what the device reports.
#include <cstdint>
#include <optional>
#include <vector>

#include "vk/kernels/kernels.h"
#include "vk/kernels/matmul_units.h"

namespace tg::vk {

// The units' element type for one attention-family node, or nullopt for the portable kernel: q, k
// (and v, o, g; lse is f32) hold exactly f16 (or exactly bf16) values, the device's units take that
// type (matrix_unit_support), head_dim and Dv are multiples of 16 up to 64, and the sizes fit
// 32-bit indexing.
std::optional<DType> attention_units_element(const Graph& graph, const Node& node, const MatrixUnitSupport& units);

// The launch of `node` on the matrix-unit kernel of `element`.
KernelLaunch plan_attention_units(const Graph& graph, const Node& node, DType element);

// Re-plans every attention-family launch whose operands and device allow the units.
void route_attention(const Graph& graph, const DeviceInfo& device, std::vector<KernelLaunch>& launches);

}  // namespace tg::vk
