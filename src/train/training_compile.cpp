// tg::compile: trace the loss with the params bound, differentiate, append the optimizer, and build
// the Session that runs the step.
#include <algorithm>
#include <random>
#include <stdexcept>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/passes/autocast.h"
#include "tensorgrad/passes/autodiff.h"
#include "training_impl.h"

namespace tg {

namespace {
template <class Map>
auto& checked_at(Map& inputs, std::string_view name) {
  const auto it = inputs.find(name);
  if (it != inputs.end()) return it->second;
  std::string declared;
  for (const auto& entry : inputs) declared += (declared.empty() ? "" : ", ") + entry.first;
  throw CompileError("input '" + std::string(name) + "' is read but not declared; the declared inputs are " +
                     (declared.empty() ? std::string("(none)") : declared) +
                     " (add it to the spec's .inputs with its shape)");
}
}  // namespace

const Tensor& Inputs::at(std::string_view name) const { return checked_at(*this, name); }
Tensor& Inputs::at(std::string_view name) { return checked_at(*this, name); }

namespace detail {

RunFailure failure(std::string kind, std::string message) { return {std::move(kind), std::move(message)}; }

std::uint64_t random_seed() {
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device();
}

HostTensor step_seed_value(std::uint64_t seed, std::int64_t index) {
  // splitmix64 of (seed, index): a different seed per run, the same for the same (seed, run).
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ULL * static_cast<std::uint64_t>(index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return HostTensor::i32({}, {static_cast<std::int32_t>(z & 0x7FFFFFFFU)});
}

namespace {
std::string names_of(const InputSpecs& specs) {
  std::string out;
  for (const auto& entry : specs) out += (out.empty() ? "" : ", ") + entry.first;
  return out.empty() ? "(none)" : out;
}
}  // namespace

std::optional<std::string> check_data(const InputSpecs& specs, const TensorMap& data) {
  std::string problems;
  const auto add = [&](const std::string& problem) { problems += (problems.empty() ? "" : "; ") + problem; };
  for (const auto& [name, value] : data) {
    if (!specs.contains(name)) add("unknown input '" + name + "' (the declared inputs are " + names_of(specs) + ")");
  }
  for (const auto& [name, spec] : specs) {
    const TensorType expected{spec.dtype, spec.shape};
    const auto it = data.find(name);
    if (it == data.end()) {
      add("missing input '" + name + "' (" + expected.to_string() + ")");
    } else if (!(it->second.type == expected)) {
      add("input '" + name + "': expected " + expected.to_string() + ", got " + it->second.type.to_string());
    }
  }
  if (problems.empty()) return std::nullopt;
  return problems;
}

Graph trace(const Module& model, const ErasedFn& fn, const InputSpecs& inputs, const std::string& graph_name,
            const std::function<void(GraphBuilder&, const Tensor&)>& add_outputs, const std::set<std::string>& patches,
            PatchSites* sites) {
  GraphBuilder builder(graph_name);
  {
    TracingScope scope(builder);
    PatchTraceScope patch_scope(builder, patches);
    ParamBinding bound(model, builder);
    Inputs traced;
    for (const auto& [name, spec] : inputs) traced.emplace(name, builder.input(name, {spec.dtype, spec.shape}));
    Tensor result;
    try {
      result = fn(model, traced);
    } catch (const Error&) {
      throw;
    } catch (const std::logic_error& e) {
      // A std::out_of_range from a container's at() in the user's function (a ModuleList index, a
      // vector of sizes, ...): a mistake in the spec, reported as one.
      throw CompileError("graph '" + graph_name + "': the traced function threw a std::logic_error: " + e.what());
    }
    if (!result.valid() || &result.builder() != &builder) {
      throw CompileError("graph '" + graph_name +
                         "': the function must return a tensor traced from its inputs or params");
    }
    add_outputs(builder, result);
    if (sites != nullptr) *sites = patch_scope.sites();
  }
  // Without active sites the graph is exactly what was traced; with them, the nodes that computed
  // the replaced values are dead and dropped.
  if (patches.empty()) return builder.take();
  return without_dead_nodes(builder.graph());
}

namespace {
// An input named like a param, or like a graph input the compiler adds (the optimizer's scalars
// "optim.*", the state "<param>.adam.m", "<param>.last_grad", ..., the step seed), would collide
// with it in the step graph.
void check_input_names(const InputSpecs& inputs, const std::vector<ParamInfo>& params) {
  for (const auto& [name, input] : inputs) {
    const auto refuse = [&](const std::string& why) { throw CompileError("compile: input '" + name + "' " + why); };
    if (name.empty()) refuse("has an empty name");
    if (name == kStepSeedInput || name.starts_with(std::string(kStepSeedInput) + ".")) {
      refuse("is reserved for the step seeds of dropout and randn");
    }
    if (name.starts_with("optim.")) refuse("is in the namespace 'optim.' of the optimizer's inputs");
    for (const ParamInfo& p : params) {
      if (name == p.name) refuse("has the name of a param of the model");
      if (name.starts_with(p.name + ".")) {
        refuse("is in the namespace '" + p.name + ".' of param '" + p.name + "''s optimizer state");
      }
    }
  }
}

// Whether `value` is computed from a param input (the nodes are in SSA order: producers first).
bool depends_on_a_param(const Graph& graph, ValueId value) {
  std::vector<bool> needed(graph.values().size(), false);
  needed[static_cast<std::size_t>(value)] = true;
  for (auto node = graph.nodes().rbegin(); node != graph.nodes().rend(); ++node) {
    if (!needed[static_cast<std::size_t>(node->output)]) continue;
    for (const ValueId in : node->inputs) needed[static_cast<std::size_t>(in)] = true;
  }
  return std::any_of(graph.inputs().begin(), graph.inputs().end(), [&](const GraphInput& in) {
    return in.kind == InputKind::param && needed[static_cast<std::size_t>(in.value)];
  });
}

// The loss scaling a policy asks for (absent: on for f16 only), checked.
std::optional<LossScaling> loss_scaling_of(const PrecisionPolicy& policy) {
  if (!is_float(policy.compute)) {
    throw CompileError("compile: precision.compute must be f32, f16 or bf16, got " +
                       std::string(dtype_name(policy.compute)));
  }
  const LossScaling config = policy.loss_scaling.value_or(LossScaling{.enabled = policy.compute == DType::f16});
  if (!config.enabled) return std::nullopt;
  try {
    check_loss_scaling(config);
  } catch (const Error& e) {
    throw CompileError(std::string("compile: precision.") + e.what());
  }
  return config;
}
}  // namespace

CompiledStep compile_step(const ErasedTrainingSpec& spec, const std::set<std::string>& patches) {
  if (spec.model == nullptr) throw CompileError("compile: no model");
  if (!spec.loss) throw CompileError("compile: no loss function");
  for (const auto& [name, input] : spec.inputs) {
    for (const std::int64_t dim : input.shape) {
      if (dim < 0) {
        throw CompileError("compile: input '" + name + "' has shape " + shape_to_string(input.shape) +
                           ": training inputs are static (wildcards are for attached forwards)");
      }
    }
  }
  CompiledStep out;
  out.params = spec.model->params();
  if (out.params.empty()) throw CompileError("compile: the model has no params to train");
  for (const ParamInfo& p : out.params) out.param_names.push_back(p.name);
  check_input_names(spec.inputs, out.params);

  // With gradient accumulation the loss is traced at one micro-batch's shapes.
  const InputSpecs traced_inputs = micro_batch_inputs(spec.inputs, spec.micro_batches);
  const Graph forward = trace(
      *spec.model, spec.loss, traced_inputs, "training",
      [](GraphBuilder& b, const Tensor& loss) {
        if (loss.rank() != 0 || !is_float(loss.dtype())) {
          throw CompileError("compile: the loss must be a 0-d float tensor (a scalar), got " + loss.type().to_string() +
                             "; reduce it, e.g. with mean()");
        }
        b.output("loss", loss);
      },
      patches, &out.patch_sites);
  out.patches = patches;
  if (!depends_on_a_param(forward, *forward.find_output("loss"))) {
    throw CompileError("compile: the loss does not depend on any param of the model (" +
                       std::to_string(out.params.size()) + " params, e.g. '" + out.params.front().name +
                       "'), so there is nothing to train");
  }
  out.loss_scaling = loss_scaling_of(spec.precision);
  const Graph mixed = autocast(forward, spec.precision.compute);
  Graph with_grads = out.loss_scaling ? differentiate_scaled(mixed, "loss") : differentiate(mixed, {.loss = "loss"});
  if (spec.micro_batches > 1) with_grads = accumulate_micro_batches(with_grads, spec.inputs, spec.micro_batches);
  if (spec.communicator) {
    // Data parallel: this rank's forward and backward run alone; the update reads every rank's sums.
    out.grad_session = std::make_unique<Session>(
        with_grads, SessionOptions{.backend = spec.backend,
                                   .vk_context = spec.vk_context,
                                   .allow_nonfinite_params = true,  // copies of the update session's, checked there
                                   .interp_schedule = spec.interp_schedule,
                                   .interp_threads = spec.interp_threads,
                                   .matmul_precision = spec.matmul_precision,
                                   .vk_early_readback_bytes = spec.reduce_bucket_bytes});
    with_grads = reduced_update_graph(with_grads, spec.communicator->size());
  }
  std::vector<ParamGrad> grads = param_grads(with_grads);
  for (ParamGrad& g : grads) {
    for (const ParamInfo& p : out.params)
      if (p.name == g.param) g.decay = p.decay;
  }
  OptimizedGraph optimized = append_optimizer(with_grads, grads, spec.optimizer);
  if (out.loss_scaling) {
    ScaledUpdate guarded = guard_update(optimized.graph, optimized.writebacks, *out.loss_scaling);
    optimized.graph = std::move(guarded.graph);
    optimized.writebacks = std::move(guarded.writebacks);
    for (std::string& name : guarded.state_inputs) optimized.state_inputs.push_back(std::move(name));
  }
  out.state_inputs = optimized.state_inputs;
  for (const std::string& name : out.param_names) {
    const auto grad = optimized.graph.find_output("grad." + name);
    if (!grad) continue;
    const std::string input = name + ".last_grad";
    optimized.graph.add_input(input, InputKind::state, optimized.graph.type(*grad));
    optimized.writebacks.push_back({"grad." + name, input});
    out.grad_inputs.emplace_back(name, input);
  }
  const Graph& seeded = out.grad_session ? out.grad_session->graph() : optimized.graph;
  out.uses_step_seed = seeded.find_input(kStepSeedInput).has_value();
  out.session =
      std::make_unique<Session>(optimized.graph, SessionOptions{.backend = spec.backend,
                                                                .vk_context = spec.vk_context,
                                                                .writebacks = optimized.writebacks,
                                                                .commit_if_finite = "loss",
                                                                .allow_nonfinite_params = spec.allow_nonfinite_params,
                                                                .interp_schedule = spec.interp_schedule,
                                                                .interp_threads = spec.interp_threads,
                                                                .matmul_precision = spec.matmul_precision});
  return out;
}

void TrainingCore::reinit(bool params, bool optimizer) {
  Session& session = *compiled.session;
  ++local_changes;
  if (params) {
    for (const ParamInfo& p : compiled.params) session.set_param(p.name, init_value(p, seed));
    ++params_version;
  }
  if (optimizer) {
    const auto zero = [&](const std::string& input) {
      session.set_param(input, HostTensor::filled(session.graph().type(*session.graph().find_input(input)), 0.0));
    };
    for (const std::string& name : compiled.state_inputs) zero(name);
    for (const auto& [param, input] : compiled.grad_inputs) zero(input);
    if (compiled.loss_scaling) {
      session.set_param(kLossScaleInput, HostTensor::filled({DType::f32, {}}, compiled.loss_scaling->init_scale));
    }
    last_step_skipped = false;
    steps = 0;
    lr = base_lr;
    has_grads = false;
  }
}

const TensorMap& TrainingCore::param_snapshot() {
  if (!snapshot || snapshot_version != params_version) {
    TensorMap values;
    for (const std::string& name : compiled.param_names) values.emplace(name, compiled.session->param(name));
    snapshot = std::move(values);
    snapshot_version = params_version;
  }
  return *snapshot;
}

}  // namespace detail

Training compile_erased(detail::ErasedTrainingSpec spec) {
  validate(spec.lr);
  if (spec.interp_threads < 0) {
    throw CompileError("compile: interp_threads is " + std::to_string(spec.interp_threads) +
                       "; it must be >= 0 (0: TBB's default thread count)");
  }
  (void)detail::micro_batch_inputs(spec.inputs, spec.micro_batches);  // throws for a bad micro_batches
  detail::prepare_data_parallel(spec);  // collective with a communicator: agrees on rank 0's seed
  if (spec.backend == Backend::vulkan && !spec.vk_context) spec.vk_context = vk::Context::create();
  auto core = std::make_shared<detail::TrainingCore>();
  core->compiled = detail::compile_step(spec);
  core->seed = spec.seed.value_or(detail::random_seed());
  core->base_lr = spec.lr;
  core->lr = spec.lr;
  core->spec = std::move(spec);
  core->reinit(true, true);
  return Training(std::move(core));
}

}  // namespace tg
