// Elementwise binary ops with NumPy broadcasting: arithmetic (add, sub, mul, div, minimum, maximum),
// comparisons (less, greater, equal -> bool) and where(condition, if_true, if_false).
#include "tensorgrad/ir/ops/ids/elementwise_binary.h"

#include <algorithm>
#include <utility>

#include "rules.h"

namespace tg {

namespace {

using rules::kMaxSampleElements;

// ---- shape rules -------------------------------------------------------------------------------

TensorType arithmetic_shape(const Attrs&, std::span<const TensorType> in) {
  rules::require_dtype(in[0], DType::f32, "input 0");
  rules::require_dtype(in[1], DType::f32, "input 1");
  return {DType::f32, rules::broadcast_shapes(in[0].shape, in[1].shape)};
}

TensorType comparison_shape(const Attrs&, std::span<const TensorType> in) {
  rules::require_dtype(in[0], DType::f32, "input 0");
  rules::require_dtype(in[1], DType::f32, "input 1");
  return {DType::boolean, rules::broadcast_shapes(in[0].shape, in[1].shape)};
}

TensorType where_shape(const Attrs&, std::span<const TensorType> in) {
  rules::require_dtype(in[0], DType::boolean, "condition (input 0)");
  if (in[1].dtype != in[2].dtype) {
    rule_broken("if_true and if_false must have the same dtype, got " + in[1].to_string() + " and " +
                in[2].to_string());
  }
  const Shape shapes[] = {in[0].shape, in[1].shape, in[2].shape};
  return {in[1].dtype, rules::broadcast_shapes(shapes)};
}

// ---- grad rules (cotangents may keep the output's broadcast shape) -----------------------------

std::vector<std::optional<Tensor>> add_grad(const GradArgs& args) { return {args.cotangent, args.cotangent}; }

std::vector<std::optional<Tensor>> sub_grad(const GradArgs& args) { return {args.cotangent, neg(args.cotangent)}; }

std::vector<std::optional<Tensor>> mul_grad(const GradArgs& args) {
  const Tensor& g = args.cotangent;
  return {g * args.inputs[1], g * args.inputs[0]};
}

// d(a/b)/db = -a/b^2 = -(a/b)/b: reuse the output instead of squaring b.
std::vector<std::optional<Tensor>> div_grad(const GradArgs& args) {
  const Tensor g_over_b = args.cotangent / args.inputs[1];
  return {g_over_b, neg(g_over_b * args.output)};
}

// At a tie the kernel returns input 0, so input 0 takes the whole cotangent there.
std::vector<std::optional<Tensor>> minimum_grad(const GradArgs& args) {
  const Tensor b_wins = greater(args.inputs[0], args.inputs[1]);
  return {where(b_wins, 0.0, args.cotangent), where(b_wins, args.cotangent, 0.0)};
}

std::vector<std::optional<Tensor>> maximum_grad(const GradArgs& args) {
  const Tensor b_wins = less(args.inputs[0], args.inputs[1]);
  return {where(b_wins, 0.0, args.cotangent), where(b_wins, args.cotangent, 0.0)};
}

std::vector<std::optional<Tensor>> where_grad(const GradArgs& args) {
  if (!is_float(args.inputs[1].dtype())) return {std::nullopt, std::nullopt, std::nullopt};
  const Tensor& c = args.inputs[0];
  return {std::nullopt, where(c, args.cotangent, 0.0), where(c, 0.0, args.cotangent)};
}

// ---- samples -----------------------------------------------------------------------------------

Shape draw_shape(SampleRng& rng) {
  for (;;) {
    Shape s = rng.shape(0, 4);
    if (num_elements(s) <= rules::sample_cap(rng)) return s;
  }
}

// A shape that broadcasts with `s`: a suffix of it with some axes squeezed to 1, some of its size-1
// axes widened, and sometimes an extra leading axis, so either side may be the larger one.
Shape broadcast_partner(SampleRng& rng, const Shape& s) {
  const auto rank = static_cast<std::int64_t>(s.size());
  const auto keep = static_cast<std::size_t>(rng.coin(0.5) ? rank : rng.uniform_int(0, rank));
  Shape p(s.end() - static_cast<std::ptrdiff_t>(keep), s.end());
  for (auto& d : p) {
    if (d == 1 && rng.coin(0.3)) {
      d = rng.uniform_int(2, 4);
    } else if (rng.coin(0.25)) {
      d = 1;
    }
  }
  if (p.size() == s.size() && s.size() < 4 && rng.coin(0.2)) p.insert(p.begin(), rng.uniform_int(2, 3));
  if (num_elements(rules::broadcast_shapes(s, p)) > rules::sample_cap(rng)) return s;
  return p;
}

// Two untied domains whose grids interleave: ValueDomain::spaced draws lie on lo + step*i with
// step = max(gap, (hi - lo) / count) and jitter under gap/4 (sample.cpp). Giving both inputs the
// same step, with b offset by half a step, keeps every a/b pair at least gap/2 apart, so minimum,
// maximum, less and greater never see a tie, whatever broadcasting pairs up.
std::pair<ValueDomain, ValueDomain> interleaved_domains(std::int64_t count_a, std::int64_t count_b) {
  constexpr double kGap = 0.02;
  const auto widest = std::max<std::int64_t>({count_a, count_b, 1});
  const double step = std::max(2 * kGap, 4.0 / static_cast<double>(widest));
  const double lo_a = -2.0;
  const double lo_b = lo_a + step / 2;
  const auto span = [step](std::int64_t count) { return step * static_cast<double>(std::max<std::int64_t>(count, 1)); };
  return {ValueDomain::untied(lo_a, lo_a + span(count_a), kGap), ValueDomain::untied(lo_b, lo_b + span(count_b), kGap)};
}

enum class PairDomains { smooth, divisor, interleaved, small_ints };

template <PairDomains kDomains>
std::optional<OpSample> binary_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  if (first && first->dtype != DType::f32) return std::nullopt;
  const Shape a = first ? first->shape : draw_shape(rng);
  const Shape b = broadcast_partner(rng, a);
  OpSample sample{{}, {{DType::f32, a}, {DType::f32, b}}, {}};
  switch (kDomains) {
    case PairDomains::smooth:
      sample.domains = {ValueDomain::real_range(-2, 2), ValueDomain::real_range(-2, 2)};
      break;
    case PairDomains::divisor:
      sample.domains = {ValueDomain::real_range(-2, 2), ValueDomain::nonzero(0.5, 2)};
      break;
    case PairDomains::interleaved: {
      auto [da, db] = interleaved_domains(num_elements(a), num_elements(b));
      sample.domains = {da, db};
      break;
    }
    case PairDomains::small_ints:
      sample.domains = {ValueDomain::small_integers(0, 2), ValueDomain::small_integers(0, 2)};
      break;
  }
  return sample;
}

std::optional<OpSample> where_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  if (first && first->dtype != DType::boolean) return std::nullopt;
  const Shape c = first ? first->shape : draw_shape(rng);
  const Shape a = broadcast_partner(rng, c);
  // Derived from the broadcast of c and a, so all three shapes broadcast together.
  const Shape b = broadcast_partner(rng, rules::broadcast_shapes(c, a));
  // Mostly f32; sometimes i32 to exercise the "any equal dtype" branches.
  const bool ints = rng.coin(0.15);
  const DType dtype = ints ? DType::i32 : DType::f32;
  const ValueDomain values = ints ? ValueDomain::indices(0, 5) : ValueDomain::real_range(-2, 2);
  return OpSample{{}, {{DType::boolean, c}, {dtype, a}, {dtype, b}}, {ValueDomain::booleans(), values, values}};
}

