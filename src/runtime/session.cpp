// tg::Session: the interpreter backends keep params on the host and apply writebacks there; the
// Vulkan backend keeps them on the device (vk::Program with resident params and writebacks).
// Every public call that touches params, the program or the options' mutable state holds the
// session's mutex, so calls from several threads are serialised (docs/runtime.md, "Threads").
#include "tensorgrad/runtime/session.h"

#include <tbb/task_arena.h>

#include <cmath>
#include <cstdio>
#include <mutex>
#include <set>

#include "shape_mismatch.h"
#include "tensorgrad/interp/interpreter.h"
#include "tensorgrad/ir/error.h"
#include "tensorgrad/vk/error.h"

namespace tg {

std::string_view backend_name(Backend backend) {
  switch (backend) {
    case Backend::interp_f32:
      return "interp_f32";
    case Backend::interp_f64:
      return "interp_f64";
    case Backend::vulkan:
      return "vulkan";
  }
  return "unknown";
}

const TensorMap& RunResult::outputs() const {
  if (const auto* failure = std::get_if<RunFailure>(&state_)) {
    throw RuntimeError("the run failed (" + failure->kind + "): " + failure->message);
  }
  return std::get<TensorMap>(state_);
}

const HostTensor& RunResult::output(std::string_view name) const {
  const TensorMap& out = outputs();
  const auto it = out.find(name);
  if (it == out.end()) throw RuntimeError("the run has no output named '" + std::string(name) + "'");
  return it->second;
}

const RunFailure& RunResult::failure() const {
  if (ok()) throw RuntimeError("the run completed; it has no failure");
  return std::get<RunFailure>(state_);
}

struct Session::Impl {
  // Held by every public call but graph() and backend(), which read what never changes after
  // construction. Impl's members call each other without it (it is not recursive).
  mutable std::mutex mutex;
  Graph graph;
  SessionOptions options;
  std::optional<vk::Program> program;  // Backend::vulkan
  TensorMap params;                    // interpreter backends: the current params and state
  std::set<std::string, std::less<>> set_params;
  // Interpreter runs execute in it when options.interp_threads > 0: a limit of this session's own,
  // where a tbb::global_control would change every session of the process.
  std::unique_ptr<tbb::task_arena> arena;

  Impl(const Graph& g, SessionOptions opts) : graph(g), options(std::move(opts)) {
    if (options.interp_threads < 0) {
      throw CompileError("SessionOptions::interp_threads is " + std::to_string(options.interp_threads) +
                         " for graph '" + graph.name() + "'; it must be >= 0 (0: TBB's default thread count)");
    }
    if (options.interp_threads > 0 && options.backend != Backend::vulkan) {
      arena = std::make_unique<tbb::task_arena>(options.interp_threads);
    }
    if (options.backend == Backend::vulkan) {
      if (!options.vk_context) options.vk_context = vk::Context::create();
      program.emplace(options.vk_context, graph,
                      vk::ProgramOptions{.guard_bytes = options.vk_guard_bytes,
                                         .timestamps = options.vk_timestamps,
                                         .resident_params = true,
                                         .writebacks = options.writebacks,
                                         .matmul_precision = options.matmul_precision,
                                         .early_readback_bytes = options.vk_early_readback_bytes});
      check_commit_output();
      return;
    }
    // The interpreter backends check writebacks as the Vulkan program does.
    std::set<std::string> targets;
    for (const Writeback& w : options.writebacks) {
      const auto out = graph.find_output(w.output);
      const auto in_value = graph.find_input(w.input);
      const GraphInput* in = in_value ? graph.input_of_value(*in_value) : nullptr;
      const std::string what = "writeback '" + w.output + "' -> '" + w.input + "' of graph '" + graph.name() + "': ";
      if (!out) throw CompileError(what + "no output named '" + w.output + "'");
      if (!in) throw CompileError(what + "no input named '" + w.input + "'");
      if (in->kind == InputKind::data) throw CompileError(what + "the input is not resident (a param or state)");
      if (!(graph.type(*out) == graph.type(in->value))) {
        throw CompileError(what + "the output is " + graph.type(*out).to_string() + " but the input is " +
                           graph.type(in->value).to_string());
      }
      if (!targets.insert(w.input).second) {
        throw CompileError(what + "the input is the target of another writeback");
      }
    }
    check_commit_output();
  }

  void check_commit_output() const {
    if (options.commit_if_finite.empty()) return;
    const auto out = graph.find_output(options.commit_if_finite);
    if (!out || !is_float(graph.type(*out).dtype)) {
      throw CompileError("commit_if_finite names '" + options.commit_if_finite +
                         "', which is not a float output of graph '" + graph.name() + "'");
    }
  }

