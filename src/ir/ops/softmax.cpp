// softmax and log_softmax along one axis: shape rules, gradient rules, samples and the front-end.
#include "tensorgrad/ir/ops/ids/softmax.h"

#include "rules.h"

namespace tg {

namespace {

using rules::kMaxSampleElements;

TensorType softmax_rule(const Attrs& attrs, std::span<const TensorType> inputs) {
  const TensorType& x = inputs[0];
  rules::require_dtype(x, DType::f32, "input");
  const std::int64_t axis = attrs.integer("axis");
  // Attributes hold the normalized axis; the parser hands raw ones, so the range is checked here.
  if (axis < 0 || axis >= x.rank()) {
    rules::rule_broken("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(x.rank()));
  }
  return x;
}

// Each output element depends on the sum over the axis.
std::int64_t softmax_reduction_length(const Attrs& attrs, std::span<const TensorType> inputs) {
  return inputs[0].shape.at(static_cast<std::size_t>(attrs.integer("axis")));
}

// y * (g - sum(g * y)) with the sum over the softmax axis.
std::vector<std::optional<Tensor>> softmax_grad(const GradArgs& args) {
  const std::int64_t axis = args.attrs.integer("axis");
  const Tensor& y = args.output;
  const Tensor& g = args.cotangent;
  return {mul(y, sub(g, sum(mul(g, y), axis, {.keep_dims = true})))};
}

// g - softmax(x) * sum(g), where softmax(x) = exp(log_softmax(x)).
std::vector<std::optional<Tensor>> log_softmax_grad(const GradArgs& args) {
  const std::int64_t axis = args.attrs.integer("axis");
  const Tensor& g = args.cotangent;
  return {sub(g, mul(exp(args.output), sum(g, axis, {.keep_dims = true})))};
}

std::optional<OpSample> softmax_sample(SampleRng& rng, const std::optional<TensorType>& first) {
  TensorType x{DType::f32, {}};
  if (first) {
    if (first->dtype != DType::f32 || first->rank() < 1) return std::nullopt;
    x = *first;
  } else {
    do {
      x.shape = rng.shape(1, 4);
    } while (num_elements(x.shape) > rules::sample_cap(rng));
  }
  Attrs attrs{{"axis", rng.uniform_int(0, x.rank() - 1)}};
  // Softmax is smooth everywhere; a wider range exercises the max subtraction.
  return OpSample{std::move(attrs), {x}, {ValueDomain::real_range(-4, 4)}};
}

Tensor emit_softmax(OpId op, const Tensor& x, std::int64_t axis, const CallSite& loc) {
  std::int64_t normalized = 0;
  try {
    normalized = rules::normalize_axis(axis, x.rank());
  } catch (const RuleBroken& broken) {
    throw ShapeError(std::string(op_name(op)), {x.type()}, broken.rule, frontend::site(loc));
  }
  return frontend::emit(op, {x}, Attrs{{"axis", normalized}}, loc);
}

}  // namespace

const OpDef& Softmax_def() {
  static const OpDef def{.name = op_name(op::Softmax),
                         .arity = 1,
                         .attrs = {{"axis", AttrKind::integer}},
                         .shape = softmax_rule,
                         .grad = softmax_grad,
                         .samples = softmax_sample,
                         .tolerance = ToleranceClass::reduction,
                         .reduction_length = softmax_reduction_length};
  return def;
}

const OpDef& LogSoftmax_def() {
  static const OpDef def{.name = op_name(op::LogSoftmax),
                         .arity = 1,
                         .attrs = {{"axis", AttrKind::integer}},
                         .shape = softmax_rule,
                         .grad = log_softmax_grad,
                         .samples = softmax_sample,
                         .tolerance = ToleranceClass::reduction,
                         .reduction_length = softmax_reduction_length};
  return def;
}

Tensor softmax(const Tensor& x, std::int64_t axis, CallSite loc) { return emit_softmax(op::Softmax, x, axis, loc); }
Tensor log_softmax(const Tensor& x, std::int64_t axis, CallSite loc) {
  return emit_softmax(op::LogSoftmax, x, axis, loc);
}

}  // namespace tg
