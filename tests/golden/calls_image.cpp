// Explicit golden calls of the image module (cases in tools/goldens/image.py): the composite
// nearest_upsample2d (`factor`). conv2d, its adjoints, max_pool2d and max_pool2d_grad are traced as
// the ops themselves, every attribute given.
#include "golden_calls.h"
#include "tensorgrad/ir/ops/ids/image.h"

namespace tg::golden {

namespace {

void add_calls(CallEntries& t) {
  t["nearest_upsample2d"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, "nearest_upsample2d");
    return nearest_upsample2d(in[0], a.integer("factor"));
  };
}

const CallRegistration kCalls("image", add_calls);

}  // namespace

}  // namespace tg::golden
