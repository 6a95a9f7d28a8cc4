#pragma once
// The op contract. Every op in ops.def has one OpDef (returned by its Id_def(), declared in the
// generated family header tensorgrad/ir/ops/ids/<family>.h): name, arity, attribute schema, shape rule,
// gradient rule (or an explicit "not differentiable" mark), sample generator and tolerance class.
// Kernels live in the backends and are looked up by OpId.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "tensorgrad/ir/attrs.h"
#include "tensorgrad/ir/ops/op_id.h"
#include "tensorgrad/ir/ops/sample.h"
#include "tensorgrad/ir/shape.h"
#include "tensorgrad/ir/tensor.h"

namespace tg {

// How float32 rounding error grows for one op; the property tests turn it into a tolerance when an
// f32 run is compared with the f64 oracle. `n` is the reduction length (or K for matmul).
enum class ToleranceClass : std::uint8_t {
  exact,           // data movement, comparisons, integer results: bit-exact
  elementwise,     // one or two correctly rounded float ops: a few ulp
  transcendental,  // libm functions (exp, log, tanh, ...): tens of ulp
  reduction,       // sums over n terms: grows with n
  matmul,          // dot products over K terms: grows with K
};
std::string_view tolerance_class_name(ToleranceClass cls);
// Relative error bound of one op in f32, in units of f32 epsilon, for a reduction length n.
double tolerance_ulps(ToleranceClass cls, std::int64_t n);

// Shape rule: pure function of the attributes and input types; calls rule_broken() on bad input.
using ShapeRule = TensorType (*)(const Attrs& attrs, std::span<const TensorType> inputs);

// Gradient rule, written with the tracing front-end so it runs on every backend and can itself be
// differentiated. It returns one cotangent per input (nullopt: no gradient flows there). A returned
// cotangent may have the output's broadcast shape; autodiff reduces it with sum_to_shape.
struct GradArgs {
  std::span<const Tensor> inputs;
  Tensor output;
  Tensor cotangent;
  const Attrs& attrs;
};
using GradRule = std::vector<std::optional<Tensor>> (*)(const GradArgs& args);

// Sample generator: valid attributes, input types and input value domains. When `first` is given
// the sample must use exactly that type as input 0, or return nullopt if the op cannot take it.
using SampleRule = std::optional<OpSample> (*)(SampleRng& rng, const std::optional<TensorType>& first);

// Reduction length used by the tolerance class; default: input-0 elements / output elements.
using ReductionLength = std::int64_t (*)(const Attrs& attrs, std::span<const TensorType> inputs);

inline constexpr int kVariadic = -1;

// Which dtypes an op takes and returns, declared once per op (docs/dtypes.md).
enum class DTypeRule : std::uint8_t {
  // The shape rule is written for f32 and the op is the same computation in every float dtype:
  // infer_type hands the rule f32 in place of the float inputs' dtype, and gives that dtype back to
  // its f32 results. All float inputs must share one dtype; a mix is refused, pointing at cast
  // (there is no implicit promotion). i32 and bool inputs and results pass unchanged.
  float_generic,
  // The shape rule checks and chooses every dtype itself (cast, the creation ops).
  explicit_dtypes,
};
std::string_view dtype_rule_name(DTypeRule rule);

struct OpDef {
  std::string_view name;
  int arity = 0;  // number of inputs, or kVariadic
  std::vector<AttrSpec> attrs;
  ShapeRule shape = nullptr;
  GradRule grad = nullptr;     // required unless differentiable == false
  bool differentiable = true;  // false: the explicit "not differentiable" mark
  SampleRule samples = nullptr;
  ToleranceClass tolerance = ToleranceClass::elementwise;
  ReductionLength reduction_length = nullptr;  // optional
  DTypeRule dtypes = DTypeRule::float_generic;
};

const OpDef& op_def(OpId id);

// A sample of the op in float dtype `dtype` (f32, f16 or bf16). For a float_generic op the sample
// rule draws as written, in f32, and every f32 input then takes `dtype`; a given `first` of another
// float dtype is handed to the rule as f32 and sets `dtype` itself. An explicit_dtypes op's rule
// is called unchanged. nullopt when the rule cannot take `first`.
std::optional<OpSample> sample_in_dtype(OpId id, SampleRng& rng, const std::optional<TensorType>& first,
                                        DType dtype = DType::f32);
std::optional<OpId> find_op(std::string_view name);

// Checks attrs against the op's schema (names and kinds), applies the op's DTypeRule, then runs the
// shape rule. Throws
// RuleBroken on failure; the builder and the verifier add context.
TensorType infer_type(OpId id, const Attrs& attrs, std::span<const TensorType> inputs);

}  // namespace tg
