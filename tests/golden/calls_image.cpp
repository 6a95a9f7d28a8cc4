// Explicit golden calls of the image module (cases in tools/goldens/image.py): the composite
// nearest_upsample2d (`factor`), and conv2d and max_pool2d through their front-ends' forms the IR
// does not take: conv2d_with_defaults (stride 1, padding 0, dilation 1, groups 1); conv2d_options
// (`stride`, `padding`, `dilation` as [height, width] and `groups`, passed as tg::Conv2dOptions);
// conv2d_same (padding = tg::kPaddingSame with `dilation` [height, width] and `groups`: the IR has
// no `same`, the front end resolves it to explicit padding and, for an odd total, a pad op);
// max_pool2d_with_default_stride (`kernel`, stride the kernel). Every other case of conv2d, its
// adjoints, max_pool2d and max_pool2d_grad is traced as the op itself, every attribute given.
#include "golden_calls.h"
#include "tensorgrad/ir/ops/ids/image.h"

namespace tg::golden {

namespace {

void add_calls(CallEntries& t) {
  t["conv2d_with_defaults"] = [](const std::vector<Tensor>& in, const Attrs&) {
    require_inputs(in, 2, "conv2d_with_defaults");
    return conv2d(in[0], in[1]);
  };
  t["conv2d_options"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 2, "conv2d_options");
    const auto& stride = a.ints("stride");
    const auto& padding = a.ints("padding");
    const auto& dilation = a.ints("dilation");
    return conv2d(in[0], in[1],
                  {.stride = {stride.at(0), stride.at(1)},
                   .padding = {padding.at(0), padding.at(1)},
                   .dilation = {dilation.at(0), dilation.at(1)},
                   .groups = a.integer("groups")});
  };
  t["conv2d_same"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 2, "conv2d_same");
    const auto& dilation = a.ints("dilation");
    return conv2d(
        in[0], in[1],
        {.padding = kPaddingSame, .dilation = {dilation.at(0), dilation.at(1)}, .groups = a.integer("groups")});
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