OpDef arithmetic_def(OpId id, GradRule grad, SampleRule samples) {
  return OpDef{.name = op_name(id),
               .arity = 2,
               .attrs = {},
               .shape = arithmetic_shape,
               .grad = grad,
               .differentiable = true,
               .samples = samples,
               .tolerance = ToleranceClass::elementwise};
}

OpDef comparison_def(OpId id, SampleRule samples) {
  return OpDef{.name = op_name(id),
               .arity = 2,
               .attrs = {},
               .shape = comparison_shape,
               .grad = nullptr,
               .differentiable = false,
               .samples = samples,
               .tolerance = ToleranceClass::exact};
}

}  // namespace

const OpDef& Add_def() {
  static const OpDef def = arithmetic_def(op::Add, add_grad, binary_samples<PairDomains::smooth>);
  return def;
}

const OpDef& Sub_def() {
  static const OpDef def = arithmetic_def(op::Sub, sub_grad, binary_samples<PairDomains::smooth>);
  return def;
}

const OpDef& Mul_def() {
  static const OpDef def = arithmetic_def(op::Mul, mul_grad, binary_samples<PairDomains::smooth>);
  return def;
}

const OpDef& Div_def() {
  static const OpDef def = arithmetic_def(op::Div, div_grad, binary_samples<PairDomains::divisor>);
  return def;
}

