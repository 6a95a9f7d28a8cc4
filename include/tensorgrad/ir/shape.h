#pragma once
// Static shapes and tensor types (dtype + shape), with the helpers every shape rule needs.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tensorgrad/ir/dtype.h"

namespace tg {

using Shape = std::vector<std::int64_t>;

// Size limits (docs/architecture.md, "Size limits"). Every dim is >= 0 and a shape's extent, the
// product of its dims with a 0 dim counted as 1, is at most kMaxElements = 2^48. So an element
// count, a row-major stride or any partial product of dims fits in 48 bits; a byte count of
// elements of up to 8 bytes is at most kMaxBytes = 2^51, and sums of many such counts
// still fit in int64 (a thousand of them stay under 2^61). Graph::add_input and Graph::add_node refuse types past the
// limits, so no value of a graph, and nothing a kernel or a plan computes from one, can exceed them.
inline constexpr std::int64_t kMaxElements = std::int64_t{1} << 48;
inline constexpr std::int64_t kMaxElementBytes = 8;
inline constexpr std::int64_t kMaxBytes = kMaxElements * kMaxElementBytes;

// Why `shape` is past the size limits (a negative dim, or an extent over kMaxElements), naming its
// dims; empty when it is within them.
std::string shape_limit_problem(const Shape& shape);
// Throws tg::RuleBroken with shape_limit_problem() when `shape` is past the size limits.
void check_shape_limits(const Shape& shape);

// Overflow-checked int64 arithmetic for shape code: the result, or tg::RuleBroken saying that
// `what` (such as "pad's before + after on axis 1") overflows, with both operands.
std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what);
std::int64_t checked_sub(std::int64_t a, std::int64_t b, std::string_view what);
std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view what);

// The element count; throws tg::RuleBroken (check_shape_limits) for a shape past the size limits,
// so a count is never negative and never wraps.
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
