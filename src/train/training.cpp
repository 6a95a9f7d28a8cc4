// tg::Training: the step, param access, reset, set_lr and replace_model. Every call that reads or
// changes the core holds core_->mutex (shared with the attached forwards: training_impl.h).
#include "tensorgrad/train/training.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <variant>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/op_def.h"
#include "training_impl.h"

namespace tg {

Training::Training(std::shared_ptr<detail::TrainingCore> core) : core_(std::move(core)) {}
Training::Training(Training&&) noexcept = default;
Training& Training::operator=(Training&&) noexcept = default;
Training::~Training() = default;

namespace {

// What a step feeds its sessions: the data, patches and seeds (`grad`: the forward and backward)
// and the optimizer's per-step inputs (`update`). One process feeds both to one session.
struct StepFeeds {
  TensorMap grad, update;
};

// The feeds of step `number`, or why it cannot run. Switches to the graph of the active patches.
std::variant<StepFeeds, RunFailure> prepare_step(detail::TrainingCore& core, const TensorMap& data,
                                                 const Patches& patches, std::int64_t number) {
  if (auto problems = detail::check_data(core.spec.inputs, data)) return detail::failure("input", "step: " + *problems);
  StepFeeds feeds;
  try {
    feeds.update = optimizer_step_inputs(core.spec.optimizer, core.lr, number);
  } catch (const std::exception& e) {
    return detail::failure("schedule", "step " + std::to_string(number) + ": " + e.what());
  }
  for (const auto& [name, value] : data) feeds.grad.emplace(name, value);
  // Every step graph records every site, so the current one checks the patches before a switch.
  auto patch_feed = detail::patch_feed(core.compiled.patch_sites, patches);
  if (const auto* why = std::get_if<std::string>(&patch_feed)) return detail::failure("patch", "step: " + *why);
  for (auto& [name, value] : std::get<TensorMap>(patch_feed)) feeds.grad.insert_or_assign(name, std::move(value));
  try {
    core.use_patches(patches.sites());
  } catch (const std::exception& e) {
    return detail::failure("compile", "step: " + std::string(e.what()));
  }
  if (core.compiled.uses_step_seed) {
    // Micro-batch i draws from the stream seed + splitmix64's increment * i (micro-batch 0: the
    // seed itself; accumulate_micro_batches' step_seed.i inputs). Data parallel numbers the
    // micro-batches across the ranks, rank 0's first, so the streams are those of one process
    // stepping on all the ranks' micro-batches in rank order.
    const int per_rank = core.spec.micro_batches;
    const int rank = core.spec.communicator ? core.spec.communicator->rank() : 0;
    for (int i = 0; i < per_rank; ++i) {
      const auto global =
          static_cast<std::uint64_t>(rank) * static_cast<std::uint64_t>(per_rank) + static_cast<std::uint64_t>(i);
      const std::uint64_t stream = core.seed + 0x9E3779B97F4A7C15ULL * global;
      feeds.grad.insert_or_assign(i == 0 ? std::string(kStepSeedInput) : detail::micro_seed_input(i),
                                  detail::step_seed_value(stream, number));
    }
  }
  return feeds;
}

}  // namespace

StepResult Training::step(const TensorMap& data, const Patches& patches) {
  const std::lock_guard lock(core_->mutex);
  detail::TrainingCore& core = *core_;
  const std::int64_t number = core.steps + 1;
  std::variant<StepFeeds, RunFailure> prepared = prepare_step(core, data, patches, number);
  RunResult run = RunResult::failed({});
  if (core.spec.communicator) {
    // Every rank takes part even when its own step cannot run, so the others learn it and fail too.
    const auto* early = std::get_if<RunFailure>(&prepared);
    StepFeeds feeds = early ? StepFeeds{} : std::move(std::get<StepFeeds>(prepared));
    run = detail::data_parallel_step(core, early ? std::optional(*early) : std::nullopt, std::move(feeds.grad),
                                     std::move(feeds.update), number);
  } else if (const auto* failed = std::get_if<RunFailure>(&prepared)) {
    return TrainingResult<double>::failed(*failed);
  } else {
    StepFeeds& feeds = std::get<StepFeeds>(prepared);
    feeds.grad.merge(feeds.update);
    run = core.compiled.session->run(feeds.grad);
  }
  if (!run.ok()) return TrainingResult<double>::failed(run.failure());
  try {
    const TensorMap& outputs = run.outputs();
    const double loss = outputs.at("loss").at(0);
    core.has_grads = true;
    // A step loss scaling skipped changed no param or state (but the scale): it does not count.
    const auto finite = outputs.find(kGradsFiniteOutput);
    core.last_step_skipped = finite != outputs.end() && finite->second.at(0) == 0.0;
    if (!core.last_step_skipped) core.steps = number;
    ++core.params_version;
    if (auto diverged = detail::check_ranks_agree(core)) return TrainingResult<double>::failed(*diverged);
    return TrainingResult<double>::completed(loss, Captures::from_outputs(outputs));
  } catch (const std::exception& e) {
    // Only a bad_alloc can get here; the params were updated, so count the step.
    core.steps = number;
    ++core.params_version;
    return TrainingResult<double>::failed(detail::failure("memory", e.what()));
  }
}

std::int64_t Training::steps() const {
  const std::lock_guard lock(core_->mutex);
  return core_->steps;
}
double Training::loss_scale() const {
  const std::lock_guard lock(core_->mutex);
  if (!core_->compiled.loss_scaling) return 1.0;
  return core_->compiled.session->param(kLossScaleInput).at(0);
}
bool Training::last_step_skipped() const {
  const std::lock_guard lock(core_->mutex);
  return core_->last_step_skipped;
}
std::uint64_t Training::seed() const {
  const std::lock_guard lock(core_->mutex);
  return core_->seed;
}
const std::vector<std::string>& Training::param_names() const {
  const std::lock_guard lock(core_->mutex);
  return core_->compiled.param_names;
}
const std::vector<ParamInfo>& Training::params() const {
  const std::lock_guard lock(core_->mutex);
  return core_->compiled.params;
}
const Graph& Training::graph() const {
  const std::lock_guard lock(core_->mutex);
  return core_->compiled.session->graph();
}
std::vector<std::string> Training::kernels() const {
  const std::lock_guard lock(core_->mutex);
  // One entry per node: the op each dispatch (Vulkan) or kernel call (interpreter) runs.
  std::vector<std::string> out;
  for (const Node& node : graph().nodes()) out.emplace_back(op_def(node.op).name);
  return out;
}
Backend Training::backend() const { return core_->spec.backend; }  // never changes
MemoryPlan Training::memory_plan() const {
  const std::lock_guard lock(core_->mutex);
  return core_->compiled.session->memory_plan();
}
const Schedule& Training::lr() const {
  const std::lock_guard lock(core_->mutex);
  return core_->lr;
}

namespace {
ParamValues as_floats(const TensorMap& tensors) {
  ParamValues out;
  for (const auto& [name, t] : tensors) out.emplace(name, t.to_f32());
  return out;
}
}  // namespace

TensorMap Training::download_param_tensors() const {
  const std::lock_guard lock(core_->mutex);
  TensorMap out;
  for (const std::string& name : core_->compiled.param_names) out.emplace(name, core_->compiled.session->param(name));
  return out;
}

ParamValues Training::download_params() const { return as_floats(download_param_tensors()); }

TensorMap Training::download_param_grad_tensors() const {
  const std::lock_guard lock(core_->mutex);
  if (!core_->has_grads) throw Error("download_param_grads: no step has completed yet (since compile or reset)");
  TensorMap out;
  for (const auto& [param, input] : core_->compiled.grad_inputs)
    out.emplace(param, core_->compiled.session->param(input));
  return out;
}

ParamValues Training::download_param_grads() const { return as_floats(download_param_grad_tensors()); }

TensorMap Training::download_optimizer_state() const {
  const std::lock_guard lock(core_->mutex);
  TensorMap out;
  for (const std::string& name : core_->compiled.state_inputs) out.emplace(name, core_->compiled.session->param(name));
  return out;
}

void Training::reset(ResetOptions options) {
  const std::lock_guard lock(core_->mutex);
  core_->reinit(options.params, options.optimizer);
}

void Training::set_lr(Schedule lr) {
  const std::lock_guard lock(core_->mutex);
  validate(lr);
  core_->lr = rebased(lr, core_->steps);
  core_->base_lr = std::move(lr);
}

void Training::replace_model_erased(const Module& model, std::type_index type, ReplaceOptions options) {
  const std::lock_guard lock(core_->mutex);
  detail::TrainingCore& core = *core_;
  if (type != core.spec.model_type) {
    throw CompileError(
        "replace_model: the new model's type differs from the compiled one; the loss takes the compiled type");
  }
  if (options.lr) validate(*options.lr);
  detail::ErasedTrainingSpec spec = core.spec;
  spec.model = &model;
  if (options.optimizer) spec.optimizer = *options.optimizer;
  detail::CompiledStep compiled = detail::compile_step(spec);
  // Everything that can throw is done (init_value of a checked ParamInfo does not): swap in.
  core.spec = std::move(spec);
  core.compiled = std::move(compiled);
  core.patch_variants.clear();  // they trace the old model
  core.seed = options.seed.value_or(detail::random_seed());
  if (options.lr) core.base_lr = *options.lr;
  core.snapshot.reset();
  ++core.generation;
  core.reinit(true, true);
}

}  // namespace tg
