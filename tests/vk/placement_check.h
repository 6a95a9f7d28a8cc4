#pragma once
// An independent check of a buffer plan (src/vk/plan.h): the lifetimes are recomputed here from the
// graph and the planner's inputs (readers, extra reads, keep-alive, whole-program values, aliases,
// scratch, guards), without the planner's live_from/live_to or its step arithmetic, and every
// placement is checked against them and against the device's limits:
//   - ranges of two values (or scratch) alive at a common node are disjoint in their block, guards
//     included;
//   - every range lies inside its block at an aligned offset, within maxStorageBufferRange; every
//     block within the cap, the cap within maxMemoryAllocationSize, the total within the heap;
//   - no block is empty; alias members share their root's range;
//   - peak_live_bytes is the most bytes alive at one node;
//   - for one strategy alone, its own rule: no range could have gone to an earlier (block, offset)
//     that was free of every range the strategy had placed there and that was alive with it. The
//     set used is a superset of what the strategy saw when it placed the range, so a correct
//     placement never fails this, and one that kept dead ranges (or ignored a gap) does.
#include <cstdint>
#include <string>
#include <vector>

#include "tensorgrad/ir/graph.h"
#include "vk/plan.h"

namespace tg::vk::testing {

// One placed range as the check sees it: a value's (alias roots only) or a node's scratch.
struct CheckedRange {
  std::string name;        // "%7" or "scratch of node 3"
  ValueSlot slot;          // where the plan put it
  std::uint64_t size = 0;  // payload and guard
  std::int64_t first = 0;  // first node at which it must hold its data (-1: before the first node)
  std::int64_t last = 0;   // last such node (nodes().size(): until the end of the program)
};

// The ranges of `plan` with lifetimes computed from `graph` and `options` alone.
std::vector<CheckedRange> checked_ranges(const Graph& graph, const PlanOptions& options, const BufferPlan& plan);

// Every rule above that `plan` (made with `limits` and `options`, options.strategy included)
// breaks, one line each (at most max_errors); empty when it breaks none.
std::vector<std::string> placement_errors(const Graph& graph, const PlanLimits& limits, const PlanOptions& options,
                                          const BufferPlan& plan, std::size_t max_errors = 8);

// The most bytes (payload and guard) alive at one node, from checked_ranges.
std::uint64_t live_peak(const std::vector<CheckedRange>& ranges);

}  // namespace tg::vk::testing
