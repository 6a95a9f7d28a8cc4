#pragma once
// Scaled dot-product attention as one op (docs/ops.md, "attention"), and the ops its gradient is
// made of. Declared here rather than in api.h, which most of the library includes.
#include <optional>

#include "tensorgrad/ir/ops/api.h"

namespace tg {

struct AttentionOptions {
  // Query i sees keys j <= i (top-left aligned); needs as many queries as keys.
  bool causal = false;
  // The factor on q . k; 1/sqrt(head_dim) when not given. Rounded to f32 once, so every backend and
  // the oracle apply the same value.
  std::optional<double> scale;
};

// softmax(scale * q k^T [+ causal mask]) v over the last two axes, without the [Tq, Tk] scores ever
// existing as a value. q [..., Tq, D], k [..., Tk, D], v [..., Tk, Dv] -> [..., Tq, Dv]; the leading
// axes (batch, heads) must be equal (no broadcasting); D >= 1 and Tk >= 1. Every float dtype; the
// inputs share one.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, AttentionOptions options = {}, TG_CALL_SITE);

// The parts of attention's gradient, as ops of their own (FlashAttention-2 style: the backward
// recomputes the probabilities from the per-row log-sum-exp instead of keeping them).
// Per-row log-sum-exp of the masked, scaled scores: [..., Tq], always f32.
Tensor attention_lse(const Tensor& q, const Tensor& k, AttentionOptions options = {}, TG_CALL_SITE);
// dq from the output o, its cotangent g and lse: [..., Tq, D].
Tensor attention_grad_q(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& g,
                        const Tensor& lse, AttentionOptions options = {}, TG_CALL_SITE);
// dk and dv side by side: [..., Tk, D + Dv] (columns [0, D) are dk).
Tensor attention_grad_kv(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& g,
                         const Tensor& lse, AttentionOptions options = {}, TG_CALL_SITE);

}  // namespace tg
