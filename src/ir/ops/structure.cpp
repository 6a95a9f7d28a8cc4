// Structure ops: narrow (a contiguous slice along one axis), pad (zeros before and after along one
// axis) and concat (variadic, along one axis). They move data without arithmetic, so they take any
// dtype and are bit-exact. narrow and pad are each other's gradient; concat's gradient narrows the
// cotangent once per input. The composites built from them (stack, split, flatten, split_heads,
// merge_heads) are at the bottom.
#include "tensorgrad/ir/ops/ids/structure.h"

#include <algorithm>
#include <numeric>

#include "rules.h"
#include "tensorgrad/ir/ops/ids/creation.h"

namespace tg {

namespace {

using rules::any_value_domain;
using rules::kMaxSampleElements;

// Outputs built around a given input (pad, concat) may grow past the drawn-shape limit, not past this.
constexpr std::int64_t kMaxGrownElements = 1024;

// A shape of rank in [min_rank, 4], dims 1..8, at most rules::sample_cap(rng) elements.
Shape sample_shape(SampleRng& rng, int min_rank) {
  for (;;) {
    Shape s = rng.shape(min_rank, 4);
    if (num_elements(s) <= rules::sample_cap(rng)) return s;
  }
}

std::string str(std::int64_t v) { return std::to_string(v); }

// Attributes reach rules raw from the parser, so the axis is checked here even though the
// front-end normalizes it.
void require_axis_in_range(std::int64_t axis, std::int64_t rank) {
  if (rank == 0) rule_broken("a 0-d input has no axis " + str(axis));
  if (axis < 0 || axis >= rank) rule_broken("axis " + str(axis) + " is out of range for rank " + str(rank));
}

std::int64_t dim_at(const Shape& shape, std::int64_t axis) { return shape[static_cast<std::size_t>(axis)]; }

// Negative entries in [-rank, 0) count from the end; anything else is left for the rule to refuse
// with the user's own number in the message.
std::int64_t wrap_negative_axis(std::int64_t axis, std::int64_t rank) {
  return (axis < 0 && axis + rank >= 0) ? axis + rank : axis;
}

// A zero tensor of x's shape and dtype, in x's graph: the gradient piece of an empty slice, which
// narrow (length >= 1) cannot express.
Tensor zeros_like(const Tensor& x) {
  Attrs attrs{{"shape", x.shape()}, {"dtype", x.dtype()}};
  return x.builder().emit(op::Zeros, {}, std::move(attrs), frontend::site(CallSite::current()));
}

// ---- narrow ----

TensorType narrow_rule(const Attrs& attrs, std::span<const TensorType> inputs) {
  const TensorType& x = inputs[0];
  const auto axis = attrs.integer("axis");
  const auto start = attrs.integer("start");
  const auto length = attrs.integer("length");
  require_axis_in_range(axis, x.rank());
  const auto dim = dim_at(x.shape, axis);
  if (start < 0) rule_broken("start " + str(start) + " is negative");
  if (length < 1) rule_broken("length " + str(length) + " is less than 1");
  if (length > dim - start) {  // start + length > dim, without overflow on huge parsed values
    // The sum is shown only when it fits in int64 (start and length may be anything parsed).
    std::int64_t end = 0;
    const bool fits = !__builtin_add_overflow(start, length, &end);
    rule_broken("start " + str(start) + " + length " + str(length) + (fits ? " = " + str(end) : std::string()) +
                " is past the end of axis " + str(axis) + " of size " + str(dim));
  }
  Shape out = x.shape;
  out[static_cast<std::size_t>(axis)] = length;
  return {x.dtype, out};
}

std::vector<std::optional<Tensor>> narrow_grad(const GradArgs& args) {
  if (!is_float(args.inputs[0].dtype())) return {std::nullopt};
  const auto axis = args.attrs.integer("axis");
  const auto start = args.attrs.integer("start");
  const auto length = args.attrs.integer("length");
  const auto dim = args.inputs[0].dim(axis);
  return {pad(args.cotangent, axis, start, dim - start - length)};
}

std::optional<OpSample> narrow_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  const TensorType x = first ? *first : TensorType{DType::f32, sample_shape(rng, 1)};
  std::vector<std::int64_t> usable;  // axes with at least one element to keep
  for (std::int64_t a = 0; a < x.rank(); ++a) {
    if (dim_at(x.shape, a) >= 1) usable.push_back(a);
  }
  if (usable.empty()) return std::nullopt;
  const auto axis = usable[static_cast<std::size_t>(rng.uniform_int(0, static_cast<std::int64_t>(usable.size()) - 1))];
  const auto dim = dim_at(x.shape, axis);
  const auto start = rng.uniform_int(0, dim - 1);
  const auto length = rng.uniform_int(1, dim - start);
  return OpSample{Attrs{{"axis", axis}, {"start", start}, {"length", length}}, {x}, {any_value_domain(x.dtype)}};
}

// ---- pad ----

TensorType pad_rule(const Attrs& attrs, std::span<const TensorType> inputs) {
  const TensorType& x = inputs[0];
  const auto axis = attrs.integer("axis");
  const auto before = attrs.integer("before");
  const auto after = attrs.integer("after");
  require_axis_in_range(axis, x.rank());
  if (before < 0) rule_broken("before " + str(before) + " is negative");
  if (after < 0) rule_broken("after " + str(after) + " is negative");
  Shape out = x.shape;
  auto& padded = out[static_cast<std::size_t>(axis)];
  padded = checked_add(padded, checked_add(before, after, "before + after"), "the padded axis " + str(axis));
  return {x.dtype, out};
}

std::vector<std::optional<Tensor>> pad_grad(const GradArgs& args) {
  const Tensor& x = args.inputs[0];
  if (!is_float(x.dtype())) return {std::nullopt};
  const auto axis = args.attrs.integer("axis");
  const auto dim = x.dim(axis);
  if (dim == 0) return {zeros_like(x)};
  return {narrow(args.cotangent, axis, args.attrs.integer("before"), dim)};
}

std::optional<OpSample> pad_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  const TensorType x = first ? *first : TensorType{DType::f32, sample_shape(rng, 1)};
  if (x.rank() == 0) return std::nullopt;
  const auto axis = rng.uniform_int(0, x.rank() - 1);
  // Rows of the padded axis the element budget still allows (at least none).
  const auto row = std::max<std::int64_t>(1, x.size() / std::max<std::int64_t>(1, dim_at(x.shape, axis)));
  const auto room = std::max<std::int64_t>(0, (kMaxGrownElements - x.size()) / row);
  const auto before = rng.uniform_int(0, std::min<std::int64_t>(3, room));
  const auto after = rng.uniform_int(0, std::min<std::int64_t>(3, room - before));
  return OpSample{Attrs{{"axis", axis}, {"before", before}, {"after", after}}, {x}, {any_value_domain(x.dtype)}};
}

