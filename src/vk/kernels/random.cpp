// Launches of the random family: randn (shaders/randn.comp) and dropout (shaders/dropout.comp).
// One invocation per element, grid-stride; each draws Philox4x32-10 at its own counter under the
// key (step seed, salt) exactly as src/interp/philox.h does (shaders/philox.glsl), so the words,
// and therefore dropout's kept elements, are the interpreter's bit for bit. The step seed is the
// op's 0-d i32 input, read by the shader from its buffer (it changes every run, the graph does not).
#include "tensorgrad/ir/ops/ids/random.h"

#include <cmath>
#include <string>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/vk/error.h"
#include "vk/kernels/kernels.h"

namespace tg::vk {

namespace {

constexpr std::uint32_t kGroupSize = 256;

// One form each (no size-dependent launch logic).
const LaunchPath kRandn{"vulkan", "randn", "kernel"};
const LaunchPath kDropout{"vulkan", "dropout", "kernel"};

struct RandnPush {
  std::uint32_t salt = 0;
  std::uint32_t count = 0;
  std::uint32_t index_high = 0;  // the counter's high word; 0 for every graph
  std::uint32_t mode = 0;        // 0: normal draws (1: raw Philox words, used by the tests only)
};
static_assert(sizeof(RandnPush) == 16);

struct DropoutPush {
  std::uint32_t salt = 0;
  std::uint32_t count = 0;
  std::uint32_t keep_threshold = 0;
  float keep_scale_denominator = 1.0f;
};
static_assert(sizeof(DropoutPush) == 16);

// The shaders index elements with 32-bit counters (the counter's high word stays 0).
std::uint32_t element_count(const Graph& graph, const Node& node) {
  const TensorType& type = graph.type(node.output);
  if (type.size() > 0xffffffffll) {
    throw LimitError("Vulkan kernel for '" + std::string(op_name(node.op)) + "' on " + type.to_string() +
                     ": more than 2^32-1 elements");
  }
  return static_cast<std::uint32_t>(type.size());
}

// The salt is one 32-bit key word; the shape rules keep it in [0, 2^32).
std::uint32_t salt_of(const Node& node) { return static_cast<std::uint32_t>(node.attrs.integer("salt")); }

KernelLaunch plan_randn(const Graph& graph, const Node& node) {
  RandnPush push;
  push.salt = salt_of(node);
  push.count = element_count(graph, node);

  KernelLaunch launch;
  launch.shader = "randn";
  launch.bindings = {node.inputs[0], node.output};
  launch.group_size = kGroupSize;
  launch.items = push.count;
  launch.loop_passes = simple_kernel_passes(launch.items, launch.group_size);
  launch.paths = {&kRandn};
  append_pod(launch.push, push);
  return launch;
}

// The interpreter keeps element i when (w0 >> 8) * 2^-24 >= p in double. Scaling by 2^24 is exact,
// so that is (w0 >> 8) >= p * 2^24, i.e. (w0 >> 8) >= ceil(p * 2^24) for the integer w0 >> 8.
std::uint32_t keep_threshold(double p) { return static_cast<std::uint32_t>(std::ceil(p * 16777216.0)); }

KernelLaunch plan_dropout(const Graph& graph, const Node& node) {
  const double p = node.attrs.real("p");  // in [0, 1): checked by the shape rule
  DropoutPush push;
  push.salt = salt_of(node);
  push.count = element_count(graph, node);
  push.keep_threshold = keep_threshold(p);
  // 1 - p formed in double and rounded once to float, as the f32 interpreter divides by.
  push.keep_scale_denominator = static_cast<float>(1.0 - p);

  KernelLaunch launch;
  launch.shader = "dropout";
  launch.bindings = {node.inputs[0], node.inputs[1], node.output};
  launch.group_size = kGroupSize;
  launch.items = push.count;
  launch.loop_passes = simple_kernel_passes(launch.items, launch.group_size);
  launch.paths = {&kDropout};
  append_pod(launch.push, push);
  return launch;
}

constexpr std::size_t slot(OpId id) { return static_cast<std::size_t>(id); }

}  // namespace

void register_random_kernels(KernelPlanTable& table) {
  table[slot(op::Randn)] = plan_randn;
  table[slot(op::Dropout)] = plan_dropout;
}

}  // namespace tg::vk
