#pragma once
// tg::compile: a model, a loss and an optimizer compiled into one training step on a backend, and
// Training::attach: inference forwards that read the same params.
//
//   struct Net : tg::Module { tg::Linear l1{*this, "l1", 2, 1}; };
//   tg::Tensor loss_fn(const Net& m, const tg::Inputs& in) {
//     tg::Tensor r = m.l1(in.at("x")) - in.at("y");
//     return tg::mean(r * r);
//   }
//   Net net;
//   tg::Training train = tg::compile(tg::TrainingSpec<Net>{
//       .model = net, .loss = loss_fn, .inputs = {{"x", {{8, 2}}}, {"y", {{8, 1}}}},
//       .optimizer = {.kind = tg::AdamConfig{}}, .lr = 1e-2, .backend = tg::Backend::vulkan});
//   tg::StepResult r = train.step({{"x", x}, {"y", y}});   // never throws
//   if (r.ok()) use(r.loss()); else log(r.failure().kind, r.failure().message);
//
// The model is referenced, not copied (modules are not copyable): it must outlive the Training and
// every Forward attached to it (forwards trace it again for each new batch size). It is only read.
// Threads: a Training and the Forwards attached to it may be called from several threads at once.
// They share one mutex, so their calls are serialised (a forward's run waits for a step in progress
// and sees its params). References that accessors return (param_names(), graph(), lr(), ...) stay
// valid only until replace_model or set_lr; moving or destroying an object while another thread
// calls it is not allowed (docs/training.md, "Threads").
// docs/training/compile.md describes the graph compile builds and the cost of each call.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeindex>
#include <typeinfo>
#include <variant>
#include <vector>

#include "tensorgrad/interp/host_tensor.h"
#include "tensorgrad/ir/graph.h"
#include "tensorgrad/ir/tensor.h"
#include "tensorgrad/passes/loss_scaling.h"
#include "tensorgrad/passes/optimizer.h"
#include "tensorgrad/runtime/session.h"
#include "tensorgrad/train/capture.h"
#include "tensorgrad/train/communicator.h"
#include "tensorgrad/train/module.h"
#include "tensorgrad/train/patch.h"
#include "tensorgrad/train/schedule.h"