// ---- concat ----

TensorType concat_rule(const Attrs& attrs, std::span<const TensorType> inputs) {
  if (inputs.empty()) rule_broken("needs at least one input");
  const TensorType& head = inputs[0];
  const auto axis = attrs.integer("axis");
  require_axis_in_range(axis, head.rank());
  Shape out = head.shape;
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    const TensorType& t = inputs[i];
    if (t.dtype != head.dtype) {
      rule_broken("input " + str(static_cast<std::int64_t>(i)) + " is " + t.to_string() + " but input 0 is " +
                  head.to_string() + ": dtypes must match");
    }
    if (t.rank() != head.rank()) {
      rule_broken("input " + str(static_cast<std::int64_t>(i)) + " has rank " + str(t.rank()) +
                  " but input 0 has rank " + str(head.rank()));
    }
    for (std::int64_t a = 0; a < head.rank(); ++a) {
      if (a != axis && dim_at(t.shape, a) != dim_at(head.shape, a)) {
        rule_broken("input " + str(static_cast<std::int64_t>(i)) + " has size " + str(dim_at(t.shape, a)) +
                    " on axis " + str(a) + " but input 0 has " + str(dim_at(head.shape, a)) +
                    " (only the concat axis " + str(axis) + " may differ)");
      }
    }
    auto& joined = out[static_cast<std::size_t>(axis)];
    joined = checked_add(joined, dim_at(t.shape, axis), "the concatenated axis " + str(axis));
  }
  return {head.dtype, out};
}

std::vector<std::optional<Tensor>> concat_grad(const GradArgs& args) {
  const auto axis = args.attrs.integer("axis");
  std::vector<std::optional<Tensor>> grads;
  std::int64_t offset = 0;
  for (const Tensor& x : args.inputs) {
    const auto dim = x.dim(axis);
    if (!is_float(x.dtype())) {
      grads.emplace_back(std::nullopt);
    } else if (dim == 0) {
      grads.emplace_back(zeros_like(x));
    } else {
      grads.emplace_back(narrow(args.cotangent, axis, offset, dim));
    }
    offset += dim;
  }
  return grads;
}

