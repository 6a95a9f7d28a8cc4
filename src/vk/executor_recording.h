#pragma once
// Internal: recording a planned program into one reusable command buffer, and what the recording
// owns (the device blocks, staging buffers, pipelines, descriptor sets, timestamp queries, index-check
// status words). tg::vk::Program (executor.cpp) replays it.
#include <array>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tensorgrad/vk/context.h"
#include "tensorgrad/vk/executor.h"
#include "vk/buffer.h"
#include "vk/commands.h"
#include "vk/compute.h"
#include "vk/kernels/kernels.h"
#include "vk/plan.h"

namespace tg::vk {

// The status word of an index check before any invocation has reported a bad element.
inline constexpr std::uint32_t k_no_bad_element = 0xFFFFFFFFu;

// A range of the host-visible staging buffers: which buffer, and where in it. Staging is packed in
// order into buffers of at most maxMemoryAllocationSize each, so inputs and outputs together may
// exceed one allocation.
struct Staged {
  std::uint32_t buffer = 0;
  std::uint64_t offset = 0;
};

struct RecordedCheck {
  NodeId node = kNoNode;
  IndexCheck index;
  std::uint64_t status_offset = 0;  // of its status word in the status buffer
  Staged readback;                  // of its status word in staging_out
};

// A query pool of timestamps; destroyed with the recording.
class TimestampPool {
 public:
  TimestampPool(std::shared_ptr<Context> context, std::uint32_t count);
  TimestampPool(const TimestampPool&) = delete;
  TimestampPool& operator=(const TimestampPool&) = delete;
  ~TimestampPool();
  VkQueryPool handle() const { return pool_; }
  std::uint32_t count() const { return count_; }

 private:
  std::shared_ptr<Context> context_;
  VkQueryPool pool_ = VK_NULL_HANDLE;
  std::uint32_t count_ = 0;
};

struct RecordedProgram {
  std::vector<Buffer> blocks;  // every value, in its plan block at its offset
  const Buffer& block(const ValueSlot& s) const { return blocks[s.block]; }
  Buffer status;  // one word per index check, at offsets aligned for binding
  std::vector<Buffer> staging_in, staging_out;
  std::vector<Staged> in_staged;   // per graph input (unused when resident)
  std::vector<Staged> out_staged;  // per graph output (unused when not read back)
  std::byte* staged(const std::vector<Buffer>& buffers, const Staged& at) const {
    return buffers[at.buffer].mapped() + at.offset;
  }
  std::vector<RecordedCheck> checks;
  std::vector<NodeId> dispatch_nodes;        // the node of each recorded dispatch, in order
  std::vector<std::string> dispatch_labels;  // each dispatch's KernelLaunch::label (empty: the op)
  std::map<std::string, std::shared_ptr<const ComputePipeline>> pipelines;  // shared with the Context
  std::unique_ptr<DescriptorPool> pool;
  std::unique_ptr<TimestampPool> timestamps;
  // Writebacks without copies: each (output, input) pair has two slots, and the two recordings swap
  // them. Replay `parity` reads the inputs from slots[parity] and writes the outputs into the other
  // slot of each pair; after a completed run the program flips parity, so the new values become the
  // inputs. A run that is not committed leaves parity alone: the params are as they were.
  // Without writebacks only recording 0 exists.
  std::array<std::vector<ValueSlot>, 2> slots;
  // Each recording is one command buffer per segment (RecordingRequest::early_readback_bytes; one
  // segment when it is 0), submitted together; segment s reads back the graph outputs listed in
  // segment_outputs[s] at its end, the last segment also the index-check status words.
  std::array<std::vector<std::unique_ptr<CommandBuffer>>, 2> commands;
  std::vector<std::vector<std::size_t>> segment_outputs;
};

struct RecordingRequest {
  const Graph& graph;
  const BufferPlan& plan;
  const std::vector<KernelLaunch>& launches;                   // one per node, in node order
  const std::vector<bool>& resident;                           // per graph input: not uploaded by the replay
  const std::vector<std::pair<ValueId, ValueId>>& writebacks;  // output value <-> input value
  const std::set<ValueId>& unread_outputs;                     // outputs not read back
  // Per node: computed once when the program is built, not on every run (nodes without inputs,
  // whose values the plan keeps for the whole program).
  const std::vector<bool>& constants;
  bool timestamps = false;
  std::uint32_t max_workgroups = 0;  // ProgramOptions::max_workgroups
  // ProgramOptions::early_readback_bytes: the replay is cut after the node where at least this many
  // bytes of read-back outputs have had their last write since the previous cut. 0: one segment.
  std::uint64_t early_readback_bytes = 0;
};

// Allocates what the program needs and records the command buffer. Fills stats' dispatch and
// barrier counts.
RecordedProgram record_program(const std::shared_ptr<Context>& ctx, const RecordingRequest& request,
                               ProgramStats& stats);

// After a replay with timestamps: each dispatch's start and end in microseconds since the first
// dispatch's start (2 per dispatch).
std::vector<double> read_timestamps(const RecordedProgram& recorded, Context& ctx);

}  // namespace tg::vk
