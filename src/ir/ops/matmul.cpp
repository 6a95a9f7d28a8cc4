// matmul with torch.matmul's semantics: 1-D operands promoted to a row or a column, batch dims
// broadcast (src/ir/ops/matmul_layout.h). The shape rule, the gradient rule (each operand's
// cotangent summed over the batch dims it was broadcast along), and the samples.
#include "tensorgrad/ir/ops/ids/matmul.h"

#include <algorithm>

#include "matmul_layout.h"
#include "result_dtype.h"
#include "rules.h"

namespace tg {

namespace {

Shape batch_dims(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

std::string describe(const char* side, const Shape& s) { return std::string(side) + " " + shape_to_string(s); }

}  // namespace

MatmulLayout matmul_layout(const Shape& lhs, const Shape& rhs) {
  if (lhs.empty()) rule_broken("lhs must have rank >= 1 ([K] or [..., M, K]), got a 0-d tensor");
  if (rhs.empty()) rule_broken("rhs must have rank >= 1 ([K] or [..., K, N]), got a 0-d tensor");
  // Promote 1-D operands: lhs [K] -> [1, K], rhs [K] -> [K, 1].
  Shape a = lhs.size() == 1 ? Shape{1, lhs[0]} : lhs;
  Shape b = rhs.size() == 1 ? Shape{rhs[0], 1} : rhs;
  MatmulLayout layout;
  layout.m = a[a.size() - 2];
  layout.k = a.back();
  layout.n = b.back();
  const std::int64_t k_rhs = b[b.size() - 2];
  if (layout.k != k_rhs) {
    rule_broken("inner dimensions differ: " + describe("lhs", lhs) + " has K=" + std::to_string(layout.k) + " (dim " +
                std::to_string(lhs.size() - 1) + ") but " + describe("rhs", rhs) + " has K=" + std::to_string(k_rhs) +
                " (dim " + std::to_string(rhs.size() == 1 ? 0 : rhs.size() - 2) + ")");
  }

  // Broadcast the batch dims, right-aligned; each operand's batch stride runs from its innermost
  // batch dim (one matrix) outwards.
  const Shape a_batch = batch_dims(a);
  const Shape b_batch = batch_dims(b);
  const std::size_t rank = std::max(a_batch.size(), b_batch.size());
  Shape batch(rank, 1);
  std::int64_t a_stride = layout.m * layout.k;
  std::int64_t b_stride = layout.k * layout.n;
  std::vector<MatmulLayout::Group> inner_first;
  bool rhs_has_batch = false;
  for (std::size_t r = 0; r < rank; ++r) {  // r: position from the innermost batch dim
    const bool in_a = r < a_batch.size();
    const bool in_b = r < b_batch.size();
    const std::int64_t da = in_a ? a_batch[a_batch.size() - 1 - r] : 1;
    const std::int64_t db = in_b ? b_batch[b_batch.size() - 1 - r] : 1;
    if (da != db && da != 1 && db != 1) {
      rule_broken("batch dimensions do not broadcast: " + describe("lhs", lhs) + " dim " +
                  std::to_string(a_batch.size() - 1 - r) + " has size " + std::to_string(da) + " but " +
                  describe("rhs", rhs) + " dim " + std::to_string(b_batch.size() - 1 - r) + " has size " +
                  std::to_string(db) + " (batch dims must be equal or 1)");
    }
    const std::int64_t extent = da == 1 ? db : da;
    batch[rank - 1 - r] = extent;
    rhs_has_batch = rhs_has_batch || db != 1;
    if (extent != 1) {
      const MatmulLayout::Group g{extent, da == 1 ? 0 : a_stride, db == 1 ? 0 : b_stride};
      layout.broadcast = layout.broadcast || da != db;
      // Merged with the group inside it when the strides continue (a broadcast dim beside a
      // broadcast dim, a stored dim beside a stored dim in the same order).
      MatmulLayout::Group* inside = inner_first.empty() ? nullptr : &inner_first.back();
      if (inside && inside->lhs_stride * inside->extent == g.lhs_stride &&
          inside->rhs_stride * inside->extent == g.rhs_stride) {
        inside->extent *= extent;
      } else {
        inner_first.push_back(g);
      }
    }
    a_stride *= da;
    b_stride *= db;
  }
  layout.out = batch;
  if (lhs.size() > 1) layout.out.push_back(layout.m);
  if (rhs.size() > 1) layout.out.push_back(layout.n);
  layout.batches = num_elements(batch);
  if (!rhs_has_batch) {
    // One B for every lhs matrix, whose batch is then the whole output batch, stored contiguously.
    layout.folded = true;
    layout.broadcast = false;
    Shape rows = batch;  // counted through num_elements, which refuses a count past the limits
    rows.push_back(layout.m);
    layout.m = num_elements(rows);
    layout.batches = 1;
  } else if (layout.batches > 0) {
    layout.groups.assign(inner_first.rbegin(), inner_first.rend());
  }
  return layout;
}

namespace {

TensorType matmul_rule(const Attrs&, std::span<const TensorType> inputs) {
  const TensorType& a = inputs[0];
  const TensorType& b = inputs[1];
  rules::require_dtype(a, DType::f32, "lhs");
  rules::require_dtype(b, DType::f32, "rhs");
  return {DType::f32, matmul_layout(a.shape, b.shape).out};
}

std::int64_t matmul_reduction_length(const Attrs&, std::span<const TensorType> inputs) {
  return inputs[0].shape.back();
}

// The gradient on the promoted operands (a [.., M, K], b [.., K, N], g [batch.., M, N]): g b^T to
// a and a^T g to b, each summed to its operand's shape over the batch dims it was broadcast along;
// the promotions undone with reshapes.
std::vector<std::optional<Tensor>> matmul_grad(const GradArgs& args) {
  const Tensor& a_in = args.inputs[0];
  const Tensor& b_in = args.inputs[1];
  const Shape a_in_shape = a_in.shape();
  const Shape b_in_shape = b_in.shape();
  const MatmulLayout layout = matmul_layout(a_in_shape, b_in_shape);
  const std::int64_t k = layout.k;
  const Tensor a = a_in.rank() == 1 ? reshape(a_in, {1, k}) : a_in;
  const Tensor b = b_in.rank() == 1 ? reshape(b_in, {k, 1}) : b_in;
  const Shape a_shape = a.shape();
  const Shape b_shape = b.shape();
  // The cotangent in the promoted output shape [batch.., M, N].
  Shape g_shape(layout.out.begin(), layout.out.end() - (a_in.rank() > 1) - (b_in.rank() > 1));
  g_shape.push_back(a_shape[a_shape.size() - 2]);
  g_shape.push_back(b_shape.back());
  const Tensor g = args.cotangent.shape() == g_shape ? args.cotangent : reshape(args.cotangent, g_shape);

  Tensor da = matmul(g, swap_axes(b, -1, -2));
  if (da.shape() != a_shape) da = sum_to_shape(da, a_shape);
  Tensor db;
  if (layout.folded) {
    // Every row of a (all batch dims folded into P rows) met the same b: one product sums them.
    const std::int64_t n = b_shape.back();
    const std::int64_t p = num_elements(Shape(a_shape.begin(), a_shape.end() - 1));  // not size / K: K may be 0
    const Tensor a_rows = a.rank() == 2 ? a : reshape(a, {p, k});
    const Tensor g_rows = g.rank() == 2 ? g : reshape(g, {p, n});
    db = matmul(swap_axes(a_rows, 0, 1), g_rows);
    if (b.rank() != 2) db = reshape(db, b_shape);
  } else {
    db = matmul(swap_axes(a, -1, -2), g);
    if (db.shape() != b_shape) db = sum_to_shape(db, b_shape);
  }
  if (a_in.rank() == 1) da = reshape(da, a_in_shape);
  if (b_in.rank() == 1) db = reshape(db, b_in_shape);
  return {da, db};
}

// The product of `dims`' elements with one matrix of `per_matrix` stays within the sample cap.
bool fits(const SampleRng& rng, const Shape& dims, std::int64_t per_matrix) {
  return num_elements(dims) * per_matrix <= rules::sample_cap(rng);
}

// Batch dims small enough that a whole operand stays within the sample element limit.
Shape sample_batch(SampleRng& rng, std::int64_t per_matrix) {
  for (;;) {
    Shape s = rng.shape(1, 2, 3);
    if (fits(rng, s, per_matrix)) return s;
  }
}

// A batch that broadcasts against `batch`: some dims set to 1, some leading dims dropped.
Shape broadcasting_batch(SampleRng& rng, const Shape& batch) {
  Shape s = batch;
  for (auto& d : s) {
    if (rng.coin(0.4)) d = 1;
  }
  const auto drop = rng.uniform_int(0, static_cast<std::int64_t>(s.size()));
  s.erase(s.begin(), s.begin() + drop);
  return s;
}

Shape with_matrix(Shape batch, std::int64_t rows, std::int64_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

// An rhs for a given lhs: a vector [K], a shared [K, N], or (a batched lhs) batch dims equal to the
// lhs's or broadcasting against them.
Shape rhs_for(SampleRng& rng, const TensorType& first, std::int64_t n) {
  const std::int64_t k = first.shape.back();
  if (rng.coin(0.15)) return {k};
  const std::int64_t columns =
      std::min(n, std::max<std::int64_t>(1, rules::sample_cap(rng) / std::max<std::int64_t>(k, 1)));
  Shape batch;
  if (first.rank() >= 3 && rng.coin()) {
    batch = batch_dims(first.shape);
    if (rng.coin()) batch = broadcasting_batch(rng, batch);
  } else if (first.rank() <= 2 && rng.coin(0.3)) {  // a batched rhs: the lhs broadcasts
    batch = sample_batch(rng, k * columns);
  }
  if (!fits(rng, batch, k * columns)) batch = {};
  return with_matrix(batch, k, columns);
}

std::optional<OpSample> matmul_sample(SampleRng& rng, const std::optional<TensorType>& first) {
  const auto domain = ValueDomain::real_range(-2, 2);
  const std::int64_t n = rng.dim(8);
  if (first) {
    if (first->dtype != DType::f32 || first->rank() < 1) return std::nullopt;
    return OpSample{{}, {*first, {DType::f32, rhs_for(rng, *first, n)}}, {domain, domain}};
  }
  const std::int64_t m = rng.dim(8);
  // Boundary draws include an empty contraction now and then: K = 0 gives zeros.
  const std::int64_t k = rng.profile().boundary && rng.coin(0.05) ? 0 : rng.dim(8);
  Shape lhs{m, k};
  Shape rhs{k, n};
  switch (rng.uniform_int(0, 4)) {
    case 0:  // plain 2-D
      break;
    case 1: {  // leading dims on the lhs only
      const Shape lead = sample_batch(rng, m * k);
      lhs = with_matrix(lead, m, k);
      break;
    }
    case 2: {  // batched, same batch dims on both sides
      const Shape batch = sample_batch(rng, std::max(m, n) * k);
      lhs = with_matrix(batch, m, k);
      rhs = with_matrix(batch, k, n);
      break;
    }
    case 3: {  // batch dims that broadcast: 1s and missing leading dims on either side
      const Shape batch = sample_batch(rng, std::max(m, n) * k);
      lhs = with_matrix(broadcasting_batch(rng, batch), m, k);
      rhs = with_matrix(broadcasting_batch(rng, batch), k, n);
      break;
    }
    default: {  // a vector on one side or both (batched against the other now and then)
      const Shape batch = rng.coin() ? sample_batch(rng, std::max(m, n) * k) : Shape{};
      const int form = static_cast<int>(rng.uniform_int(0, 2));
      lhs = form == 1 ? with_matrix(batch, m, k) : Shape{k};
      rhs = form == 0 ? with_matrix(batch, k, n) : Shape{k};
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

Tensor matmul(const Tensor& a, const Tensor& b, DType out, CallSite loc) {
  return frontend::product_in_dtype("matmul", a, b, out, loc,
                                    [&](const Tensor& x, const Tensor& y) { return matmul(x, y, loc); });
}

}  // namespace tg
