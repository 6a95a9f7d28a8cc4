// Classification losses over the last (class) axis with i32 targets: nll_loss and the fused
// cross_entropy (log_softmax + NLL in one kernel). Shape rules, gradient rules, samples and the
// front-end, which turns LossOptions into the string attribute `reduction`.
#include "tensorgrad/ir/ops/ids/losses.h"

#include <algorithm>

#include "rules.h"

namespace tg {

namespace {

using rules::kMaxSampleElements;

using Grads = std::vector<std::optional<Tensor>>;

std::string reduction_name(Reduction reduction) {
  switch (reduction) {
    case Reduction::none:
      return "none";
    case Reduction::mean:
      return "mean";
    case Reduction::sum:
      return "sum";
  }
  // A value cast from outside the enum: the shape rule refuses it with a ShapeError.
  return "<invalid Reduction " + std::to_string(static_cast<int>(reduction)) + ">";
}

Reduction checked_reduction(const Attrs& attrs) {
  const std::string& name = attrs.string("reduction");
  for (Reduction r : {Reduction::none, Reduction::mean, Reduction::sum}) {
    if (name == reduction_name(r)) return r;
  }
  rules::rule_broken("reduction must be \"none\", \"mean\" or \"sum\", got \"" + name + "\"");
}

// inputs: scores [..., C] (log-probabilities or logits), targets [...].
TensorType loss_rule(const Attrs& attrs, std::span<const TensorType> inputs) {
  const TensorType& scores = inputs[0];
  const TensorType& targets = inputs[1];
  rules::require_dtype(scores, DType::f32, "input 0");
  rules::require_dtype(targets, DType::i32, "targets");
  if (scores.rank() < 1) rules::rule_broken("input 0 needs a class axis: rank >= 1, got rank 0");
  if (scores.shape.back() < 1) rules::rule_broken("the class axis must have at least one class, got 0");
  const Shape batch(scores.shape.begin(), scores.shape.end() - 1);
  if (targets.shape != batch) {
    rules::rule_broken("targets must have the input's shape without the class axis, " + shape_to_string(batch) +
                       ", got " + shape_to_string(targets.shape));
  }
  return checked_reduction(attrs) == Reduction::none ? TensorType{DType::f32, batch} : TensorType{DType::f32, {}};
}

// The cotangent of the loss spread over the class axis: per position for "none", shared evenly
// among the N positions for "mean", as is for "sum" (a 0-d cotangent broadcasts by itself).
Tensor per_position_cotangent(const GradArgs& args) {
  const Tensor& g = args.cotangent;
  switch (checked_reduction(args.attrs)) {
    case Reduction::none: {
      Shape with_class_axis = args.inputs[1].shape();  // a copy: emitting nodes moves the graph
      with_class_axis.push_back(1);
      return reshape(g, with_class_axis);
    }
    case Reduction::mean:
      return div(g, static_cast<double>(args.inputs[1].size()));
    case Reduction::sum:
      break;
  }
  return g;
}

// d(-log_probs[target]) = -one_hot(target).
Grads nll_loss_grad(const GradArgs& args) {
  const std::int64_t classes = args.inputs[0].shape().back();
  const Tensor picked = cast(one_hot(args.inputs[1], classes), args.inputs[0].dtype());
  return {neg(mul(picked, per_position_cotangent(args))), std::nullopt};
}

// d(logsumexp(x) - x[target]) = softmax(x) - one_hot(target).
Grads cross_entropy_grad(const GradArgs& args) {
  const std::int64_t classes = args.inputs[0].shape().back();
  const Tensor residual =
      sub(softmax(args.inputs[0], -1), cast(one_hot(args.inputs[1], classes), args.inputs[0].dtype()));
  return {mul(residual, per_position_cotangent(args)), std::nullopt};
}

// A "mean" or "sum" adds N per-position terms; each cross-entropy term itself sums over C classes.
std::int64_t nll_reduction_length(const Attrs& attrs, std::span<const TensorType> inputs) {
  return checked_reduction(attrs) == Reduction::none ? 1 : inputs[1].size();
}
std::int64_t cross_entropy_reduction_length(const Attrs& attrs, std::span<const TensorType> inputs) {
  const std::int64_t classes = inputs[0].shape.back();
  return checked_reduction(attrs) == Reduction::none ? classes : classes * std::max<std::int64_t>(inputs[1].size(), 1);
}

std::optional<OpSample> loss_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  TensorType scores{DType::f32, {}};
  if (first) {
    if (first->dtype != DType::f32 || first->rank() < 1 || first->size() == 0) return std::nullopt;
    scores = *first;
  } else {
    scores.shape = rng.shape(0, 2);  // the positions [...]
    const std::int64_t classes = rng.dim(8);
    while (num_elements(scores.shape) * classes > rules::sample_cap(rng)) {
      auto largest = std::max_element(scores.shape.begin(), scores.shape.end());
      *largest = (*largest + 1) / 2;
    }
    scores.shape.push_back(classes);
  }
  const TensorType targets{DType::i32, Shape(scores.shape.begin(), scores.shape.end() - 1)};
  constexpr Reduction kReductions[] = {Reduction::none, Reduction::mean, Reduction::sum};
  Attrs attrs{{"reduction", reduction_name(kReductions[rng.uniform_int(0, 2)])}};
  // Both losses are smooth in their float input; targets must be valid class indices.
  const ValueDomain target_domain = ValueDomain::indices(0, static_cast<double>(scores.shape.back() - 1));
  return OpSample{std::move(attrs), {scores, targets}, {ValueDomain::real_range(-4, 4), target_domain}};
}

const std::vector<AttrSpec> kLossAttrs = {{"reduction", AttrKind::string}};

Tensor emit_loss(OpId op, const Tensor& scores, const Tensor& targets, LossOptions options, const CallSite& loc) {
  return frontend::emit(op, {scores, targets}, Attrs{{"reduction", reduction_name(options.reduction)}}, loc);
}

}  // namespace

const OpDef& NllLoss_def() {
  static const OpDef def{.name = op_name(op::NllLoss),
                         .arity = 2,
                         .attrs = kLossAttrs,
                         .shape = loss_rule,
                         .grad = nll_loss_grad,
                         .samples = loss_samples,
                         .tolerance = ToleranceClass::reduction,
                         .reduction_length = nll_reduction_length};
  return def;
}

const OpDef& CrossEntropy_def() {
  static const OpDef def{.name = op_name(op::CrossEntropy),
                         .arity = 2,
                         .attrs = kLossAttrs,
                         .shape = loss_rule,
                         .grad = cross_entropy_grad,
                         .samples = loss_samples,
                         .tolerance = ToleranceClass::reduction,
                         .reduction_length = cross_entropy_reduction_length};
  return def;
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, LossOptions options, CallSite loc) {
  return emit_loss(op::NllLoss, log_probs, targets, options, loc);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, LossOptions options, CallSite loc) {
  return emit_loss(op::CrossEntropy, logits, targets, options, loc);
}

}  // namespace tg
