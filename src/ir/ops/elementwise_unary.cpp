// Elementwise unary ops: f32 math (neg, abs, square, sqrt, rsqrt, exp, log, sin, cos, tanh, sigmoid,
// relu, gelu, silu, clamp) and stop_gradient, the identity that blocks gradients (any dtype).
#include "tensorgrad/ir/ops/ids/elementwise_unary.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "rules.h"

namespace tg {

namespace {

using rules::kMaxSampleElements;

// ---- shape rules -------------------------------------------------------------------------------

TensorType float_unary_shape(const Attrs&, std::span<const TensorType> in) {
  rules::require_dtype(in[0], DType::f32, "input");
  return in[0];
}

TensorType any_dtype_unary_shape(const Attrs&, std::span<const TensorType> in) { return in[0]; }

std::string real_to_string(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

TensorType clamp_shape(const Attrs& attrs, std::span<const TensorType> in) {
  rules::require_dtype(in[0], DType::f32, "input");
  const double lo = attrs.real("lo");
  const double hi = attrs.real("hi");
  if (!(lo <= hi)) rule_broken("lo must be <= hi, got lo=" + real_to_string(lo) + " and hi=" + real_to_string(hi));
  return in[0];
}

// ---- grad rules --------------------------------------------------------------------------------

using Grads = std::vector<std::optional<Tensor>>;

Grads neg_grad(const GradArgs& args) { return {neg(args.cotangent)}; }

Grads abs_grad(const GradArgs& args) {
  const Tensor& g = args.cotangent;
  return {where(less(args.inputs[0], 0.0), neg(g), g)};
}

Grads square_grad(const GradArgs& args) { return {args.cotangent * args.inputs[0] * 2.0}; }

// d sqrt(x) = 1 / (2 sqrt(x)): reuses the output.
Grads sqrt_grad(const GradArgs& args) { return {args.cotangent / (args.output * 2.0)}; }

// d x^(-1/2) = -x^(-3/2) / 2 = -out^3 / 2.
Grads rsqrt_grad(const GradArgs& args) {
  const Tensor& out = args.output;
  return {args.cotangent * (out * square(out) * -0.5)};
}

Grads exp_grad(const GradArgs& args) { return {args.cotangent * args.output}; }

Grads log_grad(const GradArgs& args) { return {args.cotangent / args.inputs[0]}; }

Grads sin_grad(const GradArgs& args) { return {args.cotangent * cos(args.inputs[0])}; }

Grads cos_grad(const GradArgs& args) { return {neg(args.cotangent * sin(args.inputs[0]))}; }

// tanh' = 1 - tanh^2 = 4 s(2x) s(-2x), s = sigmoid: 1 - tanh(x)^2 cancels once tanh rounds near
// +-1 (from |x| ~ 9 in f32 and ~ 19 in f64 it is 0 where the true slope is ~1e-8 and ~1e-17);
// the sigmoids of opposite arguments keep every digit, down to the slope's underflow.
Grads tanh_grad(const GradArgs& args) {
  const Tensor& x = args.inputs[0];
  return {args.cotangent * (sigmoid(x * 2.0) * sigmoid(x * -2.0) * 4.0)};
}

// sigmoid' = s(x) (1 - s(x)) = s(x) s(-x): 1 - s(x) cancels for large x (0 from x ~ 17 in f32),
// s(-x) is the same number without cancelling.
Grads sigmoid_grad(const GradArgs& args) { return {args.cotangent * (args.output * sigmoid(neg(args.inputs[0])))}; }

Grads relu_grad(const GradArgs& args) { return {where(greater(args.inputs[0], 0.0), args.cotangent, 0.0)}; }

// gelu(x) = x/2 (1 + tanh(u)) = x s(v), u = c (x + k x^3), v = 2u, s = sigmoid:
// gelu'(x) = s(v) + x s(v) s(-v) v' = s(v) (1 + x s(-v) v'), v' = 2c (1 + 3k x^2).
// The form with 1 + tanh(u) and 1 - tanh(u)^2 cancels for large |x| (as tanh_grad's).
constexpr double kGeluScale = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kGeluCubic = 0.044715;

Grads gelu_grad(const GradArgs& args) {
  const Tensor& x = args.inputs[0];
  GraphBuilder& builder = x.builder();
  const Tensor cubic = frontend::exact_constant(builder, kGeluCubic, x.dtype());
  const Tensor scale = frontend::exact_constant(builder, kGeluScale, x.dtype());
  const Tensor x2 = square(x);
  const Tensor v = (x + x2 * x * cubic) * scale * 2.0;
  const Tensor dv_dx = (x2 * (cubic * 3.0) + 1.0) * scale * 2.0;
  const Tensor slope = sigmoid(v) * (x * sigmoid(neg(v)) * dv_dx + 1.0);
  return {args.cotangent * slope};
}

// silu(x) = x s(x): silu'(x) = s(x) (1 + x s(-x)), with s(-x) for 1 - s(x) (see sigmoid_grad).
Grads silu_grad(const GradArgs& args) {
  const Tensor& x = args.inputs[0];
  return {args.cotangent * (sigmoid(x) * (x * sigmoid(neg(x)) + 1.0))};
}

// Zero outside the open interval (lo, hi), where the output does not move with x.
Grads clamp_grad(const GradArgs& args) {
  const Tensor& x = args.inputs[0];
  const Tensor inside_hi = where(less(x, args.attrs.real("hi")), args.cotangent, 0.0);
  return {where(greater(x, args.attrs.real("lo")), inside_hi, 0.0)};
}

// ---- samples -----------------------------------------------------------------------------------

Shape draw_shape(SampleRng& rng) {
  for (;;) {
    Shape s = rng.shape(0, 4);
    if (num_elements(s) <= rules::sample_cap(rng)) return s;
  }
}

// Grid of a ValueDomain::spaced draw of `count` values (sample.cpp): lo + step*i, jitter < gap/4.
struct Grid {
  double lo;
  double step;
  double gap;
};

Grid spaced_grid(std::int64_t count) {
  constexpr double kGap = 0.05;
  const auto n = static_cast<double>(std::max<std::int64_t>(count, 1));
  return {-2.0, std::max(kGap, 4.0 / n), kGap};
}

// An untied domain laid out so that `kink` falls halfway between two grid points: no value lands
// within step/2 - gap/4 of it, so f32, f64 and finite differences agree about which side it is on.
ValueDomain domain_around_kink(std::int64_t count, double kink) {
  const Grid grid = spaced_grid(count);
  const double below = std::floor(static_cast<double>(std::max<std::int64_t>(count, 1)) / 2);
  const double lo = kink - (below + 0.5) * grid.step;
  return ValueDomain::untied(lo, lo + grid.step * static_cast<double>(std::max<std::int64_t>(count, 1)), grid.gap);
}

template <ValueDomain (*kDomain)(std::int64_t count)>
std::optional<OpSample> float_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  if (first && first->dtype != DType::f32) return std::nullopt;
  const TensorType type = first ? *first : TensorType{DType::f32, draw_shape(rng)};
  return OpSample{{}, {type}, {kDomain(type.size())}};
}

ValueDomain smooth_domain(std::int64_t) { return ValueDomain::real_range(-2, 2); }
ValueDomain positive_domain(std::int64_t) { return ValueDomain::positive(0.5, 3); }
ValueDomain kink_at_zero_domain(std::int64_t count) { return domain_around_kink(count, 0.0); }

// clamp's bounds sit halfway between grid points of the value domain, for the same reason as above.
std::optional<OpSample> clamp_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  if (first && first->dtype != DType::f32) return std::nullopt;
  const TensorType type = first ? *first : TensorType{DType::f32, draw_shape(rng)};
  const Grid grid = spaced_grid(type.size());
  const std::int64_t points = std::max<std::int64_t>(type.size(), 1);
  const auto bound = [&](std::int64_t i) { return grid.lo + (static_cast<double>(i) + 0.5) * grid.step; };
  const std::int64_t lo_index = rng.uniform_int(-1, points / 2);
  const std::int64_t hi_index = rng.uniform_int(lo_index, points);
  Attrs attrs{{"lo", bound(lo_index)}, {"hi", bound(hi_index)}};
  const ValueDomain values = ValueDomain::untied(grid.lo, grid.lo + grid.step * static_cast<double>(points), grid.gap);
  return OpSample{std::move(attrs), {type}, {values}};
}

// stop_gradient takes any dtype; its input is an ordinary value.
std::optional<OpSample> stop_gradient_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  const TensorType type = first ? *first : TensorType{DType::f32, draw_shape(rng)};
  ValueDomain domain = ValueDomain::real_range(-2, 2);
  if (type.dtype == DType::i32) domain = ValueDomain::indices(0, 5);
  if (type.dtype == DType::boolean) domain = ValueDomain::booleans();
  return OpSample{{}, {type}, {domain}};
}

