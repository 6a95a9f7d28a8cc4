// The record-once executor: plan, pipelines, descriptor sets, one command buffer, replay.
#include "tensorgrad/vk/executor.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "interp/parallel_copy.h"
#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/low_precision.h"
#include "tensorgrad/ir/ops/op_def.h"
#include "vk/buffer.h"
#include "vk/commands.h"
#include "vk/compute.h"
#include "vk/executor_recording.h"
#include "vk/kernels/kernels.h"
#include "vk/low_precision_lowering.h"
#include "vk/plan.h"
#include "vk/program_plan.h"

namespace tg::vk {

std::string_view to_string(MatmulPrecision precision) {
  switch (precision) {
    case MatmulPrecision::ieee:
      return "ieee";
    case MatmulPrecision::split:
      return "split";
    case MatmulPrecision::fast:
      return "fast";
  }
  return "unknown";
}

bool has_kernel(OpId op) {
  const auto slot = static_cast<std::size_t>(op);
  return slot < kOpIdSpace && kernel_plan_table()[slot] != nullptr;
}

namespace {

// A host tensor's elements as the device stores them (vk/plan.h, device_element_bytes): f32 and
// i32 storage copied as they are, bool bytes widened to 32-bit words, wide (f64) elements rounded
// to float or converted to int32; a 16-bit dtype as its 16-bit patterns, copied from f16 or bf16
// storage, or rounded once to the dtype from any other (an f64 element directly from the double, as
// the interpreters store it).
void write_words(const HostTensor& t, std::byte* dst) {
  const DType dtype = t.type.dtype;
  const bool low = is_low_precision(dtype);
  const bool as_is = low ? (dtype == DType::f16 && t.storage() == HostStorage::f16) ||
                               (dtype == DType::bf16 && t.storage() == HostStorage::bf16)
                         : t.storage() == HostStorage::f32 || t.storage() == HostStorage::i32;
  if (as_is) {
    // Not at all when the caller wrote the value into its staging range (Program::input_staging).
    if (t.raw_data() != dst) interp::parallel_copy(dst, t.raw_data(), (low ? 2 : 4) * t.size());
    return;
  }
  if (low) {
    for (std::size_t e = 0; e < t.size(); ++e) {
      const auto once = static_cast<float>(round_to_dtype(t.at_unchecked(e), dtype));
      const std::uint16_t bits = f32_to_low_precision_bits(once, dtype);
      std::memcpy(dst + 2 * e, &bits, 2);
    }
    return;
  }
  const bool real = is_float(dtype);
  for (std::size_t e = 0; e < t.size(); ++e) {
    const double v = t.at_unchecked(e);
    const std::uint32_t word = real ? std::bit_cast<std::uint32_t>(static_cast<float>(v))
                                    : static_cast<std::uint32_t>(static_cast<std::int32_t>(v));
    std::memcpy(dst + 4 * e, &word, 4);
  }
}

// Storage an output's readback may use again. A model-sized readback (a data-parallel step's
// gradients) in fresh memory pays a page fault per 4 KiB page every run: glibc maps each allocation
// past 32 MiB anew, and the faults ran at about 2.5 GB/s on an H200 host. So a run reads an output
// of at least kKeptOutputBytes into the allocation the last run's value of that output had, when no
// HostTensor holds it any more (the Program's reference is the only one left); otherwise, and for
// smaller outputs, into new memory that becomes the one kept.
constexpr std::size_t kKeptOutputBytes = std::size_t{1} << 20;

struct KeptOutput {
  std::shared_ptr<std::byte[]> bytes;
  std::size_t size = 0;
};

// Device words as a host tensor in its dtype's own storage (16-bit dtypes: their bit patterns),
// reusing `kept` (when given) as described above.
HostTensor read_words(const TensorType& type, const std::byte* src, KeptOutput* kept = nullptr) {
  const auto n = static_cast<std::size_t>(type.size());
  // f32 and i32 words and 16-bit patterns are adopted in storage that nothing zero-fills: the
  // parallel copy is the first touch of its pages, so a model-sized readback costs one parallel
  // pass instead of a serial fill and fault pass before it.
  const auto adopted = [&](HostStorage storage, std::size_t element_bytes) {
    const std::size_t bytes = std::max<std::size_t>(n * element_bytes, 1);
    std::shared_ptr<std::byte[]> owner;
    if (kept && kept->bytes && kept->size == bytes && kept->bytes.use_count() == 1) {
      owner = kept->bytes;
    } else {
      owner.reset(new std::byte[bytes]);
      if (kept && bytes >= kKeptOutputBytes) *kept = {owner, bytes};
    }
    interp::parallel_copy(owner.get(), src, n * element_bytes);
    const void* data = owner.get();
    return HostTensor::adopt(type, storage, std::move(owner), data);
  };
  if (type.dtype == DType::f16) return adopted(HostStorage::f16, 2);
  if (type.dtype == DType::bf16) return adopted(HostStorage::bf16, 2);
  if (type.dtype == DType::f32) return adopted(HostStorage::f32, 4);
  if (type.dtype == DType::i32) return adopted(HostStorage::i32, 4);
  std::vector<std::int32_t> words(n);
  if (n > 0) std::memcpy(words.data(), src, 4 * n);
  return HostTensor::boolean(type.shape, std::vector<bool>(words.begin(), words.end()));
}

}  // namespace

struct Program::Impl {
  std::shared_ptr<Context> ctx;
  Graph graph;
  ProgramOptions options;
  BufferPlan plan;
  ProgramStats stats;
  RecordedProgram recorded;
  std::vector<bool> resident;   // per graph input
  std::vector<bool> constants;  // per node: computed once at build (see the constructor)
  std::set<ValueId> writeback_sources;
  std::set<ValueId> unread_outputs;  // not read back by run(): writeback sources and device outputs
  std::map<std::string, ValueId, std::less<>> device_outputs;
  std::optional<std::size_t> last_run_parity;  // the recording the last completed run replayed
  std::vector<double> timestamps_us;           // per dispatch: start, end (relative to the first start)
  std::size_t parity = 0;                      // which recording (slot assignment) the next run replays
  bool uncommitted = false;                    // the last run deferred its writebacks
  std::vector<KeptOutput> kept_outputs;        // per graph output (read_words)

