// The buffer plan: lifetimes from the node order, first-fit placement with alignment.
#include "vk/plan.h"

#include <algorithm>
#include <map>
#include <optional>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/op_def.h"

namespace tg::vk {

namespace {

std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

std::string mib(std::uint64_t bytes) {
  return std::to_string(bytes) + " bytes (" + std::to_string(bytes >> 20) + " MiB)";
}

// Live allocations of one block ordered by offset; first fit walks the gaps between them.
class FirstFit {
 public:
  explicit FirstFit(std::uint64_t alignment) : alignment_(alignment) {}

  // The first aligned gap of `size` bytes that ends at or below `cap`, or none.
  std::optional<std::uint64_t> allocate(std::uint64_t size, std::uint64_t cap) {
    std::uint64_t candidate = 0;
    for (const auto& [offset, len] : live_) {
      if (candidate + size <= offset) break;
      candidate = std::max(candidate, align_up(offset + len, alignment_));
    }
    if (candidate + size > cap) return std::nullopt;
    live_.emplace(candidate, size);
    end_ = std::max(end_, candidate + size);
    return candidate;
  }
  void release(std::uint64_t offset) { live_.erase(offset); }
  std::uint64_t end() const { return end_; }

 private:
  std::uint64_t alignment_;
  std::map<std::uint64_t, std::uint64_t> live_;
  std::uint64_t end_ = 0;
};

// First fit over blocks in creation order; a new block only when none has room below the cap.
class BlockedFirstFit {
 public:
  BlockedFirstFit(std::uint64_t alignment, std::uint64_t cap) : alignment_(alignment), cap_(cap) {}

  // Every request is at most the cap, so a fresh block always has room.
  void place(ValueSlot& slot, std::uint64_t size) {
    for (std::size_t b = 0; b < blocks_.size(); ++b) {
      if (const auto offset = blocks_[b].allocate(size, cap_)) {
        slot.block = static_cast<std::uint32_t>(b);
        slot.offset = *offset;
        return;
      }
    }
    blocks_.emplace_back(alignment_);
    slot.block = static_cast<std::uint32_t>(blocks_.size() - 1);
    slot.offset = *blocks_.back().allocate(size, cap_);
  }
  void release(const ValueSlot& slot) { blocks_[slot.block].release(slot.offset); }
  std::vector<std::uint64_t> block_bytes() const {
    std::vector<std::uint64_t> out;
    for (const FirstFit& b : blocks_) out.push_back(align_up(std::max<std::uint64_t>(b.end(), 4), 4));
    if (out.empty()) out.push_back(4);  // a graph without values still binds one buffer
    return out;
  }