  // The name of the first non-finite element of the commit output, or nothing.
  std::optional<std::string> non_finite(const TensorMap& outputs) const {
    if (options.commit_if_finite.empty()) return std::nullopt;
    const HostTensor& t = outputs.at(options.commit_if_finite);
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (!std::isfinite(t.at(i))) {
        return "output '" + options.commit_if_finite + "' is " + std::to_string(t.at(i)) +
               (t.size() > 1 ? " at element " + std::to_string(i) : std::string()) +
               ": the run's updates were discarded, params and state are as they were before it";
      }
    }
    return std::nullopt;
  }

  const GraphInput& resident_input(std::string_view name) const {
    for (const GraphInput& in : graph.inputs()) {
      if (in.name != name) continue;
      if (in.kind == InputKind::data) {
        throw RuntimeError("'" + std::string(name) + "' of graph '" + graph.name() +
                           "' is a data input: pass it to run(), not set_param()");
      }
      return in;
    }
    throw RuntimeError("graph '" + graph.name() + "' has no param or state named '" + std::string(name) + "'");
  }

  // Refuses a NaN or Inf in a float param or state value unless the options allow it.
  void check_finite(const GraphInput& in, const HostTensor& value) const {
    if (options.allow_nonfinite_params || !is_float(value.type.dtype)) return;
    for (std::size_t i = 0; i < value.size(); ++i) {
      if (std::isfinite(value.at(i))) continue;
      throw RuntimeError(std::string(input_kind_name(in.kind)) + " '" + in.name + "' of graph '" + graph.name() +
                         "' holds " +
                         std::string(std::isnan(value.at(i)) ? "NaN"
                                     : value.at(i) > 0       ? "+Inf"
                                                             : "-Inf") +
                         " at element " + std::to_string(i) +
                         " (every later run would compute from it; SessionOptions::allow_nonfinite_params accepts "
                         "it)");
    }
  }

  void set_param(std::string_view name, const HostTensor& value) {
    const GraphInput& in = resident_input(name);
    if (const TensorType& expected = graph.type(in.value); !(value.type == expected)) {
      throw RuntimeError(std::string(input_kind_name(in.kind)) + " '" + in.name + "' of graph '" + graph.name() +
                         "': " + detail::type_mismatch(expected, value.type) + "; nothing was written");
    }
    TensorMap one;
    one.emplace(in.name, value);
    validate_inputs(graph, one, [](const GraphInput&) { return false; });
    check_finite(in, value);
    if (program) {
      program->write_input(in.name, value);
    } else {
      params[in.name] = value;
    }
    set_params.insert(in.name);
  }

  HostTensor param(std::string_view name) const {
    const GraphInput& in = resident_input(name);
    if (!set_params.contains(in.name)) {
      throw RuntimeError("param '" + in.name + "' of graph '" + graph.name() + "' has not been set");
    }
    return program ? program->read_input(in.name) : params.find(in.name)->second;
  }

  std::vector<std::string> unset_params() const {
    std::vector<std::string> out;
    for (const GraphInput& in : graph.inputs()) {
      if (in.kind != InputKind::data && !set_params.contains(in.name)) out.push_back(in.name);
    }
    return out;
  }

  TensorMap run_checked(const TensorMap& data) {
    // Everything is checked before any param passed with the data is set, so a refused run leaves
    // params and state as they were.
    for (const GraphInput& in : graph.inputs()) {
      if (in.kind != InputKind::data && !set_params.contains(in.name) && !data.contains(in.name)) {
        throw RuntimeError("missing " + std::string(input_kind_name(in.kind)) + " '" + in.name + "' (" +
                           graph.type(in.value).to_string() + "): set it with set_param() before running");
      }
    }
    for (const auto& [name, value] : data) {
      const auto id = graph.find_input(name);
      const GraphInput* in = id ? graph.input_of_value(*id) : nullptr;
      if (in && in->kind != InputKind::data && !(value.type == graph.type(in->value))) {
        throw RuntimeError(std::string(input_kind_name(in->kind)) + " '" + in->name + "' of graph '" + graph.name() +
                           "': " + detail::type_mismatch(graph.type(in->value), value.type));
      }
    }
    validate_inputs(graph, data, [](const GraphInput& in) { return in.kind == InputKind::data; });
    for (const auto& [name, value] : data) {
      const auto id = graph.find_input(name);
      const GraphInput* in = id ? graph.input_of_value(*id) : nullptr;
      if (in && in->kind != InputKind::data) check_finite(*in, value);
    }
    // Params passed with the data are set (and stay set).
    for (const auto& [name, value] : data) {
      const auto id = graph.find_input(name);
      if (id && graph.input_of_value(*id)->kind != InputKind::data) set_param(name, value);
    }
    return {};
  }

