// tg::Forward: inference graphs attached to a Training, one per resolved batch size (an LRU cache),
// reading the training's params by copying them in whenever they changed. Every call holds the
// training's mutex (training_impl.h): a forward reads the training's params, counters and device.
#include <mutex>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/vk/error.h"
#include "training_impl.h"

namespace tg {
namespace detail {
namespace {

// The wildcard batch size of `data` (-1 when the specs have none), or a message saying why the data
// do not resolve one: a wildcard input missing or of the wrong rank, or wildcards that disagree.
std::variant<std::int64_t, std::string> resolve_batch(const InputSpecs& specs, const TensorMap& data) {
  std::int64_t batch = -1;
  std::string first;
  for (const auto& [name, spec] : specs) {
    if (spec.shape.empty() || spec.shape[0] != -1) continue;
    const auto it = data.find(name);
    if (it == data.end())
      return "missing input '" + name + "' (" + TensorType{spec.dtype, spec.shape}.to_string() + ")";
    const Shape& got = it->second.type.shape;
    if (got.size() != spec.shape.size()) {
      return "input '" + name + "': expected rank " + std::to_string(spec.shape.size()) + " " +
             shape_to_string(spec.shape) + " (-1: any batch size), got " + it->second.type.to_string();
    }
    if (batch >= 0 && got[0] != batch) {
      return "the wildcard batch dims disagree: input '" + first + "' has " + std::to_string(batch) + ", input '" +
             name + "' has " + std::to_string(got[0]);
    }
    batch = got[0];
    first = name;
  }
  return batch;
}

InputSpecs resolved(const InputSpecs& specs, std::int64_t batch) {
  InputSpecs out = specs;
  for (auto& [name, spec] : out)
    if (!spec.shape.empty() && spec.shape[0] == -1) spec.shape[0] = batch;
  return out;
}

}  // namespace

ForwardCore::Entry& ForwardCore::entry_for(std::int64_t batch, const std::set<std::string>& patches) {
  if (generation != training->generation) {
    cache.clear();  // replace_model: the old graphs trace the old model
    generation = training->generation;
  }
  for (auto it = cache.begin(); it != cache.end(); ++it) {
    if (it->batch == batch && it->patches == patches) {
      cache.splice(cache.begin(), cache, it);
      return cache.front();
    }
  }
  const std::string name = batch < 0 ? "forward" : "forward.b" + std::to_string(batch);
  Entry entry;
  const Graph graph = trace(
      *training->spec.model, fn, resolved(inputs, batch), name,
      [](GraphBuilder& b, const Tensor& out) { b.output("output", out); }, patches, &entry.patch_sites);
  entry.batch = batch;
  entry.patches = patches;
  entry.uses_step_seed = graph.find_input(kStepSeedInput).has_value();
  entry.session =
      std::make_unique<Session>(graph, SessionOptions{.backend = training->spec.backend,
                                                      .vk_context = training->spec.vk_context,
                                                      .allow_nonfinite_params = training->spec.allow_nonfinite_params,
                                                      .interp_schedule = training->spec.interp_schedule,
                                                      .interp_threads = training->spec.interp_threads,
                                                      .matmul_precision = training->spec.matmul_precision});
  cache.push_front(std::move(entry));
  while (cache.size() > max_cached) cache.pop_back();
  return cache.front();
}

}  // namespace detail

Forward::Forward(std::unique_ptr<detail::ForwardCore> core) : core_(std::move(core)) {}
Forward::Forward(Forward&&) noexcept = default;
Forward& Forward::operator=(Forward&&) noexcept = default;
Forward::~Forward() = default;

Forward Training::attach_erased(detail::ErasedFn fn, std::type_index type, InputSpecs inputs, std::size_t max_cached) {
  const std::lock_guard lock(core_->mutex);
  if (!fn) throw CompileError("attach: no forward function");
  if (type != core_->spec.model_type)
    throw CompileError("attach: the forward takes another model type than the training's");
  if (max_cached < 1) throw CompileError("attach: max_cached_shapes must be >= 1");
  bool wildcard = false;
  for (const auto& [name, spec] : inputs) {
    for (std::size_t d = 0; d < spec.shape.size(); ++d) {
      if (spec.shape[d] >= 0 || (d == 0 && spec.shape[d] == -1)) continue;
      throw CompileError("attach: input '" + name + "' has shape " + shape_to_string(spec.shape) +
                         ": only dim 0 may be a wildcard (-1), and dims must be >= 0");
    }
    wildcard = wildcard || (!spec.shape.empty() && spec.shape[0] == -1);
  }
  auto core = std::make_unique<detail::ForwardCore>();
  core->training = core_;
  core->fn = std::move(fn);
  core->model_type = type;
  core->inputs = std::move(inputs);
  core->max_cached = max_cached;
  core->generation = core_->generation;
  // Static shapes compile now, so a forward that cannot trace fails here rather than at run().
  if (!wildcard) core->entry_for(-1);
  return Forward(std::move(core));
}

ForwardResult Forward::run(const TensorMap& data, const Patches& patches) {
  const std::lock_guard lock(core_->training->mutex);
  detail::ForwardCore& core = *core_;
  const auto batch = detail::resolve_batch(core.inputs, data);
  if (const auto* why = std::get_if<std::string>(&batch)) {
    return TrainingResult<HostTensor>::failed(detail::failure("input", "run: " + *why));
  }
  const std::int64_t b = std::get<std::int64_t>(batch);
  if (auto problems = detail::check_data(detail::resolved(core.inputs, b), data)) {
    return TrainingResult<HostTensor>::failed(detail::failure("input", "run: " + *problems));
  }
  // Every graph of this forward (of the current model) records every site's name: an unknown one
  // is refused before a graph is compiled for it.
  if (!patches.empty() && !core.cache.empty() && core.generation == core.training->generation) {
    if (auto why = detail::unknown_sites(core.cache.front().patch_sites, patches)) {
      return TrainingResult<HostTensor>::failed(detail::failure("patch", "run: " + *why));
    }
  }
  detail::ForwardCore::Entry* entry = nullptr;
  try {
    entry = &core.entry_for(b, patches.sites());
  } catch (const std::exception& e) {
    return TrainingResult<HostTensor>::failed(detail::failure("compile", e.what()));
  }
  auto patch_feed = detail::patch_feed(entry->patch_sites, patches);
  if (const auto* why = std::get_if<std::string>(&patch_feed)) {
    return TrainingResult<HostTensor>::failed(detail::failure("patch", "run: " + *why));
  }
  try {
    detail::TrainingCore& training = *core.training;
    if (!entry->synced || entry->synced_version != training.params_version) {
      for (const auto& [name, value] : training.param_snapshot()) entry->session->set_param(name, value);
      entry->synced = true;
      entry->synced_version = training.params_version;
    }
  } catch (const vk::DeviceError& e) {
    return TrainingResult<HostTensor>::failed(
        detail::failure("device", std::string("copying the params: ") + e.what()));
  } catch (const std::exception& e) {
    return TrainingResult<HostTensor>::failed(
        detail::failure("internal", std::string("copying the params: ") + e.what()));
  }
  TensorMap feed = data;
  for (auto& [name, value] : std::get<TensorMap>(patch_feed)) feed.insert_or_assign(name, std::move(value));
  if (entry->uses_step_seed)
    feed.insert_or_assign(kStepSeedInput, detail::step_seed_value(core.training->seed, core.runs));
  ++core.runs;
  const RunResult run = entry->session->run(feed);
  if (!run.ok()) return TrainingResult<HostTensor>::failed(run.failure());
  return TrainingResult<HostTensor>::completed(run.output("output"), Captures::from_outputs(run.outputs()));
}

const std::vector<std::string>& Forward::param_names() const {
  const std::lock_guard lock(core_->training->mutex);
  return core_->training->compiled.param_names;
}

const Graph& Forward::graph_for(const TensorMap& data, const Patches& patches) {
  const std::lock_guard lock(core_->training->mutex);
  const auto batch = detail::resolve_batch(core_->inputs, data);
  if (const auto* why = std::get_if<std::string>(&batch)) throw RuntimeError("graph_for: " + *why);
  return core_->entry_for(std::get<std::int64_t>(batch), patches.sites()).session->graph();
}

std::size_t Forward::cached_shapes() const {
  const std::lock_guard lock(core_->training->mutex);
  return core_->cache.size();
}

// Training's calls take the lock.
void Forward::upload_params(const TensorMap& values) { Training(core_->training).upload_params(values); }
void Forward::upload_params(const ParamValues& values) { Training(core_->training).upload_params(values); }

ParamValues Forward::download_params() const { return Training(core_->training).download_params(); }

}  // namespace tg
