// Golden calls of the image family (cases in tools/goldens/image.py). conv2d and the conv adjoints
// take optional `stride` (default 1) and `padding` (default 0); conv2d_input_grad also `height` and
// `width`, conv2d_weight_grad `kernel_h` and `kernel_w`; max_pool2d takes `kernel` and optional
// `stride` (default: the kernel) and `padding`; max_pool2d_grad takes all three; nearest_upsample2d
// takes `factor`.
#include "golden_calls.h"

namespace tg::golden {

namespace {

Conv2dOptions conv_options(const Attrs& a) {
  return {.stride = optional_integer(a, "stride").value_or(1), .padding = optional_integer(a, "padding").value_or(0)};
}

}  // namespace

void register_image_calls(CallTable& t) {
  t["conv2d"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 2, "conv2d");
    return conv2d(in[0], in[1], conv_options(a));
  };
  t["conv2d_input_grad"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 2, "conv2d_input_grad");
    return conv2d_input_grad(in[0], in[1], a.integer("height"), a.integer("width"), conv_options(a));
  };
  t["conv2d_weight_grad"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 2, "conv2d_weight_grad");
    return conv2d_weight_grad(in[0], in[1], a.integer("kernel_h"), a.integer("kernel_w"), conv_options(a));
  };
  t["max_pool2d"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, "max_pool2d");
    return max_pool2d(in[0], a.integer("kernel"),
                      {.stride = optional_integer(a, "stride"), .padding = optional_integer(a, "padding").value_or(0)});
  };
  t["max_pool2d_grad"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 2, "max_pool2d_grad");
    return max_pool2d_grad(in[0], in[1], a.integer("kernel"), a.integer("stride"), a.integer("padding"));
  };
  t["nearest_upsample2d"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, "nearest_upsample2d");
    return nearest_upsample2d(in[0], a.integer("factor"));
  };
}

}  // namespace tg::golden