  Impl(std::shared_ptr<Context> context, const Graph& g, ProgramOptions opts)
      : ctx(std::move(context)), graph(prepare_low_precision(g, ctx->info())), options(std::move(opts)) {
    ProgramPlan planned = plan_program(graph, ctx->info(), options);
    plan = std::move(planned.plan);
    stats = planned.stats;
    resident = std::move(planned.resident);
    constants = std::move(planned.constants);
    writeback_sources = std::move(planned.writeback_sources);
    unread_outputs = std::move(planned.unread_outputs);
    device_outputs = std::move(planned.device_outputs);
    RecordingRequest request{graph,
                             plan,
                             planned.launches,
                             resident,
                             planned.writebacks,
                             unread_outputs,
                             constants,
                             options.timestamps,
                             options.max_workgroups,
                             options.early_readback_bytes};
    recorded = record_program(ctx, request, stats);
    kept_outputs.resize(graph.outputs().size());
  }

  bool is_resident(std::string_view name) const {
    for (std::size_t i = 0; i < graph.inputs().size(); ++i) {
      if (graph.inputs()[i].name == name) return resident[i];
    }
    return false;
  }

  const ValueSlot& slot(ValueId v) const { return recorded.slots[parity][static_cast<std::size_t>(v)]; }

  void write_input(std::string_view name, const HostTensor& value) {
    const auto id = graph.find_input(name);
    if (!id || !is_resident(name)) {
      throw RuntimeError("Vulkan program '" + graph.name() + "': '" + std::string(name) + "' is not a resident input");
    }
    TensorMap one;
    one.emplace(std::string(name), value);
    validate_inputs(graph, one, [](const GraphInput&) { return false; });
    if (value.size() == 0) return;
    std::vector<std::byte> bytes(device_value_bytes(value.type));
    write_words(value, bytes.data());
    upload(recorded.blocks[slot(*id).block], bytes, slot(*id).offset);
  }