namespace tg {

// The traced inputs a loss or forward receives, by name. at() of a name that was not declared throws
// CompileError naming it and the declared inputs (a plain std::map would throw std::out_of_range).
class Inputs : public std::map<std::string, Tensor, std::less<>> {
 public:
  using map::map;
  const Tensor& at(std::string_view name) const;
  Tensor& at(std::string_view name);
};

// The largest step counter a Training holds: Training::load refuses a checkpoint whose step is
// larger. 2^53 keeps every step exact as a double (schedules and Adam's bias correction compute in
// double) and leaves step + 1 far from overflowing.
inline constexpr std::int64_t kMaxTrainingSteps = std::int64_t{1} << 53;

// A declared input. In a forward's specs, dim 0 may be -1: a wildcard batch dim, resolved at each
// run from the data (all wildcards of one run must agree). Training inputs are fully static.
struct InputSpec {
  Shape shape;
  DType dtype = DType::f32;
  friend bool operator==(const InputSpec&, const InputSpec&) = default;
};
using InputSpecs = std::map<std::string, InputSpec, std::less<>>;

// Flat param values keyed by dotted name ("l1.W"), row-major. Shapeless: upload_params of these
// checks each param's element count but cannot see its layout, so a [64,128] matrix uploaded into a
// [128,64] param is accepted with its elements in the wrong places. Upload shaped tensors
// (TensorMap) to have shapes checked (docs/training/safetensors.md, "Starting from outside weights").
using ParamValues = std::map<std::string, std::vector<float>, std::less<>>;

// Mixed precision (docs/training.md, "2026-11-28: mixed precision"). compute f16 or bf16: the step
// graph is the traced loss graph rewritten by tg::autocast (matmul, conv2d and attention in `compute`,
// reductions, softmaxes and losses in f32, the rest following its inputs); params, gradients and
// optimizer state stay f32. f32 (the default) leaves the graph as traced, bit for bit.
struct PrecisionPolicy {
  DType compute = DType::f32;
  // Dynamic loss scaling (GradScaler). Absent: on with LossScaling{} for f16, off for f32 and
  // bf16 (whose range is f32's).
  std::optional<LossScaling> loss_scaling;
};

// TrainingSpec::reduce_bucket_bytes unless set: 8 MiB. On two H200s W6 (343 MB of gradients) steps in
// 297 ms with 32 MiB buckets, 290 with 16, 291 with 8 and 288 with 4 (docs/performance.md).
inline constexpr std::uint64_t kDefaultReduceBucketBytes = std::uint64_t{8} << 20;

template <class M>
struct TrainingSpec {
  const M& model;
  // Must return a 0-d float tensor (compile throws tg::Error naming the shape otherwise).
  std::function<Tensor(const M&, const Inputs&)> loss;
  InputSpecs inputs;
  OptimizerConfig optimizer;
  // The learning rate: a number or a schedule (step 1 = the first step). Not in OptimizerConfig:
  // the optimizer pass takes it as a per-step input.
  Schedule lr = 1e-3;
  Backend backend = Backend::interp_f32;
  // The init seed; when absent a random one is drawn (Training::seed() tells which).
  std::optional<std::uint64_t> seed;
  // Vulkan: the device to use; null creates one.
  std::shared_ptr<vk::Context> vk_context;
  // upload_params and load refuse NaN and Inf values (after which every step would fail) with a
  // tg::RuntimeError / SafetensorsError naming the param and the first bad element; true accepts
  // them.
  bool allow_nonfinite_params = false;
  // interp_f32/interp_f64, for the step and every attached forward: the interpreter's schedule and
  // the most threads a run may use (0: TBB's default; n > 0: a task arena of n slots owned by each
  // session; negative: compile throws CompileError). SessionOptions describes both.
  InterpSchedule interp_schedule = InterpSchedule::sequential;
  int interp_threads = 0;
  // The step graph's precision; attached forwards run as traced (f32).
  PrecisionPolicy precision;
  // Vulkan: how f32 matmuls compute, in the step and every attached forward (vk::MatmulPrecision:
  // ieee, split or fast).
  vk::MatmulPrecision matmul_precision = vk::MatmulPrecision::ieee;
  // Gradient accumulation: each step splits every input along dim 0 into this many micro-batches
  // (each dim 0 must be a multiple of it), runs their forwards and backwards one after the other,
  // and applies one optimizer update with the mean of their gradients, summed in micro-batch order
  // ((g1 + g2) + g3 ...) then divided by the count; the step's loss is the mean of theirs. For a
  // loss that is a mean over the batch this is the full batch's update, within rounding, holding
  // one micro-batch's activations at a time. Patches are refused (step fails with kind "compile");
  // captures are micro-batch 1's. docs/training.md, "Gradient accumulation".
  int micro_batches = 1;
  // Data parallel: the group this process trains in (communicator.h; an MPI one from
  // tensorgrad/distributed/mpi.h). Every rank compiles the same spec and steps on its own shard of
  // the batch; the gradients (and loss) are summed over the ranks in rank order and divided by their
  // count, and every rank applies the same update, so params stay the same bits everywhere. compile
  // is collective (rank 0's seed is used), and so are step and any call that needs the others
  // (docs/training.md, "Data parallel"). interp_f32 and vulkan only. Null: one process.
  std::shared_ptr<Communicator> communicator;
  // Data parallel: every this many steps the ranks compare a checksum of their params and optimizer
  // state, and a step after which they differ fails with kind "diverged" (0: never compare).
  int params_check_interval = 100;
  // Data parallel: the gradients are summed over the ranks in buckets of at least this many bytes,
  // each as soon as the backward has produced it, while the rest of the backward runs (on Vulkan;
  // the CPU backends hand the gradients over when the backward ends). 0: one sum after the
  // backward. The bits of the update do not depend on it.
  std::uint64_t reduce_bucket_bytes = kDefaultReduceBucketBytes;
};

template <class M>
struct ForwardSpec {
  std::function<Tensor(const M&, const Inputs&)> forward;
  InputSpecs inputs;
  // Compiled graphs kept, one per resolved batch size, least recently used evicted first.
  std::size_t max_cached_shapes = 8;
};

// The result of Training::step / Forward::run: completed (a value and the captures) or failed
// (RunFailure: kind + message). Kinds are Session's ("input", "runtime", "nonfinite", "device",
// "memory", "internal") plus "schedule" (the schedule has no rate for the step number),
// "compile" (a forward could not be traced at a new batch size or set of active patch sites),
// "patch" (an unknown patch site or a patch value of the wrong type, naming the site), and with a
// communicator "diverged" (the ranks' params differ: the step was applied, the next starts from rank
// 0's) and "distributed" (the transport failed).
template <class Value>
class TrainingResult {
 public:
  static TrainingResult completed(Value value, Captures captures) {
    return TrainingResult(Done{std::move(value), std::move(captures)});
  }
  static TrainingResult failed(RunFailure failure) { return TrainingResult(std::move(failure)); }

