// Explicit golden calls of the creation module (cases in tools/goldens/creation.py): the composite
// scalar (a 0-d f32 full, its `value` rounded to float32). full, zeros, ones and arange are traced as
// the ops themselves, their dtype given as a string.
#include "golden_calls.h"
#include "tensorgrad/ir/ops/ids/creation.h"

namespace tg::golden {

namespace {

// Appends to the runner's tracing scope: the call has no inputs.
void add_calls(CallEntries& t) {
  t["scalar"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 0, "scalar");
    return scalar(number(a, "value"));
  };
}

const CallRegistration kCalls("creation", add_calls);

}  // namespace

}  // namespace tg::golden