 private:
  std::uint64_t alignment_, cap_;
  std::vector<FirstFit> blocks_;
};

}  // namespace

BufferPlan plan_buffers(const Graph& graph, const PlanLimits& limits, const PlanOptions& options) {
  const std::uint64_t alignment = std::max<std::uint64_t>(4, limits.alignment);
  const std::uint64_t guard = align_up(options.guard_bytes, 4);
  const auto& values = graph.values();
  const auto& nodes = graph.nodes();
  const auto n_nodes = static_cast<std::int64_t>(nodes.size());

  BufferPlan plan;
  plan.guard_bytes = guard;
  plan.slots.resize(values.size());
  plan.live_from.assign(values.size(), -1);
  plan.live_to.assign(values.size(), -1);

  for (std::size_t n = 0; n < nodes.size(); ++n) {
    const auto out = static_cast<std::size_t>(nodes[n].output);
    plan.live_from[out] = static_cast<std::int64_t>(n);
    plan.live_to[out] = std::max(plan.live_to[out], static_cast<std::int64_t>(n));
    for (ValueId v : nodes[n].inputs) {
      auto& to = plan.live_to[static_cast<std::size_t>(v)];
      to = std::max(to, static_cast<std::int64_t>(n));
    }
  }
  for (const GraphInput& in : graph.inputs()) plan.live_to[static_cast<std::size_t>(in.value)] = n_nodes;
  for (const GraphOutput& out : graph.outputs()) plan.live_to[static_cast<std::size_t>(out.value)] = n_nodes;
  for (const auto& [v, node] : options.extra_reads) {
    auto& to = plan.live_to[static_cast<std::size_t>(v)];
    to = std::max(to, static_cast<std::int64_t>(node));
  }
  for (ValueId v : options.keep_alive) plan.live_to[static_cast<std::size_t>(v)] = n_nodes;
  for (ValueId v : options.whole_program) {
    plan.live_from[static_cast<std::size_t>(v)] = -1;
    plan.live_to[static_cast<std::size_t>(v)] = n_nodes;
  }

  // Alias groups: every member takes its root's range, which lives as long as any member does.
  std::vector<ValueId> root(values.size());
  for (std::size_t v = 0; v < values.size(); ++v) root[v] = static_cast<ValueId>(v);
  for (const auto& [alias, source] : options.aliases) root[static_cast<std::size_t>(alias)] = source;
  const auto find_root = [&](ValueId v) {
    while (root[static_cast<std::size_t>(v)] != v) v = root[static_cast<std::size_t>(v)];
    return v;
  };
  for (const auto& [alias, source] : options.aliases) {
    const auto a = static_cast<std::size_t>(alias);
    const auto r = static_cast<std::size_t>(find_root(alias));
    plan.live_from[r] = std::min(plan.live_from[r], plan.live_from[a]);
    plan.live_to[r] = std::max(plan.live_to[r], plan.live_to[a]);
  }

  const std::uint64_t max_range = limits.max_storage_buffer_range;
  const std::uint64_t max_allocation = limits.max_memory_allocation_size;
  std::uint64_t largest = 0;  // slot and guard
  for (std::size_t v = 0; v < values.size(); ++v) {
    const auto elements = static_cast<std::uint64_t>(std::max<std::int64_t>(values[v].type.size(), 1));
    ValueSlot& slot = plan.slots[v];
    slot.bytes = elements * 4;
    slot.guard_bytes = guard;
    if (slot.bytes > max_range) {
      throw Error("Vulkan buffer plan: value %" + std::to_string(v) + " (" + values[v].type.to_string() +
                  ") of graph '" + graph.name() + "' needs " + mib(slot.bytes) + ", above maxStorageBufferRange " +
                  mib(max_range) + " of " + limits.device);
    }
    if (slot.bytes + guard > max_allocation) {
      throw Error("Vulkan buffer plan: value %" + std::to_string(v) + " (" + values[v].type.to_string() +
                  ") of graph '" + graph.name() + "' needs " + mib(slot.bytes + guard) +
                  ", above maxMemoryAllocationSize " + mib(max_allocation) + " of " + limits.device);
    }
    largest = std::max(largest, slot.bytes + guard);
    plan.naive_bytes += align_up(slot.bytes + guard, alignment);
  }

  // Values by the step at which they come alive; at step s, values whose last use was before s are
  // released first, then the step's new values are placed.
  std::vector<std::vector<ValueId>> born(static_cast<std::size_t>(n_nodes + 1));
  std::vector<std::vector<ValueId>> dies(static_cast<std::size_t>(n_nodes + 3));
  for (std::size_t v = 0; v < values.size(); ++v) {
    if (values[v].producer == kNoNode && !graph.input_of_value(static_cast<ValueId>(v))) continue;
    if (root[v] != static_cast<ValueId>(v)) continue;  // placed with its root
    born[static_cast<std::size_t>(plan.live_from[v] + 1)].push_back(static_cast<ValueId>(v));
    dies[static_cast<std::size_t>(plan.live_to[v] + 2)].push_back(static_cast<ValueId>(v));
  }
  // Scratch of node n: placed with node n's output (step n + 1), released at step n + 2 like a value
  // that only node n reads, so it never overlaps anything node n reads or writes.
  plan.scratch.assign(nodes.size(), ValueSlot{});
  for (std::size_t n = 0; n < options.scratch_bytes.size() && n < nodes.size(); ++n) {
    ValueSlot& slot = plan.scratch[n];
    slot.bytes = align_up(options.scratch_bytes[n], 4);
    slot.guard_bytes = slot.bytes > 0 ? guard : 0;
    if (slot.bytes > 0) plan.naive_bytes += align_up(slot.bytes + guard, alignment);
    if (slot.bytes > max_range || slot.bytes + slot.guard_bytes > max_allocation) {
      throw Error("Vulkan buffer plan: node %" + std::to_string(n) + " ('" + std::string(op_name(nodes[n].op)) +
                  "') of graph '" + graph.name() + "' needs " + mib(slot.bytes) +
                  " of scratch, above maxStorageBufferRange " + mib(max_range) + " or maxMemoryAllocationSize " +
                  mib(max_allocation) + " of " + limits.device);
    }
    largest = std::max(largest, slot.bytes + slot.guard_bytes);
  }
  // The block cap: the caller's (or the default), at least the largest request, at most one allocation.
  const std::uint64_t wanted_cap = limits.block_bytes > 0 ? limits.block_bytes : k_default_block_bytes;
  plan.block_cap = std::min(std::max(wanted_cap, largest), max_allocation);
  BlockedFirstFit heap(alignment, plan.block_cap);
  const auto place = [&](ValueSlot& slot) {
    heap.place(slot, slot.bytes + slot.guard_bytes);
    slot.guard_offset = slot.offset + slot.bytes;
  };
  for (std::int64_t step = 0; step <= n_nodes; ++step) {
    // With guards, nothing is reused: a guard must keep its sentinel until check_guards() reads it.
    if (guard == 0) {
      for (ValueId v : dies[static_cast<std::size_t>(step)]) heap.release(plan.slots[static_cast<std::size_t>(v)]);
      if (step >= 2 && plan.scratch[static_cast<std::size_t>(step - 2)].bytes > 0)
        heap.release(plan.scratch[static_cast<std::size_t>(step - 2)]);
    }
    for (ValueId v : born[static_cast<std::size_t>(step)]) place(plan.slots[static_cast<std::size_t>(v)]);
    if (step >= 1 && plan.scratch[static_cast<std::size_t>(step - 1)].bytes > 0)
      place(plan.scratch[static_cast<std::size_t>(step - 1)]);
  }
  for (const auto& [alias, source] : options.aliases) {
    const auto a = static_cast<std::size_t>(alias);
    const auto r = static_cast<std::size_t>(find_root(alias));
    plan.slots[a] = plan.slots[r];
    plan.live_from[a] = plan.live_from[r];
    plan.live_to[a] = plan.live_to[r];
  }
  plan.blocks = heap.block_bytes();
  for (std::uint64_t b : plan.blocks) plan.total_bytes += b;
  if (plan.total_bytes > limits.heap_bytes) {
    throw Error("Vulkan buffer plan: graph '" + graph.name() + "' needs " + mib(plan.total_bytes) +
                " of device memory in " + std::to_string(plan.blocks.size()) + " allocation(s), above the " +
                mib(limits.heap_bytes) + " of " + (limits.heap.empty() ? "its memory heap" : limits.heap) + " on " +
                limits.device + "; use a smaller batch or a larger device");
  }
  return plan;
}

}  // namespace tg::vk
