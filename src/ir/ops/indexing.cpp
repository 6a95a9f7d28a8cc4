// Indexing ops: one_hot, embedding, take_along_axis and its adjoint scatter_add, and the causal-mask
// pair softmax_causal / where_causal: shape rules, gradient rules, samples and the front-end.
// Index values are checked by the kernels at run time (they are data, not types).
#include "tensorgrad/ir/ops/ids/indexing.h"

#include <algorithm>

#include "rules.h"

namespace tg {

namespace {

using rules::any_value_domain;
using rules::kMaxSampleElements;

using Grads = std::vector<std::optional<Tensor>>;

// A shape of rank in [min_rank, max_rank] whose element count, times `per_element`, stays within
// rules::sample_cap(rng) (the largest dim is halved until it fits).
Shape small_shape(SampleRng& rng, int min_rank, int max_rank, std::int64_t per_element = 1) {
  Shape shape = rng.shape(min_rank, max_rank);
  while (num_elements(shape) * per_element > rules::sample_cap(rng)) {
    auto largest = std::max_element(shape.begin(), shape.end());
    *largest = (*largest + 1) / 2;
  }
  return shape;
}

// Valid index values into an axis of `extent` elements.
ValueDomain index_domain(std::int64_t extent) { return ValueDomain::indices(0, static_cast<double>(extent - 1)); }

// Attributes reach shape rules unchecked from the parser, so the axis range is validated here.
std::size_t checked_axis(const Attrs& attrs, std::int64_t rank) {
  const std::int64_t axis = attrs.integer("axis");
  if (axis < 0 || axis >= rank) {
    rules::rule_broken("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  return static_cast<std::size_t>(axis);
}

// Negative axes in [-rank, 0) count from the end; anything else goes to the rule unchanged, so its
// message shows the user's own number.
std::int64_t wrap_negative_axis(std::int64_t axis, std::int64_t rank) {
  return (axis < 0 && axis + rank >= 0) ? axis + rank : axis;
}

// ---- one_hot ----

TensorType one_hot_rule(const Attrs& attrs, std::span<const TensorType> inputs) {
  rules::require_dtype(inputs[0], DType::i32, "indices");
  const std::int64_t depth = attrs.integer("depth");
  if (depth < 1) rules::rule_broken("depth must be >= 1, got " + std::to_string(depth));
  Shape out = inputs[0].shape;
  out.push_back(depth);
  return {DType::f32, out};
}

std::optional<OpSample> one_hot_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  if (first && first->dtype != DType::i32) return std::nullopt;
  const std::int64_t depth = rng.dim(8);
  const TensorType indices = first ? *first : TensorType{DType::i32, small_shape(rng, 0, 3, depth)};
  return OpSample{Attrs{{"depth", depth}}, {indices}, {index_domain(depth)}};
}

// ---- embedding ----

TensorType embedding_rule(const Attrs&, std::span<const TensorType> inputs) {
  const TensorType& table = inputs[0];
  rules::require_dtype(table, DType::f32, "table");
  rules::require_dtype(inputs[1], DType::i32, "indices");
  if (table.rank() != 2) rules::rule_broken("table must be a [V, D] matrix, got rank " + std::to_string(table.rank()));
  Shape out = inputs[1].shape;
  out.push_back(table.shape[1]);
  return {DType::f32, out};
}

// Each row of the table collects the cotangent rows of the positions that looked it up: a one-hot
// matmul, so the gradient is itself built from differentiable ops.
Grads embedding_grad(const GradArgs& args) {
  const Shape table_shape = args.inputs[0].shape();  // a copy: emitting nodes moves the graph
  const std::int64_t n = args.inputs[1].size();
  const Tensor positions = reshape(args.inputs[1], {n});
  const DType dtype = args.inputs[0].dtype();
  const Tensor rows_by_position = swap_axes(cast(one_hot(positions, table_shape[0]), dtype), 0, 1);  // [V, N]
  return {matmul(rows_by_position, reshape(args.cotangent, {n, table_shape[1]})), std::nullopt};
}

std::optional<OpSample> embedding_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  if (first && (first->dtype != DType::f32 || first->rank() != 2 || first->size() == 0)) return std::nullopt;
  const TensorType table = first ? *first : TensorType{DType::f32, {rng.dim(8), rng.dim(8)}};
  const TensorType indices{DType::i32, small_shape(rng, 0, 3, table.shape[1])};
  return OpSample{{}, {table, indices}, {ValueDomain::real_range(-2, 2), index_domain(table.shape[0])}};
}

// ---- take_along_axis ----

TensorType take_along_axis_rule(const Attrs& attrs, std::span<const TensorType> inputs) {
  const TensorType& x = inputs[0];
  const TensorType& indices = inputs[1];
  rules::require_dtype(indices, DType::i32, "indices");
  if (x.rank() != indices.rank()) {
    rules::rule_broken("x and indices must have the same rank, got " + std::to_string(x.rank()) + " and " +
                       std::to_string(indices.rank()));
  }
  const std::size_t axis = checked_axis(attrs, x.rank());
  for (std::size_t a = 0; a < x.shape.size(); ++a) {
    if (a != axis && x.shape[a] != indices.shape[a]) {
      rules::rule_broken("axis " + std::to_string(a) + " has size " + std::to_string(x.shape[a]) + " in x but " +
                         std::to_string(indices.shape[a]) + " in indices (only axis " + std::to_string(axis) +
                         " may differ)");
    }
  }
  return {x.dtype, indices.shape};
}

Grads take_along_axis_grad(const GradArgs& args) {
  if (!is_float(args.inputs[0].dtype())) return {std::nullopt, std::nullopt};
  const std::int64_t axis = args.attrs.integer("axis");
  const std::int64_t extent = args.inputs[0].dim(axis);
  return {scatter_add(args.cotangent, args.inputs[1], axis, extent), std::nullopt};
}

// The indices take x's shape with a new extent (1..8) along the chosen axis.
std::optional<OpSample> take_along_axis_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  if (first && (first->rank() < 1 || first->size() == 0)) return std::nullopt;
  TensorType x = first ? *first : TensorType{DType::f32, small_shape(rng, 1, 4)};
  if (!first && rng.coin(0.2)) x.dtype = rng.coin() ? DType::i32 : DType::boolean;  // any dtype moves
  const std::int64_t axis = rng.uniform_int(0, x.rank() - 1);
  Shape index_shape = x.shape;
  const std::int64_t others = x.size() / x.shape[static_cast<std::size_t>(axis)];
  const std::int64_t budget = std::max<std::int64_t>(1, std::max(rules::sample_cap(rng), x.size()) / others);
  index_shape[static_cast<std::size_t>(axis)] = rng.uniform_int(1, std::min<std::int64_t>(8, budget));
  const std::int64_t extent = x.shape[static_cast<std::size_t>(axis)];
  return OpSample{Attrs{{"axis", axis}},
                  {x, TensorType{DType::i32, index_shape}},
                  {any_value_domain(x.dtype), index_domain(extent)}};
}

// ---- scatter_add ----

TensorType scatter_add_rule(const Attrs& attrs, std::span<const TensorType> inputs) {
  const TensorType& updates = inputs[0];
  const TensorType& indices = inputs[1];
  rules::require_dtype(updates, DType::f32, "updates");
  rules::require_dtype(indices, DType::i32, "indices");
  if (updates.shape != indices.shape) {
    rules::rule_broken("updates and indices must have the same shape, got " + shape_to_string(updates.shape) + " and " +
                       shape_to_string(indices.shape));
  }
  const std::size_t axis = checked_axis(attrs, indices.rank());
  const std::int64_t size = attrs.integer("size");
  if (size < 0) rules::rule_broken("size must be >= 0, got " + std::to_string(size));
  Shape out = indices.shape;
  out[axis] = size;
  return {DType::f32, out};
}

Grads scatter_add_grad(const GradArgs& args) {
  return {take_along_axis(args.cotangent, args.inputs[1], args.attrs.integer("axis")), std::nullopt};
}

// At most this many updates land on one output element.
std::int64_t scatter_add_reduction_length(const Attrs& attrs, std::span<const TensorType> inputs) {
  return inputs[1].shape.at(static_cast<std::size_t>(attrs.integer("axis")));
}

std::optional<OpSample> scatter_add_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  if (first && (first->dtype != DType::f32 || first->rank() < 1)) return std::nullopt;
  const TensorType updates = first ? *first : TensorType{DType::f32, small_shape(rng, 1, 4)};
  const std::int64_t axis = rng.uniform_int(0, updates.rank() - 1);
  const std::int64_t along = updates.shape[static_cast<std::size_t>(axis)];
  const std::int64_t others = along == 0 ? 0 : updates.size() / along;
  const std::int64_t budget = others == 0 ? 8 : std::max(rules::sample_cap(rng), updates.size()) / others;
  const std::int64_t size = rng.uniform_int(1, std::clamp<std::int64_t>(budget, 1, 8));
  return OpSample{Attrs{{"axis", axis}, {"size", size}},
                  {updates, TensorType{DType::i32, updates.shape}},
                  {ValueDomain::real_range(-2, 2), index_domain(size)}};
}

