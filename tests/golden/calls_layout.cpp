// Explicit golden calls of the layout family (cases in tools/goldens/layout.py): reshape infers one
// -1 dimension, permute and swap_axes take negative axes, as the front-end does; the IR takes the
// resolved values. broadcast_to and sum_to_shape are traced as the ops themselves.
#include "golden_calls.h"
#include "tensorgrad/ir/ops/ids/layout.h"

namespace tg::golden {

namespace {

void add_calls(CallEntries& t) {
  t["reshape"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, "reshape");
    return reshape(in[0], a.ints("shape"));
  };
  t["permute"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, "permute");
    return permute(in[0], a.ints("perm"));
  };
  t["swap_axes"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, "swap_axes");
    return swap_axes(in[0], a.integer("axis0"), a.integer("axis1"));
  };
}

const CallRegistration kCalls("layout", add_calls);

}  // namespace

}  // namespace tg::golden
