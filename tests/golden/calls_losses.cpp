// Golden calls of the losses family (cases in tools/goldens/losses.py): inputs (scores [..., C],
// i32 targets [...]) and an optional string attribute `reduction`, "none" | "mean" | "sum"
// (default "mean", as in the front-end).
#include "golden_calls.h"

namespace tg::golden {

namespace {

using LossFn = Tensor (*)(const Tensor&, const Tensor&, LossOptions, CallSite);

Reduction reduction_of(const Attrs& a) {
  if (!a.has("reduction")) return Reduction::mean;
  const std::string& name = a.string("reduction");
  if (name == "none") return Reduction::none;
  if (name == "sum") return Reduction::sum;
  if (name == "mean") return Reduction::mean;
  throw Error("golden attribute reduction = \"" + name + "\" is not none, mean or sum");
}

GoldenCall loss_call(std::string name, LossFn fn) {
  return [name, fn](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 2, name);
    return fn(in[0], in[1], {.reduction = reduction_of(a)}, CallSite::current());
  };
}

}  // namespace

void register_losses_calls(CallTable& t) {
  t["nll_loss"] = loss_call("nll_loss", nll_loss);
  t["cross_entropy"] = loss_call("cross_entropy", cross_entropy);
}

}  // namespace tg::golden
