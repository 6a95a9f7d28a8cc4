// Creation ops: full, zeros, ones and arange. They take no inputs, so the front-end appends them to
// the current tracing scope's builder; they are constants, hence not differentiable and bit-exact.
#include "tensorgrad/ir/ops/ids/creation.h"

#include <cmath>
#include <limits>

#include "rules.h"
#include "tensorgrad/ir/low_precision.h"

namespace tg {

namespace {

// A negative dim, or a shape past the size limits (shape.h), breaks the rule before anything is
// allocated.
void require_nonnegative_shape(const Shape& shape) { check_shape_limits(shape); }

// A value the dtype can hold exactly: i32 needs an integer in range, bool needs 0 or 1. Any f32
// value is accepted, infinities included (masks use -inf).
void require_representable(double value, DType dtype) {
  const std::string shown = attr_value_to_string(value);
  if (dtype == DType::i32) {
    if (!std::isfinite(value) || value != std::floor(value) || value < std::numeric_limits<std::int32_t>::min() ||
        value > std::numeric_limits<std::int32_t>::max()) {
      rule_broken("an i32 tensor needs an integer value in the i32 range, got " + shown);
    }
  } else if (dtype == DType::boolean && value != 0.0 && value != 1.0) {
    rule_broken("a bool tensor needs the value 0 or 1, got " + shown);
  }
}

TensorType full_shape(const Attrs& attrs, std::span<const TensorType>) {
  const Shape& shape = attrs.ints("shape");
  require_nonnegative_shape(shape);
  const DType dtype = attrs.dtype("dtype");
  require_representable(attrs.real("value"), dtype);
  return TensorType{dtype, shape};
}

TensorType filled_shape(const Attrs& attrs, std::span<const TensorType>) {
  require_nonnegative_shape(attrs.ints("shape"));
  return TensorType{attrs.dtype("dtype"), attrs.ints("shape")};
}

TensorType arange_shape(const Attrs& attrs, std::span<const TensorType>) {
  const auto n = attrs.integer("n");
  if (n < 0) rule_broken("n must be >= 0, got " + std::to_string(n));
  const DType dtype = attrs.dtype("dtype");
  if (!is_float(dtype) && dtype != DType::i32) {
    rule_broken("dtype must be a float dtype (f32, f16, bf16) or i32, got " + std::string(dtype_name(dtype)));
  }
  if (n > std::int64_t{std::numeric_limits<std::int32_t>::max()} + 1) {
    rule_broken("n = " + std::to_string(n) + " is too large for i32 indices");
  }
  return TensorType{dtype, Shape{n}};
}

DType random_dtype(SampleRng& rng) {
  constexpr DType kDtypes[] = {DType::f32, DType::f32, DType::i32, DType::boolean, DType::f16, DType::bf16};
  return kDtypes[rng.uniform_int(0, 5)];
}

// Creation ops have no input 0, so a sample can never start from an existing value.
std::optional<OpSample> full_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  if (first) return std::nullopt;
  const DType dtype = random_dtype(rng);
  double value = 0;
  switch (dtype) {
    case DType::f32:
    case DType::f16:
    case DType::bf16:
      value = round_to_dtype(rng.uniform(-2, 2), dtype);
      break;
    case DType::i32:
      value = static_cast<double>(rng.uniform_int(-8, 8));
      break;
    case DType::boolean:
      value = rng.coin() ? 1.0 : 0.0;
      break;
  }
  return OpSample{Attrs{{"dtype", dtype}, {"shape", rng.shape(0, 3)}, {"value", value}}, {}, {}};
}

std::optional<OpSample> filled_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  if (first) return std::nullopt;
  return OpSample{Attrs{{"dtype", random_dtype(rng)}, {"shape", rng.shape(0, 3)}}, {}, {}};
}

std::optional<OpSample> arange_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  if (first) return std::nullopt;
  const DType dtype = rng.coin() ? DType::f32 : DType::i32;
  // Boundary draws reach the launch sizes past one workgroup (and a grid-stride loop under a cap).
  const std::int64_t n = rng.profile().boundary ? rng.dim() : rng.uniform_int(0, 64);
  return OpSample{Attrs{{"dtype", dtype}, {"n", n}}, {}, {}};
}

OpDef creation_def(OpId id, std::vector<AttrSpec> attrs, ShapeRule shape, SampleRule samples) {
  return OpDef{.name = op_name(id),
               .arity = 0,
               .attrs = std::move(attrs),
               .shape = shape,
               .grad = nullptr,
               .differentiable = false,
               .samples = samples,
               .tolerance = ToleranceClass::exact,
               .dtypes = DTypeRule::explicit_dtypes};
}

}  // namespace

const OpDef& Full_def() {
  static const OpDef def =
      creation_def(op::Full, {{"shape", AttrKind::ints}, {"value", AttrKind::real}, {"dtype", AttrKind::dtype}},
                   full_shape, full_samples);
  return def;
}

const OpDef& Zeros_def() {
  static const OpDef def =
      creation_def(op::Zeros, {{"shape", AttrKind::ints}, {"dtype", AttrKind::dtype}}, filled_shape, filled_samples);
  return def;
}

const OpDef& Ones_def() {
  static const OpDef def =
      creation_def(op::Ones, {{"shape", AttrKind::ints}, {"dtype", AttrKind::dtype}}, filled_shape, filled_samples);
  return def;
}

const OpDef& Arange_def() {
  static const OpDef def =
      creation_def(op::Arange, {{"n", AttrKind::integer}, {"dtype", AttrKind::dtype}}, arange_shape, arange_samples);
  return def;
}

// ---- front-end ----

Tensor full(Shape shape, double value, DType dtype, CallSite loc) {
  // A float constant is a value of its dtype: round it here so the f64 oracle and the f32 and
  // 16-bit backends agree.
  if (is_float(dtype)) value = round_to_dtype(value, dtype);
  return frontend::emit(op::Full, {}, Attrs{{"shape", std::move(shape)}, {"value", value}, {"dtype", dtype}}, loc);
}

Tensor zeros(Shape shape, DType dtype, CallSite loc) {
  return frontend::emit(op::Zeros, {}, Attrs{{"shape", std::move(shape)}, {"dtype", dtype}}, loc);
}

Tensor ones(Shape shape, DType dtype, CallSite loc) {
  return frontend::emit(op::Ones, {}, Attrs{{"shape", std::move(shape)}, {"dtype", dtype}}, loc);
}

Tensor arange(std::int64_t n, DType dtype, CallSite loc) {
  return frontend::emit(op::Arange, {}, Attrs{{"n", n}, {"dtype", dtype}}, loc);
}

Tensor scalar(double value, CallSite loc) { return full(Shape{}, value, DType::f32, loc); }

}  // namespace tg
