// The attention family: scaled dot-product attention as one op, and the three ops its gradient is
// made of (the per-row log-sum-exp and the two FlashAttention-2 style backward products). Shape
// rules, gradient rule, samples and the front-end (tensorgrad/ir/ops/attention.h).
#include "tensorgrad/ir/ops/attention.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "rules.h"
#include "tensorgrad/ir/ops/ids/attention.h"

namespace tg {

namespace {

using Grads = std::vector<std::optional<Tensor>>;

std::string dims_text(const Shape& shape) { return TensorType{DType::f32, shape}.to_string(); }

// The parts of q [..., Tq, D], k [..., Tk, D] and (when given) v [..., Tk, Dv] after the checks
// every attention op shares.
struct AttentionDims {
  Shape batch;
  std::int64_t tq = 0, tk = 0, d = 0, dv = 0;
};

void require_rank(const TensorType& t, const char* what) {
  if (t.rank() < 2) {
    rules::rule_broken(std::string(what) + " must be [..., T, head_dim] of rank >= 2, got rank " +
                       std::to_string(t.rank()));
  }
}

Shape leading(const TensorType& t) { return Shape(t.shape.begin(), t.shape.end() - 2); }

// Every kernel multiplies by the scale in f32, and the gradient ops carry it as f32: a scale past
// f32's range (finite as a double) would be an infinity there.
bool finite_in_f32(double scale) {
  return std::isfinite(scale) && std::fabs(scale) <= std::numeric_limits<float>::max();
}

AttentionDims check_qkv(const Attrs& attrs, const TensorType& q, const TensorType& k, const TensorType* v) {
  require_rank(q, "q");
  require_rank(k, "k");
  if (v) require_rank(*v, "v");
  AttentionDims dims;
  dims.batch = leading(q);
  if (leading(k) != dims.batch || (v && leading(*v) != dims.batch)) {
    rules::rule_broken("q, k and v must share their leading (batch, head) axes, got " + dims_text(dims.batch) + ", " +
                       dims_text(leading(k)) + (v ? " and " + dims_text(leading(*v)) : std::string()));
  }
  dims.tq = q.shape[q.shape.size() - 2];
  dims.d = q.shape.back();
  dims.tk = k.shape[k.shape.size() - 2];
  if (k.shape.back() != dims.d) {
    rules::rule_broken("q and k must have the same head_dim, got " + std::to_string(dims.d) + " and " +
                       std::to_string(k.shape.back()));
  }
  if (dims.d < 1) rules::rule_broken("head_dim must be at least 1, got 0");
  if (dims.tk < 1) rules::rule_broken("needs at least one key (Tk >= 1), got Tk = 0");
  if (v) {
    if (v->shape[v->shape.size() - 2] != dims.tk) {
      rules::rule_broken("k and v must have the same number of keys, got " + std::to_string(dims.tk) + " and " +
                         std::to_string(v->shape[v->shape.size() - 2]));
    }
    dims.dv = v->shape.back();
  }
  if (attrs.boolean("causal") && dims.tq != dims.tk) {
    rules::rule_broken("causal attention needs as many queries as keys (top-left aligned), got Tq = " +
                       std::to_string(dims.tq) + " and Tk = " + std::to_string(dims.tk));
  }
  const double scale = attrs.real("scale");
  if (!finite_in_f32(scale)) {
    std::ostringstream text;
    text << "scale must be finite in f32 (|scale| <= " << std::numeric_limits<float>::max() << "), got " << scale;
    rules::rule_broken(text.str());
  }
  return dims;
}

Shape with_tail(const Shape& batch, std::initializer_list<std::int64_t> tail) {
  Shape shape = batch;
  shape.insert(shape.end(), tail);
  return shape;
}

// attention is float_generic: the rule sees f32 for every float dtype.
TensorType attention_rule(const Attrs& attrs, std::span<const TensorType> in) {
  rules::require_dtype(in[0], DType::f32, "q");
  rules::require_dtype(in[1], DType::f32, "k");
  rules::require_dtype(in[2], DType::f32, "v");
  const AttentionDims dims = check_qkv(attrs, in[0], in[1], &in[2]);
  return {DType::f32, with_tail(dims.batch, {dims.tq, dims.dv})};
}

// The backward ops take 16-bit operands with an f32 lse, so they choose their dtypes themselves.
void require_float_like(const TensorType& t, DType dtype, const char* what) {
  if (t.dtype != dtype) {
    rules::rule_broken(std::string(what) + " must be " + std::string(dtype_name(dtype)) + " like q, got " +
                       t.to_string());
  }
}

DType query_dtype(const TensorType& q) {
  if (!is_float(q.dtype)) rules::rule_broken("q must be a float tensor, got " + q.to_string());
  return q.dtype;
}

TensorType attention_lse_rule(const Attrs& attrs, std::span<const TensorType> in) {
  const DType dtype = query_dtype(in[0]);
  require_float_like(in[1], dtype, "k");
  const AttentionDims dims = check_qkv(attrs, in[0], in[1], nullptr);
  Shape shape = dims.batch;
  shape.push_back(dims.tq);
  return {DType::f32, shape};
}

// q, k, v, o, g, lse: o and g are [..., Tq, Dv] in q's dtype, lse is f32 [..., Tq].
AttentionDims check_backward_inputs(const Attrs& attrs, std::span<const TensorType> in) {
  const DType dtype = query_dtype(in[0]);
  require_float_like(in[1], dtype, "k");
  require_float_like(in[2], dtype, "v");
  require_float_like(in[3], dtype, "o");
  require_float_like(in[4], dtype, "g");
  const AttentionDims dims = check_qkv(attrs, in[0], in[1], &in[2]);
  const Shape rows = with_tail(dims.batch, {dims.tq, dims.dv});
  if (in[3].shape != rows || in[4].shape != rows) {
    rules::rule_broken("o and g must be [..., Tq, Dv] = " + dims_text(rows) + ", got " + dims_text(in[3].shape) +
                       " and " + dims_text(in[4].shape));
  }
  Shape lse = dims.batch;
  lse.push_back(dims.tq);
  if (in[5].dtype != DType::f32 || in[5].shape != lse) {
    rules::rule_broken("lse must be f32" + dims_text(lse) + ", got " + in[5].to_string());
  }
  return dims;
}

TensorType attention_grad_q_rule(const Attrs& attrs, std::span<const TensorType> in) {
  const AttentionDims dims = check_backward_inputs(attrs, in);
  return {in[0].dtype, with_tail(dims.batch, {dims.tq, dims.d})};
}

TensorType attention_grad_kv_rule(const Attrs& attrs, std::span<const TensorType> in) {
  const AttentionDims dims = check_backward_inputs(attrs, in);
  return {in[0].dtype, with_tail(dims.batch, {dims.tk, dims.d + dims.dv})};
}

// Each output element combines dot products over head_dim with a softmax over the keys.
std::int64_t forward_length(const Attrs&, std::span<const TensorType> in) {
  return in[0].shape.back() + in[1].shape[in[1].shape.size() - 2];
}
// dq sums over keys, dk and dv over queries; both use dot products over D and Dv.
std::int64_t grad_q_length(const Attrs&, std::span<const TensorType> in) {
  return in[0].shape.back() + in[2].shape.back() + in[1].shape[in[1].shape.size() - 2];
}
std::int64_t grad_kv_length(const Attrs&, std::span<const TensorType> in) {
  return in[0].shape.back() + in[2].shape.back() + in[0].shape[in[0].shape.size() - 2];
}

AttentionOptions options_of(const Attrs& attrs) {
  return AttentionOptions{.causal = attrs.boolean("causal"), .scale = attrs.real("scale")};
}

// The backward of one attention node: lse recomputed from q and k (a [..., Tq] value, not the
// scores), then dq and [dk | dv] from the two backward ops.
Grads attention_grad(const GradArgs& args) {
  const Tensor& q = args.inputs[0];
  const Tensor& k = args.inputs[1];
  const Tensor& v = args.inputs[2];
  const AttentionOptions options = options_of(args.attrs);
  const Tensor lse = attention_lse(q, k, options);
  const Tensor dq = attention_grad_q(q, k, v, args.output, args.cotangent, lse, options);
  const Tensor dkv = attention_grad_kv(q, k, v, args.output, args.cotangent, lse, options);
  const std::int64_t d = q.shape().back();
  const std::int64_t dv = v.shape().back();
  // An empty v (Dv = 0) has nothing to receive; narrow refuses a zero-length slice.
  std::optional<Tensor> dv_grad;
  if (dv > 0) dv_grad = narrow(dkv, -1, d, dv);
  return {dq, narrow(dkv, -1, 0, d), dv_grad};
}

struct SampledDims {
  Shape batch;
  std::int64_t tq = 1, tk = 1, d = 1, dv = 1;
  bool causal = false;
  double scale = 1;
};

// The scores' work as the Vulkan flash kernels run it stays under this: heads x Tq x Tk with each T
// at least one 32-row tile, times the square of the 64-column chunks of head_dim + Dv (each chunk
// recomputes the scores over both). The element budget alone lets T reach 2^20 at head_dim 1, or
// head_dims of 1025 at T = 64: hours of lavapipe and of the oracle.
constexpr std::int64_t kMaxScoreWork = std::int64_t{1} << 18;
std::int64_t score_work(std::int64_t heads, std::int64_t tq, std::int64_t tk, std::int64_t width) {
  const std::int64_t chunks = (width + 63) / 64;
  return heads * std::max<std::int64_t>(tq, 32) * std::max<std::int64_t>(tk, 32) * chunks * chunks;
}

// Small batch/head axes, T and head_dims that reach the kernels' tile edges under the boundary
// profile, all under the sample's element budget and kMaxScoreWork.
std::optional<SampledDims> sample_dims(SampleRng& rng, const std::optional<TensorType>& first) {
  if (first && (first->dtype != DType::f32 || first->rank() < 2 || first->shape.back() < 1)) return std::nullopt;
  const std::int64_t cap = rules::sample_cap(rng);
  for (;;) {
    SampledDims s;
    s.causal = rng.coin(0.4);
    if (first) {
      s.batch = leading(*first);
      s.tq = first->shape[first->shape.size() - 2];
      s.d = first->shape.back();
    } else {
      s.batch = rng.shape(0, 2, 3);
      s.tq = rules::sample_dim(rng, 1, 9);
      s.d = rules::sample_dim(rng, 1, 6);
    }
    s.tk = s.causal ? s.tq : rules::sample_dim(rng, 1, 9);
    s.dv = rules::sample_dim(rng, 1, 6);
    const std::int64_t heads = num_elements(s.batch);
    const std::int64_t largest = heads * std::max({s.tq * s.d, s.tk * (s.d + s.dv), s.tq * s.dv});
    if (largest > cap || score_work(heads, s.tq, s.tk, s.d + s.dv) > kMaxScoreWork) {
      // A given first input that fits on its own still has a small sample: one key, Dv = 1.
      if (first && heads * std::max(s.tq * s.d, 2 * s.d + 2) <= cap &&
          score_work(heads, s.tq, 1, s.d + 1) <= kMaxScoreWork) {
        s.causal = s.causal && s.tq == 1;
        s.tk = 1;
        s.dv = 1;
      } else if (first) {
        return std::nullopt;
      } else {
        continue;
      }
    }
    // The default scale, or another of the same size (negative included), so scores stay O(1) at
    // any head_dim and the softmax is neither flat nor one-hot.
    const double unit = 1.0 / std::sqrt(static_cast<double>(s.d));
    s.scale = static_cast<float>(rng.coin() ? unit : unit * rng.uniform(-1.5, 1.5));
    return s;
  }
}

Attrs sample_attrs(const SampledDims& s) { return Attrs{{"causal", s.causal}, {"scale", s.scale}}; }

std::optional<OpSample> attention_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  const auto s = sample_dims(rng, first);
  if (!s) return std::nullopt;
  const TensorType q{DType::f32, with_tail(s->batch, {s->tq, s->d})};
  const TensorType k{DType::f32, with_tail(s->batch, {s->tk, s->d})};
  const TensorType v{DType::f32, with_tail(s->batch, {s->tk, s->dv})};
  const ValueDomain domain = ValueDomain::real_range(-2, 2);
  return OpSample{sample_attrs(*s), {q, k, v}, {domain, domain, domain}};
}

std::optional<OpSample> attention_lse_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  auto sample = attention_samples(rng, first);
  if (!sample) return std::nullopt;
  sample->inputs.resize(2);
  sample->domains.resize(2);
  return sample;
}

