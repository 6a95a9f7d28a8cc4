// lavapipe's per-invocation loop limit (kernels.h): which devices have it, and the check that
// refuses a launch that could reach it when a Program is built, instead of a silently wrong run.
#include <algorithm>
#include <cctype>
#include <string>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/vk/error.h"
#include "vk/kernels/kernels.h"

namespace tg::vk {

namespace {

// The test override (ScopedLoopLimitForTesting): set, it replaces every device's answer.
bool g_overridden = false;
std::optional<std::uint64_t> g_override;

bool contains_llvmpipe(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text.find("llvmpipe") != std::string::npos;
}

std::string operand_types(const Graph& graph, const Node& node) {
  std::string types;
  for (ValueId v : node.inputs) types += (types.empty() ? "" : ", ") + graph.type(v).to_string();
  return "(" + types + ") -> " + graph.type(node.output).to_string();
}

}  // namespace

std::optional<std::uint64_t> device_loop_limit(const DeviceInfo& device) {
  if (g_overridden) return g_override;
  if (contains_llvmpipe(device.name) || contains_llvmpipe(device.driver_name)) return kLlvmpipeLoopLimit;
  return std::nullopt;
}

void check_loop_limit(const KernelLaunch& launch, const DeviceInfo& device, const Graph& graph, const Node& node) {
  const std::optional<std::uint64_t> limit = device_loop_limit(device);
  if (!limit || launch.items == 0) return;
  for (const KernelLaunch* step : launch_steps(launch)) {
    if (step->items == 0 || step->loop_passes <= *limit) continue;
    throw LimitError("Vulkan kernel '" + step->shader + "' for '" + std::string(op_name(node.op)) + "' on " +
                     operand_types(graph, node) + " (value %" + std::to_string(node.output) + " of graph '" +
                     graph.name() + "', created at " + node.loc.to_string() + ") may loop " +
                     std::to_string(step->loop_passes) +
                     " times in one invocation, above lavapipe's 65535-iteration loop limit (llvmpipe ends every loop "
                     "of an invocation past " +
                     std::to_string(*limit) + " passes and returns a wrong result) on " + device.name);
  }
}

ScopedLoopLimitForTesting::ScopedLoopLimitForTesting(std::optional<std::uint64_t> limit)
    : had_previous_(g_overridden), previous_(g_override) {
  g_overridden = true;
  g_override = limit;
}

ScopedLoopLimitForTesting::~ScopedLoopLimitForTesting() {
  g_overridden = had_previous_;
  g_override = previous_;
}

}  // namespace tg::vk