std::optional<OpSample> concat_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  const TensorType head = first ? *first : TensorType{DType::f32, sample_shape(rng, 1)};
  if (head.rank() == 0) return std::nullopt;
  const auto axis = rng.uniform_int(0, head.rank() - 1);
  const auto row = std::max<std::int64_t>(1, head.size() / std::max<std::int64_t>(1, dim_at(head.shape, axis)));
  const auto budget = first ? kMaxGrownElements : rules::sample_cap(rng);
  const auto count = rng.uniform_int(1, 4);
  OpSample sample{Attrs{{"axis", axis}}, {head}, {any_value_domain(head.dtype)}};
  std::int64_t total = head.size();
  for (std::int64_t i = 1; i < count; ++i) {
    const auto room = (budget - total) / row;
    if (room < 1) break;
    Shape shape = head.shape;
    shape[static_cast<std::size_t>(axis)] = rng.uniform_int(1, std::min<std::int64_t>(8, room));
    total += num_elements(shape);
    sample.inputs.push_back({head.dtype, shape});
    sample.domains.push_back(any_value_domain(head.dtype));
  }
  return sample;
}

}  // namespace

const OpDef& Narrow_def() {
  static const OpDef def{
      .name = op_name(op::Narrow),
      .arity = 1,
      .attrs = {{"axis", AttrKind::integer}, {"start", AttrKind::integer}, {"length", AttrKind::integer}},
      .shape = narrow_rule,
      .grad = narrow_grad,
      .samples = narrow_samples,
      .tolerance = ToleranceClass::exact};
  return def;
}

const OpDef& Pad_def() {
  static const OpDef def{
      .name = op_name(op::Pad),
      .arity = 1,
      .attrs = {{"axis", AttrKind::integer}, {"before", AttrKind::integer}, {"after", AttrKind::integer}},
      .shape = pad_rule,
      .grad = pad_grad,
      .samples = pad_samples,
      .tolerance = ToleranceClass::exact};
  return def;
}

const OpDef& Concat_def() {
  static const OpDef def{.name = op_name(op::Concat),
                         .arity = kVariadic,
                         .attrs = {{"axis", AttrKind::integer}},
                         .shape = concat_rule,
                         .grad = concat_grad,
                         .samples = concat_samples,
                         .tolerance = ToleranceClass::exact};
  return def;
}

// ---- front-end ----

namespace {

std::vector<TensorType> types_of(const std::vector<Tensor>& xs) {
  std::vector<TensorType> types;
  for (const Tensor& x : xs) types.push_back(x.type());
  return types;
}

// Composites check their own arguments and throw the ShapeError a shape rule would, naming the
// composite the user called rather than the op it would have failed in.
[[noreturn]] void composite_error(std::string_view name, std::vector<TensorType> inputs, std::string rule,
                                  const CallSite& loc) {
  throw ShapeError(std::string(name), std::move(inputs), std::move(rule), frontend::site(loc));
}

}  // namespace

Tensor narrow(const Tensor& x, std::int64_t axis, std::int64_t start, std::int64_t length, CallSite loc) {
  Attrs attrs{{"axis", wrap_negative_axis(axis, x.rank())}, {"start", start}, {"length", length}};
  return frontend::emit(op::Narrow, {x}, std::move(attrs), loc);
}

Tensor pad(const Tensor& x, std::int64_t axis, std::int64_t before, std::int64_t after, CallSite loc) {
  Attrs attrs{{"axis", wrap_negative_axis(axis, x.rank())}, {"before", before}, {"after", after}};
  return frontend::emit(op::Pad, {x}, std::move(attrs), loc);
}

Tensor concat(const std::vector<Tensor>& xs, std::int64_t axis, CallSite loc) {
  if (xs.empty()) composite_error("concat", {}, "needs at least one input", loc);
  Attrs attrs{{"axis", wrap_negative_axis(axis, xs.front().rank())}};
  return xs.front().builder().emit(op::Concat, xs, std::move(attrs), frontend::site(loc));
}