// The backward ops are defined for any o, g and lse; lse stays near the scores' log-sum-exp so the
// recomputed probabilities neither overflow nor vanish.
std::optional<OpSample> attention_backward_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  auto sample = attention_samples(rng, first);
  if (!sample) return std::nullopt;
  const TensorType& q = sample->inputs[0];
  const TensorType& v = sample->inputs[2];
  TensorType rows = v;
  rows.shape = leading(q);
  rows.shape.push_back(q.shape[q.shape.size() - 2]);
  rows.shape.push_back(v.shape.back());
  TensorType lse{DType::f32, leading(q)};
  lse.shape.push_back(q.shape[q.shape.size() - 2]);
  sample->inputs.insert(sample->inputs.end(), {rows, rows, lse});
  const ValueDomain domain = ValueDomain::real_range(-2, 2);
  sample->domains.insert(sample->domains.end(), {domain, domain, ValueDomain::real_range(0, 3)});
  return sample;
}

const std::vector<AttrSpec> kAttentionAttrs = {{"causal", AttrKind::boolean}, {"scale", AttrKind::real}};

Attrs attention_attrs(const Tensor& q, const AttentionOptions& options) {
  double scale = 1.0;
  if (options.scale) {
    scale = *options.scale;
  } else if (q.rank() >= 1 && q.shape().back() > 0) {
    scale = 1.0 / std::sqrt(static_cast<double>(q.shape().back()));
  }
  // Round once here so the oracle and every f32 kernel multiply by the same value; a scale that is
  // not finite in f32 stays as given and the rule names it.
  if (finite_in_f32(scale)) scale = static_cast<float>(scale);
  return Attrs{{"causal", options.causal}, {"scale", scale}};
}

}  // namespace