const OpDef& Minimum_def() {
  static const OpDef def = arithmetic_def(op::Minimum, minimum_grad, binary_samples<PairDomains::interleaved>);
  return def;
}

const OpDef& Maximum_def() {
  static const OpDef def = arithmetic_def(op::Maximum, maximum_grad, binary_samples<PairDomains::interleaved>);
  return def;
}

const OpDef& Less_def() {
  static const OpDef def = comparison_def(op::Less, binary_samples<PairDomains::interleaved>);
  return def;
}

const OpDef& Greater_def() {
  static const OpDef def = comparison_def(op::Greater, binary_samples<PairDomains::interleaved>);
  return def;
}

const OpDef& Equal_def() {
  static const OpDef def = comparison_def(op::Equal, binary_samples<PairDomains::small_ints>);
  return def;
}

const OpDef& Where_def() {
  static const OpDef def{.name = op_name(op::Where),
                         .arity = 3,
                         .attrs = {},
                         .shape = where_shape,
                         .grad = where_grad,
                         .differentiable = true,
                         .samples = where_samples,
                         .tolerance = ToleranceClass::elementwise};
  return def;
}

// ---- front-end ---------------------------------------------------------------------------------

Tensor add(Operand a, Operand b, CallSite loc) { return frontend::emit_binary(op::Add, a, b, loc); }
Tensor sub(Operand a, Operand b, CallSite loc) { return frontend::emit_binary(op::Sub, a, b, loc); }
Tensor mul(Operand a, Operand b, CallSite loc) { return frontend::emit_binary(op::Mul, a, b, loc); }
Tensor div(Operand a, Operand b, CallSite loc) { return frontend::emit_binary(op::Div, a, b, loc); }
Tensor minimum(Operand a, Operand b, CallSite loc) { return frontend::emit_binary(op::Minimum, a, b, loc); }
Tensor maximum(Operand a, Operand b, CallSite loc) { return frontend::emit_binary(op::Maximum, a, b, loc); }
Tensor less(Operand a, Operand b, CallSite loc) { return frontend::emit_binary(op::Less, a, b, loc); }
Tensor greater(Operand a, Operand b, CallSite loc) { return frontend::emit_binary(op::Greater, a, b, loc); }
Tensor equal(Operand a, Operand b, CallSite loc) { return frontend::emit_binary(op::Equal, a, b, loc); }

Tensor where(const Tensor& condition, Operand if_true, Operand if_false, CallSite loc) {
  GraphBuilder& builder = condition.builder();
  const SourceLoc at = frontend::site(loc);
  const DType dtype = frontend::scalar_dtype({&if_true, &if_false});
  const Tensor inputs[] = {condition, frontend::as_tensor(if_true, builder, at, dtype),
                           frontend::as_tensor(if_false, builder, at, dtype)};
  return builder.emit(op::Where, inputs, Attrs{}, at);
}

}  // namespace tg
