// matmul: [..., M, K] x [K, N], or batched [B..., M, K] x [B..., K, N] with equal batch dims.
#include "tensorgrad/ir/ops/ids/matmul.h"

#include <algorithm>

#include "rules.h"

namespace tg {

namespace {

using rules::kMaxSampleElements;

Shape batch_dims(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

TensorType matmul_rule(const Attrs&, std::span<const TensorType> inputs) {
  const TensorType& a = inputs[0];
  const TensorType& b = inputs[1];
  rules::require_dtype(a, DType::f32, "lhs");
  rules::require_dtype(b, DType::f32, "rhs");
  if (a.rank() < 2) rules::rule_broken("lhs must have rank >= 2 ([..., M, K]), got rank " + std::to_string(a.rank()));
  if (b.rank() < 2) rules::rule_broken("rhs must have rank >= 2 ([K, N]), got rank " + std::to_string(b.rank()));
  const std::int64_t k_lhs = a.shape.back();
  const std::int64_t k_rhs = b.shape[b.shape.size() - 2];
  if (k_lhs != k_rhs) {
    rules::rule_broken("inner dimensions differ: lhs " + shape_to_string(a.shape) + " has K=" + std::to_string(k_lhs) +
                       " but rhs " + shape_to_string(b.shape) + " has K=" + std::to_string(k_rhs));
  }
  Shape out(a.shape.begin(), a.shape.end() - 1);
  out.push_back(b.shape.back());
  if (b.rank() == 2) return {DType::f32, out};
  // Batched: both operands carry the same batch dims (no broadcasting of batches).
  if (a.rank() != b.rank()) {
    rules::rule_broken("batched matmul needs operands of equal rank, got lhs " + shape_to_string(a.shape) + " (rank " +
                       std::to_string(a.rank()) + ") and rhs " + shape_to_string(b.shape) + " (rank " +
                       std::to_string(b.rank()) + ")");
  }
  if (batch_dims(a.shape) != batch_dims(b.shape)) {
    rules::rule_broken("batch dimensions differ: lhs " + shape_to_string(batch_dims(a.shape)) + " vs rhs " +
                       shape_to_string(batch_dims(b.shape)));
  }
  return {DType::f32, out};
}

std::int64_t matmul_reduction_length(const Attrs&, std::span<const TensorType> inputs) {
  return inputs[0].shape.back();
}

std::vector<std::optional<Tensor>> matmul_grad(const GradArgs& args) {
  const Tensor& a = args.inputs[0];
  const Tensor& b = args.inputs[1];
  const Tensor& g = args.cotangent;
  if (b.rank() == 2) {
    // Every row of a (all leading dims folded into P) met the same b: db sums over all of them.
    const std::int64_t k = b.dim(0);
    const std::int64_t n = b.dim(1);
    // P from a's leading dims: a.size() / K is 0 when K = 0, though the rows (and g's) are there.
    const Shape a_shape = a.shape();
    const std::int64_t p = num_elements(Shape(a_shape.begin(), a_shape.end() - 1));
    const Tensor a_rows = a.rank() == 2 ? a : reshape(a, {p, k});
    const Tensor g_rows = g.rank() == 2 ? g : reshape(g, {p, n});
    return {matmul(g, swap_axes(b, 0, 1)), matmul(swap_axes(a_rows, 0, 1), g_rows)};
  }
  return {matmul(g, swap_axes(b, -1, -2)), matmul(swap_axes(a, -1, -2), g)};
}

// Batch dims small enough that a whole operand stays within the sample element limit.
Shape sample_batch(SampleRng& rng, std::int64_t per_matrix) {
  for (;;) {
    Shape s = rng.shape(1, 2, 3);
    if (num_elements(s) * per_matrix <= rules::sample_cap(rng)) return s;
  }
}

std::optional<OpSample> matmul_sample(SampleRng& rng, const std::optional<TensorType>& first) {
  const auto domain = ValueDomain::real_range(-2, 2);
  const std::int64_t n = rng.dim(8);
  if (first) {
    if (first->dtype != DType::f32 || first->rank() < 2) return std::nullopt;
    const std::int64_t k = first->shape.back();
    const std::int64_t columns =
        std::min(n, std::max<std::int64_t>(1, rules::sample_cap(rng) / std::max<std::int64_t>(k, 1)));
    Shape rhs = first->rank() >= 3 && rng.coin() ? batch_dims(first->shape) : Shape{};
    rhs.push_back(k);
    rhs.push_back(columns);
    if (num_elements(rhs) > rules::sample_cap(rng)) rhs = {k, columns};
    return OpSample{{}, {*first, {DType::f32, rhs}}, {domain, domain}};
  }
  const std::int64_t m = rng.dim(8);
  // Boundary draws include an empty contraction now and then: K = 0 gives zeros.
  const std::int64_t k = rng.profile().boundary && rng.coin(0.05) ? 0 : rng.dim(8);
  Shape lhs{m, k};
  Shape rhs{k, n};
  switch (rng.uniform_int(0, 2)) {
    case 0:  // plain 2-D
      break;
    case 1: {  // leading dims on the lhs only
      Shape lead = sample_batch(rng, m * k);
      lhs.insert(lhs.begin(), lead.begin(), lead.end());
      break;
    }
    default: {  // batched, same batch dims on both sides
      Shape batch = sample_batch(rng, std::max(m, n) * k);
      lhs.insert(lhs.begin(), batch.begin(), batch.end());
      rhs.insert(rhs.begin(), batch.begin(), batch.end());
      break;
    }
  }
  return OpSample{{}, {{DType::f32, lhs}, {DType::f32, rhs}}, {domain, domain}};
}

}  // namespace

const OpDef& Matmul_def() {
  static const OpDef def{.name = op_name(op::Matmul),
                         .arity = 2,
                         .attrs = {},
                         .shape = matmul_rule,
                         .grad = matmul_grad,
                         .samples = matmul_sample,
                         .tolerance = ToleranceClass::matmul,
                         .reduction_length = matmul_reduction_length};
  return def;
}

Tensor matmul(const Tensor& a, const Tensor& b, CallSite loc) {
  return frontend::emit(op::Matmul, {a, b}, Attrs{}, loc);
}

}  // namespace tg