  // Device-to-device copies of resident inputs from `source` (a program on the same context) into
  // this program's: one submission, no trip through the host.
  void copy_inputs_from(const Impl& source, const std::vector<std::string>& names) {
    if (source.ctx != ctx) {
      throw RuntimeError("Vulkan program '" + graph.name() + "': copy_inputs_from needs a program on the same context");
    }
    ctx->require_usable("copying inputs into graph '" + graph.name() + "'");
    CommandBuffer commands(ctx);
    commands.begin(/*one_time=*/true);
    VkCommandBuffer c = commands.handle();
    VkMemoryBarrier before{VK_STRUCTURE_TYPE_MEMORY_BARRIER, nullptr,
                           VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                           VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
    vkCmdPipelineBarrier(c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0, nullptr, 0, nullptr);
    for (const std::string& name : names) {
      const auto to = graph.find_input(name);
      const auto from = source.graph.find_input(name);
      if (!to || !is_resident(name) || !from || !source.is_resident(name)) {
        throw RuntimeError("Vulkan program '" + graph.name() + "': copy_inputs_from: '" + name +
                           "' is not a resident input of both programs");
      }
      if (!(graph.type(*to) == source.graph.type(*from))) {
        throw RuntimeError("Vulkan program '" + graph.name() + "': copy_inputs_from: '" + name + "' is " +
                           graph.type(*to).to_string() + " here and " + source.graph.type(*from).to_string() + " in '" +
                           source.graph.name() + "'");
      }
      const ValueSlot& dst = slot(*to);
      const ValueSlot& src = source.slot(*from);
      const VkDeviceSize bytes = device_value_bytes(graph.type(*to));
      if (bytes == 0) continue;
      const VkBufferCopy region{src.offset, dst.offset, bytes};
      vkCmdCopyBuffer(c, source.recorded.block(src).handle(), recorded.block(dst).handle(), 1, &region);
    }
    VkMemoryBarrier after{VK_STRUCTURE_TYPE_MEMORY_BARRIER, nullptr, VK_ACCESS_TRANSFER_WRITE_BIT,
                          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT};
    vkCmdPipelineBarrier(c, VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &after, 0,
                         nullptr, 0, nullptr);
    commands.end();
    submit_and_wait(ctx, c, "copying inputs into graph '" + graph.name() + "'");
  }

  std::span<std::byte> input_staging(std::string_view name) {
    const auto id = graph.find_input(name);
    if (!id || is_resident(name)) {
      throw RuntimeError("Vulkan program '" + graph.name() + "': '" + std::string(name) +
                         "' is not an input uploaded on each run");
    }
    const std::size_t i = static_cast<std::size_t>(graph.input_of_value(*id) - graph.inputs().data());
    const std::size_t bytes = graph.type(*id).size() > 0 ? device_value_bytes(graph.type(*id)) : 0;
    return {recorded.staged(recorded.staging_in, recorded.in_staged[i]), bytes};
  }

  HostTensor read_input(std::string_view name) const {
    const auto id = graph.find_input(name);
    if (!id || !is_resident(name)) {
      throw RuntimeError("Vulkan program '" + graph.name() + "': '" + std::string(name) + "' is not a resident input");
    }
    return download_value(*id, slot(*id));
  }

  // Value v's words at `s` (a range of the device buffer), downloaded now.
  HostTensor download_value(ValueId v, const ValueSlot& s) const {
    const TensorType& type = graph.type(v);
    std::vector<std::byte> bytes(type.size() > 0 ? device_value_bytes(type) : 0);
    if (!bytes.empty()) download(recorded.block(s), bytes, s.offset);
    return read_words(type, bytes.data());
  }

  HostTensor read_output(std::string_view name) const {
    const auto it = device_outputs.find(name);
    if (it == device_outputs.end()) {
      throw RuntimeError("Vulkan program '" + graph.name() + "': '" + std::string(name) +
                         "' is not a device output (ProgramOptions::device_outputs)");
    }
    if (!last_run_parity) {
      throw RuntimeError("Vulkan program '" + graph.name() + "': device output '" + std::string(name) +
                         "' read before a run completed");
    }
    return download_value(it->second, recorded.slots[*last_run_parity][static_cast<std::size_t>(it->second)]);
  }

  TensorMap run(const TensorMap& inputs, bool commit, const OutputSink& sink) {
    uncommitted = false;
    last_run_parity.reset();  // a run that throws leaves the device outputs undefined
    ctx->require_usable("running graph '" + graph.name() + "'");
    // `in` is an element of graph.inputs(): its index finds its flag without a name search per input.
    validate_inputs(graph, inputs, [&](const GraphInput& in) {
      return !resident[static_cast<std::size_t>(&in - graph.inputs().data())];
    });
    for (std::size_t i = 0; i < graph.inputs().size(); ++i) {
      const GraphInput& in = graph.inputs()[i];
      const auto it = inputs.find(in.name);
      if (it == inputs.end()) continue;
      if (resident[i]) {
        write_input(in.name, it->second);
      } else {
        write_words(it->second, recorded.staged(recorded.staging_in, recorded.in_staged[i]));
      }
    }
    TensorMap out;
    const auto read_output_now = [&](std::size_t i) {
      const GraphOutput& o = graph.outputs()[i];
      HostTensor value = read_words(graph.type(o.value), recorded.staged(recorded.staging_out, recorded.out_staged[i]),
                                    &kept_outputs[i]);
      if (sink) sink(o.name, value);
      out.insert_or_assign(o.name, std::move(value));
    };
    // Each segment's outputs are read (and handed to the sink) as soon as it completes.
    std::vector<VkCommandBuffer> segments;
    for (const auto& commands : recorded.commands[parity]) segments.push_back(commands->handle());
    submit_in_order(ctx, segments, "running graph '" + graph.name() + "'", [&](std::size_t segment) {
      for (const std::size_t i : recorded.segment_outputs[segment]) read_output_now(i);
    });
    if (options.timestamps) timestamps_us = read_timestamps(recorded, *ctx);
    check_indices();
    last_run_parity = parity;
    if (commit) {
      flip();
    } else {
      uncommitted = !writeback_sources.empty();
    }
    // Empty outputs have no readback in any segment.
    for (std::size_t i = 0; i < graph.outputs().size(); ++i) {
      const GraphOutput& o = graph.outputs()[i];
      if (!unread_outputs.contains(o.value) && graph.type(o.value).size() == 0) read_output_now(i);
    }
    return out;
  }

  void flip() {
    if (!writeback_sources.empty()) parity ^= 1;
  }

  void commit() {
    if (writeback_sources.empty()) return;  // nothing to accept
    if (!uncommitted)
      throw RuntimeError("Vulkan program '" + graph.name() + "': no run with deferred writebacks to commit");
    uncommitted = false;
    flip();
  }

  // The interpreter's message for the first out-of-range element of the first failed check.
  void check_indices() const {
    for (const RecordedCheck& check : recorded.checks) {
      std::uint32_t first_bad;
      std::memcpy(&first_bad, recorded.staged(recorded.staging_out, check.readback), 4);
      if (first_bad == k_no_bad_element) continue;
      std::array<std::byte, 4> word{};
      const ValueSlot& input = slot(check.index.input);
      download(recorded.block(input), word, input.offset + 4ull * first_bad);
      std::uint32_t raw;
      std::memcpy(&raw, word.data(), 4);
      const Node& node = graph.node(check.node);
      throw RuntimeError(std::string(op_name(node.op)) + ": " + check.index.what + " " +
                         std::to_string(static_cast<std::int32_t>(raw)) + " is out of range [0, " +
                         std::to_string(check.index.extent) + ") at element " + std::to_string(first_bad) + " (node %" +
                         std::to_string(check.node) + " " + std::string(op_name(node.op)) + ", created at " +
                         node.loc.to_string() + ")");
    }
  }

  std::vector<DispatchTiming> timings() const {
    std::vector<DispatchTiming> out;
    if (timestamps_us.empty()) return out;
    for (std::size_t d = 0; d < recorded.dispatch_nodes.size(); ++d) {
      const NodeId n = recorded.dispatch_nodes[d];
      const std::string& label = recorded.dispatch_labels[d];
      out.push_back({n, label.empty() ? std::string(op_name(graph.node(n).op)) : label,
                     timestamps_us[2 * d + 1] - timestamps_us[2 * d]});
    }
    return out;
  }

  double span() const {
    if (timestamps_us.empty()) return 0.0;
    return *std::max_element(timestamps_us.begin(), timestamps_us.end());
  }

  std::vector<std::string> check_guards() const {
    std::vector<std::string> problems;
    if (plan.guard_bytes == 0) return problems;
    std::vector<std::vector<std::uint32_t>> words;
    for (const Buffer& block : recorded.blocks) {
      words.emplace_back(block.size() / 4);
      download(block, std::as_writable_bytes(std::span(words.back())));
    }
    // The byte offset of the first word of s's guard that lost its sentinel, if any.
    const auto overwritten = [&](const ValueSlot& s) -> std::optional<std::uint64_t> {
      for (std::uint64_t b = s.guard_offset; b < s.guard_offset + s.guard_bytes; b += 4) {
        if (words[s.block][b / 4] != k_guard_word) return b - s.guard_offset;
      }
      return std::nullopt;
    };
    for (std::size_t v = 0; v < plan.slots.size(); ++v) {
      if (const auto at = overwritten(plan.slots[v])) {
        const NodeId producer = graph.value(static_cast<ValueId>(v)).producer;
        problems.push_back(
            "guard after value %" + std::to_string(v) + " (" + graph.type(static_cast<ValueId>(v)).to_string() +
            (producer == kNoNode ? std::string(", a graph input")
                                 : ", written by '" + std::string(op_name(graph.node(producer).op)) + "'") +
            ") overwritten at byte " + std::to_string(*at));
      }
    }
    for (std::size_t n = 0; n < plan.scratch.size(); ++n) {
      if (const auto at = overwritten(plan.scratch[n])) {
        problems.push_back("guard after the scratch of node %" + std::to_string(n) + " ('" +
                           std::string(op_name(graph.node(static_cast<NodeId>(n)).op)) + "') overwritten at byte " +
                           std::to_string(*at));
      }
    }
    return problems;
  }
};

Program::Program(std::shared_ptr<Context> context, const Graph& graph, ProgramOptions options)
    : impl_(std::make_unique<Impl>(std::move(context), graph, std::move(options))) {}
Program::Program(Program&&) noexcept = default;
Program& Program::operator=(Program&&) noexcept = default;
Program::~Program() = default;

TensorMap Program::run(const TensorMap& inputs, bool commit_writebacks, const OutputSink& sink) {
  return impl_->run(inputs, commit_writebacks, sink);
}
void Program::commit() { impl_->commit(); }
void Program::write_input(std::string_view name, const HostTensor& value) { impl_->write_input(name, value); }
HostTensor Program::read_input(std::string_view name) const { return impl_->read_input(name); }
void Program::copy_inputs_from(const Program& source, const std::vector<std::string>& names) {
  impl_->copy_inputs_from(*source.impl_, names);
}
HostTensor Program::read_output(std::string_view name) const { return impl_->read_output(name); }
std::span<std::byte> Program::input_staging(std::string_view name) { return impl_->input_staging(name); }
bool Program::is_resident(std::string_view name) const { return impl_->is_resident(name); }
std::vector<std::string> Program::check_guards() const { return impl_->check_guards(); }
std::vector<DispatchTiming> Program::timings() const { return impl_->timings(); }
double Program::dispatch_span_microseconds() const { return impl_->span(); }
const ProgramStats& Program::stats() const { return impl_->stats; }
const Graph& Program::graph() const { return impl_->graph; }

}  // namespace tg::vk