// ---- softmax_causal and where_causal ----

// Both act on square [..., T, T] score matrices: row i may see columns j <= i.
TensorType causal_rule(const Attrs&, std::span<const TensorType> inputs) {
  const TensorType& x = inputs[0];
  rules::require_dtype(x, DType::f32, "input");
  if (x.rank() < 2) rules::rule_broken("needs a [..., T, T] input of rank >= 2, got rank " + std::to_string(x.rank()));
  const std::int64_t rows = x.shape[x.shape.size() - 2];
  const std::int64_t cols = x.shape.back();
  if (rows != cols) {
    rules::rule_broken("the last two axes must be equal (a square [..., T, T] matrix), got " + std::to_string(rows) +
                       " and " + std::to_string(cols));
  }
  return x;
}

std::int64_t causal_row_length(const Attrs&, std::span<const TensorType> inputs) { return inputs[0].shape.back(); }

// Masked entries have y == 0, so the usual softmax rule gives them no gradient.
Grads softmax_causal_grad(const GradArgs& args) {
  const Tensor& y = args.output;
  const Tensor& g = args.cotangent;
  return {mul(y, sub(g, sum(mul(g, y), -1, {.keep_dims = true})))};
}

Grads where_causal_grad(const GradArgs& args) { return {where_causal(args.cotangent, 0.0)}; }

