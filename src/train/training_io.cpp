// Training::save / load: params, optimizer state and the step counter in one safetensors file.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <mutex>

#include "../runtime/shape_mismatch.h"
#include "tensorgrad/ir/error.h"
#include "tensorgrad/train/safetensors.h"
#include "training_impl.h"

namespace tg {
namespace {

constexpr std::string_view kStepKey = "tensorgrad.step";
constexpr std::string_view kSeedKey = "tensorgrad.seed";
constexpr std::string_view kOwnPrefix = "tensorgrad.";  // keys of ours: known ones only

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

// Every param with its type: what a params-only file holds.
std::map<std::string, TensorType> param_types(const detail::TrainingCore& core) {
  std::map<std::string, TensorType> out;
  const Graph& graph = core.compiled.session->graph();
  for (const std::string& name : core.compiled.param_names) out.emplace(name, graph.type(*graph.find_input(name)));
  return out;
}

[[noreturn]] void refuse(const std::string& path, const std::string& what) {
  throw SafetensorsError("safetensors file '" + path + "': not loaded: " + what);
}

// A metadata value that must be a plain decimal count (digits only: no sign, space or exponent).
template <class Int>
Int parse_count(const std::string& path, std::string_view key, const std::string& text, Int max) {
  Int value = 0;
  const bool digits_only =
      !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (!digits_only || error != std::errc() || end != text.data() + text.size() || value > max) {
    refuse(path, "metadata '" + std::string(key) + "' is \"" + text + "\"; it must be a decimal integer in [0, " +
                     std::to_string(max) + "]");
  }
  return value;
}

// The step counter; the seed, when present, must be a u64 (it is not applied: the training keeps
// its own); any other "tensorgrad." key is from an unknown writer and refused.
std::int64_t read_metadata(const std::string& path, const SafetensorsMetadata& metadata) {
  const auto step = metadata.find(std::string(kStepKey));
  if (step == metadata.end()) {
    refuse(path, "not a training checkpoint: metadata '" + std::string(kStepKey) + "' (the step counter) is missing");
  }
  const std::int64_t steps = parse_count<std::int64_t>(path, kStepKey, step->second, kMaxTrainingSteps);
  for (const auto& [key, value] : metadata) {
    if (key == kSeedKey) {
      parse_count<std::uint64_t>(path, kSeedKey, value, std::numeric_limits<std::uint64_t>::max());
    } else if (key != kStepKey && key.starts_with(kOwnPrefix)) {
      refuse(path, "unknown metadata '" + key + "' (a checkpoint holds only '" + std::string(kStepKey) + "' and '" +
                       std::string(kSeedKey) + "' under 'tensorgrad.')");
    }
  }
  return steps;
}

// Values the step cannot start from: NaN or Inf (unless allowed), a negative Adam second moment
// (its square root is taken).
void check_values(const std::string& path, const TensorMap& tensors, bool allow_nonfinite) {
  for (const auto& [name, tensor] : tensors) {
    const auto v = tensor.to_f64();
    if (!allow_nonfinite) {
      const auto bad = std::find_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); });
      if (bad != v.end()) {
        refuse(path, "tensor '" + name + "' element " + std::to_string(bad - v.begin()) + " is " +
                         std::to_string(*bad) +
                         " (not finite; every later step would fail. TrainingSpec::allow_nonfinite_params accepts it)");
      }
    }
    if (name == kLossScaleInput && !(v.at(0) > 0)) {
      refuse(path, "tensor '" + name + "' is " + std::to_string(v.at(0)) + ", but the loss scale is always > 0");
    }
    if (name.ends_with(".adam.v")) {
      const auto negative = std::find_if(v.begin(), v.end(), [](double x) { return x < 0; });
      if (negative != v.end()) {
        refuse(path, "tensor '" + name + "' element " + std::to_string(negative - v.begin()) + " is " +
                         std::to_string(*negative) + ", but Adam's second moment is never negative");
      }
    }
  }
}

// load_matching, with a hint appended when the file's mismatch is a param stored transposed (a
// PyTorch nn.Linear weight converted without .T): the file is read a second time, on this error
// path only, to learn the shapes it holds.
SafetensorsFile load_checked(const std::string& path, const std::map<std::string, TensorType>& expected) {
  try {
    return load_matching(path, expected);
  } catch (const SafetensorsError& e) {
    std::string transposed;
    try {
      for (const auto& [name, tensor] : load_safetensors(path).tensors) {
        const auto it = expected.find(name);
        if (it != expected.end() && detail::looks_transposed(it->second.shape, tensor.type.shape)) {
          transposed += (transposed.empty() ? "" : ", ") + ("'" + name + "'");
        }
      }
    } catch (const SafetensorsError&) {
      throw e;  // the first reading's message says what is wrong
    }
    if (transposed.empty()) throw;
    throw SafetensorsError(std::string(e.what()) + "\n  " + transposed +
                           " looks transposed (the expected shape with its last two dims swapped): PyTorch's "
                           "nn.Linear stores its weight as [out, in], tensorgrad's Linear W is [in, out]; save "
                           "weight.T");
  }
}

}  // namespace

void Training::save(const std::string& path) const {
  const std::lock_guard lock(core_->mutex);  // params and state of one step (docs/training.md, "Threads")
  // Data parallel: every rank holds the same params and state; rank 0 alone writes them.
  if (core_->spec.communicator && core_->spec.communicator->rank() != 0) return;
  TensorMap tensors = download_param_tensors();
  tensors.merge(download_optimizer_state());
  save_safetensors(
      path, tensors,
      {{std::string(kStepKey), std::to_string(core_->steps)}, {std::string(kSeedKey), std::to_string(core_->seed)}});
}

void Training::load(const std::string& path, LoadOptions options) {
  const std::lock_guard lock(core_->mutex);
  detail::TrainingCore& core = *core_;
  // Everything is read and checked into temporaries first; only a fully valid file is applied.
  if (options.params_only) {
    // Outside weights carry no step counter; their metadata (a converter's, say) is not ours to read.
    SafetensorsFile file = load_checked(path, param_types(core));
    check_values(path, file.tensors, core.spec.allow_nonfinite_params);
    for (const auto& [name, value] : file.tensors) core.compiled.session->set_param(name, value);
    ++core.params_version;  // reinit counts the local change
    core.reinit(/*params=*/false, /*optimizer=*/true);
    return;
  }
  SafetensorsFile file = load_checked(path, checkpoint_types(core));
  const std::int64_t steps = read_metadata(path, file.metadata);
  check_values(path, file.tensors, core.spec.allow_nonfinite_params);
  for (const auto& [name, value] : file.tensors) core.compiled.session->set_param(name, value);
  core.steps = steps;
  core.has_grads = false;
  core.last_step_skipped = false;
  ++core.params_version;
  ++core.local_changes;
}

}  // namespace tg
