#pragma once
// The tracing front-end: free functions and operators that append nodes to the graph being traced.
// Every function takes the user's call site as a defaulted last argument, so a shape error names
// the line that called it. Negative axes count from the end; binary ops accept a float scalar on
// either side.
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <source_location>
#include <variant>
#include <vector>

#include "tensorgrad/ir/tensor.h"

namespace tg {

using CallSite = std::source_location;
#define TG_CALL_SITE ::tg::CallSite loc = ::tg::CallSite::current()

// A tensor or a float scalar (a scalar becomes a 0-d f32 `full` node that broadcasts).
class Operand {
 public:
  Operand(const Tensor& tensor) : value_(tensor) {}  // NOLINT(google-explicit-constructor)
  Operand(double scalar) : value_(scalar) {}         // NOLINT(google-explicit-constructor)
  Operand(float scalar) : value_(double{scalar}) {}  // NOLINT(google-explicit-constructor)
  Operand(int scalar) : value_(double(scalar)) {}    // NOLINT(google-explicit-constructor)
  const std::variant<Tensor, double>& value() const { return value_; }

 private:
  std::variant<Tensor, double> value_;
};

// Axes of a reduction: all of them (default), one, or a list.
class Axes {
 public:
  Axes() = default;
  Axes(std::int64_t axis) : list_(std::vector<std::int64_t>{axis}) {}  // NOLINT
  Axes(int axis) : list_(std::vector<std::int64_t>{axis}) {}           // NOLINT
  Axes(std::initializer_list<std::int64_t> axes) : list_(std::vector<std::int64_t>(axes)) {}
  Axes(std::vector<std::int64_t> axes) : list_(std::move(axes)) {}  // NOLINT
  static Axes all() { return {}; }
  const std::optional<std::vector<std::int64_t>>& list() const { return list_; }

 private:
  std::optional<std::vector<std::int64_t>> list_;
};

struct ReduceOptions {
  bool keep_dims = false;
};

// elementwise binary (NumPy broadcasting)
Tensor add(Operand a, Operand b, TG_CALL_SITE);
Tensor sub(Operand a, Operand b, TG_CALL_SITE);
Tensor mul(Operand a, Operand b, TG_CALL_SITE);
Tensor div(Operand a, Operand b, TG_CALL_SITE);
Tensor minimum(Operand a, Operand b, TG_CALL_SITE);
Tensor maximum(Operand a, Operand b, TG_CALL_SITE);
Tensor less(Operand a, Operand b, TG_CALL_SITE);     // bool
Tensor greater(Operand a, Operand b, TG_CALL_SITE);  // bool
Tensor equal(Operand a, Operand b, TG_CALL_SITE);    // bool
Tensor where(const Tensor& condition, Operand if_true, Operand if_false, TG_CALL_SITE);

// elementwise unary
Tensor neg(const Tensor& x, TG_CALL_SITE);
Tensor abs(const Tensor& x, TG_CALL_SITE);
Tensor square(const Tensor& x, TG_CALL_SITE);
Tensor sqrt(const Tensor& x, TG_CALL_SITE);
Tensor rsqrt(const Tensor& x, TG_CALL_SITE);
Tensor exp(const Tensor& x, TG_CALL_SITE);
Tensor log(const Tensor& x, TG_CALL_SITE);
Tensor sin(const Tensor& x, TG_CALL_SITE);
Tensor cos(const Tensor& x, TG_CALL_SITE);
Tensor tanh(const Tensor& x, TG_CALL_SITE);
Tensor sigmoid(const Tensor& x, TG_CALL_SITE);
Tensor relu(const Tensor& x, TG_CALL_SITE);
Tensor gelu(const Tensor& x, TG_CALL_SITE);  // tanh approximation
Tensor silu(const Tensor& x, TG_CALL_SITE);
Tensor clamp(const Tensor& x, double lo, double hi, TG_CALL_SITE);
Tensor stop_gradient(const Tensor& x, TG_CALL_SITE);

// reductions; the whole tensor by default (a 0-d result)
Tensor sum(const Tensor& x, Axes axes = {}, ReduceOptions options = {}, TG_CALL_SITE);
Tensor mean(const Tensor& x, Axes axes = {}, ReduceOptions options = {}, TG_CALL_SITE);
Tensor max(const Tensor& x, Axes axes = {}, ReduceOptions options = {}, TG_CALL_SITE);
Tensor min(const Tensor& x, Axes axes = {}, ReduceOptions options = {}, TG_CALL_SITE);
// i32 indices; without an axis, the flat index over the whole tensor (a 0-d result).
Tensor argmax(const Tensor& x, std::optional<std::int64_t> axis = std::nullopt, ReduceOptions options = {},
              TG_CALL_SITE);
Tensor argmin(const Tensor& x, std::optional<std::int64_t> axis = std::nullopt, ReduceOptions options = {},
              TG_CALL_SITE);
Tensor softmax(const Tensor& x, std::int64_t axis = -1, TG_CALL_SITE);
Tensor log_softmax(const Tensor& x, std::int64_t axis = -1, TG_CALL_SITE);

// matmul: [..., M, K] x [K, N], or batched [B..., M, K] x [B..., K, N] with equal batch dims
Tensor matmul(const Tensor& a, const Tensor& b, TG_CALL_SITE);

// layout
Tensor reshape(const Tensor& x, Shape shape, TG_CALL_SITE);  // at most one -1
Tensor permute(const Tensor& x, std::vector<std::int64_t> perm, TG_CALL_SITE);
Tensor swap_axes(const Tensor& x, std::int64_t axis0, std::int64_t axis1, TG_CALL_SITE);
Tensor broadcast_to(const Tensor& x, Shape shape, TG_CALL_SITE);
Tensor sum_to_shape(const Tensor& x, Shape shape, TG_CALL_SITE);

// creation (appended to the current tracing scope)
Tensor full(Shape shape, double value, DType dtype = DType::f32, TG_CALL_SITE);
Tensor zeros(Shape shape, DType dtype = DType::f32, TG_CALL_SITE);
Tensor ones(Shape shape, DType dtype = DType::f32, TG_CALL_SITE);
Tensor arange(std::int64_t n, DType dtype = DType::i32, TG_CALL_SITE);
Tensor scalar(double value, TG_CALL_SITE);  // 0-d f32

// Operators. The call site rides along on the implicit conversion of the operands.
class OperandAt {
 public:
  OperandAt(const Tensor& tensor, CallSite loc = CallSite::current()) : operand(tensor), site(loc) {}  // NOLINT
  OperandAt(double scalar, CallSite loc = CallSite::current()) : operand(scalar), site(loc) {}        // NOLINT
  OperandAt(float scalar, CallSite loc = CallSite::current()) : operand(scalar), site(loc) {}         // NOLINT
  OperandAt(int scalar, CallSite loc = CallSite::current()) : operand(scalar), site(loc) {}           // NOLINT
  Operand operand;
  CallSite site;
};
class TensorAt {
 public:
  TensorAt(const Tensor& t, CallSite loc = CallSite::current()) : tensor(t), site(loc) {}  // NOLINT
  Tensor tensor;
  CallSite site;
};
Tensor operator+(OperandAt a, OperandAt b);
Tensor operator-(OperandAt a, OperandAt b);
Tensor operator*(OperandAt a, OperandAt b);
Tensor operator/(OperandAt a, OperandAt b);
Tensor operator-(TensorAt x);

}  // namespace tg
