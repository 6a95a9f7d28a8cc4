#pragma once
// tg::Session: one graph compiled for one backend — the interpreter in float or double, or a
// Vulkan device — behind one API: set params and state once (they stay with the backend), run with
// the data inputs, read outputs; writebacks carry an update (an optimizer's) from an output into an
// input after every run, on the backend. run() never throws: it returns a RunResult that is either
// completed (outputs) or failed (a typed error). The training API is built on it.
//
// Threads: one Session may be called from several threads at once. Each call holds the session's
// mutex, so calls are serialised (a run, set_param or param waits for the one in progress) and each
// sees the state the previous one left; graph() and backend() read what never changes. Moving,
// assigning or destroying a Session while another thread calls it is not allowed. Vulkan: a
// vk::Context is not thread-safe, so sessions that share one (SessionOptions::vk_context) must not
// be called from different threads at the same time (a Training's step and its forwards share one
// and are serialised by the Training).
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tensorgrad/interp/host_tensor.h"
#include "tensorgrad/interp/interpreter.h"
#include "tensorgrad/ir/graph.h"
#include "tensorgrad/vk/context.h"
#include "tensorgrad/vk/executor.h"

namespace tg {

enum class Backend : std::uint8_t {
  interp_f32,  // the TBB interpreter computing in float: a CPU backend
  interp_f64,  // the oracle: every float in double
  vulkan,      // tg::vk::Program on a Vulkan device (a GPU, or lavapipe on a CPU)
};
std::string_view backend_name(Backend backend);

struct SessionOptions {
  Backend backend = Backend::interp_f32;
  // Vulkan: the device to use; null creates one (TG_VK_DEVICE or the best device, see Context).
  std::shared_ptr<vk::Context> vk_context;
  // Vulkan: guard regions (a debug aid) and per-dispatch timestamps.
  std::uint64_t vk_guard_bytes = 0;
  bool vk_timestamps = false;
  // After every completed run, output `output` becomes the value of param/state input `input`.
  std::vector<Writeback> writebacks;
  // When set: the name of a float output (a training step's loss) that must be finite for the run's
  // writebacks to take effect. A NaN or Inf there fails the run ("nonfinite") and leaves params and
  // state as they were before it, on every backend.
  std::string commit_if_finite;
  // set_param (and params passed to run) refuse a float value holding NaN or Inf with a
  // RuntimeError naming the param and the element, since every later run would compute garbage
  // from it; true accepts such values (a test of NaN propagation, say).
  bool allow_nonfinite_params = false;
  // interp_f32/interp_f64: run independent nodes at once (InterpSchedule::parallel) or one after
  // another; the results are the same bits either way (docs/architecture.md, "Interpret").
  InterpSchedule interp_schedule = InterpSchedule::sequential;
  // interp_f32/interp_f64: the most threads a run may use (the parallel schedule's branches and the
  // kernels' own parallel loops). 0: TBB's default (every core, or what a tbb::global_control
  // allows); n > 0: the run executes in a tbb::task_arena of n slots that this session owns, so
  // other sessions and the process's TBB settings are unaffected. Negative: the constructor throws
  // CompileError. The results are the same bits at every count. Vulkan ignores it.
  int interp_threads = 0;
  // Vulkan: how f32 matmuls compute (vk::MatmulPrecision: ieee, split or fast).
  vk::MatmulPrecision matmul_precision = vk::MatmulPrecision::ieee;
  // Vulkan: vk::ProgramOptions::early_readback_bytes (outputs read back in groups of about this
  // many bytes as the graph produces them, each handed to run()'s sink at once). 0: after the run.
  std::uint64_t vk_early_readback_bytes = 0;
};

// Why a run failed. kind: "input" (missing, unknown or misshapen input: the message names it, what
// was expected and what came), "runtime" (an op failed: out-of-range index, ...), "nonfinite" (the
// commit_if_finite output was NaN or Inf), "device" (the Vulkan device failed; a lost device leaves
// the session unusable). Only a completed run changes params and state.
struct RunFailure {
  std::string kind;
  std::string message;
};

class RunResult {
 public:
  static RunResult completed(TensorMap outputs) { return RunResult(std::move(outputs)); }
  static RunResult failed(RunFailure failure) { return RunResult(std::move(failure)); }

  bool ok() const { return std::holds_alternative<TensorMap>(state_); }
  explicit operator bool() const { return ok(); }
  // Throws tg::Error when the run failed (with the failure's message).
  const TensorMap& outputs() const;
  const HostTensor& output(std::string_view name) const;
  // Throws tg::Error when the run completed.
  const RunFailure& failure() const;

 private:
  explicit RunResult(TensorMap outputs) : state_(std::move(outputs)) {}
  explicit RunResult(RunFailure failure) : state_(std::move(failure)) {}
  std::variant<TensorMap, RunFailure> state_;
};

// The device memory a compiled graph holds. Vulkan: its buffer plan, a few allocations that every
// value is placed in (memory of dead values reused; docs/vulkan.md, "Memory"). The interpreters
// allocate each value when it is computed and free it after its last reader: no allocations here,
// and unshared_bytes is what all values together would take.
struct MemoryPlan {
  std::vector<std::uint64_t> allocation_bytes;  // each device allocation, in plan order
  std::uint64_t total_bytes = 0;                // all allocations together
  std::uint64_t unshared_bytes = 0;             // one slot per value, no reuse
  // "3 allocations, 1.50 GiB (one slot per value: 4.20 GiB)"
  std::string to_string() const;
};

class Session {
 public:
  // Compiles `graph` for the backend. Throws what compiling throws: tg::Error for a bad writeback
  // or an op without a kernel, vk::NoDeviceError/DeviceError for Vulkan problems.
  Session(const Graph& graph, SessionOptions options = {});
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();

  // Params and state (inputs of kind param or state) are held by the session: set them once, they
  // stay for later runs until set again or updated by a writeback. Throws RuntimeError naming the
  // input for an unknown name, a data input, or a wrong type or shape (both shapes, and whether the
  // value's is the transpose of the expected one); then nothing is written.
  void set_param(std::string_view name, const HostTensor& value);
  HostTensor param(std::string_view name) const;
  // Sets params/state `names` to source's values. On Vulkan with both sessions on one context it is
  // a device-to-device copy (no trip through the host; the values were checked when set in
  // `source`); otherwise set_param(name, source.param(name)). Throws RuntimeError naming an input
  // that either session lacks, or whose types differ.
  void copy_params_from(const Session& source, const std::vector<std::string>& names);
  // Whether every param and state input has been set.
  std::vector<std::string> unset_params() const;

  // Runs with the data inputs (params/state may be passed too: they are set first). Never throws.
  // A sink receives each output as the backend has it (Vulkan with vk_early_readback_bytes: as its
  // segment completes, while the device computes the rest; otherwise once the run is done, before
  // the finiteness check), possibly for a run that then fails. What the sink throws fails the run
  // ("runtime" for a tg::Error, else "internal").
  RunResult run(const TensorMap& data, const OutputSink& sink = {});

  // Vulkan: vk::Program::input_staging for data input `name` (write a value there, then run with a
  // HostTensor viewing it, and the run copies nothing). Empty for the interpreters. Throws
  // RuntimeError for a name that is no data input.
  std::span<std::byte> input_staging(std::string_view name);

  const Graph& graph() const;
  Backend backend() const;
  // Vulkan with timestamps: the last run's per-dispatch device times; empty otherwise.
  std::vector<vk::DispatchTiming> timings() const;
  MemoryPlan memory_plan() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tg
