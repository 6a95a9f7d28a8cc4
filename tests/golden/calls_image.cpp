// Explicit golden calls of the image module (cases in tools/goldens/image.py): the composite
// nearest_upsample2d (`factor`), and conv2d and max_pool2d through their front-ends' defaults
// (conv2d_with_defaults: stride 1, padding 0; max_pool2d_with_default_stride: `kernel`, stride the
// kernel). Every other case of conv2d, its adjoints, max_pool2d and max_pool2d_grad is traced as the
// op itself, every attribute given.
#include "golden_calls.h"
#include "tensorgrad/ir/ops/ids/image.h"

namespace tg::golden {

namespace {

void add_calls(CallEntries& t) {
  t["conv2d_with_defaults"] = [](const std::vector<Tensor>& in, const Attrs&) {
    require_inputs(in, 2, "conv2d_with_defaults");
    return conv2d(in[0], in[1]);
  };
  t["max_pool2d_with_default_stride"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, "max_pool2d_with_default_stride");
    return max_pool2d(in[0], a.integer("kernel"));
  };
  t["nearest_upsample2d"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, "nearest_upsample2d");
    return nearest_upsample2d(in[0], a.integer("factor"));
  };
}

const CallRegistration kCalls("image", add_calls);

}  // namespace

}  // namespace tg::golden
