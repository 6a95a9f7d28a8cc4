// Explicit golden calls of the normalization composites (cases in tools/goldens/normalization.py). The
// boolean attributes `gain` and `bias` (default false) say which optional inputs follow x, in that
// order; `eps` defaults as in api.h.
#include "golden_calls.h"

namespace tg::golden {

namespace {

// The optional inputs after x, as the case's boolean attributes announce them.
struct Affine {
  std::optional<Tensor> gain;
  std::optional<Tensor> bias;
};

Affine affine_inputs(const std::vector<Tensor>& in, const Attrs& a, bool takes_bias, std::string_view call) {
  const bool with_gain = boolean_or(a, "gain", false);
  const bool with_bias = takes_bias && boolean_or(a, "bias", false);
  require_inputs(in, 1 + (with_gain ? 1 : 0) + (with_bias ? 1 : 0), call);
  Affine affine;
  if (with_gain) affine.gain = in[1];
  if (with_bias) affine.bias = in[with_gain ? 2 : 1];
  return affine;
}

void add_calls(CallEntries& t) {
  t["layer_norm"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    const Affine affine = affine_inputs(in, a, true, "layer_norm");
    if (const auto eps = optional_number(a, "eps")) return layer_norm(in[0], affine.gain, affine.bias, *eps);
    return layer_norm(in[0], affine.gain, affine.bias);
  };
  t["rms_norm"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    const Affine affine = affine_inputs(in, a, false, "rms_norm");
    if (const auto eps = optional_number(a, "eps")) return rms_norm(in[0], affine.gain, *eps);
    return rms_norm(in[0], affine.gain);
  };
}

const CallRegistration kCalls("normalization", add_calls);

}  // namespace

}  // namespace tg::golden
