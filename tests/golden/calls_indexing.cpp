// Explicit golden calls of the indexing family (cases in tools/goldens/indexing.py): take_along_axis
// (`axis`) and scatter_add (`axis`, `size`) take negative axes, as the front-end does; the IR takes
// non-negative ones. one_hot, embedding, softmax_causal and where_causal are traced as the ops.
#include "golden_calls.h"
#include "tensorgrad/ir/ops/ids/indexing.h"

namespace tg::golden {

namespace {

void add_calls(CallEntries& t) {
  t["take_along_axis"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 2, "take_along_axis");
    return take_along_axis(in[0], in[1], a.integer("axis"));
  };
  t["scatter_add"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 2, "scatter_add");
    return scatter_add(in[0], in[1], a.integer("axis"), a.integer("size"));
  };
}

const CallRegistration kCalls("indexing", add_calls);

}  // namespace

}  // namespace tg::golden
