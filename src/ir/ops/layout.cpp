// Layout ops: reshape, permute, swap_axes, broadcast_to and sum_to_shape. All but sum_to_shape move
// data without arithmetic, so they take any dtype and are bit-exact.
#include "tensorgrad/ir/ops/ids/layout.h"

#include <algorithm>
#include <numeric>

#include "rules.h"

namespace tg {

namespace {

using rules::any_value_domain;
using rules::kMaxSampleElements;

// A random shape of rank in [min_rank, max_rank] with at most rules::sample_cap(rng) elements.
Shape small_shape(SampleRng& rng, int min_rank, int max_rank) {
  Shape shape = rng.shape(min_rank, max_rank);
  while (num_elements(shape) > rules::sample_cap(rng)) {
    auto largest = std::max_element(shape.begin(), shape.end());
    *largest = (*largest + 1) / 2;
  }
  return shape;
}

TensorType fresh_or_first(SampleRng& rng, const std::optional<TensorType>& first, int min_rank, int max_rank) {
  if (first) return *first;
  return TensorType{DType::f32, small_shape(rng, min_rank, max_rank)};
}

OpSample single_input_sample(Attrs attrs, const TensorType& input) {
  return OpSample{std::move(attrs), {input}, {any_value_domain(input.dtype)}};
}

void require_nonnegative_dims(const Shape& shape, std::string_view what) {
  for (auto d : shape) {
    if (d < 0) {
      rule_broken(std::string(what) + " " + shape_to_string(shape) + " has a negative dimension " + std::to_string(d));
    }
  }
}

// Rethrows a front-end validation failure as the ShapeError the builder would have thrown.
template <class F>
auto with_shape_error(OpId op, const Tensor& x, const CallSite& loc, F&& body) {
  try {
    return body();
  } catch (const RuleBroken& broken) {
    throw ShapeError(std::string(op_name(op)), {x.type()}, broken.rule, frontend::site(loc));
  }
}

// Negative entries in [-rank, 0) count from the end; anything else is left for the rule to refuse
// with the user's own number in the message.
std::int64_t wrap_negative_axis(std::int64_t axis, std::int64_t rank) {
  return (axis < 0 && axis + rank >= 0) ? axis + rank : axis;
}

std::vector<std::optional<Tensor>> no_grad_unless_float(const GradArgs& args, Tensor grad) {
  if (!is_float(args.inputs[0].dtype())) return {std::nullopt};
  return {std::move(grad)};
}

// ---- reshape ----

TensorType reshape_shape(const Attrs& attrs, std::span<const TensorType> inputs) {
  const Shape& target = attrs.ints("shape");
  require_nonnegative_dims(target, "target shape");
  const auto from = inputs[0].size();
  const auto to = num_elements(target);
  if (from != to) {
    rule_broken("reshape to " + shape_to_string(target) + " changes the element count: " + std::to_string(from) +
                " vs " + std::to_string(to));
  }
  return TensorType{inputs[0].dtype, target};
}

std::vector<std::optional<Tensor>> reshape_grad(const GradArgs& args) {
  return no_grad_unless_float(args, reshape(args.cotangent, args.inputs[0].shape()));
}

// A random factorization of `count` into up to four dims: its prime factors dealt to random axes.
Shape random_factorization(SampleRng& rng, std::int64_t count) {
  if (count == 0) return Shape{0};
  std::vector<std::int64_t> primes;
  std::int64_t rest = count;
  for (std::int64_t p = 2; p * p <= rest; ++p) {
    while (rest % p == 0) {
      primes.push_back(p);
      rest /= p;
    }
  }
  if (rest > 1) primes.push_back(rest);
  const auto rank = rng.uniform_int(primes.empty() ? 0 : 1, 4);
  Shape shape(static_cast<std::size_t>(rank), 1);
  for (auto p : primes) shape[static_cast<std::size_t>(rng.uniform_int(0, rank - 1))] *= p;
  return shape;
}

std::optional<OpSample> reshape_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  const TensorType input = fresh_or_first(rng, first, 0, 4);
  const Shape target = random_factorization(rng, input.size());
  return single_input_sample(Attrs{{"shape", target}}, input);
}

// ---- permute ----

// Checks that `perm` is a permutation of [0, rank).
void require_permutation(const std::vector<std::int64_t>& perm, std::int64_t rank) {
  if (static_cast<std::int64_t>(perm.size()) != rank) {
    rule_broken("perm " + rules::axes_to_string(perm) + " has " + std::to_string(perm.size()) + " entries for rank " +
                std::to_string(rank));
  }
  std::vector<bool> seen(perm.size(), false);
  for (auto axis : perm) {
    if (axis < 0 || axis >= rank) {
      rule_broken("perm entry " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    }
    if (seen[static_cast<std::size_t>(axis)]) {
      rule_broken("perm " + rules::axes_to_string(perm) + " names axis " + std::to_string(axis) + " twice");
    }
    seen[static_cast<std::size_t>(axis)] = true;
  }
}

TensorType permute_shape(const Attrs& attrs, std::span<const TensorType> inputs) {
  const auto& perm = attrs.ints("perm");
  require_permutation(perm, inputs[0].rank());
  Shape out;
  for (auto axis : perm) out.push_back(inputs[0].shape[static_cast<std::size_t>(axis)]);
  return TensorType{inputs[0].dtype, out};
}

std::vector<std::optional<Tensor>> permute_grad(const GradArgs& args) {
  const auto& perm = args.attrs.ints("perm");
  std::vector<std::int64_t> inverse(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i)
    inverse[static_cast<std::size_t>(perm[i])] = static_cast<std::int64_t>(i);
  return no_grad_unless_float(args, permute(args.cotangent, inverse));
}

std::optional<OpSample> permute_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  const TensorType input = fresh_or_first(rng, first, 0, 4);
  std::vector<std::int64_t> perm(static_cast<std::size_t>(input.rank()));
  std::iota(perm.begin(), perm.end(), 0);
  for (std::size_t i = perm.size(); i > 1; --i) {
    std::swap(perm[i - 1], perm[static_cast<std::size_t>(rng.uniform_int(0, static_cast<std::int64_t>(i) - 1))]);
  }
  return single_input_sample(Attrs{{"perm", perm}}, input);
}

// ---- swap_axes ----

TensorType swap_axes_shape(const Attrs& attrs, std::span<const TensorType> inputs) {
  const auto rank = inputs[0].rank();
  Shape out = inputs[0].shape;
  const auto axis0 = attrs.integer("axis0");
  const auto axis1 = attrs.integer("axis1");
  for (auto axis : {axis0, axis1}) {
    if (axis < 0 || axis >= rank) {
      rule_broken("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    }
  }
  std::swap(out[static_cast<std::size_t>(axis0)], out[static_cast<std::size_t>(axis1)]);
  return TensorType{inputs[0].dtype, out};
}

std::vector<std::optional<Tensor>> swap_axes_grad(const GradArgs& args) {
  return no_grad_unless_float(args,
                              swap_axes(args.cotangent, args.attrs.integer("axis0"), args.attrs.integer("axis1")));
}

std::optional<OpSample> swap_axes_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  if (first && first->rank() == 0) return std::nullopt;  // a scalar has no axes to swap
  const TensorType input = fresh_or_first(rng, first, 1, 4);
  const auto axis0 = rng.uniform_int(0, input.rank() - 1);
  const auto axis1 = rng.uniform_int(0, input.rank() - 1);
  return single_input_sample(Attrs{{"axis0", axis0}, {"axis1", axis1}}, input);
}

// ---- broadcast_to ----

// Whether `from` broadcasts to `to` under NumPy rules; otherwise a message naming the first bad axis.
std::optional<std::string> broadcast_mismatch(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) {
    return "rank " + std::to_string(from.size()) + " is more than the target rank " + std::to_string(to.size());
  }
  for (std::size_t k = 1; k <= from.size(); ++k) {  // k counts axes from the end
    const auto d = from[from.size() - k];
    const auto t = to[to.size() - k];
    if (d != t && d != 1) {
      return "axis -" + std::to_string(k) + " has size " + std::to_string(d) + " where the target has " +
             std::to_string(t) + " (sizes must be equal or 1)";
    }
  }
  return std::nullopt;
}

TensorType broadcast_to_shape(const Attrs& attrs, std::span<const TensorType> inputs) {
  const Shape& target = attrs.ints("shape");
  require_nonnegative_dims(target, "target shape");
  if (auto why = broadcast_mismatch(inputs[0].shape, target)) {
    rule_broken(shape_to_string(inputs[0].shape) + " does not broadcast to " + shape_to_string(target) + ": " + *why);
  }
  return TensorType{inputs[0].dtype, target};
}

std::vector<std::optional<Tensor>> broadcast_to_grad(const GradArgs& args) {
  return no_grad_unless_float(args, sum_to_shape(args.cotangent, args.inputs[0].shape()));
}

// Input with some size-1 axes; target adds leading axes and widens size-1 axes, staying small.
std::pair<Shape, Shape> broadcast_pair(SampleRng& rng, const std::optional<TensorType>& first, Shape input) {
  if (!first) {
    for (auto& d : input) {
      if (rng.coin(0.4)) d = 1;
    }
  }
  Shape target = input;
  auto budget = [&] { return rules::sample_cap(rng) / std::max<std::int64_t>(num_elements(target), 1); };
  for (auto& d : target) {
    if (d == 1 && rng.coin(0.7)) {
      // Widened axes reach boundary sizes under that profile (sum_to_shape's long rows, its gradient).
      d = rng.profile().boundary ? std::clamp<std::int64_t>(rng.dim(), 1, std::max<std::int64_t>(budget(), 1))
                                 : rng.uniform_int(1, std::min<std::int64_t>(8, budget()));
    }
  }
  const auto leading = rng.uniform_int(0, std::max<std::int64_t>(0, 4 - static_cast<std::int64_t>(target.size())));
  for (std::int64_t i = 0; i < leading; ++i) {
    target.insert(target.begin(), rng.uniform_int(1, std::min<std::int64_t>(8, std::max<std::int64_t>(budget(), 1))));
  }
  return {std::move(input), std::move(target)};
}

std::optional<OpSample> broadcast_to_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  const TensorType drawn = fresh_or_first(rng, first, 0, 3);
  auto [input, target] = broadcast_pair(rng, first, drawn.shape);
  return single_input_sample(Attrs{{"shape", target}}, TensorType{drawn.dtype, input});
}

