// Explicit golden calls of the softmax family (cases in tools/goldens/softmax.py): the front-end's
// optional `axis` (default -1), negative axes counting from the end; the IR takes a non-negative axis.
#include "golden_calls.h"
#include "tensorgrad/ir/ops/ids/softmax.h"

namespace tg::golden {

namespace {

using SoftmaxFn = Tensor (*)(const Tensor&, std::int64_t, CallSite);

GoldenCall softmax_call(std::string name, SoftmaxFn fn) {
  return [name, fn](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, name);
    return fn(in[0], optional_integer(a, "axis").value_or(-1), CallSite::current());
  };
}

void add_calls(CallEntries& t) {
  t["softmax"] = softmax_call("softmax", softmax);
  t["log_softmax"] = softmax_call("log_softmax", log_softmax);
}

const CallRegistration kCalls("softmax", add_calls);

}  // namespace

}  // namespace tg::golden
