// Data-parallel training (TrainingSpec::communicator). Each rank's step runs two sessions:
//  - the grad session: the forward and backward of this rank's shard (with its micro-batches), on
//    copies of the params and state, producing the loss, the gradients and the loss scaler's flag;
//  - the update session (CompiledStep::session, which holds the params and optimizer state as in a
//    single process): the optimizer, fed the sums of every rank's outputs.
// Between them the ranks agree, by small all_gathers, on whether every rank's part went well, so
// either every rank applies the update or none does, and the sums are taken in rank order by
// Communicator::sum_in_rank_order, so every rank feeds the same bits to the same update graph.
// docs/training.md, "Data parallel", describes the protocol from the user's side.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "interp/parallel_copy.h"
#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/api.h"
#include "tensorgrad/passes/loss_scaling.h"
#include "training_impl.h"

namespace tg::detail {

namespace {

constexpr std::string_view kReducedPrefix = "optim.reduced.";

std::string reduced_input(const std::string& output) { return std::string(kReducedPrefix) + output; }

// The outputs of the grad graph that are reduced (all but captures), in the graph's order.
std::vector<std::string> reduced_outputs(const Graph& with_grads) {
  std::vector<std::string> out;
  for (const GraphOutput& o : with_grads.outputs()) {
    if (!o.name.starts_with(kCapturePrefix)) out.push_back(o.name);
  }
  return out;
}

// ---- bytes on the wire -------------------------------------------------------------------------

void append_bytes(std::vector<std::byte>& out, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const std::byte*>(data);
  out.insert(out.end(), p, p + bytes);
}

template <class T>
void append_value(std::vector<std::byte>& out, T value) {
  append_bytes(out, &value, sizeof(T));
}

class Reader {
 public:
  explicit Reader(const std::vector<std::byte>& bytes) : bytes_(bytes) {}
  void read(void* to, std::size_t n) {
    if (at_ + n > bytes_.size()) throw CommunicatorError("data parallel: a message from rank 0 is truncated");
    std::memcpy(to, bytes_.data() + at_, n);
    at_ += n;
  }
  template <class T>
  T value() {
    T v;
    read(&v, sizeof(T));
    return v;
  }

