// Launches of the unary elementwise family (shaders/elementwise_unary.comp): contiguous input and
// output of the same shape, the op as a push constant.
#include "tensorgrad/ir/ops/ids/elementwise_unary.h"

#include <iterator>

#include "vk/kernels/kernels.h"

namespace tg::vk {

namespace {

struct UnaryPush {
  std::uint32_t op = 0;
  std::uint32_t n = 0;
  float lo = 0;
  float hi = 0;
};

enum UnaryOp : std::uint32_t {
  neg,
  abs_,
  square,
  sqrt_,
  rsqrt,
  exp_,
  log_,
  sin_,
  cos_,
  tanh_,
  sigmoid,
  relu,
  gelu,
  silu,
  clamp,
  copy
};

// A fusable op's own dispatch (fusion.cpp names the fused ones); stop_gradient is not fusable.
const LaunchPath kOwn[] = {
    {"vulkan", "neg", "own_kernel"},      {"vulkan", "abs", "own_kernel"},     {"vulkan", "square", "own_kernel"},
    {"vulkan", "sqrt", "own_kernel"},     {"vulkan", "rsqrt", "own_kernel"},   {"vulkan", "exp", "own_kernel"},
    {"vulkan", "log", "own_kernel"},      {"vulkan", "sin", "own_kernel"},     {"vulkan", "cos", "own_kernel"},
    {"vulkan", "tanh", "own_kernel"},     {"vulkan", "sigmoid", "own_kernel"}, {"vulkan", "relu", "own_kernel"},
    {"vulkan", "gelu", "own_kernel"},     {"vulkan", "silu", "own_kernel"},    {"vulkan", "clamp", "own_kernel"},
    {"vulkan", "stop_gradient", "kernel"}};  // by UnaryOp
static_assert(std::size(kOwn) == copy + 1);

template <UnaryOp Op>
KernelLaunch plan(const Graph& graph, const Node& node) {
  UnaryPush push;
  push.op = Op;
  push.n = static_cast<std::uint32_t>(graph.type(node.output).size());
  if constexpr (Op == clamp) {
    push.lo = static_cast<float>(node.attrs.real("lo"));
    push.hi = static_cast<float>(node.attrs.real("hi"));
  }
  KernelLaunch launch;
  launch.shader = "elementwise_unary";
  launch.bindings = {node.inputs[0], node.output};
  append_pod(launch.push, push);
  launch.items = push.n;
  launch.loop_passes = simple_kernel_passes(launch.items, launch.group_size);
  launch.paths = {&kOwn[Op]};
  return launch;
}

constexpr std::size_t slot(OpId id) { return static_cast<std::size_t>(id); }

}  // namespace

void register_elementwise_unary_kernels(KernelPlanTable& table) {
  table[slot(op::Neg)] = plan<neg>;
  table[slot(op::Abs)] = plan<abs_>;
  table[slot(op::Square)] = plan<square>;
  table[slot(op::Sqrt)] = plan<sqrt_>;
  table[slot(op::Rsqrt)] = plan<rsqrt>;
  table[slot(op::Exp)] = plan<exp_>;
  table[slot(op::Log)] = plan<log_>;
  table[slot(op::Sin)] = plan<sin_>;
  table[slot(op::Cos)] = plan<cos_>;
  table[slot(op::Tanh)] = plan<tanh_>;
  table[slot(op::Sigmoid)] = plan<sigmoid>;
  table[slot(op::Relu)] = plan<relu>;
  table[slot(op::Gelu)] = plan<gelu>;
  table[slot(op::Silu)] = plan<silu>;
  table[slot(op::Clamp)] = plan<clamp>;
  table[slot(op::StopGradient)] = plan<copy>;
}

}  // namespace tg::vk