OpDef float_unary_def(OpId id, GradRule grad, SampleRule samples, ToleranceClass tolerance) {
  return OpDef{.name = op_name(id),
               .arity = 1,
               .attrs = {},
               .shape = float_unary_shape,
               .grad = grad,
               .differentiable = true,
               .samples = samples,
               .tolerance = tolerance};
}

constexpr auto kElementwise = ToleranceClass::elementwise;
constexpr auto kTranscendental = ToleranceClass::transcendental;

}  // namespace

const OpDef& Neg_def() {
  static const OpDef def = float_unary_def(op::Neg, neg_grad, float_samples<smooth_domain>, kElementwise);
  return def;
}

const OpDef& Abs_def() {
  static const OpDef def = float_unary_def(op::Abs, abs_grad, float_samples<kink_at_zero_domain>, kElementwise);
  return def;
}

const OpDef& Square_def() {
  static const OpDef def = float_unary_def(op::Square, square_grad, float_samples<smooth_domain>, kElementwise);
  return def;
}

const OpDef& Sqrt_def() {
  static const OpDef def = float_unary_def(op::Sqrt, sqrt_grad, float_samples<positive_domain>, kTranscendental);
  return def;
}

const OpDef& Rsqrt_def() {
  static const OpDef def = float_unary_def(op::Rsqrt, rsqrt_grad, float_samples<positive_domain>, kTranscendental);
  return def;
}

