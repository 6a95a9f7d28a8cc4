// Training::upload_params: params set from shaped tensors (every type checked, a transposed matrix
// named as such) or from flat floats (element counts checked, layout not). Either form checks every
// value before it writes any, so a refused upload leaves every param as it was.
#include <algorithm>
#include <cmath>
#include <mutex>
#include <optional>
#include <string>

#include "../runtime/shape_mismatch.h"
#include "tensorgrad/ir/error.h"
#include "training_impl.h"

namespace tg {
namespace {

const ParamInfo* find_param(const detail::TrainingCore& core, std::string_view name) {
  const auto& params = core.compiled.params;
  const auto it = std::find_if(params.begin(), params.end(), [&](const ParamInfo& p) { return p.name == name; });
  return it == params.end() ? nullptr : &*it;
}

// "unknown param 'x' (the params are a, b)".
std::string unknown_param(const detail::TrainingCore& core, const std::string& name) {
  std::string known;
  for (const std::string& p : core.compiled.param_names) known += (known.empty() ? "" : ", ") + p;
  return "unknown param '" + name + "' (the params are " + known + ")";
}

// The first NaN or Inf of `value`, described, unless the spec allows them.
std::optional<std::string> non_finite(const detail::TrainingCore& core, const std::string& name,
                                      const HostTensor& value) {
  if (core.spec.allow_nonfinite_params) return std::nullopt;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const double v = value.at_unchecked(i);
    if (std::isfinite(v)) continue;
    return "param '" + name + "' element " + std::to_string(i) + " is " + std::to_string(v) +
           " (not finite; TrainingSpec::allow_nonfinite_params accepts it)";
  }
  return std::nullopt;
}

// Writes values already checked against their params' types.
void write_checked(detail::TrainingCore& core, const TensorMap& values) {
  for (const auto& [name, value] : values) core.compiled.session->set_param(name, value);
  ++core.params_version;
  ++core.local_changes;
}

void throw_if_any(const std::string& problems) {
  if (!problems.empty()) throw RuntimeError("upload_params: " + problems + "; nothing was written");
}

}  // namespace

void Training::upload_params(const TensorMap& values) {
  const std::lock_guard lock(core_->mutex);
  std::string problems;
  const auto add = [&](const std::string& problem) { problems += (problems.empty() ? "" : "; ") + problem; };
  for (const auto& [name, value] : values) {
    const ParamInfo* param = find_param(*core_, name);
    if (param == nullptr) {
      add(unknown_param(*core_, name));
      continue;
    }
    const TensorType expected{DType::f32, param->shape};
    if (!(value.type == expected)) {
      add("param '" + name + "': " + detail::type_mismatch(expected, value.type));
    } else if (auto why = non_finite(*core_, name, value)) {
      add(*why);
    }
  }
  throw_if_any(problems);
  write_checked(*core_, values);
}

void Training::upload_params(const ParamValues& values) {
  const std::lock_guard lock(core_->mutex);
  std::string problems;
  const auto add = [&](const std::string& problem) { problems += (problems.empty() ? "" : "; ") + problem; };
  TensorMap shaped;
  for (const auto& [name, data] : values) {
    const ParamInfo* param = find_param(*core_, name);
    if (param == nullptr) {
      add(unknown_param(*core_, name));
      continue;
    }
    const std::int64_t expected = num_elements(param->shape);
    if (static_cast<std::int64_t>(data.size()) != expected) {
      add("param '" + name + "' is f32" + shape_to_string(param->shape) + " (" + std::to_string(expected) +
          " values), got " + std::to_string(data.size()) + " values");
      continue;
    }
    // Flat values take the param's shape: their layout is the caller's word (ParamValues).
    HostTensor value = HostTensor::f32(param->shape, data);
    if (auto why = non_finite(*core_, name, value)) add(*why);
    shaped.emplace(name, std::move(value));
  }
  throw_if_any(problems);
  write_checked(*core_, shaped);
}

}  // namespace tg
