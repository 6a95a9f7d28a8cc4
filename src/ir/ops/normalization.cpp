// Normalization over the last axis, as front-end composites (no registry ops): layer_norm and
// rms_norm are built from mean, sub, square, rsqrt, mul and add, so their gradients come from those
// ops' rules and every backend runs them without a kernel of their own. The gain and bias are [D],
// D the last axis's length, and broadcast over the leading axes. In f16 or bf16 they compute in f32
// between a cast in and a cast out (norms accumulate in f32: docs/dtypes.md), so the statistics
// are not rounded to 16 bits on the way.
#include "rules.h"

namespace tg {

namespace {

std::vector<TensorType> types_of(const Tensor& x, const std::optional<Tensor>& gain,
                                 const std::optional<Tensor>& bias) {
  std::vector<TensorType> types{x.type()};
  if (gain) types.push_back(gain->type());
  if (bias) types.push_back(bias->type());
  return types;
}

void require_affine_shape(const std::optional<Tensor>& param, std::string_view what, std::int64_t d, DType dtype) {
  if (!param) return;
  if (param->dtype() != dtype) {
    rule_broken(std::string(what) + " is " + std::string(dtype_name(param->dtype())) + " but the input is " +
                std::string(dtype_name(dtype)) +
                "; tensorgrad never promotes implicitly, so cast one first, e.g. cast(" + std::string(what) +
                ", DType::" + std::string(dtype_name(dtype)) + ")");
  }
  if (param->shape() != Shape{d}) {
    rule_broken(std::string(what) + " must have shape [" + std::to_string(d) + "] (the last axis of the input), got " +
                shape_to_string(param->shape()));
  }
}

// The checks both composites share, raised as the ShapeError a registry op's rule would give, with
// the composite's name and the user's call site.
void check_normalization_inputs(std::string_view op, const Tensor& x, const std::optional<Tensor>& gain,
                                const std::optional<Tensor>& bias, const CallSite& loc) {
  try {
    if (!is_float(x.dtype())) {
      rule_broken("input must be a float dtype (f32, f16, bf16), got " + std::string(dtype_name(x.dtype())));
    }
    if (x.rank() == 0) rule_broken("the input needs at least one axis to normalize over, got a 0-d tensor");
    const std::int64_t d = x.dim(-1);
    require_affine_shape(gain, "gain", d, x.dtype());
    require_affine_shape(bias, "bias", d, x.dtype());
  } catch (const RuleBroken& broken) {
    throw ShapeError(std::string(op), types_of(x, gain, bias), broken.rule, frontend::site(loc));
  }
}

Tensor apply_affine(Tensor y, const std::optional<Tensor>& gain, const std::optional<Tensor>& bias,
                    const CallSite& loc) {
  if (gain) y = mul(y, *gain, loc);
  if (bias) y = add(y, *bias, loc);
  return y;
}

std::optional<Tensor> as_f32(const std::optional<Tensor>& t, const CallSite& loc) {
  if (!t) return std::nullopt;
  return cast(*t, DType::f32, loc);
}

}  // namespace

Tensor layer_norm(const Tensor& x, const std::optional<Tensor>& gain, const std::optional<Tensor>& bias, double eps,
                  CallSite loc) {
  check_normalization_inputs("layer_norm", x, gain, bias, loc);
  if (is_low_precision(x.dtype())) {
    return cast(layer_norm(cast(x, DType::f32, loc), as_f32(gain, loc), as_f32(bias, loc), eps, loc), x.dtype(), loc);
  }
  const Tensor centered = sub(x, mean(x, -1, {.keep_dims = true}, loc), loc);
  const Tensor variance = mean(square(centered, loc), -1, {.keep_dims = true}, loc);  // biased, as PyTorch
  const Tensor normalized = mul(centered, rsqrt(add(variance, eps, loc), loc), loc);
  return apply_affine(normalized, gain, bias, loc);
}

Tensor rms_norm(const Tensor& x, const std::optional<Tensor>& gain, double eps, CallSite loc) {
  check_normalization_inputs("rms_norm", x, gain, std::nullopt, loc);
  if (is_low_precision(x.dtype())) {
    return cast(rms_norm(cast(x, DType::f32, loc), as_f32(gain, loc), eps, loc), x.dtype(), loc);
  }
  const Tensor mean_square = mean(square(x, loc), -1, {.keep_dims = true}, loc);
  const Tensor normalized = mul(x, rsqrt(add(mean_square, eps, loc), loc), loc);
  return apply_affine(normalized, gain, std::nullopt, loc);
}

}  // namespace tg