const OpDef& Exp_def() {
  static const OpDef def = float_unary_def(op::Exp, exp_grad, float_samples<smooth_domain>, kTranscendental);
  return def;
}

const OpDef& Log_def() {
  static const OpDef def = float_unary_def(op::Log, log_grad, float_samples<positive_domain>, kTranscendental);
  return def;
}

const OpDef& Sin_def() {
  static const OpDef def = float_unary_def(op::Sin, sin_grad, float_samples<smooth_domain>, kTranscendental);
  return def;
}

const OpDef& Cos_def() {
  static const OpDef def = float_unary_def(op::Cos, cos_grad, float_samples<smooth_domain>, kTranscendental);
  return def;
}

const OpDef& Tanh_def() {
  static const OpDef def = float_unary_def(op::Tanh, tanh_grad, float_samples<smooth_domain>, kTranscendental);
  return def;
}

const OpDef& Sigmoid_def() {
  static const OpDef def = float_unary_def(op::Sigmoid, sigmoid_grad, float_samples<smooth_domain>, kTranscendental);
  return def;
}

const OpDef& Relu_def() {
  static const OpDef def = float_unary_def(op::Relu, relu_grad, float_samples<kink_at_zero_domain>, kElementwise);
  return def;
}

const OpDef& Gelu_def() {
  static const OpDef def = float_unary_def(op::Gelu, gelu_grad, float_samples<smooth_domain>, kTranscendental);
  return def;
}

const OpDef& Silu_def() {
  static const OpDef def = float_unary_def(op::Silu, silu_grad, float_samples<smooth_domain>, kTranscendental);
  return def;
}

const OpDef& Clamp_def() {
  static const OpDef def{.name = op_name(op::Clamp),
                         .arity = 1,
                         .attrs = {{"hi", AttrKind::real}, {"lo", AttrKind::real}},
                         .shape = clamp_shape,
                         .grad = clamp_grad,
                         .differentiable = true,
                         .samples = clamp_samples,
                         .tolerance = kElementwise};
  return def;
}

const OpDef& StopGradient_def() {
  static const OpDef def{.name = op_name(op::StopGradient),
                         .arity = 1,
                         .attrs = {},
                         .shape = any_dtype_unary_shape,
                         .grad = nullptr,
                         .differentiable = false,
                         .samples = stop_gradient_samples,
                         .tolerance = ToleranceClass::exact};
  return def;
}

// ---- front-end ---------------------------------------------------------------------------------

namespace {
Tensor emit_unary(OpId op, const Tensor& x, const CallSite& loc) { return frontend::emit(op, {x}, Attrs{}, loc); }
}  // namespace

Tensor neg(const Tensor& x, CallSite loc) { return emit_unary(op::Neg, x, loc); }
Tensor abs(const Tensor& x, CallSite loc) { return emit_unary(op::Abs, x, loc); }
Tensor square(const Tensor& x, CallSite loc) { return emit_unary(op::Square, x, loc); }
Tensor sqrt(const Tensor& x, CallSite loc) { return emit_unary(op::Sqrt, x, loc); }
Tensor rsqrt(const Tensor& x, CallSite loc) { return emit_unary(op::Rsqrt, x, loc); }
Tensor exp(const Tensor& x, CallSite loc) { return emit_unary(op::Exp, x, loc); }
Tensor log(const Tensor& x, CallSite loc) { return emit_unary(op::Log, x, loc); }
Tensor sin(const Tensor& x, CallSite loc) { return emit_unary(op::Sin, x, loc); }
Tensor cos(const Tensor& x, CallSite loc) { return emit_unary(op::Cos, x, loc); }
Tensor tanh(const Tensor& x, CallSite loc) { return emit_unary(op::Tanh, x, loc); }
Tensor sigmoid(const Tensor& x, CallSite loc) { return emit_unary(op::Sigmoid, x, loc); }
Tensor relu(const Tensor& x, CallSite loc) { return emit_unary(op::Relu, x, loc); }
Tensor gelu(const Tensor& x, CallSite loc) { return emit_unary(op::Gelu, x, loc); }
Tensor silu(const Tensor& x, CallSite loc) { return emit_unary(op::Silu, x, loc); }
Tensor stop_gradient(const Tensor& x, CallSite loc) { return emit_unary(op::StopGradient, x, loc); }

Tensor clamp(const Tensor& x, double lo, double hi, CallSite loc) {
  return frontend::emit(op::Clamp, {x}, Attrs{{"lo", lo}, {"hi", hi}}, loc);
}

}  // namespace tg