// ---- sum_to_shape ----

TensorType sum_to_shape_shape(const Attrs& attrs, std::span<const TensorType> inputs) {
  rules::require_dtype(inputs[0], DType::f32, "input 0");
  const Shape& target = attrs.ints("shape");
  require_nonnegative_dims(target, "target shape");
  if (auto why = broadcast_mismatch(target, inputs[0].shape)) {
    rule_broken("target " + shape_to_string(target) + " does not broadcast to the input shape " +
                shape_to_string(inputs[0].shape) + ": " + *why);
  }
  return TensorType{DType::f32, target};
}

std::vector<std::optional<Tensor>> sum_to_shape_grad(const GradArgs& args) {
  return {broadcast_to(args.cotangent, args.inputs[0].shape())};
}

// The reverse of broadcast_to's samples: the input is the wide shape, the target the narrow one.
std::optional<OpSample> sum_to_shape_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  if (first && first->dtype != DType::f32) return std::nullopt;
  if (first) {
    Shape target = first->shape;
    const auto dropped = rng.uniform_int(0, static_cast<std::int64_t>(target.size()));
    target.erase(target.begin(), target.begin() + dropped);
    for (auto& d : target) {
      if (rng.coin(0.4)) d = 1;
    }
    return OpSample{Attrs{{"shape", target}}, {*first}, {ValueDomain::real_range(-2, 2)}};
  }
  if (rng.profile().boundary && rng.coin(0.3)) {
    // Rows of a matrix summed to a column or a row: sum_to_shape's row modes, at boundary sizes.
    const Shape wide{rng.dim(), rng.dim()};
    const Shape narrow = rng.coin() ? Shape{wide[0], 1} : Shape{1, wide[1]};
    return OpSample{Attrs{{"shape", narrow}}, {TensorType{DType::f32, wide}}, {ValueDomain::real_range(-2, 2)}};
  }
  auto [narrow, wide] = broadcast_pair(rng, std::nullopt, small_shape(rng, 0, 3));
  return OpSample{Attrs{{"shape", narrow}}, {TensorType{DType::f32, wide}}, {ValueDomain::real_range(-2, 2)}};
}

