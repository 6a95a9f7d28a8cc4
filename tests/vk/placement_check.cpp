// The independent buffer-plan check (see placement_check.h).
#include "placement_check.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

namespace tg::vk::testing {

namespace {

std::uint64_t round_up(std::uint64_t v, std::uint64_t to) { return (v + to - 1) / to * to; }

std::string describe(const CheckedRange& r) {
  return r.name + " (block " + std::to_string(r.slot.block) + ", [" + std::to_string(r.slot.offset) + ", " +
         std::to_string(r.slot.offset + r.size) + "), alive at nodes " + std::to_string(r.first) + ".." +
         std::to_string(r.last) + ")";
}

bool share_bytes(const CheckedRange& a, const CheckedRange& b) {
  return a.slot.block == b.slot.block && a.slot.offset < b.slot.offset + b.size &&
         b.slot.offset < a.slot.offset + a.size;
}

bool alive_together(const CheckedRange& a, const CheckedRange& b) { return a.first <= b.last && b.first <= a.last; }

// Whether the strategy that made the plan had to take a place at or after `r`'s: the lowest
// aligned place below the cap in blocks up to r's that is clear of every range in `seen` (a
// superset of the ranges the strategy had placed and not released when it placed r). Returns the
// earlier place that was free, if any.
std::optional<std::pair<std::uint32_t, std::uint64_t>> earlier_free_place(const CheckedRange& r,
                                                                          const std::vector<const CheckedRange*>& seen,
                                                                          std::uint64_t alignment, std::uint64_t cap) {
  for (std::uint32_t block = 0; block <= r.slot.block; ++block) {
    std::vector<std::uint64_t> places{0};
    for (const CheckedRange* s : seen)
      if (s->slot.block == block) places.push_back(round_up(s->slot.offset + s->size, alignment));
    std::sort(places.begin(), places.end());
    for (std::uint64_t at : places) {
      if (block == r.slot.block && at >= r.slot.offset) break;
      if (at + r.size > cap) break;
      const bool clear = std::none_of(seen.begin(), seen.end(), [&](const CheckedRange* s) {
        return s->slot.block == block && at < s->slot.offset + s->size && s->slot.offset < at + r.size;
      });
      if (clear) return std::pair{block, at};
    }
  }
  return std::nullopt;
}

}  // namespace

std::vector<CheckedRange> checked_ranges(const Graph& graph, const PlanOptions& options, const BufferPlan& plan) {
  const auto& values = graph.values();
  const auto& nodes = graph.nodes();
  const auto end = static_cast<std::int64_t>(nodes.size());
  const std::uint64_t guard = round_up(options.guard_bytes, 4);
  // Per value: the first node it must hold data at (its producer; -1 for inputs) and the last (its
  // last reader; the end for whatever the host or a later run still reads).
  std::vector<std::int64_t> first(values.size(), end + 1), last(values.size(), -2);
  std::vector<bool> placed(values.size(), false);
  for (const GraphInput& in : graph.inputs()) {
    const auto v = static_cast<std::size_t>(in.value);
    first[v] = -1;
    last[v] = end;
    placed[v] = true;
  }
  for (std::int64_t n = 0; n < end; ++n) {
    const Node& node = nodes[static_cast<std::size_t>(n)];
    const auto out = static_cast<std::size_t>(node.output);
    first[out] = std::min(first[out], n);
    last[out] = std::max(last[out], n);
    placed[out] = true;
    for (ValueId v : node.inputs) last[static_cast<std::size_t>(v)] = std::max(last[static_cast<std::size_t>(v)], n);
  }
  for (const auto& [v, n] : options.extra_reads)
    last[static_cast<std::size_t>(v)] = std::max(last[static_cast<std::size_t>(v)], static_cast<std::int64_t>(n));
  for (const GraphOutput& out : graph.outputs()) last[static_cast<std::size_t>(out.value)] = end;
  for (ValueId v : options.keep_alive) last[static_cast<std::size_t>(v)] = end;
  for (ValueId v : options.whole_program) {
    first[static_cast<std::size_t>(v)] = -1;
    last[static_cast<std::size_t>(v)] = end;
  }
  // An alias group holds its data from its first member's first node to its last member's last.
  std::vector<ValueId> source(values.size(), -1);
  for (const auto& [alias, from] : options.aliases) source[static_cast<std::size_t>(alias)] = from;
  const auto root_of = [&](std::size_t v) {
    while (source[v] >= 0) v = static_cast<std::size_t>(source[v]);
    return v;
  };
  for (std::size_t v = 0; v < values.size(); ++v) {
    if (!placed[v] || source[v] < 0) continue;
    const std::size_t r = root_of(v);
    first[r] = std::min(first[r], first[v]);
    last[r] = std::max(last[r], last[v]);
  }
  std::vector<CheckedRange> ranges;
  for (std::size_t v = 0; v < values.size(); ++v) {
    if (!placed[v] || source[v] >= 0) continue;
    const ValueSlot& slot = plan.slots[v];
    ranges.push_back(
        {"%" + std::to_string(v), slot, slot.bytes + slot.guard_bytes, first[v], guard > 0 ? end : last[v]});
  }
  for (std::size_t n = 0; n < plan.scratch.size(); ++n) {
    const ValueSlot& slot = plan.scratch[n];
    if (slot.bytes == 0) continue;
    const auto at = static_cast<std::int64_t>(n);
    ranges.push_back(
        {"scratch of node " + std::to_string(n), slot, slot.bytes + slot.guard_bytes, at, guard > 0 ? end : at});
  }
  return ranges;
}

std::uint64_t live_peak(const std::vector<CheckedRange>& ranges) {
  std::int64_t lo = 0, hi = 0;
  for (const CheckedRange& r : ranges) {
    lo = std::min(lo, r.first);
    hi = std::max(hi, r.last);
  }
  std::uint64_t peak = 0;
  for (std::int64_t n = lo; n <= hi; ++n) {
    std::uint64_t live = 0;
    for (const CheckedRange& r : ranges)
      if (r.first <= n && n <= r.last) live += r.size;
    peak = std::max(peak, live);
  }
  return peak;
}

std::vector<std::string> placement_errors(const Graph& graph, const PlanLimits& limits, const PlanOptions& options,
                                          const BufferPlan& plan, std::size_t max_errors) {
  std::vector<std::string> errors;
  const auto fail = [&](const std::string& why) {
    if (errors.size() < max_errors) errors.push_back(why);
  };
  const std::uint64_t alignment = std::max<std::uint64_t>(4, limits.alignment);
  const std::uint64_t guard = round_up(options.guard_bytes, 4);
  const std::vector<CheckedRange> ranges = checked_ranges(graph, options, plan);

  // Each range: its size, its guard, its alignment, its block, the device's binding limit.
  std::uint64_t largest = 0;
  std::vector<bool> used(plan.blocks.size(), false);
  for (const CheckedRange& r : ranges) {
    largest = std::max(largest, r.size);
    if (r.slot.guard_bytes != guard) fail(describe(r) + ": guard of " + std::to_string(r.slot.guard_bytes));
    if (r.slot.guard_offset != r.slot.offset + r.slot.bytes) fail(describe(r) + ": guard not right after the payload");
    if (r.slot.offset % alignment != 0) fail(describe(r) + ": offset not a multiple of " + std::to_string(alignment));
    if (r.slot.bytes > limits.max_storage_buffer_range) fail(describe(r) + ": above maxStorageBufferRange");
    if (r.slot.block >= plan.blocks.size()) {
      fail(describe(r) + ": no such block (the plan has " + std::to_string(plan.blocks.size()) + ")");
      continue;
    }
    used[r.slot.block] = true;
    if (r.slot.offset + r.size > plan.blocks[r.slot.block])
      fail(describe(r) + ": past the end of its block of " + std::to_string(plan.blocks[r.slot.block]) + " bytes");
  }
  for (std::size_t v = 0; v < graph.values().size(); ++v) {
    const auto& type = graph.values()[v].type;
    // 4 bytes an element (2 for f16 and bf16), in whole 32-bit words, at least one word.
    const auto elements = static_cast<std::uint64_t>(std::max<std::int64_t>(type.size(), 1));
    const std::uint64_t element_bytes = is_low_precision(type.dtype) ? 2 : 4;
    if (plan.slots[v].bytes != round_up(elements * element_bytes, 4))
      fail("%" + std::to_string(v) + " (" + type.to_string() + "): " + std::to_string(plan.slots[v].bytes) + " bytes");
  }
  for (std::size_t n = 0; n < options.scratch_bytes.size() && n < plan.scratch.size(); ++n) {
    if (plan.scratch[n].bytes != round_up(options.scratch_bytes[n], 4))
      fail("scratch of node " + std::to_string(n) + ": " + std::to_string(plan.scratch[n].bytes) + " bytes for " +
           std::to_string(options.scratch_bytes[n]) + " asked");
  }
  for (const auto& [alias, source] : options.aliases) {
    const ValueSlot& a = plan.slots[static_cast<std::size_t>(alias)];
    const ValueSlot& s = plan.slots[static_cast<std::size_t>(source)];
    if (a.block != s.block || a.offset != s.offset)
      fail("alias %" + std::to_string(alias) + " is not at its source %" + std::to_string(source) + "'s range");
  }

  // The blocks: none empty, each within the cap; the cap within one allocation and no larger than
  // asked (unless one range needs more); the total within the heap.
  const std::uint64_t asked = limits.block_bytes > 0 ? limits.block_bytes : k_default_block_bytes;
  if (plan.block_cap > limits.max_memory_allocation_size) fail("block cap above maxMemoryAllocationSize");
  if (plan.block_cap < largest) fail("block cap below the largest range, " + std::to_string(largest) + " bytes");
  if (plan.block_cap > std::max(asked, largest)) fail("block cap above the one asked for");
  std::uint64_t total = 0;
  for (std::size_t b = 0; b < plan.blocks.size(); ++b) {
    total += plan.blocks[b];
    if (plan.blocks[b] > plan.block_cap)
      fail("block " + std::to_string(b) + " of " + std::to_string(plan.blocks[b]) + " bytes is above the cap");
    if (!used[b] && !ranges.empty()) fail("block " + std::to_string(b) + " holds no range");
  }
  if (total != plan.total_bytes) fail("total_bytes is not the sum of the blocks");
  if (total > limits.heap_bytes) fail("the blocks together exceed the heap");
  if (plan.peak_live_bytes != live_peak(ranges))
    fail("peak_live_bytes " + std::to_string(plan.peak_live_bytes) + ", but " + std::to_string(live_peak(ranges)) +
         " bytes are alive at one node");

  // Ranges alive at a common node share no byte.
  for (std::size_t a = 0; a < ranges.size(); ++a)
    for (std::size_t b = a + 1; b < ranges.size(); ++b)
      if (alive_together(ranges[a], ranges[b]) && share_bytes(ranges[a], ranges[b]))
        fail(describe(ranges[a]) + " and " + describe(ranges[b]) + " are alive together and share bytes");

  // The strategy's own rule. First fit in step order has placed, when it places r, ranges born no
  // later than r; of those it has released the ones dead before r is born. Greedy by size has
  // placed the ranges at least as large as r and avoids those alive with it.
  if (options.strategy == PlacementStrategy::smaller_of_both) return errors;
  for (const CheckedRange& r : ranges) {
    std::vector<const CheckedRange*> seen;
    for (const CheckedRange& s : ranges) {
      if (&s == &r) continue;
      const bool in_view = options.strategy == PlacementStrategy::first_fit_in_order
                               ? s.first <= r.first && r.first <= s.last
                               : s.size >= r.size && alive_together(r, s);
      if (in_view) seen.push_back(&s);
    }
    if (const auto place = earlier_free_place(r, seen, alignment, plan.block_cap)) {
      fail(describe(r) + ": block " + std::to_string(place->first) + " had room at offset " +
           std::to_string(place->second) + ", free of every range placed before it and alive with it");
    }
  }
  return errors;
}

}  // namespace tg::vk::testing
