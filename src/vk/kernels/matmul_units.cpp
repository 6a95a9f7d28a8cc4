// Matmul kernel selection (matmul_units.h).
#include "vk/kernels/matmul_units.h"

#include <algorithm>

#include "tensorgrad/ir/ops/ids/layout.h"
#include "tensorgrad/ir/ops/ids/matmul.h"
#include "tensorgrad/ir/ops/ids/precision.h"

namespace tg::vk {

namespace {

// Shared memory of shaders/matmul_coopmat.comp at its largest (fast): two parts of the 128 x (32 + 8)
// A slice and of the 32 x (128 + 8) B slice in 16-bit words, and eight 16 x 16 f32 staging tiles.
constexpr std::uint32_t kCoopmatSharedBytes = 2 * (128 * 40 + 32 * 136) * 2 + 8 * 256 * 4;

bool has_shape(const MatrixUnitFeatures& units, MatrixElement element) {
  return std::any_of(units.shapes.begin(), units.shapes.end(), [&](const CooperativeMatrixShape& s) {
    return s.m == 16 && s.n == 16 && s.k == 16 && s.a == element && s.b == element && s.c == MatrixElement::f32 &&
           s.result == MatrixElement::f32 && s.subgroup_scope;
  });
}

}  // namespace

MatrixUnitSupport matrix_unit_support(const DeviceInfo& device) {
  MatrixUnitSupport support;
  const MatrixUnitFeatures& units = device.matrix_units;
  std::string common;
  if (units.shapes.empty()) {
    common = units.off_reason.empty() ? "no cooperative matrices (VK_KHR_cooperative_matrix)" : units.off_reason;
  } else if (device.subgroup_size != 32) {
    common = "subgroups of " + std::to_string(device.subgroup_size) + " invocations (the kernel needs 32)";
  } else if (!units.vulkan_memory_model) {
    common = "no Vulkan memory model";
  } else if (device.max_compute_shared_memory_size < kCoopmatSharedBytes) {
    common = std::to_string(device.max_compute_shared_memory_size) + " bytes of shared memory (the kernel needs " +
             std::to_string(kCoopmatSharedBytes) + ")";
  } else if (device.max_compute_work_group_invocations < 256) {
    common = "workgroups below 256 invocations";
  }
  if (!common.empty()) {
    support.why_not = common;
    return support;
  }
  support.f16 = has_shape(units, MatrixElement::f16) && units.shader_float16;
  support.bf16 = has_shape(units, MatrixElement::bf16) && units.bfloat16;
  if (!support.bf16 && !units.off_reason.empty()) support.why_not = units.off_reason;
  if (!support.f16) support.why_not = "no 16x16x16 f16 x f16 -> f32 subgroup shape with shaderFloat16";
  if (!support.bf16 && units.off_reason.empty()) {
    support.why_not += std::string(support.why_not.empty() ? "" : "; ") +
                       "no 16x16x16 bf16 x bf16 -> f32 subgroup shape with VK_KHR_shader_bfloat16";
  }
  return support;
}

MatmulRoute choose_matmul_route(DType exact_operands, MatmulPrecision precision, const MatrixUnitSupport& units) {
  // Products of 16-bit values are exact in f32: one part on the units of that type, or the
  // portable kernel's fp32 multiply-adds (the same products), whatever the precision setting.
  if (exact_operands == DType::f16) return units.f16 ? MatmulRoute{true, DType::f16, 1} : MatmulRoute{};
  if (exact_operands == DType::bf16) return units.bf16 ? MatmulRoute{true, DType::bf16, 1} : MatmulRoute{};
  // f32 operands: bf16 parts keep f32's exponent range (f16 parts would need scaling that a row
  // of mixed magnitudes cannot have), so split and fast run on bf16 units or, without them, as the
  // same arithmetic on the portable kernel.
  const std::uint32_t terms = precision == MatmulPrecision::split ? 6u : precision == MatmulPrecision::fast ? 3u : 0u;
  if (terms == 0) return {};
  return units.bf16 ? MatmulRoute{true, DType::bf16, terms} : MatmulRoute{false, DType::f32, terms};
}

DType exact_operand_dtype(const Graph& graph, ValueId value) {
  for (;;) {
    const NodeId producer = graph.value(value).producer;
    if (producer == kNoNode) return DType::f32;
    const Node& node = graph.nodes()[static_cast<std::size_t>(producer)];
    if (node.op == op::Cast) {
      const DType from = graph.type(node.inputs[0]).dtype;
      return from == DType::f16 || from == DType::bf16 ? from : DType::f32;
    }
    if (node.op != op::Reshape && node.op != op::Permute && node.op != op::SwapAxes && node.op != op::BroadcastTo) {
      return DType::f32;
    }
    value = node.inputs[0];
  }
}

void route_matmuls(const Graph& graph, const DeviceInfo& device, MatmulPrecision precision,
                   std::vector<KernelLaunch>& launches) {
  const MatrixUnitSupport units = matrix_unit_support(device);
  for (std::size_t n = 0; n < launches.size() && n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    KernelLaunch& launch = launches[n];
    if (node.op != op::Matmul || (launch.shader != "matmul" && launch.shader != "matmul_small")) continue;
    if (graph.type(node.output).dtype != DType::f32) continue;
    const DType lhs_dtype = exact_operand_dtype(graph, node.inputs[0]);
    const DType rhs_dtype = exact_operand_dtype(graph, node.inputs[1]);
    const MatmulRoute route = choose_matmul_route(lhs_dtype == rhs_dtype ? lhs_dtype : DType::f32, precision, units);
    if (!route.matrix_units && route.split_terms == 0) continue;
    // The operands the launch reads (absorbed transposes rebound them; K = 0 binds the output).
    if (launch.bindings.size() < 3 || launch.bindings[0] == node.output) continue;
    const auto spec = [&](std::size_t i) { return launch.specialization.size() > i && launch.specialization[i] != 0; };
    const MatmulOperand lhs{launch.bindings[0], spec(0)};
    const MatmulOperand rhs{launch.bindings[1], spec(1)};
    std::vector<ValueId> extra_reads = std::move(launch.extra_reads);
    launch = plan_matmul_routed(graph, node, lhs, rhs, route);
    launch.extra_reads = std::move(extra_reads);
  }
}

}  // namespace tg::vk