 private:
  const std::vector<std::byte>& bytes_;
  std::size_t at_ = 0;
};

// A rank's verdict on its part of a step: nothing (fine) or its failure.
std::vector<std::byte> encode(const std::optional<RunFailure>& failure, bool changed = false) {
  std::vector<std::byte> out;
  append_value<std::uint8_t>(out, failure ? 1 : 0);
  append_value<std::uint8_t>(out, changed ? 1 : 0);
  if (failure) {
    append_bytes(out, failure->kind.data(), failure->kind.size());
    append_value<char>(out, '\0');
    append_bytes(out, failure->message.data(), failure->message.size());
  }
  return out;
}

struct Verdict {
  std::optional<RunFailure> failure;
  bool changed = false;
};

Verdict decode(const std::vector<std::byte>& bytes) {
  Verdict v;
  if (bytes.size() < 2) throw CommunicatorError("data parallel: a malformed status message");
  v.changed = bytes[1] != std::byte{0};
  if (bytes[0] == std::byte{0}) return v;
  std::string text(reinterpret_cast<const char*>(bytes.data()) + 2, bytes.size() - 2);
  const std::size_t split = text.find('\0');
  v.failure = RunFailure{text.substr(0, split), split == std::string::npos ? "" : text.substr(split + 1)};
  return v;
}

// Every rank's verdicts. When any rank failed: the failure every rank reports, naming the ranks.
std::optional<RunFailure> agree(const std::vector<Verdict>& verdicts, std::int64_t number, const std::string& part,
                                const std::string& outcome = "no rank updated its params") {
  std::optional<RunFailure> first;
  std::string others;
  for (std::size_t r = 0; r < verdicts.size(); ++r) {
    if (!verdicts[r].failure) continue;
    if (!first) {
      first = RunFailure{verdicts[r].failure->kind, "step " + std::to_string(number) + ": rank " + std::to_string(r) +
                                                        " of " + std::to_string(verdicts.size()) + " failed its " +
                                                        part + " (" + verdicts[r].failure->kind +
                                                        "): " + verdicts[r].failure->message};
    } else {
      others += (others.empty() ? "" : ", ") + std::to_string(r);
    }
  }
  if (first) {
    if (!others.empty()) first->message += "; ranks " + others + " failed too";
    first->message += "; " + outcome;
  }
  return first;
}

std::vector<Verdict> gather_verdicts(Communicator& comm, const std::optional<RunFailure>& mine, bool changed = false) {
  std::vector<Verdict> out;
  for (const std::vector<std::byte>& bytes : comm.all_gather(encode(mine, changed))) out.push_back(decode(bytes));
  return out;
}

// ---- params and state --------------------------------------------------------------------------

// What the update session holds that must be the same on every rank, in a fixed order.
std::vector<std::string> held_names(const CompiledStep& c) {
  std::vector<std::string> names = c.param_names;
  names.insert(names.end(), c.state_inputs.begin(), c.state_inputs.end());
  for (const auto& [param, input] : c.grad_inputs) names.push_back(input);
  return names;
}

HostTensor tensor_from_floats(const TensorType& type, std::vector<float> values) {
  if (type.dtype == DType::f32) return HostTensor::f32(type.shape, std::move(values));
  return HostTensor::of(type, std::vector<double>(values.begin(), values.end()));
}

// Rank 0's params, optimizer state, last gradients and counters, set on every rank.
void broadcast_from_rank0(TrainingCore& core) {
  Communicator& comm = *core.spec.communicator;
  CompiledStep& c = core.compiled;
  const std::vector<std::string> names = held_names(c);
  std::vector<std::byte> bytes;
  if (comm.rank() == 0) {
    append_value<std::int64_t>(bytes, core.steps);
    append_value<std::uint64_t>(bytes, core.seed);
    append_value<std::uint8_t>(bytes, core.last_step_skipped ? 1 : 0);
    append_value<std::uint8_t>(bytes, core.has_grads ? 1 : 0);
    for (const std::string& name : names) {
      const std::vector<float> values = c.session->param(name).to_f32();
      append_bytes(bytes, values.data(), values.size() * sizeof(float));
    }
  }
  comm.broadcast(bytes, 0);
  if (comm.rank() == 0) return;
  Reader in(bytes);
  const auto steps = in.value<std::int64_t>();
  const auto seed = in.value<std::uint64_t>();
  const bool skipped = in.value<std::uint8_t>() != 0;
  const bool grads = in.value<std::uint8_t>() != 0;
  for (const std::string& name : names) {
    const TensorType& type = c.session->graph().type(*c.session->graph().find_input(name));
    std::vector<float> values(static_cast<std::size_t>(type.size()));
    in.read(values.data(), values.size() * sizeof(float));
    c.session->set_param(name, tensor_from_floats(type, std::move(values)));
  }
  core.steps = steps;
  core.seed = seed;
  core.last_step_skipped = skipped;
  core.has_grads = grads;
  ++core.params_version;
}

// Copies the params and state the grad session reads from the update session, when they changed.
void sync_grad_session(TrainingCore& core) {
  CompiledStep& c = core.compiled;
  const std::pair key{core.params_version, core.local_changes};
  if (c.grad_synced == key) return;
  std::vector<std::string> names;
  for (const GraphInput& in : c.grad_session->graph().inputs()) {
    if (in.kind != InputKind::data) names.push_back(in.name);
  }
  c.grad_session->copy_params_from(*c.session, names);  // on the device where both are Vulkan
  c.grad_synced = key;
}

// A 64-bit checksum of what held_names lists, word by word (a multiply-xorshift mix: cheap enough
// for hundreds of MB, and any changed bit changes it with overwhelming probability).
std::uint64_t checksum(const CompiledStep& c) {
  std::uint64_t h = 0x243F6A8885A308D3ULL;
  for (const std::string& name : held_names(c)) {
    const std::vector<float> values = c.session->param(name).to_f32();
    for (std::size_t i = 0; i < values.size(); i += 2) {
      std::uint64_t word = 0;
      std::memcpy(&word, values.data() + i, (i + 1 < values.size() ? 2 : 1) * sizeof(float));
      h = (h ^ word) * 0x9E3779B97F4A7C15ULL;
      h ^= h >> 29;
    }
    h = (h ^ values.size()) * 0xBF58476D1CE4E5B9ULL;
  }
  return h;
}

std::string hex(std::uint64_t v) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) out[static_cast<std::size_t>(i)] = digits[v & 15];
  return out;
}

}  // namespace

Graph reduced_update_graph(const Graph& with_grads, int ranks) {
  GraphBuilder builder(with_grads.name());
  TracingScope scope(builder);
  for (const GraphInput& in : with_grads.inputs()) {
    if (in.kind != InputKind::data) builder.input(in.name, with_grads.type(in.value), in.kind);
  }
  for (const std::string& name : reduced_outputs(with_grads)) {
    const TensorType& type = with_grads.type(*with_grads.find_output(name));
    const Tensor sum = builder.input(reduced_input(name), {DType::f32, type.shape});
    Tensor value;
    if (name == kGradsFiniteOutput) {
      value = cast(equal(sum, static_cast<double>(ranks)), DType::f32);
    } else if (name == "loss" || name.starts_with("grad.")) {
      // The same division accumulate_micro_batches makes, so one micro-batch per rank gives the
      // bits of one process with a micro-batch per rank (the sums are in the same order).
      value = sum / static_cast<double>(ranks);
    } else {
      throw Error("compile: internal error: data parallel does not know how to reduce output '" + name + "'");
    }
    if (type.dtype != DType::f32) value = cast(value, type.dtype);
    builder.output(name, value);
  }
  return builder.take();
}