const OpDef& Attention_def() {
  static const OpDef def{.name = op_name(op::Attention),
                         .arity = 3,
                         .attrs = kAttentionAttrs,
                         .shape = attention_rule,
                         .grad = attention_grad,
                         .samples = attention_samples,
                         .tolerance = ToleranceClass::matmul,
                         .reduction_length = forward_length};
  return def;
}

const OpDef& AttentionLse_def() {
  static const OpDef def{.name = op_name(op::AttentionLse),
                         .arity = 2,
                         .attrs = kAttentionAttrs,
                         .shape = attention_lse_rule,
                         .differentiable = false,
                         .samples = attention_lse_samples,
                         .tolerance = ToleranceClass::matmul,
                         .reduction_length = forward_length,
                         .dtypes = DTypeRule::explicit_dtypes};
  return def;
}

const OpDef& AttentionGradQ_def() {
  static const OpDef def{.name = op_name(op::AttentionGradQ),
                         .arity = 6,
                         .attrs = kAttentionAttrs,
                         .shape = attention_grad_q_rule,
                         .differentiable = false,
                         .samples = attention_backward_samples,
                         .tolerance = ToleranceClass::matmul,
                         .reduction_length = grad_q_length,
                         .dtypes = DTypeRule::explicit_dtypes};
  return def;
}