  bool ok() const { return std::holds_alternative<Done>(state_); }
  explicit operator bool() const { return ok(); }
  // These throw tg::Error on the wrong branch (with the failure's message).
  const Value& value() const { return done().value; }
  const Captures& captures() const { return done().captures; }
  const RunFailure& failure() const;

 private:
  struct Done {
    Value value;
    Captures captures;
  };
  explicit TrainingResult(Done done) : state_(std::move(done)) {}
  explicit TrainingResult(RunFailure failure) : state_(std::move(failure)) {}
  const Done& done() const;
  std::variant<Done, RunFailure> state_;
};

class StepResult : public TrainingResult<double> {
 public:
  StepResult(TrainingResult<double> r) : TrainingResult<double>(std::move(r)) {}  // NOLINT(google-explicit-constructor)
  double loss() const { return value(); }
};
class ForwardResult : public TrainingResult<HostTensor> {
 public:
  ForwardResult(TrainingResult<HostTensor> r) : TrainingResult<HostTensor>(std::move(r)) {}  // NOLINT
  const HostTensor& output() const { return value(); }
};

namespace detail {
// The model-type-free form of the specs, and the state a Training shares with its forwards.
using ErasedFn = std::function<Tensor(const Module&, const Inputs&)>;
struct ErasedTrainingSpec {
  const Module* model = nullptr;
  std::type_index model_type = typeid(void);
  ErasedFn loss;
  InputSpecs inputs;
  OptimizerConfig optimizer;
  Schedule lr;
  Backend backend = Backend::interp_f32;
  std::optional<std::uint64_t> seed;
  std::shared_ptr<vk::Context> vk_context;
  bool allow_nonfinite_params = false;
  InterpSchedule interp_schedule = InterpSchedule::sequential;
  int interp_threads = 0;
  PrecisionPolicy precision;
  vk::MatmulPrecision matmul_precision = vk::MatmulPrecision::ieee;
  int micro_batches = 1;
  std::shared_ptr<Communicator> communicator;
  int params_check_interval = 100;
  std::uint64_t reduce_bucket_bytes = kDefaultReduceBucketBytes;
};
struct TrainingCore;
struct ForwardCore;

template <class M>
ErasedFn erase(std::function<Tensor(const M&, const Inputs&)> fn) {
  static_assert(std::is_base_of_v<Module, M>, "the model type must derive from tg::Module");
  if (!fn) return {};
  return [fn = std::move(fn)](const Module& m, const Inputs& in) { return fn(static_cast<const M&>(m), in); };
}
}  // namespace detail

class Forward;

struct ResetOptions {
  bool params = true;     // re-init every param with the training's seed
  bool optimizer = true;  // zero the optimizer state and set the step counter back to 0
};

struct LoadOptions {
  // The file holds the params only (every param, nothing else, e.g. weights converted from
  // PyTorch): its names, shapes and values are checked as a checkpoint's are, its metadata is not
  // read, and on success the optimizer state, the last gradients, the step counter and the
  // learning-rate schedule are set back to their init (as reset({.params = false})): moments
  // gathered for the old params do not describe the new ones.
  bool params_only = false;
};

struct ReplaceOptions {
  std::optional<std::uint64_t> seed;         // default: a fresh random seed
  std::optional<OptimizerConfig> optimizer;  // default: the current one
  std::optional<Schedule> lr;                // default: the schedule given to compile (or set_lr)
};

class Training {
 public:
  Training(Training&&) noexcept;
  Training& operator=(Training&&) noexcept;
  ~Training();