void prepare_data_parallel(ErasedTrainingSpec& spec) {
  if (!spec.communicator) return;
  if (spec.backend == Backend::interp_f64) {
    throw CompileError(
        "compile: data parallel (communicator) runs on interp_f32 and vulkan; interp_f64 computes in double, which "
        "the f32 reduction of the gradients would round");
  }
  if (spec.params_check_interval < 0) {
    throw CompileError("compile: params_check_interval is " + std::to_string(spec.params_check_interval) +
                       "; it must be >= 0 (0: never compare the ranks' params)");
  }
  Communicator& comm = *spec.communicator;
  // Every rank must compile the same training: compare what shapes the step graphs.
  std::string shape_of_spec = "micro_batches " + std::to_string(spec.micro_batches) + "; inputs";
  for (const auto& [name, input] : spec.inputs) {
    shape_of_spec += " " + name + TensorType{input.dtype, input.shape}.to_string();
  }
  shape_of_spec += "; params";
  // No model: compile_step refuses it once the ranks have agreed.
  if (spec.model != nullptr) {
    for (const ParamInfo& p : spec.model->params()) shape_of_spec += " " + p.name + shape_to_string(p.shape);
  }
  std::vector<std::byte> mine;
  append_value<std::uint64_t>(mine, spec.seed.value_or(random_seed()));
  append_bytes(mine, shape_of_spec.data(), shape_of_spec.size());
  const std::vector<std::vector<std::byte>> all = comm.all_gather(mine);
  for (std::size_t r = 1; r < all.size(); ++r) {
    if (all[r].size() == all[0].size() && std::equal(all[r].begin() + 8, all[r].end(), all[0].begin() + 8)) continue;
    const auto text = [&](std::size_t rank) {
      return std::string(reinterpret_cast<const char*>(all[rank].data()) + 8, all[rank].size() - 8);
    };
    throw CompileError("compile: data parallel needs the same training on every rank, but rank " + std::to_string(r) +
                       " compiles {" + text(r) + "} and rank 0 {" + text(0) + "} (" + comm.describe() + ")");
  }
  std::uint64_t seed = 0;
  std::memcpy(&seed, all[0].data(), sizeof(seed));
  spec.seed = seed;  // rank 0's, so every rank inits the same params and draws the same streams
}