std::int64_t sum_to_shape_length(const Attrs& attrs, std::span<const TensorType> inputs) {
  const auto out = num_elements(attrs.ints("shape"));
  return out > 0 ? inputs[0].size() / out : 1;
}

}  // namespace

const OpDef& Reshape_def() {
  static const OpDef def{.name = op_name(op::Reshape),
                         .arity = 1,
                         .attrs = {{"shape", AttrKind::ints}},
                         .shape = reshape_shape,
                         .grad = reshape_grad,
                         .samples = reshape_samples,
                         .tolerance = ToleranceClass::exact};
  return def;
}

const OpDef& Permute_def() {
  static const OpDef def{.name = op_name(op::Permute),
                         .arity = 1,
                         .attrs = {{"perm", AttrKind::ints}},
                         .shape = permute_shape,
                         .grad = permute_grad,
                         .samples = permute_samples,
                         .tolerance = ToleranceClass::exact};
  return def;
}

const OpDef& SwapAxes_def() {
  static const OpDef def{.name = op_name(op::SwapAxes),
                         .arity = 1,
                         .attrs = {{"axis0", AttrKind::integer}, {"axis1", AttrKind::integer}},
                         .shape = swap_axes_shape,
                         .grad = swap_axes_grad,
                         .samples = swap_axes_samples,
                         .tolerance = ToleranceClass::exact};
  return def;
}