  // One optimizer step on `data` (exactly the declared inputs). Never throws. Only a completed step
  // changes params and optimizer state and advances the step counter; a NaN or Inf loss fails with
  // kind "nonfinite" and changes nothing. `patches` names the active patch() sites and their values
  // (patch.h); an unknown site or a value of the wrong type fails with kind "patch". A new set of
  // active sites compiles its own step graph (kept), and switching sets moves params and state over.
  StepResult step(const TensorMap& data, const Patches& patches = {});

  // Completed steps so far (the next step is number steps() + 1 of the schedule). A step that loss
  // scaling skipped does not count.
  std::int64_t steps() const;
  // Loss scaling (PrecisionPolicy): the current scale (1 without scaling), and whether the last
  // completed step was skipped because a gradient element was Inf or NaN (params and optimizer
  // state unchanged, the scale backed off).
  double loss_scale() const;
  bool last_step_skipped() const;
  std::uint64_t seed() const;
  const std::vector<std::string>& param_names() const;
  const std::vector<ParamInfo>& params() const;
  // The compiled step graph (loss, gradients, optimizer update) and its ops, one per node.
  const Graph& graph() const;
  std::vector<std::string> kernels() const;
  Backend backend() const;
  // The device memory the compiled step holds (Session::memory_plan): on Vulkan its allocations,
  // their total, and what one slot per value would have needed.
  MemoryPlan memory_plan() const;

  // Current params, as floats (what every backend stores, except interp_f64) ...
  ParamValues download_params() const;
  // ... and exactly as the backend holds them (doubles on interp_f64).
  TensorMap download_param_tensors() const;
  // The gradients of the last completed step ("grad.<name>" outputs, before any clipping), keyed
  // by param name. Throws tg::Error before the first completed step.
  ParamValues download_param_grads() const;
  TensorMap download_param_grad_tensors() const;
  // The optimizer state inputs ("<param>.adam.m", ...), exactly as held.
  TensorMap download_optimizer_state() const;
  // Sets some or all params from shaped tensors (f32, each of its param's exact shape; on
  // interp_f64 wide values are kept unrounded). Throws tg::RuntimeError naming every unknown name,
  // wrong dtype or shape (both shapes, and "looks transposed" when the value's shape is the
  // expected one with its last two dims swapped: PyTorch's nn.Linear weight is [out, in], Linear's
  // W is [in, out]) and (unless TrainingSpec::allow_nonfinite_params) NaN or Inf value; then
  // nothing is written.
  void upload_params(const TensorMap& values);
  // The same from flat floats: checked for element count (the error names the expected shape),
  // unknown names and NaN/Inf, but NOT for layout (see ParamValues).
  void upload_params(const ParamValues& values);

  void reset(ResetOptions options = {});
  // A new learning rate or schedule; its step 1 is the next step (rebased).
  void set_lr(Schedule lr);
  const Schedule& lr() const;

  // Params, optimizer state and the step counter as a safetensors file (metadata
  // "tensorgrad.step", "tensorgrad.seed"). load reads regular files only, checks the names and
  // shapes (load_matching), the metadata (step in [0, kMaxTrainingSteps], seed a u64, no other
  // "tensorgrad." key), that Adam's second moments are >= 0 and (unless allow_nonfinite_params)
  // that every value is finite, and throws a SafetensorsError naming the file and what is wrong; on
  // any error nothing changes. docs/training/safetensors.md lists the checks. With
  // options.params_only the file holds only the params (LoadOptions says what is reset).
  void save(const std::string& path) const;
  void load(const std::string& path, LoadOptions options = {});

  // A new model (same type as compiled with), compiled with the same loss and inputs: fresh params
  // (seed: options.seed or a random one), zero optimizer state, step counter 0. Attached forwards
  // stay valid; they recompile on their next run. Throws what compile throws; then nothing changed.
  template <class M>
  void replace_model(const M& model, ReplaceOptions options = {}) {
    replace_model_erased(model, typeid(M), std::move(options));
  }

  // An inference forward sharing this training's params (see Forward).
  template <class M>
  Forward attach(ForwardSpec<M> spec);