RunResult data_parallel_step(TrainingCore& core, std::optional<RunFailure> early, TensorMap grad_feed,
                             TensorMap update_feed, std::int64_t number) {
  Communicator& comm = *core.spec.communicator;
  CompiledStep& c = core.compiled;
  try {
    // 1. Whether every rank can run the step, and whether any changed its params or state by a
    //    call of its own since the last broadcast (then rank 0's are sent to all).
    const std::vector<Verdict> before = gather_verdicts(comm, early, core.local_changes != core.broadcast_changes);
    if (auto failed = agree(before, number, "checks")) return RunResult::failed(*failed);
    if (std::any_of(before.begin(), before.end(), [](const Verdict& v) { return v.changed; })) {
      broadcast_from_rank0(core);
      core.broadcast_changes = core.local_changes;
    }
    // 2. This rank's forward and backward, and the sums over the ranks (rank order, bucket by
    //    bucket) of what it hands over, taken while the rest of the backward runs. Every rank
    //    takes part in every bucket's sum whatever becomes of its run, so the collectives stay in
    //    step; the verdicts after it decide whether the sums are used.
    sync_grad_session(core);
    if (!c.reduce_layout) {
      c.reduce_layout = ReduceLayout::of(c.grad_session->graph(), reduced_outputs(c.grad_session->graph()),
                                         core.spec.reduce_bucket_bytes);
      for (const auto& [name, slot] : c.reduce_layout->slots) {
        const std::span<std::byte> staged = c.session->input_staging(reduced_input(name));
        c.reduce_staging[name] = staged.size() == slot.size * sizeof(float) ? staged : std::span<std::byte>{};
      }
    }
    // Each bucket's sums go on into the update's staging memory as soon as they are taken (on
    // Vulkan, while the backward still runs), so the update's run copies nothing on the host.
    const auto to_staging = [&](std::size_t bucket) {
      for (const auto& [name, slot] : c.reduce_layout->slots) {
        const std::span<std::byte> to = c.reduce_staging.at(name);
        if (slot.bucket != bucket || to.empty()) continue;
        interp::parallel_copy(to.data(), c.reduce_buffer.data() + slot.offset, to.size());
      }
    };
    BucketedReduction reduction(*c.reduce_layout, c.reduce_buffer, comm, to_staging);
    std::exception_ptr transport_failure;
    const RunResult grads = c.grad_session->run(grad_feed, [&](const std::string& name, const HostTensor& value) {
      try {
        reduction.deliver(name, value);
      } catch (...) {
        transport_failure = std::current_exception();
        throw;
      }
    });
    if (transport_failure) std::rethrow_exception(transport_failure);
    reduction.finish();
    std::optional<RunFailure> mine;
    if (!grads.ok()) {
      mine = grads.failure();
    } else if (const double loss = grads.output("loss").at(0); !std::isfinite(loss)) {
      mine = RunFailure{"nonfinite", "the loss is " + std::to_string(loss)};
    }
    if (auto failed = agree(gather_verdicts(comm, mine), number, "forward and backward")) {
      return RunResult::failed(*failed);
    }
    // 3. The sums, read by the update as views of its staging memory (already in place) or of the
    //    reduction buffer.
    for (const auto& [name, slot] : c.reduce_layout->slots) {
      const std::string input = reduced_input(name);
      const TensorType& type = c.session->graph().type(*c.session->graph().find_input(input));
      const std::span<std::byte> staged = c.reduce_staging.at(name);
      const float* sums =
          staged.empty() ? c.reduce_buffer.data() + slot.offset : reinterpret_cast<const float*>(staged.data());
      update_feed.insert_or_assign(input, HostTensor::view(type.shape, std::span<const float>(sums, slot.size)));
    }
    // 4. The same update everywhere. It fails alike on every rank (a sum that overflowed) or on
    //    one alone (a lost device): then the ranks differ, and the next step starts from rank 0's.
    RunResult update = c.session->run(update_feed);
    const std::vector<Verdict> after =
        gather_verdicts(comm, update.ok() ? std::nullopt : std::optional(update.failure()));
    const auto failures =
        std::count_if(after.begin(), after.end(), [](const Verdict& v) { return v.failure.has_value(); });
    if (failures > 0 && failures < static_cast<std::ptrdiff_t>(after.size())) {
      ++core.local_changes;
      ++core.params_version;
      const auto failed = agree(after, number, "update",
                                "the other ranks applied it, so the next step starts from rank 0's params and state");
      return RunResult::failed({"diverged", failed->message});
    }
    if (failures > 0) return RunResult::failed(*agree(after, number, "update"));
    TensorMap outputs = update.outputs();
    for (const auto& [name, value] : grads.outputs()) {
      if (name.starts_with(kCapturePrefix)) outputs.emplace(name, value);
    }
    return RunResult::completed(std::move(outputs));
  } catch (const std::exception& e) {
    return RunResult::failed(
        {"distributed", "step " + std::to_string(number) + " on " + comm.describe() + ": " + e.what()});
  }
}

std::optional<RunFailure> check_ranks_agree(TrainingCore& core) {
  if (!core.spec.communicator || core.spec.params_check_interval == 0) return std::nullopt;
  if (++core.steps_since_params_check < core.spec.params_check_interval) return std::nullopt;
  core.steps_since_params_check = 0;
  Communicator& comm = *core.spec.communicator;
  try {
    std::vector<std::byte> mine;
    append_value<std::uint64_t>(mine, checksum(core.compiled));
    const std::vector<std::vector<std::byte>> all = comm.all_gather(mine);
    std::string listed;
    bool differ = false;
    for (std::size_t r = 0; r < all.size(); ++r) {
      std::uint64_t h = 0;
      if (all[r].size() == sizeof(h)) std::memcpy(&h, all[r].data(), sizeof(h));
      listed += (r == 0 ? "" : ", ") + std::string("rank ") + std::to_string(r) + " " + hex(h);
      differ = differ || all[r] != all[0];
    }
    if (!differ) return std::nullopt;
    ++core.local_changes;  // the next step starts from rank 0's
    return RunFailure{"diverged", "after step " + std::to_string(core.steps) +
                                      ": the ranks' params and optimizer state differ (checksums " + listed +
                                      "); the step was applied, and the next one starts from rank 0's"};
  } catch (const std::exception& e) {
    return RunFailure{"distributed", "comparing params on " + comm.describe() + ": " + e.what()};
  }
}

}  // namespace tg::detail