const OpDef& BroadcastTo_def() {
  static const OpDef def{.name = op_name(op::BroadcastTo),
                         .arity = 1,
                         .attrs = {{"shape", AttrKind::ints}},
                         .shape = broadcast_to_shape,
                         .grad = broadcast_to_grad,
                         .samples = broadcast_to_samples,
                         .tolerance = ToleranceClass::exact};
  return def;
}

const OpDef& SumToShape_def() {
  static const OpDef def{.name = op_name(op::SumToShape),
                         .arity = 1,
                         .attrs = {{"shape", AttrKind::ints}},
                         .shape = sum_to_shape_shape,
                         .grad = sum_to_shape_grad,
                         .samples = sum_to_shape_samples,
                         .tolerance = ToleranceClass::reduction,
                         .reduction_length = sum_to_shape_length};
  return def;
}

// ---- front-end ----

namespace {

// Resolves at most one -1 in a reshape target against the input's element count.
Shape resolve_reshape_target(Shape target, std::int64_t count) {
  std::optional<std::size_t> inferred;
  std::int64_t known = 1;
  for (std::size_t i = 0; i < target.size(); ++i) {
    if (target[i] == -1) {
      if (inferred) rule_broken("shape " + shape_to_string(target) + " has more than one -1");
      inferred = i;
    } else if (target[i] < 0) {
      rule_broken("shape " + shape_to_string(target) + " has a negative dimension " + std::to_string(target[i]) +
                  " (only -1 is allowed, to infer one dimension)");
    } else {
      known = checked_mul(known, target[i], "the product of the dims of " + shape_to_string(target));
    }
  }
  if (!inferred) return target;
  if (known == 0 || count % known != 0) {
    rule_broken("cannot infer the -1 in " + shape_to_string(target) + ": " + std::to_string(count) +
                " elements do not divide into parts of " + std::to_string(known));
  }
  target[*inferred] = count / known;
  return target;
}

}  // namespace

Tensor reshape(const Tensor& x, Shape shape, CallSite loc) {
  Shape target = with_shape_error(op::Reshape, x, loc, [&] { return resolve_reshape_target(shape, x.size()); });
  return frontend::emit(op::Reshape, {x}, Attrs{{"shape", std::move(target)}}, loc);
}

Tensor permute(const Tensor& x, std::vector<std::int64_t> perm, CallSite loc) {
  for (auto& axis : perm) axis = wrap_negative_axis(axis, x.rank());
  return frontend::emit(op::Permute, {x}, Attrs{{"perm", std::move(perm)}}, loc);
}

Tensor swap_axes(const Tensor& x, std::int64_t axis0, std::int64_t axis1, CallSite loc) {
  Attrs attrs{{"axis0", wrap_negative_axis(axis0, x.rank())}, {"axis1", wrap_negative_axis(axis1, x.rank())}};
  return frontend::emit(op::SwapAxes, {x}, std::move(attrs), loc);
}

Tensor broadcast_to(const Tensor& x, Shape shape, CallSite loc) {
  return frontend::emit(op::BroadcastTo, {x}, Attrs{{"shape", std::move(shape)}}, loc);
}

Tensor sum_to_shape(const Tensor& x, Shape shape, CallSite loc) {
  return frontend::emit(op::SumToShape, {x}, Attrs{{"shape", std::move(shape)}}, loc);
}

}  // namespace tg