 private:
  friend Training compile_erased(detail::ErasedTrainingSpec spec);
  friend class Forward;
  explicit Training(std::shared_ptr<detail::TrainingCore> core);
  void replace_model_erased(const Module& model, std::type_index type, ReplaceOptions options);
  Forward attach_erased(detail::ErasedFn fn, std::type_index type, InputSpecs inputs, std::size_t max_cached);

  std::shared_ptr<detail::TrainingCore> core_;
};

// A forward graph compiled on the training's backend, reading the training's params: before a run,
// if the params changed since this forward last copied them (a step, upload, reset, load), it copies
// them all (a download from the training session and an upload into its own; on Vulkan a round
// trip through the host). One graph is compiled per resolved batch size, and the
// max_cached_shapes most recently used are kept. It keeps the training's state alive.
class Forward {
 public:
  Forward(Forward&&) noexcept;
  Forward& operator=(Forward&&) noexcept;
  ~Forward();

  // Never throws. Failures: "input" (unknown, missing or misshapen inputs, disagreeing wildcards),
  // "compile" (the forward cannot be traced at this batch size), "patch" (an unknown patch site or a
  // value of the wrong type: patch.h), and Session's kinds. Each set of active patch sites is a
  // graph of its own, cached like a batch size.
  ForwardResult run(const TensorMap& data, const Patches& patches = {});
  const std::vector<std::string>& param_names() const;
  // The params are the training's: these are Training::upload_params / download_params (an upload
  // here is seen by the training's next step and by every forward attached to it).
  void upload_params(const TensorMap& values);
  void upload_params(const ParamValues& values);
  ParamValues download_params() const;
  // The graph for these inputs' batch size and these active patch sites (compiled and cached like
  // run). Throws tg::Error.
  const Graph& graph_for(const TensorMap& data, const Patches& patches = {});
  std::size_t cached_shapes() const;

 private:
  friend class Training;
  explicit Forward(std::unique_ptr<detail::ForwardCore> core);
  std::unique_ptr<detail::ForwardCore> core_;
};

// Compiles the training step: traces spec.loss with the model's params bound, checks it is a 0-d
// float, differentiates it w.r.t. every param, appends the optimizer, and builds a Session with
// params = init_params(model, seed) and zero optimizer state. Throws CompileError naming what is
// wrong in the spec (an undeclared input the loss reads, a non-scalar loss, a model without params,
// a wildcard input, an input named like a param, ...), a ShapeError from tracing, a vk error from
// the backend.
Training compile_erased(detail::ErasedTrainingSpec spec);

template <class M>
Training compile(TrainingSpec<M> spec) {
  return compile_erased({.model = &spec.model,
                         .model_type = typeid(M),
                         .loss = detail::erase<M>(std::move(spec.loss)),
                         .inputs = std::move(spec.inputs),
                         .optimizer = std::move(spec.optimizer),
                         .lr = std::move(spec.lr),
                         .backend = spec.backend,
                         .seed = spec.seed,
                         .vk_context = std::move(spec.vk_context),
                         .allow_nonfinite_params = spec.allow_nonfinite_params,
                         .interp_schedule = spec.interp_schedule,
                         .interp_threads = spec.interp_threads,
                         .precision = spec.precision,
                         .matmul_precision = spec.matmul_precision,
                         .micro_batches = spec.micro_batches,
                         .communicator = std::move(spec.communicator),
                         .params_check_interval = spec.params_check_interval,
                         .reduce_bucket_bytes = spec.reduce_bucket_bytes});
}

template <class M>
Forward Training::attach(ForwardSpec<M> spec) {
  return attach_erased(detail::erase<M>(std::move(spec.forward)), typeid(M), std::move(spec.inputs),
                       spec.max_cached_shapes);
}

template <class Value>
const RunFailure& TrainingResult<Value>::failure() const {
  if (ok()) throw Error("the call completed; it has no failure");
  return std::get<RunFailure>(state_);
}

template <class Value>
const typename TrainingResult<Value>::Done& TrainingResult<Value>::done() const {
  if (const auto* f = std::get_if<RunFailure>(&state_)) throw Error("the call failed (" + f->kind + "): " + f->message);
  return std::get<Done>(state_);
}

}  // namespace tg
