// The precision family: cast, the one op that changes a value's dtype. Every other op keeps its
// inputs' float dtype (DTypeRule::float_generic), so where dtypes meet, a graph says so with a cast.
#include "tensorgrad/ir/ops/ids/precision.h"

#include "rules.h"

namespace tg {

namespace {

TensorType cast_shape(const Attrs& attrs, std::span<const TensorType> in) {
  const DType to = attrs.dtype("dtype");
  if (!is_float(to)) {
    rule_broken("casts to a float dtype (f32, f16 or bf16), got " + std::string(dtype_name(to)) +
                "; integer and bool results come from comparisons, argmax and the creation ops");
  }
  return {to, in[0].shape};
}

// The cotangent goes back to the input's dtype; no gradient flows into an i32 or bool input.
std::vector<std::optional<Tensor>> cast_grad(const GradArgs& args) {
  const DType from = args.inputs[0].dtype();
  if (!is_float(from)) return {std::nullopt};
  return {cast(args.cotangent, from)};
}

Shape draw_shape(SampleRng& rng) {
  for (;;) {
    Shape s = rng.shape(0, 4);
    if (num_elements(s) <= rules::sample_cap(rng)) return s;
  }
}

// Any input dtype to any float dtype: the values of an i32 or bool input are their domains', a float
// input's reach far enough (±3000) that f16 and bf16 both round most of them.
std::optional<OpSample> cast_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  constexpr DType kFloats[] = {DType::f32, DType::f16, DType::bf16};
  constexpr DType kSources[] = {DType::f32, DType::f16, DType::bf16, DType::f32, DType::i32, DType::boolean};
  const TensorType x = first ? *first : TensorType{kSources[rng.uniform_int(0, 5)], draw_shape(rng)};
  const DType to = kFloats[rng.uniform_int(0, 2)];
  const ValueDomain domain =
      is_float(x.dtype) ? ValueDomain::real_range(-3000, 3000) : rules::any_value_domain(x.dtype);
  return OpSample{Attrs{{"dtype", to}}, {x}, {domain}};
}

}  // namespace

const OpDef& Cast_def() {
  static const OpDef def{.name = op_name(op::Cast),
                         .arity = 1,
                         .attrs = {{"dtype", AttrKind::dtype}},
                         .shape = cast_shape,
                         .grad = cast_grad,
                         .differentiable = true,
                         .samples = cast_samples,
                         .tolerance = ToleranceClass::elementwise,
                         .dtypes = DTypeRule::explicit_dtypes};
  return def;
}

Tensor cast(const Tensor& x, DType dtype, CallSite loc) {
  if (x.dtype() == dtype) return x;
  return frontend::emit(op::Cast, {x}, Attrs{{"dtype", dtype}}, loc);
}

}  // namespace tg
