// Golden calls of the indexing family (cases in tools/goldens/indexing.py). Index inputs are i32;
// attributes: one_hot `depth`; take_along_axis `axis`; scatter_add `axis` and `size`; where_causal
// `value` (a real, or an integer the helper widens).
#include "golden_calls.h"

namespace tg::golden {

void register_indexing_calls(CallTable& t) {
  t["one_hot"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, "one_hot");
    return one_hot(in[0], a.integer("depth"));
  };
  t["embedding"] = [](const std::vector<Tensor>& in, const Attrs&) {
    require_inputs(in, 2, "embedding");
    return embedding(in[0], in[1]);
  };
  t["take_along_axis"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 2, "take_along_axis");
    return take_along_axis(in[0], in[1], a.integer("axis"));
  };
  t["scatter_add"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 2, "scatter_add");
    return scatter_add(in[0], in[1], a.integer("axis"), a.integer("size"));
  };
  t["softmax_causal"] = [](const std::vector<Tensor>& in, const Attrs&) {
    require_inputs(in, 1, "softmax_causal");
    return softmax_causal(in[0]);
  };
  t["where_causal"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, "where_causal");
    return where_causal(in[0], number(a, "value"));
  };
}

}  // namespace tg::golden
