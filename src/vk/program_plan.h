#pragma once
// Internal: everything a Program decides from the graph, the options and the device's limits
// before it touches the device: each node's launch (fused, transposes absorbed, reshapes as
// aliases), which inputs are resident, the writeback pairs, the constants, and the buffer plan.
// plan_memory() (tensorgrad/vk/executor.h) stops here; a Program records what this returns.
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tensorgrad/vk/device.h"
#include "tensorgrad/vk/executor.h"
#include "vk/kernels/kernels.h"
#include "vk/plan.h"

namespace tg::vk {

struct ProgramPlan {
  std::vector<KernelLaunch> launches;  // one per node, in node order
  BufferPlan plan;
  // What plan_buffers was given, so a test can plan the same ranges again with another
  // PlacementStrategy and check each placement against the device's limits.
  PlanLimits limits;
  PlanOptions plan_options;
  ProgramStats stats;                                   // constants, aliases, absorbed transposes and the memory fields
  std::vector<bool> resident;                           // per graph input
  std::vector<bool> constants;                          // per node: computed once when the program is built
  std::vector<std::pair<ValueId, ValueId>> writebacks;  // (output value, input value)
  std::set<ValueId> writeback_sources;
  std::set<ValueId> unread_outputs;  // not read back by run(): writeback sources and device outputs
  std::map<std::string, ValueId, std::less<>> device_outputs;
};

// Throws tg::Error naming the op, value, graph and call site for a node without a Vulkan kernel, a
// launch above the device's storage-buffer or loop limits, a bad writeback or device output, and
// a plan above the device's limits; all before anything is allocated.
ProgramPlan plan_program(const Graph& graph, const DeviceInfo& info, const ProgramOptions& options);

}  // namespace tg::vk
