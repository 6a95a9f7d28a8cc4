// Reductions over a set of axes (sum, mean, max, min) and index reductions over one axis (argmax,
// argmin): shape rules, gradient rules, samples and the front-end functions.
#include "tensorgrad/ir/ops/ids/reduce.h"

#include <algorithm>

#include "rules.h"

namespace tg {

namespace {

using rules::kMaxSampleElements;

// Attributes reach shape rules unchecked from the parser, so axes must be validated here even
// though the front-end normalizes them: in range, sorted, distinct.
void check_normalized_axes(std::span<const std::int64_t> axes, std::int64_t rank) {
  for (std::size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= rank) {
      rules::rule_broken("axis " + std::to_string(axes[i]) + " is out of range for rank " + std::to_string(rank));
    }
    if (i > 0 && axes[i] <= axes[i - 1]) {
      rules::rule_broken("axes " + rules::axes_to_string(axes) + " must be sorted and distinct");
    }
  }
}

bool is_reduced(std::span<const std::int64_t> axes, std::int64_t axis) {
  return std::find(axes.begin(), axes.end(), axis) != axes.end();
}

// The input shape with every reduced axis set to 1: the output's shape under keep_dims.
Shape keep_dims_shape(const Shape& in, std::span<const std::int64_t> axes) {
  Shape out = in;
  for (auto a : axes) out[static_cast<std::size_t>(a)] = 1;
  return out;
}

Shape reduced_shape(const Shape& in, std::span<const std::int64_t> axes, bool keep_dims) {
  if (keep_dims) return keep_dims_shape(in, axes);
  Shape out;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (!is_reduced(axes, static_cast<std::int64_t>(i))) out.push_back(in[i]);
  }
  return out;
}

std::int64_t reduced_count(const Shape& in, std::span<const std::int64_t> axes) {
  std::int64_t count = 1;
  for (auto a : axes) count *= in[static_cast<std::size_t>(a)];
  return count;
}

TensorType reduce_rule(const Attrs& attrs, std::span<const TensorType> inputs, bool needs_elements) {
  const TensorType& x = inputs[0];
  rules::require_dtype(x, DType::f32, "input");
  const auto& axes = attrs.ints("axes");
  check_normalized_axes(axes, x.rank());
  // max/min of nothing has no value (sum and mean of nothing are 0 and NaN, as in NumPy).
  if (needs_elements && reduced_count(x.shape, axes) == 0) {
    rules::rule_broken("cannot reduce over empty axes " + rules::axes_to_string(axes) + " of shape " +
                       shape_to_string(x.shape));
  }
  return {DType::f32, reduced_shape(x.shape, axes, attrs.boolean("keep_dims"))};
}

TensorType sum_mean_rule(const Attrs& attrs, std::span<const TensorType> inputs) {
  return reduce_rule(attrs, inputs, false);
}
TensorType max_min_rule(const Attrs& attrs, std::span<const TensorType> inputs) {
  return reduce_rule(attrs, inputs, true);
}