std::optional<TensorType> causal_input(SampleRng& rng, const std::optional<TensorType>& first) {
  if (first) {
    if (first->dtype != DType::f32 || first->rank() < 2) return std::nullopt;
    if (first->shape.back() != first->shape[first->shape.size() - 2]) return std::nullopt;
    return *first;
  }
  // Under the boundary profile T reaches the softmax row modes' thresholds (33, 1025, ...).
  const std::int64_t t = rules::sample_dim(rng, 1, 6);
  if (t * t > rules::sample_cap(rng)) return std::nullopt;
  Shape shape = small_shape(rng, 0, 2, t * t);
  shape.push_back(t);
  shape.push_back(t);
  return TensorType{DType::f32, shape};
}

std::optional<OpSample> softmax_causal_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  const auto x = causal_input(rng, first);
  if (!x) return std::nullopt;
  return OpSample{{}, {*x}, {ValueDomain::real_range(-4, 4)}};
}

std::optional<OpSample> where_causal_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  const auto x = causal_input(rng, first);
  if (!x) return std::nullopt;
  const double value = static_cast<float>(rng.uniform(-3, 3));  // an f32 value, the same in both runs
  return OpSample{Attrs{{"value", value}}, {*x}, {ValueDomain::real_range(-2, 2)}};
}

}  // namespace

