#pragma once
// Internal: the static buffer plan of a compiled program. Every graph value gets a byte range in one
// of a few device allocations ("blocks"), each bound per value at its own offset and range; a value
// whose last reader has run gives its memory back, and later values reuse it (first fit over the
// blocks in order, offsets aligned to minStorageBufferOffsetAlignment; a new block only when no
// existing one has room below the block cap). Graph inputs and outputs stay live for the whole
// program. Optional guard regions after every value hold a sentinel pattern the executor can check
// after a run, to catch kernels writing past their output.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tensorgrad/ir/graph.h"

namespace tg::vk {

// The block cap when the caller sets none: few allocations for any graph that fits a device, and
// small enough that one allocation never needs most of a heap in one piece.
inline constexpr std::uint64_t k_default_block_bytes = std::uint64_t{4} << 30;

struct PlanLimits {
  std::uint64_t alignment = 4;                       // minStorageBufferOffsetAlignment (at least 4)
  std::uint64_t max_storage_buffer_range = ~0ull;    // one binding's range: the largest value
  std::uint64_t max_memory_allocation_size = ~0ull;  // one block
  // The most bytes one block is planned with (0: k_default_block_bytes), raised to the largest
  // value when that is bigger, and never above max_memory_allocation_size.
  std::uint64_t block_bytes = 0;
  std::uint64_t heap_bytes = ~0ull;  // the device heap the blocks come from: all blocks together
  std::string heap;                  // "heap 0 (device-local, 80 GiB)", for error messages
  std::string device;                // for error messages
};

// Which placement plan_buffers returns. Both are computed by default and the smaller kept; tests ask
// for each alone, so a placement that is never kept is checked too (vk_placement_property_test.cpp).
enum class PlacementStrategy {
  smaller_of_both,     // first fit in step order, or greedy by size when that needs fewer bytes
  first_fit_in_order,  // online, in step order: dead ranges released, each new one in the first gap
  greedy_by_size,      // offline, largest first: each at the first gap clear of ranges alive with it
};

struct PlanOptions {
  // Rounded up to a multiple of 4. Nonzero also turns memory reuse off (a debug mode, like a
  // quarantine): every guard keeps its sentinel for the whole run, so all of them can be checked.
  std::uint64_t guard_bytes = 0;
  // Values that must hold their data until the end of the program (never reused), e.g. index
  // inputs of checked launches, which the executor reads back after a failed check.
  std::vector<ValueId> keep_alive;
  // Values that own their range for the whole program, from before the first node: writeback
  // sources, whose range holds the params between runs in the swapped recording.
  std::vector<ValueId> whole_program;
  // Per node (empty, or one entry per node): bytes of scratch memory private to the node's
  // dispatches, live only while the node runs.
  std::vector<std::uint64_t> scratch_bytes;
  // (value, node): the node's dispatches read the value although the node does not list it as an
  // input (a fused launch reads the inputs of its whole group), so it stays live until then.
  std::vector<std::pair<ValueId, NodeId>> extra_reads;
  // (alias, source): the alias shares the source's range (a reshape of a contiguous value moves no
  // data). Neither may be a graph input or output. The group's range lives from its first member's
  // start to its last member's end.
  std::vector<std::pair<ValueId, ValueId>> aliases;
  PlacementStrategy strategy = PlacementStrategy::smaller_of_both;
};

inline constexpr std::uint32_t k_guard_word = 0xDEADBEEFu;

// Bytes of one element of `dtype` on the device: 2 for f16 and bf16 (their bit patterns, read and
// written only by the cast kernel, shaders/cast.comp), 4 for f32, i32 and bool (a bool is a 32-bit
// word there).
inline std::uint64_t device_element_bytes(DType dtype) { return is_low_precision(dtype) ? 2 : 4; }
// The bytes of a value of `type` on the device: its elements, rounded up to whole 32-bit words, and
// at least one word (an empty value still gets a binding).
inline std::uint64_t device_value_bytes(const TensorType& type) {
  const auto elements = static_cast<std::uint64_t>(std::max<std::int64_t>(type.size(), 1));
  return (elements * device_element_bytes(type.dtype) + 3) / 4 * 4;
}

struct ValueSlot {
  std::uint32_t block = 0;         // which allocation
  std::uint64_t offset = 0;        // within the block
  std::uint64_t bytes = 0;         // the payload: device_value_bytes (below)
  std::uint64_t guard_offset = 0;  // = offset + bytes
  std::uint64_t guard_bytes = 0;
};

struct BufferPlan {
  std::vector<ValueSlot> slots;       // indexed by ValueId
  std::vector<ValueSlot> scratch;     // indexed by node; bytes = 0 where a node has none
  std::vector<std::uint64_t> blocks;  // bytes of each allocation
  std::uint64_t block_cap = 0;        // the most bytes a block was planned with
  std::uint64_t total_bytes = 0;      // of all blocks
  std::uint64_t peak_live_bytes = 0;  // the most bytes (guards included) alive at one step
  std::uint64_t naive_bytes = 0;      // what one slot per value would have needed
  std::uint64_t guard_bytes = 0;
  // First and last node index (inclusive) at which each value must hold its data; inputs start at
  // -1, outputs and inputs end at nodes().size().
  std::vector<std::int64_t> live_from, live_to;
};

// Throws tg::Error, before anything is allocated, when one value's range exceeds
// max_storage_buffer_range or max_memory_allocation_size, or all blocks together exceed heap_bytes.
BufferPlan plan_buffers(const Graph& graph, const PlanLimits& limits, const PlanOptions& options = {});

}  // namespace tg::vk
