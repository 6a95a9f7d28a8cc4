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

// Axes of a reduction: one axis, a list, or every axis. A list, however written, names exactly the
// axes reduced, so an empty one reduces none (NumPy's axis=()): `sum(x, {})` and
// `sum(x, std::vector<std::int64_t>{})` both keep x's shape. Every axis is spelled by leaving the
// argument out or by `Axes::all()` (NumPy's axis=None, PyTorch's dim omitted), never by braces.
class Axes {
 public:
  Axes() : list_(std::vector<std::int64_t>{}) {}                       // `{}`: the empty list, no axes
  Axes(std::int64_t axis) : list_(std::vector<std::int64_t>{axis}) {}  // NOLINT
  Axes(int axis) : list_(std::vector<std::int64_t>{axis}) {}           // NOLINT
  Axes(std::initializer_list<std::int64_t> axes) : list_(std::vector<std::int64_t>(axes)) {}
  Axes(std::vector<std::int64_t> axes) : list_(std::move(axes)) {}  // NOLINT
  static Axes all() {
    Axes every;
    every.list_.reset();
    return every;
  }
  bool is_all() const { return !list_.has_value(); }
  // The axes as written (not yet normalized); std::nullopt for every axis.
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
// x's values in another dtype (f32, f16 or bf16; i32 and bool inputs too), rounded to nearest even
// when the dtype is narrower. The gradient is the cotangent cast back. x itself when it already
// has that dtype (docs/dtypes.md).
Tensor cast(const Tensor& x, DType dtype, TG_CALL_SITE);

// reductions; every axis by default (a 0-d result, or all 1s with keep_dims); `{}` reduces none
Tensor sum(const Tensor& x, Axes axes = Axes::all(), ReduceOptions options = {}, TG_CALL_SITE);
Tensor mean(const Tensor& x, Axes axes = Axes::all(), ReduceOptions options = {}, TG_CALL_SITE);
Tensor max(const Tensor& x, Axes axes = Axes::all(), ReduceOptions options = {}, TG_CALL_SITE);
Tensor min(const Tensor& x, Axes axes = Axes::all(), ReduceOptions options = {}, TG_CALL_SITE);
// i32 indices over one axis; without one (omitted or std::nullopt), the flat index over the whole
// tensor (a 0-d result), as NumPy's axis=None.
Tensor argmax(const Tensor& x, std::optional<std::int64_t> axis = std::nullopt, ReduceOptions options = {},
              TG_CALL_SITE);
Tensor argmin(const Tensor& x, std::optional<std::int64_t> axis = std::nullopt, ReduceOptions options = {},
              TG_CALL_SITE);
// Braces do not compile here: `argmax(x, {})` would be std::nullopt (every axis) while `{}` means no
// axes for the reductions above, and a list of axes is not an index reduction.
Tensor argmax(const Tensor& x, std::initializer_list<std::int64_t> axes, ReduceOptions options = {},
              TG_CALL_SITE) = delete;
Tensor argmin(const Tensor& x, std::initializer_list<std::int64_t> axes, ReduceOptions options = {},
              TG_CALL_SITE) = delete;
Tensor softmax(const Tensor& x, std::int64_t axis = -1, TG_CALL_SITE);
Tensor log_softmax(const Tensor& x, std::int64_t axis = -1, TG_CALL_SITE);

// matmul as torch.matmul: [..., M, K] x [..., K, N] -> [..., M, N] with the batch dims broadcast
// (NumPy rules); a 1-D lhs [K] is a row and a 1-D rhs [K] a column, that dim dropped from the result
Tensor matmul(const Tensor& a, const Tensor& b, TG_CALL_SITE);
// matmul with the result in `out` (a float dtype). 16-bit a and b with out = f32 multiply exactly
// and accumulate in f32 with no rounding to 16 bits in between: the graph says so as casts of the
// operands to f32 (a backend may run that pattern on its matrix units). An out narrower than the
// operands rounds the product once. The operands must share one float dtype.
Tensor matmul(const Tensor& a, const Tensor& b, DType out, TG_CALL_SITE);

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

// structure
Tensor narrow(const Tensor& x, std::int64_t axis, std::int64_t start, std::int64_t length, TG_CALL_SITE);
Tensor pad(const Tensor& x, std::int64_t axis, std::int64_t before, std::int64_t after, TG_CALL_SITE);  // zeros
Tensor concat(const std::vector<Tensor>& xs, std::int64_t axis = 0, TG_CALL_SITE);
// Composite (built from other ops, not registry ops):
Tensor stack(const std::vector<Tensor>& xs, std::int64_t axis = 0, TG_CALL_SITE);  // reshape + concat
std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes, std::int64_t axis = 0,
                          TG_CALL_SITE);                                     // narrow per piece
Tensor flatten(const Tensor& x, std::int64_t start_axis = 0, TG_CALL_SITE);  // merges start_axis.. into one
Tensor split_heads(const Tensor& x, std::int64_t heads, TG_CALL_SITE);       // [..., T, H*d] -> [..., H, T, d]
Tensor merge_heads(const Tensor& x, TG_CALL_SITE);                           // [..., H, T, d] -> [..., T, H*d]

