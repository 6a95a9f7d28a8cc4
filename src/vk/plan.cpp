// The buffer plan: lifetimes from the node order, first-fit placement with alignment.
#include "vk/plan.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/op_def.h"
#include "tensorgrad/vk/error.h"

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

// A range to place: `size` bytes (payload and guard) alive over steps [from, to).
struct Item {
  ValueSlot* slot = nullptr;
  std::uint64_t size = 0;
  std::int64_t from = 0, to = 0;
};

struct Placement {
  std::vector<std::pair<std::uint32_t, std::uint64_t>> at;  // per item: block, offset
  std::vector<std::uint64_t> blocks;                        // bytes of each block
  std::uint64_t total = 0;
};

// Item indices in a stable order by `less` (ties keep item order, so plans are deterministic).
template <class Less>
std::vector<std::size_t> indices_by(const std::vector<Item>& items, Less less) {
  std::vector<std::size_t> order(items.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return less(items[a], items[b]); });
  return order;
}

void finish(Placement& p) {
  for (std::uint64_t& b : p.blocks) b = align_up(std::max<std::uint64_t>(b, 4), 4);
  if (p.blocks.empty()) p.blocks.push_back(4);  // a graph without values still binds one buffer
  for (std::uint64_t b : p.blocks) p.total += b;
}

// Online first fit in step order: at each step the ranges that died are released, then the new
// ones are placed in the first block with an aligned gap below the cap.
Placement first_fit_in_order(const std::vector<Item>& items, std::uint64_t alignment, std::uint64_t cap) {
  const std::vector<std::size_t> order =
      indices_by(items, [](const Item& a, const Item& b) { return a.from < b.from; });
  const std::vector<std::size_t> by_death = indices_by(items, [](const Item& a, const Item& b) { return a.to < b.to; });
  Placement p;
  p.at.resize(items.size());
  std::vector<FirstFit> heaps;
  std::size_t next_death = 0;
  for (std::size_t i : order) {
    for (; next_death < by_death.size() && items[by_death[next_death]].to <= items[i].from; ++next_death) {
      const auto [block, offset] = p.at[by_death[next_death]];
      heaps[block].release(offset);
    }
    bool placed = false;
    for (std::size_t b = 0; b < heaps.size() && !placed; ++b) {
      if (const auto offset = heaps[b].allocate(items[i].size, cap)) {
        p.at[i] = {static_cast<std::uint32_t>(b), *offset};
        placed = true;
      }
    }
    if (!placed) {  // every request is at most the cap, so a fresh block has room
      heaps.emplace_back(alignment);
      p.at[i] = {static_cast<std::uint32_t>(heaps.size() - 1), *heaps.back().allocate(items[i].size, cap)};
    }
  }
  for (const FirstFit& h : heaps) p.blocks.push_back(h.end());
  finish(p);
  return p;
}

// Offline greedy by size: the largest ranges first, each at the lowest aligned offset of the first
// block where it overlaps no placed range alive at the same time. Knowing every lifetime up front,
// it packs the big activations of a training step tighter than placing in step order does.
Placement greedy_by_size(const std::vector<Item>& items, std::uint64_t alignment, std::uint64_t cap) {
  const std::vector<std::size_t> order =
      indices_by(items, [](const Item& a, const Item& b) { return a.size > b.size; });
  Placement p;
  p.at.resize(items.size());
  std::vector<std::vector<std::size_t>> placed;               // per block: items placed there
  std::vector<std::pair<std::uint64_t, std::uint64_t>> busy;  // [offset, end) of conflicting ranges
  for (std::size_t i : order) {
    const Item& item = items[i];
    bool done = false;
    for (std::size_t b = 0; b < placed.size() && !done; ++b) {
      busy.clear();
      for (std::size_t j : placed[b]) {
        if (items[j].from < item.to && item.from < items[j].to)
          busy.emplace_back(p.at[j].second, p.at[j].second + items[j].size);
      }
      std::sort(busy.begin(), busy.end());
      std::uint64_t candidate = 0;
      for (const auto& [offset, end] : busy) {
        if (candidate + item.size <= offset) break;
        candidate = std::max(candidate, align_up(end, alignment));
      }
      if (candidate + item.size <= cap) {
        p.at[i] = {static_cast<std::uint32_t>(b), candidate};
        placed[b].push_back(i);
        p.blocks[b] = std::max(p.blocks[b], candidate + item.size);
        done = true;
      }
    }
    if (!done) {
      p.at[i] = {static_cast<std::uint32_t>(placed.size()), 0};
      placed.push_back({i});
      p.blocks.push_back(item.size);
    }
  }
  finish(p);
  return p;
}

