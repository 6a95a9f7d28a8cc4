// Launches of the unary elementwise family (shaders/elementwise_unary.comp): contiguous input and
// output of the same shape, the op as a push constant. Every TG_EW op of the family in ops.def is
// registered from the generated op codes (vk/ew_codes.h); its real attributes travel as the
// shader's two float params (ew_params below), so adding such an op needs no edit here.
#include "tensorgrad/ir/ops/ids/elementwise_unary.h"

#include <string>

#include "tensorgrad/ir/error.h"
#include "vk/kernels/ew_own_kernels.h"

namespace tg::vk {

namespace {

struct UnaryPush {
  std::uint32_t op = 0;
  std::uint32_t n = 0;
  float p0 = 0;  // the op's real attributes (ew_params), e.g. clamp's hi and lo
  float p1 = 0;
};
static_assert(kMaxEwParams == 2, "UnaryPush and the shaders carry two params");

// Every TG_EW op of the family, and stop_gradient as the word copy kEwCopy, vulkan/stop_gradient/kernel.
const EwOwnKernels kUnaryOps = [] {
  EwOwnKernels ops(EwFamily::unary);
  ops.add(op::StopGradient, kEwCopy, "kernel");
  return ops;
}();

KernelLaunch plan(const Graph& graph, const Node& node) {
  const EwOwnKernel& op = kUnaryOps[node.op];
  UnaryPush push;
  push.op = op.code;
  push.n = static_cast<std::uint32_t>(graph.type(node.output).size());
  const EwParams params = ew_params(node);
  push.p0 = params.values[0];
  push.p1 = params.values[1];
  KernelLaunch launch;
  launch.shader = "elementwise_unary";
  launch.bindings = {node.inputs[0], node.output};
  append_pod(launch.push, push);
  launch.items = push.n;
  launch.loop_passes = simple_kernel_passes(launch.items, launch.group_size);
  launch.paths = {op.path};
  return launch;
}

}  // namespace

std::size_t ew_param_count(OpId op) {
  const OpDef& def = op_def(op);
  std::size_t count = 0;
  for (const AttrSpec& attr : def.attrs) {
    if (attr.kind != AttrKind::real) {
      throw Error("Vulkan elementwise kernels: op '" + std::string(def.name) + "' has the " +
                  std::string(attr_kind_name(attr.kind)) + " attribute '" + std::string(attr.name) +
                  "'; an elementwise op's attributes reach the shaders as float params (p0, p1), so they must be "
                  "real (" +
                  std::string(op_family(op)) + " in ops.def)");
    }
    ++count;
  }
  if (count > kMaxEwParams) {
    throw Error("Vulkan elementwise kernels: op '" + std::string(def.name) + "' has " + std::to_string(count) +
                " real attributes; the elementwise shaders carry at most " + std::to_string(kMaxEwParams) +
                " (p0, p1)");
  }
  return count;
}

EwParams ew_params(const Node& node) {
  EwParams params;
  const OpDef& def = op_def(node.op);
  params.count = ew_param_count(node.op);
  for (std::size_t k = 0; k < params.count; ++k) {
    params.values[k] = static_cast<float>(node.attrs.real(def.attrs[k].name));
  }
  return params;
}

void register_elementwise_unary_kernels(KernelPlanTable& table) {
  for (const OpId op : kUnaryOps.ops()) {
    (void)ew_param_count(op);  // refuses, when the table is built, an op whose attributes cannot travel
    table[static_cast<std::size_t>(op)] = plan;
  }
}

}  // namespace tg::vk
