#include "tensorgrad/interp/host_tensor.h"

#include <cmath>
#include <limits>

#include "tensorgrad/ir/error.h"

namespace tg {

namespace {

// The element count of a host tensor's type, refusing a type past the size limits (shape.h) with a
// RuntimeError before anything is allocated for it.
std::int64_t checked_count(const TensorType& type) {
  if (std::string problem = shape_limit_problem(type.shape); !problem.empty()) {
    throw RuntimeError("a host tensor of type " + type.to_string() + " is past the size limits: " + problem);
  }
  return type.size();
}

}  // namespace

HostTensor HostTensor::of(TensorType type, std::vector<double> data) {
  if (static_cast<std::int64_t>(data.size()) != checked_count(type)) {
    throw RuntimeError("a tensor of type " + type.to_string() + " needs " + std::to_string(type.size()) +
                       " elements, got " + std::to_string(data.size()));
  }
  return HostTensor{std::move(type), std::move(data)};
}

HostTensor HostTensor::f32(Shape shape, const std::vector<float>& data) {
  return of(TensorType{DType::f32, std::move(shape)}, std::vector<double>(data.begin(), data.end()));
}

HostTensor HostTensor::i32(Shape shape, const std::vector<std::int32_t>& data) {
  return of(TensorType{DType::i32, std::move(shape)}, std::vector<double>(data.begin(), data.end()));
}

HostTensor HostTensor::filled(TensorType type, double value) {
  const auto n = static_cast<std::size_t>(checked_count(type));
  return HostTensor{std::move(type), std::vector<double>(n, value)};
}

std::vector<float> HostTensor::to_f32() const {
  std::vector<float> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = static_cast<float>(values[i]);
  return out;
}

std::vector<std::int32_t> HostTensor::to_i32() const {
  std::vector<std::int32_t> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = static_cast<std::int32_t>(values[i]);
  return out;
}

namespace {

void check_input_values(const GraphInput& in, const TensorType& expected, const HostTensor& given) {
  if (given.type != expected) {
    throw RuntimeError("input '" + in.name + "' expects " + expected.to_string() + ", got " + given.type.to_string());
  }
  if (static_cast<std::int64_t>(given.values.size()) != expected.size()) {
    throw RuntimeError("input '" + in.name + "' of type " + expected.to_string() + " needs " +
                       std::to_string(expected.size()) + " elements, got " + std::to_string(given.values.size()));
  }
  if (expected.dtype == DType::i32) {
    for (double v : given.values) {
      if (v != std::floor(v) || v < std::numeric_limits<std::int32_t>::min() ||
          v > std::numeric_limits<std::int32_t>::max()) {
        throw RuntimeError("input '" + in.name + "' is i32 but holds " + std::to_string(v));
      }
    }
  } else if (expected.dtype == DType::boolean) {
    for (double v : given.values) {
      if (v != 0.0 && v != 1.0) throw RuntimeError("input '" + in.name + "' is bool but holds " + std::to_string(v));
    }
  }
}

}  // namespace

void validate_inputs(const Graph& graph, const TensorMap& inputs) {
  validate_inputs(graph, inputs, [](const GraphInput&) { return true; });
}

void validate_inputs(const Graph& graph, const TensorMap& inputs,
                     const std::function<bool(const GraphInput&)>& required) {
  for (const auto& [name, tensor] : inputs) {
    if (!graph.find_input(name)) {
      throw RuntimeError("graph '" + graph.name() + "' has no input named '" + name + "'");
    }
  }
  for (const GraphInput& in : graph.inputs()) {
    auto it = inputs.find(in.name);
    if (it == inputs.end()) {
      if (!required(in)) continue;
      throw RuntimeError("missing input '" + in.name + "' (" + std::string(input_kind_name(in.kind)) + ", " +
                         graph.type(in.value).to_string() + ")");
    }
    check_input_values(in, graph.type(in.value), it->second);
  }
}

}  // namespace tg
