// Explicit golden calls of the attention family (cases in tools/goldens/attention.py): the front-end's
// options, `causal` (default false) and an optional `scale`. Without one the front-end takes
// 1/sqrt(head_dim), and it rounds either to f32; the IR op takes the rounded scale as a required
// attribute, so emitting the op directly would test neither.
#include "golden_calls.h"
#include "tensorgrad/ir/ops/attention.h"

namespace tg::golden {

namespace {

AttentionOptions options_of(const Attrs& a) {
  return AttentionOptions{.causal = boolean_or(a, "causal", false), .scale = optional_number(a, "scale")};
}

void add_calls(CallEntries& t) {
  t["attention"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 3, "attention");
    return attention(in[0], in[1], in[2], options_of(a));
  };
  t["attention_lse"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 2, "attention_lse");
    return attention_lse(in[0], in[1], options_of(a));
  };
  t["attention_grad_q"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 6, "attention_grad_q");
    return attention_grad_q(in[0], in[1], in[2], in[3], in[4], in[5], options_of(a));
  };
  t["attention_grad_kv"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 6, "attention_grad_kv");
    return attention_grad_kv(in[0], in[1], in[2], in[3], in[4], in[5], options_of(a));
  };
}

const CallRegistration kCalls("attention", add_calls);

}  // namespace

}  // namespace tg::golden