// indexing (indices are i32; out-of-range values fail the run with an error naming the op)
Tensor one_hot(const Tensor& indices, std::int64_t depth, TG_CALL_SITE);     // f32 [..., depth]
Tensor embedding(const Tensor& table, const Tensor& indices, TG_CALL_SITE);  // [V, D] x [...] -> [..., D]
Tensor take_along_axis(const Tensor& x, const Tensor& indices, std::int64_t axis, TG_CALL_SITE);
// The adjoint of take_along_axis: a zero tensor shaped like `indices` with `size` along `axis`, into
// which each update is added at its index.
Tensor scatter_add(const Tensor& updates, const Tensor& indices, std::int64_t axis, std::int64_t size, TG_CALL_SITE);
Tensor softmax_causal(const Tensor& scores, TG_CALL_SITE);              // [..., T, T], last axis, j > i masked
Tensor where_causal(const Tensor& x, double fill_value, TG_CALL_SITE);  // [..., T, T], j > i set to fill_value

// losses over the last axis of [..., C] with i32 targets [...]
enum class Reduction : std::uint8_t { none, mean, sum };
struct LossOptions {
  Reduction reduction = Reduction::mean;
};
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, LossOptions options = {}, TG_CALL_SITE);
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, LossOptions options = {}, TG_CALL_SITE);

// images, NCHW (PyTorch's conv2d: weight [O, C / groups, KH, KW])
// A per-axis pair (height, width); one number sets both, as PyTorch's int arguments do.
struct Pair2d {
  std::int64_t h = 0;
  std::int64_t w = 0;
  constexpr Pair2d(std::int64_t both) : h(both), w(both) {}  // NOLINT(google-explicit-constructor)
  constexpr Pair2d(std::int64_t height, std::int64_t width) : h(height), w(width) {}
  friend bool operator==(const Pair2d&, const Pair2d&) = default;
};
// Zeros around the image, per axis; or `same` (PyTorch's padding='same', stride 1 only): the output
// keeps the input's size, the odd extra row or column of an even dilation * (kernel - 1) going
// after the image, as in PyTorch.
struct Conv2dPadding : Pair2d {
  using Pair2d::Pair2d;
  bool same = false;
};
inline constexpr Conv2dPadding kPaddingSame = [] {
  Conv2dPadding p(0);
  p.same = true;
  return p;
}();
struct Conv2dOptions {
  Pair2d stride = 1;
  Conv2dPadding padding = 0;  // or tg::kPaddingSame
  Pair2d dilation = 1;        // spacing of the kernel's taps
  std::int64_t groups = 1;    // input and output channels split into this many independent convolutions
  // The result's dtype, as matmul(a, b, out): 16-bit input and weight with out = f32 multiply
  // exactly and accumulate in f32 (both cast to f32 in the graph); unset: the operands' dtype.
  std::optional<DType> out;
};
Tensor conv2d(const Tensor& input, const Tensor& weight, Conv2dOptions options = {}, TG_CALL_SITE);
struct Pool2dOptions {
  std::optional<std::int64_t> stride;  // defaults to the kernel size
  std::int64_t padding = 0;
};
Tensor max_pool2d(const Tensor& x, std::int64_t kernel, Pool2dOptions options = {}, TG_CALL_SITE);
Tensor nearest_upsample2d(const Tensor& x, std::int64_t factor, TG_CALL_SITE);  // composite
// The ops that conv2d's and max_pool2d's gradient rules emit:
Tensor conv2d_input_grad(const Tensor& grad_output, const Tensor& weight, std::int64_t height, std::int64_t width,
                         Conv2dOptions options, TG_CALL_SITE);
Tensor conv2d_weight_grad(const Tensor& input, const Tensor& grad_output, std::int64_t kernel_h, std::int64_t kernel_w,
                          Conv2dOptions options, TG_CALL_SITE);
Tensor max_pool2d_grad(const Tensor& x, const Tensor& grad_output, std::int64_t kernel, std::int64_t stride,
                       std::int64_t padding, TG_CALL_SITE);

// random: counter-based draws keyed by (the graph's step seed input, a per-call salt, element index),
// so results do not depend on thread count and a backward pass recomputes the same mask.
Tensor randn(Shape shape, TG_CALL_SITE);                  // N(0, 1), no gradient
Tensor dropout(const Tensor& x, double p, TG_CALL_SITE);  // inverted dropout, p in [0, 1); p == 0 returns x

// normalization over the last axis (composite)
Tensor layer_norm(const Tensor& x, const std::optional<Tensor>& gain, const std::optional<Tensor>& bias,
                  double eps = 1e-5, TG_CALL_SITE);
Tensor rms_norm(const Tensor& x, const std::optional<Tensor>& gain, double eps = 1e-6, TG_CALL_SITE);

// Operators. The call site rides along on the implicit conversion of the operands.
class OperandAt {
 public:
  OperandAt(const Tensor& tensor, CallSite loc = CallSite::current()) : operand(tensor), site(loc) {}  // NOLINT
  OperandAt(double scalar, CallSite loc = CallSite::current()) : operand(scalar), site(loc) {}         // NOLINT
  OperandAt(float scalar, CallSite loc = CallSite::current()) : operand(scalar), site(loc) {}          // NOLINT
  OperandAt(int scalar, CallSite loc = CallSite::current()) : operand(scalar), site(loc) {}            // NOLINT
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
