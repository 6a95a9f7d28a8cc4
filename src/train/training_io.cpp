// Training::save / load: params, optimizer state and the step counter in one safetensors file.
#include <algorithm>
#include <charconv>
#include <mutex>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/train/safetensors.h"
#include "training_impl.h"

namespace tg {
namespace {

constexpr const char* kStepKey = "tensorgrad.step";
constexpr const char* kSeedKey = "tensorgrad.seed";

// Every param and optimizer state input with its type: what a checkpoint holds (the last step's
// gradients, also state inputs of the step graph, are not part of it).
std::map<std::string, TensorType> checkpoint_types(const detail::TrainingCore& core) {
  std::map<std::string, TensorType> out;
  const Graph& graph = core.compiled.session->graph();
  for (const GraphInput& in : graph.inputs()) {
    if (in.kind == InputKind::data) continue;
    const auto& grads = core.compiled.grad_inputs;
    if (std::any_of(grads.begin(), grads.end(), [&](const auto& g) { return g.second == in.name; })) continue;
    out.emplace(in.name, graph.type(in.value));
  }
  return out;
}

}  // namespace

void Training::save(const std::string& path) const {
  const std::lock_guard lock(core_->mutex);  // params and state of one step (docs/training.md, "Threads")
  TensorMap tensors = download_param_tensors();
  tensors.merge(download_optimizer_state());
  save_safetensors(path, tensors, {{kStepKey, std::to_string(core_->steps)}, {kSeedKey, std::to_string(core_->seed)}});
}

void Training::load(const std::string& path) {
  const std::lock_guard lock(core_->mutex);
  detail::TrainingCore& core = *core_;
  SafetensorsFile file = load_matching(path, checkpoint_types(core));
  const auto it = file.metadata.find(kStepKey);
  std::int64_t steps = -1;
  if (it != file.metadata.end()) {
    const std::string& text = it->second;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), steps);
    if (error != std::errc() || end != text.data() + text.size()) steps = -1;
  }
  if (steps < 0) {
    throw SafetensorsError(path + ": not a training checkpoint: metadata '" + kStepKey +
                           "' (the step counter) is missing or not a count");
  }
  for (const auto& [name, value] : file.tensors) core.compiled.session->set_param(name, value);
  core.steps = steps;
  core.has_grads = false;
  ++core.params_version;
}

}  // namespace tg
