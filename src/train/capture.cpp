// capture() and Captures: named graph outputs surfaced next to a run's result.
#include "tensorgrad/train/capture.h"

#include "tensorgrad/ir/error.h"

namespace tg {

Tensor capture(std::string_view name, const Tensor& t) {
  if (name.empty()) throw Error("capture: the name must not be empty");
  if (!t.valid()) throw Error("capture '" + std::string(name) + "': the tensor is not a traced value");
  const std::string output = std::string(kCapturePrefix) + std::string(name);
  GraphBuilder& builder = t.builder();
  if (builder.graph().find_output(output)) {
    throw Error("capture '" + std::string(name) + "' appears twice in graph '" + builder.graph().name() +
                "': capture names must be unique within one forward");
  }
  builder.output(output, t);
  return t;
}

Captures Captures::from_outputs(const TensorMap& outputs) {
  Captures captures;
  for (const auto& [name, value] : outputs) {
    if (name.starts_with(kCapturePrefix)) captures.values_.emplace(name.substr(kCapturePrefix.size()), value);
  }
  return captures;
}

std::vector<std::string> Captures::names() const {
  std::vector<std::string> out;
  for (const auto& entry : values_) out.push_back(entry.first);
  return out;
}

const HostTensor& Captures::tensor(std::string_view name) const {
  const auto it = values_.find(name);
  if (it != values_.end()) return it->second;
  std::string known;
  for (const auto& entry : values_) known += (known.empty() ? "" : ", ") + entry.first;
  throw Error("no capture named '" + std::string(name) +
              "'; the captures are: " + (known.empty() ? std::string("(none)") : known));
}

std::vector<std::vector<double>> Captures::per_head(std::string_view name, std::int64_t heads) const {
  const HostTensor& t = tensor(name);
  const Shape& shape = t.type.shape;
  if (shape.size() < 2 || shape[1] != heads) {
    throw Error("capture '" + std::string(name) + "' is " + t.type.to_string() + ": per_head(" + std::to_string(heads) +
                ") needs axis 1 (the head axis of [B, H, ...]) of length " + std::to_string(heads));
  }
  const AxisSplit split = split_at_axis(shape, 1);
  std::vector<std::vector<double>> out(static_cast<std::size_t>(heads));
  for (std::int64_t h = 0; h < heads; ++h) {
    auto& dst = out[static_cast<std::size_t>(h)];
    dst.reserve(static_cast<std::size_t>(split.outer * split.inner));
    for (std::int64_t o = 0; o < split.outer; ++o) {
      const auto begin = static_cast<std::size_t>((o * split.length + h) * split.inner);
      for (std::size_t i = begin; i < begin + static_cast<std::size_t>(split.inner); ++i) dst.push_back(t.at(i));
    }
  }
  return out;
}

}  // namespace tg