Tensor stack(const std::vector<Tensor>& xs, std::int64_t axis, CallSite loc) {
  if (xs.empty()) composite_error("stack", {}, "needs at least one input", loc);
  const Shape shape = xs.front().shape();
  const auto rank = static_cast<std::int64_t>(shape.size());
  // The new axis may go anywhere from before the first axis to after the last: rank + 1 places.
  const auto placed = axis < 0 ? axis + rank + 1 : axis;
  if (placed < 0 || placed > rank) {
    composite_error("stack", types_of(xs),
                    "axis " + str(axis) + " is out of range [" + str(-(rank + 1)) + ", " + str(rank) +
                        "] for inputs of rank " + str(rank),
                    loc);
  }
  for (std::size_t i = 1; i < xs.size(); ++i) {
    if (xs[i].shape() != shape) {
      composite_error("stack", types_of(xs),
                      "input " + str(static_cast<std::int64_t>(i)) + " has shape " + shape_to_string(xs[i].shape()) +
                          " but input 0 has " + shape_to_string(shape) + ": all shapes must be equal",
                      loc);
    }
  }
  Shape expanded = shape;
  expanded.insert(expanded.begin() + placed, 1);
  std::vector<Tensor> pieces;
  for (const Tensor& x : xs) pieces.push_back(reshape(x, expanded, loc));
  return concat(pieces, placed, loc);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes, std::int64_t axis, CallSite loc) {
  const auto rank = x.rank();
  const auto normalized = axis < 0 ? axis + rank : axis;
  if (normalized < 0 || normalized >= rank) {
    composite_error("split", {x.type()}, "axis " + str(axis) + " is out of range for rank " + str(rank), loc);
  }
  const auto dim = x.dim(normalized);
  if (sizes.empty()) composite_error("split", {x.type()}, "needs at least one size", loc);
  for (auto s : sizes) {
    if (s < 1)
      composite_error("split", {x.type()}, "size " + str(s) + " in " + rules::axes_to_string(sizes) + " is less than 1",
                      loc);
  }
  std::int64_t total = 0;
  bool overflowed = false;  // huge sizes: the sum is past int64, so surely not the axis size
  for (auto s : sizes) overflowed = overflowed || __builtin_add_overflow(total, s, &total);
  if (overflowed) {
    composite_error("split", {x.type()},
                    "sizes " + rules::axes_to_string(sizes) + " sum past int64 but axis " + str(normalized) +
                        " has size " + str(dim),
                    loc);
  }
  if (total != dim) {
    composite_error("split", {x.type()},
                    "sizes " + rules::axes_to_string(sizes) + " sum to " + str(total) + " but axis " + str(normalized) +
                        " has size " + str(dim),
                    loc);
  }
  std::vector<Tensor> pieces;
  std::int64_t start = 0;
  for (auto s : sizes) {
    pieces.push_back(narrow(x, normalized, start, s, loc));
    start += s;
  }
  return pieces;
}

Tensor flatten(const Tensor& x, std::int64_t start_axis, CallSite loc) {
  const Shape shape = x.shape();
  const auto rank = static_cast<std::int64_t>(shape.size());
  // Like torch.flatten, a 0-d input becomes a vector of one element (its axis 0 or -1 is accepted).
  if (rank == 0) {
    if (start_axis != 0 && start_axis != -1) {
      composite_error("flatten", {x.type()}, "start_axis " + str(start_axis) + " is out of range for rank 0", loc);
    }
    return reshape(x, {1}, loc);
  }
  const auto start = start_axis < 0 ? start_axis + rank : start_axis;
  if (start < 0 || start >= rank) {
    composite_error("flatten", {x.type()}, "start_axis " + str(start_axis) + " is out of range for rank " + str(rank),
                    loc);
  }
  Shape target(shape.begin(), shape.begin() + start);
  target.push_back(std::accumulate(shape.begin() + start, shape.end(), std::int64_t{1}, std::multiplies<>()));
  return reshape(x, target, loc);
}

Tensor split_heads(const Tensor& x, std::int64_t heads, CallSite loc) {
  const Shape shape = x.shape();
  if (shape.size() < 2) {
    composite_error("split_heads", {x.type()}, "needs rank >= 2 ([..., T, D]), got rank " + str(x.rank()), loc);
  }
  if (heads < 1) composite_error("split_heads", {x.type()}, "heads " + str(heads) + " is less than 1", loc);
  const auto width = shape.back();
  if (width % heads != 0) {
    composite_error("split_heads", {x.type()},
                    "the last dimension " + str(width) + " is not divisible by heads " + str(heads), loc);
  }
  Shape split_shape = shape;
  split_shape.back() = heads;
  split_shape.push_back(width / heads);  // [..., T, H, D/H]
  return swap_axes(reshape(x, split_shape, loc), -3, -2, loc);
}

Tensor merge_heads(const Tensor& x, CallSite loc) {
  if (x.rank() < 3) {
    composite_error("merge_heads", {x.type()}, "needs rank >= 3 ([..., H, T, d]), got rank " + str(x.rank()), loc);
  }
  const Tensor swapped = swap_axes(x, -3, -2, loc);  // [..., T, H, d]
  Shape merged = swapped.shape();
  const auto d = merged.back();
  merged.pop_back();
  merged.back() *= d;
  return reshape(swapped, merged, loc);
}

}  // namespace tg