const OpDef& AttentionGradKv_def() {
  static const OpDef def{.name = op_name(op::AttentionGradKv),
                         .arity = 6,
                         .attrs = kAttentionAttrs,
                         .shape = attention_grad_kv_rule,
                         .differentiable = false,
                         .samples = attention_backward_samples,
                         .tolerance = ToleranceClass::matmul,
                         .reduction_length = grad_kv_length,
                         .dtypes = DTypeRule::explicit_dtypes};
  return def;
}

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, AttentionOptions options, CallSite loc) {
  return frontend::emit(op::Attention, {q, k, v}, attention_attrs(q, options), loc);
}

Tensor attention_lse(const Tensor& q, const Tensor& k, AttentionOptions options, CallSite loc) {
  return frontend::emit(op::AttentionLse, {q, k}, attention_attrs(q, options), loc);
}

Tensor attention_grad_q(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& g,
                        const Tensor& lse, AttentionOptions options, CallSite loc) {
  return frontend::emit(op::AttentionGradQ, {q, k, v, o, g, lse}, attention_attrs(q, options), loc);
}

Tensor attention_grad_kv(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& g,
                         const Tensor& lse, AttentionOptions options, CallSite loc) {
  return frontend::emit(op::AttentionGradKv, {q, k, v, o, g, lse}, attention_attrs(q, options), loc);
}

}  // namespace tg