TensorType arg_rule(const Attrs& attrs, std::span<const TensorType> inputs) {
  const TensorType& x = inputs[0];
  rules::require_dtype(x, DType::f32, "input");
  const std::int64_t axis = attrs.integer("axis");
  if (axis < 0 || axis >= x.rank()) {
    rules::rule_broken("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(x.rank()));
  }
  if (x.shape[static_cast<std::size_t>(axis)] == 0) {
    rules::rule_broken("cannot take an index over the empty axis " + std::to_string(axis));
  }
  // The result is an i32 index: an axis longer than 2^31 would give indices that do not fit.
  constexpr std::int64_t kMaxIndexedLength = std::int64_t{1} << 31;
  if (x.shape[static_cast<std::size_t>(axis)] > kMaxIndexedLength) {
    rules::rule_broken("axis " + std::to_string(axis) + " of " + shape_to_string(x.shape) + " has more than 2^31 (" +
                       std::to_string(kMaxIndexedLength) + ") entries, past what an i32 index holds");
  }
  const std::int64_t axes[] = {axis};
  return {DType::i32, reduced_shape(x.shape, axes, attrs.boolean("keep_dims"))};
}

// The cotangent of a reduction spread back over the input's shape. Shapes are taken by value here
// and below: a Tensor's shape() refers into the graph, which moves as nodes are emitted.
Tensor spread_back(const Tensor& g, Shape in_shape, std::span<const std::int64_t> axes) {
  const Shape kept = keep_dims_shape(in_shape, axes);
  const Tensor g_kept = g.shape() == kept ? g : reshape(g, kept);
  return g_kept.shape() == in_shape ? g_kept : broadcast_to(g_kept, in_shape);
}

std::vector<std::optional<Tensor>> sum_grad(const GradArgs& args) {
  const Shape in_shape = args.inputs[0].shape();
  const std::vector<std::int64_t> axes = args.attrs.ints("axes");
  return {spread_back(args.cotangent, in_shape, axes)};
}

std::vector<std::optional<Tensor>> mean_grad(const GradArgs& args) {
  const Shape in_shape = args.inputs[0].shape();
  const std::vector<std::int64_t> axes = args.attrs.ints("axes");  // a copy, as with shapes
  const double count = static_cast<double>(reduced_count(in_shape, axes));
  return {div(spread_back(args.cotangent, in_shape, axes), count)};
}

// The cotangent goes to the elements equal to the extremum, shared evenly among ties.
std::vector<std::optional<Tensor>> extremum_grad(const GradArgs& args) {
  const Tensor& x = args.inputs[0];
  const Shape in_shape = x.shape();
  const std::vector<std::int64_t> axes = args.attrs.ints("axes");  // a copy, as with shapes
  // The 0/1 mask in x's dtype (exact in every float dtype), so the rule stays in that dtype.
  const Tensor hits = cast(where(equal(x, spread_back(args.output, in_shape, axes)), 1.0, 0.0), x.dtype());
  const Tensor ties = sum(hits, axes, {.keep_dims = true});
  return {div(mul(spread_back(args.cotangent, in_shape, axes), hits), ties)};
}

// A shape of rank 0..4 with dims 1..8 and at most rules::sample_cap(rng) elements.
Shape sample_shape(SampleRng& rng, int min_rank) {
  for (;;) {
    Shape s = rng.shape(min_rank, 4);
    if (num_elements(s) <= rules::sample_cap(rng)) return s;
  }
}

std::optional<TensorType> sample_input(SampleRng& rng, const std::optional<TensorType>& first, int min_rank) {
  if (!first) return TensorType{DType::f32, sample_shape(rng, min_rank)};
  if (first->dtype != DType::f32 || first->rank() < min_rank || first->size() == 0) return std::nullopt;
  return *first;
}

std::optional<OpSample> reduce_sample(SampleRng& rng, const std::optional<TensorType>& first, ValueDomain domain) {
  const auto x = sample_input(rng, first, 0);
  if (!x) return std::nullopt;
  std::vector<std::int64_t> axes;
  const bool all_axes = rng.coin(0.25);
  for (std::int64_t a = 0; a < x->rank(); ++a) {
    if (all_axes || rng.coin()) axes.push_back(a);
  }
  Attrs attrs{{"axes", axes}, {"keep_dims", rng.coin()}};
  return OpSample{std::move(attrs), {*x}, {domain}};
}

std::optional<OpSample> sum_mean_sample(SampleRng& rng, const std::optional<TensorType>& first) {
  return reduce_sample(rng, first, ValueDomain::real_range(-2, 2));
}
std::optional<OpSample> max_min_sample(SampleRng& rng, const std::optional<TensorType>& first) {
  return reduce_sample(rng, first, ValueDomain::untied());
}

std::optional<OpSample> arg_sample(SampleRng& rng, const std::optional<TensorType>& first) {
  const auto x = sample_input(rng, first, 1);
  if (!x) return std::nullopt;
  Attrs attrs{{"axis", rng.uniform_int(0, x->rank() - 1)}, {"keep_dims", rng.coin()}};
  return OpSample{std::move(attrs), {*x}, {ValueDomain::untied()}};
}

const std::vector<AttrSpec> kReduceAttrs = {{"axes", AttrKind::ints}, {"keep_dims", AttrKind::boolean}};
const std::vector<AttrSpec> kArgAttrs = {{"axis", AttrKind::integer}, {"keep_dims", AttrKind::boolean}};

// Front-end axis handling throws the same ShapeError a shape rule would, naming the user's call.
std::vector<std::int64_t> resolve_axes(OpId op, const Tensor& x, const Axes& axes, const CallSite& loc) {
  if (!axes.list()) {
    std::vector<std::int64_t> all(static_cast<std::size_t>(x.rank()));
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::int64_t>(i);
    return all;
  }
  try {
    return rules::normalize_axes(*axes.list(), x.rank());
  } catch (const RuleBroken& broken) {
    throw ShapeError(std::string(op_name(op)), {x.type()}, broken.rule, frontend::site(loc));
  }
}

Tensor emit_reduce(OpId op, const Tensor& x, const Axes& axes, ReduceOptions options, const CallSite& loc) {
  Attrs attrs{{"axes", resolve_axes(op, x, axes, loc)}, {"keep_dims", options.keep_dims}};
  return frontend::emit(op, {x}, std::move(attrs), loc);
}

Tensor emit_arg(OpId op, const Tensor& x, std::optional<std::int64_t> axis, ReduceOptions options,
                const CallSite& loc) {
  if (axis) {
    std::int64_t normalized = 0;
    try {
      normalized = rules::normalize_axis(*axis, x.rank());
    } catch (const RuleBroken& broken) {
      throw ShapeError(std::string(op_name(op)), {x.type()}, broken.rule, frontend::site(loc));
    }
    return frontend::emit(op, {x}, Attrs{{"axis", normalized}, {"keep_dims", options.keep_dims}}, loc);
  }
  // Like np.argmax without an axis: the flat index into the whole tensor.
  const Tensor flat = reshape(x, {x.size()}, loc);
  const Tensor index = frontend::emit(op, {flat}, Attrs{{"axis", std::int64_t{0}}, {"keep_dims", false}}, loc);
  if (!options.keep_dims || x.rank() == 0) return index;
  return reshape(index, Shape(static_cast<std::size_t>(x.rank()), 1), loc);
}

}  // namespace

