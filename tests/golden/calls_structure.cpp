// Explicit golden calls of the structure family (cases in tools/goldens/structure.py): narrow, pad
// and concat take negative axes, as the front-end does (the IR takes non-negative ones), and the
// composites stack, split, flatten, split_heads and merge_heads. concat and stack take every input of
// the case; split returns one piece, the one at attribute `index`, since a golden call yields one
// tensor; flatten's `start_axis` and concat/stack/split's `axis` default as in api.h.
#include "golden_calls.h"
#include "tensorgrad/ir/ops/ids/structure.h"

namespace tg::golden {

namespace {

void add_calls(CallEntries& t) {
  t["narrow"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, "narrow");
    return narrow(in[0], a.integer("axis"), a.integer("start"), a.integer("length"));
  };
  t["pad"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, "pad");
    return pad(in[0], a.integer("axis"), a.integer("before"), a.integer("after"));
  };
  t["concat"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    return concat(in, optional_integer(a, "axis").value_or(0));
  };
  t["stack"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    return stack(in, optional_integer(a, "axis").value_or(0));
  };
  t["split"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, "split");
    const std::vector<Tensor> pieces = split(in[0], a.ints("sizes"), optional_integer(a, "axis").value_or(0));
    const auto index = a.integer("index");
    if (index < 0 || index >= static_cast<std::int64_t>(pieces.size())) {
      throw Error("split: golden attribute index " + std::to_string(index) + " is out of range for " +
                  std::to_string(pieces.size()) + " pieces");
    }
    return pieces[static_cast<std::size_t>(index)];
  };
  t["flatten"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, "flatten");
    return flatten(in[0], optional_integer(a, "start_axis").value_or(0));
  };
  t["split_heads"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, "split_heads");
    return split_heads(in[0], a.integer("heads"));
  };
  t["merge_heads"] = [](const std::vector<Tensor>& in, const Attrs&) {
    require_inputs(in, 1, "merge_heads");
    return merge_heads(in[0]);
  };
}

const CallRegistration kCalls("structure", add_calls);

}  // namespace

}  // namespace tg::golden
