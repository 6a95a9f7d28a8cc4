#pragma once
// Static shapes and tensor types (dtype + shape), with the helpers every shape rule needs.
#include <cstdint>
#include <string>
#include <vector>

#include "tensorgrad/ir/dtype.h"

namespace tg {

using Shape = std::vector<std::int64_t>;

std::int64_t num_elements(const Shape& shape);
std::string shape_to_string(const Shape& shape);  // "[2,3]", "[]" for a scalar
// Row-major strides in elements.
std::vector<std::int64_t> row_major_strides(const Shape& shape);

// A shape seen as [outer, length, inner] around one axis (products of the dims before and after
// it): how per-axis kernels (softmax, argmax, narrow, concat, ...) walk a tensor.
struct AxisSplit {
  std::int64_t outer = 1;
  std::int64_t length = 1;
  std::int64_t inner = 1;
};
AxisSplit split_at_axis(const Shape& shape, std::int64_t axis);  // axis already normalized

struct TensorType {
  DType dtype = DType::f32;
  Shape shape;

  std::int64_t rank() const { return static_cast<std::int64_t>(shape.size()); }
  std::int64_t size() const { return num_elements(shape); }
  std::string to_string() const;  // "f32[2,3]"
  friend bool operator==(const TensorType&, const TensorType&) = default;
};

}  // namespace tg