const OpDef& Sum_def() {
  static const OpDef def{.name = op_name(op::Sum),
                         .arity = 1,
                         .attrs = kReduceAttrs,
                         .shape = sum_mean_rule,
                         .grad = sum_grad,
                         .samples = sum_mean_sample,
                         .tolerance = ToleranceClass::reduction};
  return def;
}

const OpDef& Mean_def() {
  static const OpDef def{.name = op_name(op::Mean),
                         .arity = 1,
                         .attrs = kReduceAttrs,
                         .shape = sum_mean_rule,
                         .grad = mean_grad,
                         .samples = sum_mean_sample,
                         .tolerance = ToleranceClass::reduction};
  return def;
}

const OpDef& Max_def() {
  static const OpDef def{.name = op_name(op::Max),
                         .arity = 1,
                         .attrs = kReduceAttrs,
                         .shape = max_min_rule,
                         .grad = extremum_grad,
                         .samples = max_min_sample,
                         .tolerance = ToleranceClass::exact};
  return def;
}

const OpDef& Min_def() {
  static const OpDef def{.name = op_name(op::Min),
                         .arity = 1,
                         .attrs = kReduceAttrs,
                         .shape = max_min_rule,
                         .grad = extremum_grad,
                         .samples = max_min_sample,
                         .tolerance = ToleranceClass::exact};
  return def;
}

const OpDef& Argmax_def() {
  static const OpDef def{.name = op_name(op::Argmax),
                         .arity = 1,
                         .attrs = kArgAttrs,
                         .shape = arg_rule,
                         .differentiable = false,
                         .samples = arg_sample,
                         .tolerance = ToleranceClass::exact};
  return def;
}

const OpDef& Argmin_def() {
  static const OpDef def{.name = op_name(op::Argmin),
                         .arity = 1,
                         .attrs = kArgAttrs,
                         .shape = arg_rule,
                         .differentiable = false,
                         .samples = arg_sample,
                         .tolerance = ToleranceClass::exact};
  return def;
}

Tensor sum(const Tensor& x, Axes axes, ReduceOptions options, CallSite loc) {
  return emit_reduce(op::Sum, x, axes, options, loc);
}
Tensor mean(const Tensor& x, Axes axes, ReduceOptions options, CallSite loc) {
  return emit_reduce(op::Mean, x, axes, options, loc);
}
Tensor max(const Tensor& x, Axes axes, ReduceOptions options, CallSite loc) {
  return emit_reduce(op::Max, x, axes, options, loc);
}
Tensor min(const Tensor& x, Axes axes, ReduceOptions options, CallSite loc) {
  return emit_reduce(op::Min, x, axes, options, loc);
}
Tensor argmax(const Tensor& x, std::optional<std::int64_t> axis, ReduceOptions options, CallSite loc) {
  return emit_arg(op::Argmax, x, axis, options, loc);
}
Tensor argmin(const Tensor& x, std::optional<std::int64_t> axis, ReduceOptions options, CallSite loc) {
  return emit_arg(op::Argmin, x, axis, options, loc);
}

}  // namespace tg
