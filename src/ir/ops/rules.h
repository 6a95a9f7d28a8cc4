#pragma once
// Shared pieces for op definitions: shape-rule helpers (broadcasting, axis normalization, dtype
// checks) and the front-end helpers that turn operands into nodes. Internal to src/ir/ops.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/api.h"
#include "tensorgrad/ir/ops/op_def.h"
#include "tensorgrad/ir/ops/sample.h"

namespace tg::rules {

using tg::rule_broken;  // so rules can spell it rules::rule_broken

// NumPy broadcasting of two or more shapes; rule_broken() names the first incompatible axis.
Shape broadcast_shapes(std::span<const Shape> shapes);
Shape broadcast_shapes(const Shape& a, const Shape& b);
// Maps a possibly negative axis into [0, rank); rule_broken() when out of range.
std::int64_t normalize_axis(std::int64_t axis, std::int64_t rank);
// Normalizes, sorts and checks a list of axes for duplicates.
std::vector<std::int64_t> normalize_axes(std::span<const std::int64_t> axes, std::int64_t rank);
void require_dtype(const TensorType& t, DType dtype, std::string_view what);  // what: "input 0"
void require_same_dtype(std::span<const TensorType> inputs);
void require_arity(std::span<const TensorType> inputs, std::size_t n);
std::string axes_to_string(std::span<const std::int64_t> axes);

// Samples stay small: the property suites run thousands of graphs and full Jacobians on them.
inline constexpr std::int64_t kMaxSampleElements = 512;
// The element cap of one sampled tensor: kMaxSampleElements, or the boundary profile's larger
// budget (SizeProfile::max_elements), where dims reach the kernels' size thresholds.
inline std::int64_t sample_cap(const SampleRng& rng) {
  return rng.profile().boundary ? rng.profile().max_elements : kMaxSampleElements;
}
// A dim in [lo, hi]; under the boundary profile a boundary draw (SampleRng::dim) raised to lo.
inline std::int64_t sample_dim(SampleRng& rng, std::int64_t lo, std::int64_t hi) {
  return rng.profile().boundary ? std::max(lo, rng.dim(hi)) : rng.uniform_int(lo, hi);
}
// Values of any dtype for data-movement inputs. i32 and bool domains stay reusable (not fresh_only),
// so computed indices or masks can flow into such an op in random graphs.
ValueDomain any_value_domain(DType dtype);

}  // namespace tg::rules

namespace tg::frontend {

SourceLoc site(const CallSite& loc);
// The builder the operands belong to (the first tensor's), else the current tracing scope's.
GraphBuilder& builder_for(std::initializer_list<const Operand*> operands);
// A 0-d `full` node of `dtype` for scalar operands (a tensor operand passes unchanged). A number
// next to a tensor takes the tensor's float dtype (scalar_dtype), as a Python scalar does in
// PyTorch: scalars never make a mix of dtypes.
Tensor as_tensor(const Operand& operand, GraphBuilder& builder, const SourceLoc& loc, DType dtype = DType::f32);
// The first float tensor operand's dtype; f32 when there is none.
DType scalar_dtype(std::initializer_list<const Operand*> operands);
// A 0-d constant; f32 keeps the full double (as_tensor rounds scalars to f32). Gradient rules use it
// for irrational constants such as gelu's sqrt(2/pi), so the f64 oracle differentiates exactly the
// function its kernel computes; f32 runs round it when they fill the buffer. A 16-bit constant is
// rounded to its dtype.
Tensor exact_constant(GraphBuilder& builder, double value, DType dtype = DType::f32,
                      const CallSite& loc = CallSite::current());
Tensor emit(OpId op, std::initializer_list<Tensor> inputs, Attrs attrs, const CallSite& loc);
Tensor emit(OpId op, std::initializer_list<Tensor> inputs, Attrs attrs, const SourceLoc& loc);
Tensor emit_binary(OpId op, const Operand& a, const Operand& b, const CallSite& loc);

}  // namespace tg::frontend
