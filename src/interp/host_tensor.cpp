#include "tensorgrad/interp/host_tensor.h"

#include "tensorgrad/ir/error.h"

namespace tg {

HostTensor HostTensor::of(TensorType type, std::vector<double> data) {
  if (static_cast<std::int64_t>(data.size()) != type.size()) {
    throw Error("a tensor of type " + type.to_string() + " needs " + std::to_string(type.size()) + " elements, got " +
                std::to_string(data.size()));
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
  const auto n = static_cast<std::size_t>(type.size());
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

}  // namespace tg