const OpDef& OneHot_def() {
  static const OpDef def{.name = op_name(op::OneHot),
                         .arity = 1,
                         .attrs = {{"depth", AttrKind::integer}},
                         .shape = one_hot_rule,
                         .differentiable = false,
                         .samples = one_hot_samples,
                         .tolerance = ToleranceClass::exact};
  return def;
}

const OpDef& Embedding_def() {
  static const OpDef def{.name = op_name(op::Embedding),
                         .arity = 2,
                         .shape = embedding_rule,
                         .grad = embedding_grad,
                         .samples = embedding_samples,
                         .tolerance = ToleranceClass::exact};
  return def;
}

const OpDef& TakeAlongAxis_def() {
  static const OpDef def{.name = op_name(op::TakeAlongAxis),
                         .arity = 2,
                         .attrs = {{"axis", AttrKind::integer}},
                         .shape = take_along_axis_rule,
                         .grad = take_along_axis_grad,
                         .samples = take_along_axis_samples,
                         .tolerance = ToleranceClass::exact};
  return def;
}

const OpDef& ScatterAdd_def() {
  static const OpDef def{.name = op_name(op::ScatterAdd),
                         .arity = 2,
                         .attrs = {{"axis", AttrKind::integer}, {"size", AttrKind::integer}},
                         .shape = scatter_add_rule,
                         .grad = scatter_add_grad,
                         .samples = scatter_add_samples,
                         .tolerance = ToleranceClass::reduction,
                         .reduction_length = scatter_add_reduction_length};
  return def;
}

const OpDef& SoftmaxCausal_def() {
  static const OpDef def{.name = op_name(op::SoftmaxCausal),
                         .arity = 1,
                         .shape = causal_rule,
                         .grad = softmax_causal_grad,
                         .samples = softmax_causal_samples,
                         .tolerance = ToleranceClass::reduction,
                         .reduction_length = causal_row_length};
  return def;
}

const OpDef& WhereCausal_def() {
  static const OpDef def{.name = op_name(op::WhereCausal),
                         .arity = 1,
                         .attrs = {{"value", AttrKind::real}},
                         .shape = causal_rule,
                         .grad = where_causal_grad,
                         .samples = where_causal_samples,
                         .tolerance = ToleranceClass::exact};
  return def;
}

Tensor one_hot(const Tensor& indices, std::int64_t depth, CallSite loc) {
  return frontend::emit(op::OneHot, {indices}, Attrs{{"depth", depth}}, loc);
}

Tensor embedding(const Tensor& table, const Tensor& indices, CallSite loc) {
  return frontend::emit(op::Embedding, {table, indices}, Attrs{}, loc);
}

Tensor take_along_axis(const Tensor& x, const Tensor& indices, std::int64_t axis, CallSite loc) {
  return frontend::emit(op::TakeAlongAxis, {x, indices}, Attrs{{"axis", wrap_negative_axis(axis, x.rank())}}, loc);
}

Tensor scatter_add(const Tensor& updates, const Tensor& indices, std::int64_t axis, std::int64_t size, CallSite loc) {
  Attrs attrs{{"axis", wrap_negative_axis(axis, indices.rank())}, {"size", size}};
  return frontend::emit(op::ScatterAdd, {updates, indices}, std::move(attrs), loc);
}

Tensor softmax_causal(const Tensor& scores, CallSite loc) {
  return frontend::emit(op::SoftmaxCausal, {scores}, Attrs{}, loc);
}

Tensor where_causal(const Tensor& x, double fill_value, CallSite loc) {
  // The fill is an element of an f32 tensor: round it once here so the f64 oracle and f32 runs agree.
  const double value = static_cast<float>(fill_value);
  return frontend::emit(op::WhereCausal, {x}, Attrs{{"value", value}}, loc);
}

}  // namespace tg