  RunResult run(const TensorMap& data, const OutputSink& sink) {
    try {
      run_checked(data);
    } catch (const Error& e) {
      return RunResult::failed({"input", e.what()});
    }
    try {
      if (program) {
        TensorMap outputs = program->run(data, /*commit_writebacks=*/false, sink);
        if (auto why = non_finite(outputs)) return RunResult::failed({"nonfinite", *why});
        program->commit();
        return RunResult::completed(std::move(outputs));
      }
      TensorMap all = params;
      for (const auto& [name, value] : data) all[name] = value;
      const ComputeType compute = options.backend == Backend::interp_f64 ? ComputeType::f64 : ComputeType::f32;
      const auto run_interpreter = [&] {
        return interpret(graph, all, {.compute = compute, .schedule = options.interp_schedule}).outputs;
      };
      TensorMap outputs = arena ? arena->execute(run_interpreter) : run_interpreter();
      if (sink) {
        for (const GraphOutput& o : graph.outputs()) {
          if (const auto it = outputs.find(o.name); it != outputs.end()) sink(o.name, it->second);
        }
      }
      if (auto why = non_finite(outputs)) return RunResult::failed({"nonfinite", *why});
      for (const Writeback& w : options.writebacks) {
        auto node = outputs.extract(w.output);
        params[w.input] = std::move(node.mapped());
      }
      return RunResult::completed(std::move(outputs));
    } catch (const vk::DeviceError& e) {
      return RunResult::failed({"device", e.what()});
    } catch (const Error& e) {
      return RunResult::failed({"runtime", e.what()});
    } catch (const std::bad_alloc&) {
      return RunResult::failed({"memory", "out of host memory running graph '" + graph.name() + "'"});
    } catch (const std::exception& e) {
      return RunResult::failed({"internal", e.what()});
    }
  }
};

Session::Session(const Graph& graph, SessionOptions options)
    : impl_(std::make_unique<Impl>(graph, std::move(options))) {}
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;
Session::~Session() = default;

void Session::copy_params_from(const Session& source, const std::vector<std::string>& names) {
  if (&source == this) return;
  const std::scoped_lock lock(impl_->mutex, source.impl_->mutex);
  Impl& to = *impl_;
  const Impl& from = *source.impl_;
  const bool device_copy = to.program && from.program && to.options.vk_context == from.options.vk_context;
  if (!device_copy) {
    for (const std::string& name : names) to.set_param(name, from.param(name));
    return;
  }
  for (const std::string& name : names) {
    (void)to.resident_input(name);  // throws for a name that is no param or state input here
    if (!from.set_params.contains(from.resident_input(name).name)) {
      throw RuntimeError("param '" + name + "' of graph '" + from.graph.name() + "' has not been set");
    }
  }
  to.program->copy_inputs_from(*from.program, names);
  for (const std::string& name : names) to.set_params.insert(name);
}

void Session::set_param(std::string_view name, const HostTensor& value) {
  const std::lock_guard lock(impl_->mutex);
  impl_->set_param(name, value);
}
HostTensor Session::param(std::string_view name) const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->param(name);
}
std::vector<std::string> Session::unset_params() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->unset_params();
}
RunResult Session::run(const TensorMap& data, const OutputSink& sink) {
  const std::lock_guard lock(impl_->mutex);
  return impl_->run(data, sink);
}
std::span<std::byte> Session::input_staging(std::string_view name) {
  const std::lock_guard lock(impl_->mutex);
  const auto id = impl_->graph.find_input(name);
  if (!id || impl_->graph.input_of_value(*id)->kind != InputKind::data) {
    throw RuntimeError("graph '" + impl_->graph.name() + "' has no data input named '" + std::string(name) + "'");
  }
  return impl_->program ? impl_->program->input_staging(name) : std::span<std::byte>{};
}
const Graph& Session::graph() const { return impl_->graph; }
Backend Session::backend() const { return impl_->options.backend; }
std::vector<vk::DispatchTiming> Session::timings() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->program ? impl_->program->timings() : std::vector<vk::DispatchTiming>{};
}

MemoryPlan Session::memory_plan() const {
  const std::lock_guard lock(impl_->mutex);
  MemoryPlan plan;
  if (impl_->program) {
    const vk::ProgramStats& stats = impl_->program->stats();
    plan.allocation_bytes = stats.block_bytes;
    plan.total_bytes = stats.device_bytes;
    plan.unshared_bytes = stats.unshared_bytes;
    return plan;
  }
  const std::uint64_t element_bytes = impl_->options.backend == Backend::interp_f64 ? 8 : 4;
  for (const auto& value : impl_->graph.values()) {
    plan.unshared_bytes += element_bytes * static_cast<std::uint64_t>(value.type.size());
  }
  return plan;
}

std::string MemoryPlan::to_string() const {
  const auto gib = [](std::uint64_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / double(std::uint64_t{1} << 30));
    return std::string(text);
  };
  return std::to_string(allocation_bytes.size()) + " allocation" + (allocation_bytes.size() == 1 ? "" : "s") + ", " +
         gib(total_bytes) + " (one slot per value: " + gib(unshared_bytes) + ")";
}

}  // namespace tg
