// Attention forward kernel selection and the matrix-unit launch (attention_units.h).
#include "vk/kernels/attention_units.h"

#include <bit>
#include <limits>
#include <string>

#include "tensorgrad/ir/ops/ids/attention.h"

namespace tg::vk {

namespace {

constexpr std::uint64_t kTile = 64;        // query rows per workgroup and keys per step
constexpr std::uint32_t kGroupSize = 128;  // four 32-wide subgroups
constexpr std::int64_t kMaxHeadDim = 64;   // the shared tiles hold 64 columns

const LaunchPath kUnitsF16{"vulkan", "attention", "matrix_units_f16"};
const LaunchPath kUnitsBf16{"vulkan", "attention", "matrix_units_bf16"};
const LaunchPath kLseUnitsF16{"vulkan", "attention_lse", "matrix_units_f16"};
const LaunchPath kLseUnitsBf16{"vulkan", "attention_lse", "matrix_units_bf16"};
const LaunchPath kGradQUnitsF16{"vulkan", "attention_grad_q", "matrix_units_f16"};
const LaunchPath kGradQUnitsBf16{"vulkan", "attention_grad_q", "matrix_units_bf16"};
const LaunchPath kGradKvUnitsF16{"vulkan", "attention_grad_kv", "matrix_units_f16"};
const LaunchPath kGradKvUnitsBf16{"vulkan", "attention_grad_kv", "matrix_units_bf16"};

bool is_backward(OpId op) { return op == op::AttentionGradQ || op == op::AttentionGradKv; }

// The launch path of `op` on the units of `element`.
const LaunchPath* units_path(OpId op, bool f16) {
  if (op == op::Attention) return f16 ? &kUnitsF16 : &kUnitsBf16;
  if (op == op::AttentionLse) return f16 ? &kLseUnitsF16 : &kLseUnitsBf16;
  if (op == op::AttentionGradQ) return f16 ? &kGradQUnitsF16 : &kGradQUnitsBf16;
  return f16 ? &kGradKvUnitsF16 : &kGradKvUnitsBf16;
}

std::string units_shader(OpId op) {
  if (op == op::AttentionGradQ) return "attention_coopmat_grad_q";
  if (op == op::AttentionGradKv) return "attention_coopmat_grad_kv";
  return "attention_coopmat";
}

struct CoopmatPush {
  std::uint32_t heads = 0;
  std::uint32_t tq = 0;
  std::uint32_t tk = 0;
  std::uint32_t causal = 0;
  float scale = 0;
  std::uint32_t tiles = 0;  // the workgroups' own row tiles: queries (keys for grad_kv)
};
static_assert(sizeof(CoopmatPush) == 24);

bool fits_units(std::int64_t width) { return width > 0 && width % 16 == 0 && width <= kMaxHeadDim; }

}  // namespace

std::optional<DType> attention_units_element(const Graph& graph, const Node& node, const MatrixUnitSupport& units) {
  const bool has_v = node.op == op::Attention || is_backward(node.op);
  if (!has_v && node.op != op::AttentionLse) return std::nullopt;
  const DType element = exact_operand_dtype(graph, node.inputs[0]);
  if (element == DType::f32) return std::nullopt;
  // q, k (v, o, g): every operand but the backward's lse, which is f32 by definition.
  const std::size_t operands = is_backward(node.op) ? 5 : node.inputs.size();
  for (std::size_t i = 1; i < operands; ++i) {
    if (exact_operand_dtype(graph, node.inputs[i]) != element) return std::nullopt;
  }
  if (!(element == DType::f16 ? units.f16 : units.bf16)) return std::nullopt;
  const TensorType& q = graph.type(node.inputs[0]);
  const TensorType& k = graph.type(node.inputs[1]);
  if (!fits_units(q.shape.back())) return std::nullopt;
  if (has_v && !fits_units(graph.type(node.inputs[2]).shape.back())) return std::nullopt;
  const std::int64_t limit = std::numeric_limits<std::uint32_t>::max();
  if (q.size() > limit || k.size() > limit || graph.type(node.output).size() > limit) return std::nullopt;
  return element;
}

KernelLaunch plan_attention_units(const Graph& graph, const Node& node, DType element) {
  const bool has_v = node.op != op::AttentionLse;
  const TensorType& q = graph.type(node.inputs[0]);
  const TensorType& k = graph.type(node.inputs[1]);
  const std::int64_t tq = q.shape[q.shape.size() - 2];
  const std::int64_t d = q.shape.back();
  const std::int64_t tk = k.shape[k.shape.size() - 2];
  const std::int64_t dv = has_v ? graph.type(node.inputs[2]).shape.back() : 16;
  CoopmatPush push;
  push.heads = static_cast<std::uint32_t>(tq * d == 0 ? 0 : q.size() / (tq * d));
  push.tq = static_cast<std::uint32_t>(tq);
  push.tk = static_cast<std::uint32_t>(tk);
  push.causal = node.attrs.boolean("causal") ? 1u : 0u;
  push.scale = static_cast<float>(node.attrs.real("scale"));
  const bool over_keys = node.op == op::AttentionGradKv;
  push.tiles = static_cast<std::uint32_t>(ceil_div(static_cast<std::uint64_t>(over_keys ? tk : tq), kTile));
  KernelLaunch launch;
  launch.shader = units_shader(node.op) + (element == DType::f16 ? "_f16" : "_bf16");
  if (is_backward(node.op)) {
    launch.bindings = node.inputs;  // q, k, v, o, g, lse
    launch.bindings.push_back(node.output);
  } else {
    // attention_lse has no v: k is bound in its place and nothing reads it.
    launch.bindings = {node.inputs[0], node.inputs[1], has_v ? node.inputs[2] : node.inputs[1], node.output};
  }
  launch.group_size = kGroupSize;
  launch.items = std::uint64_t{push.heads} * push.tiles * kGroupSize;
  launch.specialization = {has_v ? 1u : 0u, static_cast<std::uint32_t>(d / 16), static_cast<std::uint32_t>(dv / 16)};
  launch.label = std::string(op_name(node.op)) + " (matrix units " + std::string(dtype_name(element)) + ")";
  // Per invocation: the workgroup loop, and per step (key tile; query tile for grad_kv) the
  // staging loops (64 x 64 / 128 = 32 elements each), the row loops over 64 values and the unrolled
  // fragment loops. Only devices with matrix units take these kernels,
  // and none of them has a loop limit; the count is still honest.
  const std::uint64_t steps = ceil_div(static_cast<std::uint64_t>(over_keys ? tq : tk), kTile);
  const std::uint64_t per_tile = 3 * loop_passes(kTile * 64 / kGroupSize) + loop_passes(64);
  launch.loop_passes = grid_stride_passes(launch.items, launch.group_size,
                                          loop_passes(kTile * 64 / kGroupSize) + loop_passes(steps, per_tile), 2);
  launch.paths = {units_path(node.op, element == DType::f16)};
  append_pod(launch.push, push);
  return launch;
}

void route_attention(const Graph& graph, const DeviceInfo& device, std::vector<KernelLaunch>& launches) {
  std::optional<MatrixUnitSupport> units;
  for (std::size_t n = 0; n < launches.size() && n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    if (node.op != op::Attention && node.op != op::AttentionLse && !is_backward(node.op)) continue;
    if (!units) units = matrix_unit_support(device);
    const std::optional<DType> element = attention_units_element(graph, node, *units);
    if (!element) continue;
    std::vector<ValueId> extra_reads = std::move(launches[n].extra_reads);
    launches[n] = plan_attention_units(graph, node, *element);
    launches[n].extra_reads = std::move(extra_reads);
  }
}

}  // namespace tg::vk