// The most bytes alive at one step: no placement needs less.
std::uint64_t peak_live(const std::vector<Item>& items) {
  std::vector<std::pair<std::int64_t, std::int64_t>> events;  // (step, +bytes at birth / -bytes at death)
  for (const Item& item : items) {
    const auto bytes = static_cast<std::int64_t>(item.size);
    events.emplace_back(item.from, bytes);
    events.emplace_back(item.to, -bytes);
  }
  std::sort(events.begin(), events.end());  // at one step, deaths (negative) before births
  std::int64_t live = 0, peak = 0;
  for (const auto& [step, delta] : events) {
    live += delta;
    peak = std::max(peak, live);
  }
  return static_cast<std::uint64_t>(peak);
}

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
    ValueSlot& slot = plan.slots[v];
    slot.bytes = device_value_bytes(values[v].type);
    slot.guard_bytes = guard;
    if (slot.bytes > max_range) {
      throw LimitError("Vulkan buffer plan: value %" + std::to_string(v) + " (" + values[v].type.to_string() +
                       ") of graph '" + graph.name() + "' needs " + mib(slot.bytes) + ", above maxStorageBufferRange " +
                       mib(max_range) + " of " + limits.device);
    }
    if (slot.bytes + guard > max_allocation) {
      throw LimitError("Vulkan buffer plan: value %" + std::to_string(v) + " (" + values[v].type.to_string() +
                       ") of graph '" + graph.name() + "' needs " + mib(slot.bytes + guard) +
                       ", above maxMemoryAllocationSize " + mib(max_allocation) + " of " + limits.device);
    }
    largest = std::max(largest, slot.bytes + guard);
    plan.naive_bytes += align_up(slot.bytes + guard, alignment);
  }

  plan.scratch.assign(nodes.size(), ValueSlot{});
  for (std::size_t n = 0; n < options.scratch_bytes.size() && n < nodes.size(); ++n) {
    ValueSlot& slot = plan.scratch[n];
    slot.bytes = align_up(options.scratch_bytes[n], 4);
    slot.guard_bytes = slot.bytes > 0 ? guard : 0;
    if (slot.bytes > 0) plan.naive_bytes += align_up(slot.bytes + guard, alignment);
    if (slot.bytes > max_range || slot.bytes + slot.guard_bytes > max_allocation) {
      throw LimitError("Vulkan buffer plan: node %" + std::to_string(n) + " ('" + std::string(op_name(nodes[n].op)) +
                       "') of graph '" + graph.name() + "' needs " + mib(slot.bytes) +
                       " of scratch, above maxStorageBufferRange " + mib(max_range) + " or maxMemoryAllocationSize " +
                       mib(max_allocation) + " of " + limits.device);
    }
    largest = std::max(largest, slot.bytes + slot.guard_bytes);
  }
  // The block cap: the caller's (or the default), at least the largest request, at most one allocation.
  const std::uint64_t wanted_cap = limits.block_bytes > 0 ? limits.block_bytes : k_default_block_bytes;
  plan.block_cap = std::min(std::max(wanted_cap, largest), max_allocation);
  // Every range with its lifetime in steps: a value born at step live_from + 1 (node n's output at
  // step n + 1) and released at live_to + 2, after its last reader; node n's scratch over step n + 1
  // only, so it never overlaps anything node n reads or writes. With guards nothing is released: a
  // guard must keep its sentinel until check_guards() reads it.
  constexpr std::int64_t kForever = std::numeric_limits<std::int64_t>::max();
  std::vector<Item> items;
  for (std::size_t v = 0; v < values.size(); ++v) {
    if (values[v].producer == kNoNode && !graph.input_of_value(static_cast<ValueId>(v))) continue;
    if (root[v] != static_cast<ValueId>(v)) continue;  // placed with its root
    ValueSlot& slot = plan.slots[v];
    items.push_back(
        {&slot, slot.bytes + slot.guard_bytes, plan.live_from[v] + 1, guard > 0 ? kForever : plan.live_to[v] + 2});
  }
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    ValueSlot& slot = plan.scratch[n];
    const auto step = static_cast<std::int64_t>(n) + 1;
    if (slot.bytes > 0) items.push_back({&slot, slot.bytes + slot.guard_bytes, step, guard > 0 ? kForever : step + 1});
  }
  // Both placements, and the smaller (first fit in step order on a tie), unless one is asked for.
  Placement chosen;
  if (options.strategy != PlacementStrategy::greedy_by_size)
    chosen = first_fit_in_order(items, alignment, plan.block_cap);
  if (options.strategy != PlacementStrategy::first_fit_in_order) {
    Placement by_size = greedy_by_size(items, alignment, plan.block_cap);
    if (options.strategy == PlacementStrategy::greedy_by_size || by_size.total < chosen.total)
      chosen = std::move(by_size);
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    items[i].slot->block = chosen.at[i].first;
    items[i].slot->offset = chosen.at[i].second;
    items[i].slot->guard_offset = items[i].slot->offset + items[i].slot->bytes;
  }
  plan.blocks = chosen.blocks;
  plan.total_bytes = chosen.total;
  plan.peak_live_bytes = peak_live(items);
  for (const auto& [alias, source] : options.aliases) {
    const auto a = static_cast<std::size_t>(alias);
    const auto r = static_cast<std::size_t>(find_root(alias));
    plan.slots[a] = plan.slots[r];
    plan.live_from[a] = plan.live_from[r];
    plan.live_to[a] = plan.live_to[r];
  }
  if (plan.total_bytes > limits.heap_bytes) {
    throw LimitError("Vulkan buffer plan: graph '" + graph.name() + "' needs " + mib(plan.total_bytes) +
                     " of device memory in " + std::to_string(plan.blocks.size()) + " allocation(s), above the " +
                     mib(limits.heap_bytes) + " of " + (limits.heap.empty() ? "its memory heap" : limits.heap) +
                     " on " + limits.device + "; use a smaller batch or a larger device");
  }
  return plan;
}

}  // namespace tg::vk
