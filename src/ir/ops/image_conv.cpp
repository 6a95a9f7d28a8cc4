// The convolution ops of the image family, NCHW, PyTorch's conv2d: conv2d and its two adjoints
// (conv2d_input_grad, the transposed convolution, and conv2d_weight_grad), with per-axis stride,
// padding and dilation and grouped channels (src/ir/ops/conv_geometry.h has the formula), and the
// front-end functions, padding = same included.
#include <algorithm>
#include <numeric>

#include "conv_geometry.h"
#include "result_dtype.h"
#include "rules.h"
#include "tensorgrad/ir/ops/ids/image.h"

namespace tg {

namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

void require_image(const TensorType& t, std::string_view what, std::string_view layout) {
  rules::require_dtype(t, DType::f32, what);
  if (t.rank() != 4) {
    rules::rule_broken(std::string(what) + " must be 4-D " + std::string(layout) + ", got " + t.to_string());
  }
}

// Stride, padding and dilation as [height, width] pairs, and groups.
struct ConvAttrs {
  std::int64_t stride[2], padding[2], dilation[2], groups;
};

ConvAttrs read_conv_attrs(const Attrs& attrs) {
  ConvAttrs a{};
  const auto pair = [&](std::string_view name, std::int64_t least, std::int64_t(&out)[2]) {
    const auto& v = attrs.ints(name);
    if (v.size() != 2) {
      rules::rule_broken(std::string(name) + " must hold two values [height, width], got " + str(v.size()));
    }
    for (int axis = 0; axis < 2; ++axis) {
      if (v[axis] < least) {
        rules::rule_broken(std::string(name) + " must be >= " + str(least) + ", got " + str(v[axis]) + " (" +
                           (axis == 0 ? "height" : "width") + ")");
      }
      out[axis] = v[axis];
    }
  };
  pair("stride", 1, a.stride);
  pair("padding", 0, a.padding);
  pair("dilation", 1, a.dilation);
  a.groups = attrs.integer("groups");
  if (a.groups < 1) rules::rule_broken("groups must be >= 1, got " + str(a.groups));
  return a;
}

void require_divides(std::int64_t groups, std::int64_t channels, std::string_view what) {
  if (channels % groups != 0) {
    rules::rule_broken("groups " + str(groups) + " does not divide the " + std::string(what) + " " + str(channels));
  }
}

// Output length of a kernel of `kernel` taps `dilation` apart sliding by `stride` over `extent`
// padded by `padding` on both sides; rule_broken when not even one window fits. Checked
// arithmetic: huge attributes break the rule rather than overflow.
std::int64_t window_count(std::int64_t extent, std::int64_t kernel, std::int64_t stride, std::int64_t padding,
                          std::int64_t dilation, std::string_view axis) {
  const std::string what = "the padded input " + std::string(axis) + " " + str(extent) + " + 2*padding " + str(padding);
  const std::int64_t padded = checked_add(extent, checked_mul(2, padding, what), what);
  const std::string span_what = "the dilated kernel " + std::string(axis);
  const std::int64_t span = checked_add(checked_mul(dilation, kernel - 1, span_what), 1, span_what);
  if (padded < span) {
    rules::rule_broken("kernel " + std::string(axis) + " " + str(kernel) +
                       (dilation > 1 ? " (dilation " + str(dilation) + ": spans " + str(span) + ")" : std::string()) +
                       " exceeds the padded input " + std::string(axis) + " " + str(padded) + " (" + str(extent) +
                       " + 2*padding " + str(padding) + "): no output");
  }
  return (padded - span) / stride + 1;
}

void require_kernel_dims(std::int64_t kh, std::int64_t kw) {
  if (kh < 1 || kw < 1) rules::rule_broken("kernel size must be >= 1, got " + str(kh) + "x" + str(kw));
}

std::int64_t out_extent(const ConvAttrs& a, int axis, std::int64_t extent, std::int64_t kernel) {
  return window_count(extent, kernel, a.stride[axis], a.padding[axis], a.dilation[axis],
                      axis == 0 ? "height" : "width");
}

std::string geometry_to_string(const ConvAttrs& a) {
  const auto pair = [](const std::int64_t(&v)[2]) { return "[" + str(v[0]) + ", " + str(v[1]) + "]"; };
  return "stride " + pair(a.stride) + ", padding " + pair(a.padding) + ", dilation " + pair(a.dilation) + ", groups " +
         str(a.groups);
}

// grad_output's spatial dims must be those a convolution of the image produces.
void require_output_extent(const TensorType& grad_output, std::int64_t height, std::int64_t width, std::int64_t kh,
                           std::int64_t kw, const ConvAttrs& a) {
  const auto oh = out_extent(a, 0, height, kh);
  const auto ow = out_extent(a, 1, width, kw);
  if (grad_output.shape[2] != oh || grad_output.shape[3] != ow) {
    rules::rule_broken("grad_output " + shape_to_string(grad_output.shape) + " has spatial size " +
                       str(grad_output.shape[2]) + "x" + str(grad_output.shape[3]) + " but a " + str(kh) + "x" +
                       str(kw) + " kernel over a " + str(height) + "x" + str(width) + " image (" +
                       geometry_to_string(a) + ") gives " + str(oh) + "x" + str(ow));
  }
}

// ---- conv2d: x [N,C,H,W], w [O,C/groups,KH,KW] -> [N,O,OH,OW] ----

TensorType conv2d_rule(const Attrs& attrs, std::span<const TensorType> inputs) {
  const TensorType& x = inputs[0];
  const TensorType& w = inputs[1];
  require_image(x, "input", "[N, C, H, W]");
  require_image(w, "weight", "[O, C / groups, kh, kw]");
  const ConvAttrs a = read_conv_attrs(attrs);
  require_divides(a.groups, x.shape[1], "input channels");
  require_divides(a.groups, w.shape[0], "output channels (weight dim 0)");
  if (x.shape[1] / a.groups != w.shape[1]) {
    rules::rule_broken("channels differ: input " + shape_to_string(x.shape) + " has " + str(x.shape[1]) +
                       " channels, " + str(x.shape[1] / a.groups) + " per group of " + str(a.groups) + ", but weight " +
                       shape_to_string(w.shape) + " expects " + str(w.shape[1]));
  }
  require_kernel_dims(w.shape[2], w.shape[3]);
  return {DType::f32,
          {x.shape[0], w.shape[0], out_extent(a, 0, x.shape[2], w.shape[2]), out_extent(a, 1, x.shape[3], w.shape[3])}};
}

Attrs conv_attrs(const Conv2dOptions& o) {
  return {{"dilation", std::vector<std::int64_t>{o.dilation.h, o.dilation.w}},
          {"groups", o.groups},
          {"padding", std::vector<std::int64_t>{o.padding.h, o.padding.w}},
          {"stride", std::vector<std::int64_t>{o.stride.h, o.stride.w}}};
}

Conv2dOptions conv_options(const Attrs& attrs) {
  const ConvAttrs a = read_conv_attrs(attrs);
  return {.stride = {a.stride[0], a.stride[1]},
          .padding = {a.padding[0], a.padding[1]},
          .dilation = {a.dilation[0], a.dilation[1]},
          .groups = a.groups};
}

std::vector<std::optional<Tensor>> conv2d_grad(const GradArgs& args) {
  const Shape x_shape = args.inputs[0].shape();  // copies: emitting nodes moves the graph's storage
  const Shape w_shape = args.inputs[1].shape();
  const auto opts = conv_options(args.attrs);
  const Tensor& g = args.cotangent;
  return {conv2d_input_grad(g, args.inputs[1], x_shape[2], x_shape[3], opts),
          conv2d_weight_grad(args.inputs[0], g, w_shape[2], w_shape[3], opts)};
}

// Multiply-adds per output element.
std::int64_t conv2d_reduction_length(const Attrs&, std::span<const TensorType> inputs) {
  const Shape& w = inputs[1].shape;
  return w[1] * w[2] * w[3];
}

// ---- conv2d_input_grad: grad_output [N,O,OH,OW], weight [O,C/groups,kh,kw] -> [N,C,height,width] ----

TensorType conv2d_input_grad_rule(const Attrs& attrs, std::span<const TensorType> inputs) {
  const TensorType& g = inputs[0];
  const TensorType& w = inputs[1];
  require_image(g, "grad_output", "[N, O, OH, OW]");
  require_image(w, "weight", "[O, C / groups, kh, kw]");
  const ConvAttrs a = read_conv_attrs(attrs);
  if (g.shape[1] != w.shape[0]) {
    rules::rule_broken("output channels differ: grad_output " + shape_to_string(g.shape) + " has " + str(g.shape[1]) +
                       " but weight " + shape_to_string(w.shape) + " has " + str(w.shape[0]));
  }
  require_divides(a.groups, w.shape[0], "output channels (weight dim 0)");
  const auto height = attrs.integer("height");
  const auto width = attrs.integer("width");
  if (height < 1 || width < 1) rules::rule_broken("image size must be >= 1, got " + str(height) + "x" + str(width));
  require_kernel_dims(w.shape[2], w.shape[3]);
  require_output_extent(g, height, width, w.shape[2], w.shape[3], a);
  const std::string what = "the input channels (weight dim 1 x groups)";
  return {DType::f32, {g.shape[0], checked_mul(w.shape[1], a.groups, what), height, width}};
}

std::vector<std::optional<Tensor>> conv2d_input_grad_grad(const GradArgs& args) {
  // y = conv2d_input_grad(g, w) is bilinear; <G, y> = <g, conv2d(G, w)> = <w, conv2d_weight_grad(G, g)>.
  const Shape w_shape = args.inputs[1].shape();
  const auto opts = conv_options(args.attrs);
  const Tensor& cot = args.cotangent;
  return {conv2d(cot, args.inputs[1], opts), conv2d_weight_grad(cot, args.inputs[0], w_shape[2], w_shape[3], opts)};
}

// Taps of a kernel axis that can land on one input position: those a with (pos + pad - a *
// dilation) a multiple of the stride, which recur every stride / gcd(stride, dilation) taps.
std::int64_t taps_per_position(std::int64_t kernel, std::int64_t stride, std::int64_t dilation) {
  const std::int64_t period = stride / std::gcd(stride, dilation);
  return kernel / period + (kernel % period != 0 ? 1 : 0);
}

std::int64_t conv2d_input_grad_reduction_length(const Attrs& attrs, std::span<const TensorType> inputs) {
  const Shape& w = inputs[1].shape;
  const ConvAttrs a = read_conv_attrs(attrs);
  return (w[0] / a.groups) * taps_per_position(w[2], a.stride[0], a.dilation[0]) *
         taps_per_position(w[3], a.stride[1], a.dilation[1]);
}

// ---- conv2d_weight_grad: input [N,C,H,W], grad_output [N,O,OH,OW] -> [O,C/groups,kernel_h,kernel_w] ----

TensorType conv2d_weight_grad_rule(const Attrs& attrs, std::span<const TensorType> inputs) {
  const TensorType& x = inputs[0];
  const TensorType& g = inputs[1];
  require_image(x, "input", "[N, C, H, W]");
  require_image(g, "grad_output", "[N, O, OH, OW]");
  const ConvAttrs a = read_conv_attrs(attrs);
  if (x.shape[0] != g.shape[0]) {
    rules::rule_broken("batch sizes differ: input " + shape_to_string(x.shape) + " has " + str(x.shape[0]) +
                       " but grad_output " + shape_to_string(g.shape) + " has " + str(g.shape[0]));
  }
  require_divides(a.groups, x.shape[1], "input channels");
  require_divides(a.groups, g.shape[1], "output channels (grad_output dim 1)");
  const auto kh = attrs.integer("kernel_h");
  const auto kw = attrs.integer("kernel_w");
  require_kernel_dims(kh, kw);
  require_output_extent(g, x.shape[2], x.shape[3], kh, kw, a);
  return {DType::f32, {g.shape[1], x.shape[1] / a.groups, kh, kw}};
}

std::vector<std::optional<Tensor>> conv2d_weight_grad_grad(const GradArgs& args) {
  // y = conv2d_weight_grad(x, g) is bilinear; <G, y> = <x, conv2d_input_grad(g, G)> = <g, conv2d(x, G)>.
  const Shape x_shape = args.inputs[0].shape();
  const auto opts = conv_options(args.attrs);
  const Tensor& cot = args.cotangent;
  return {conv2d_input_grad(args.inputs[1], cot, x_shape[2], x_shape[3], opts), conv2d(args.inputs[0], cot, opts)};
}

std::int64_t conv2d_weight_grad_reduction_length(const Attrs&, std::span<const TensorType> inputs) {
  const Shape& g = inputs[1].shape;
  return g[0] * g[2] * g[3];
}

const std::vector<AttrSpec> kConvAttrs = {{"dilation", AttrKind::ints},
                                          {"groups", AttrKind::integer},
                                          {"padding", AttrKind::ints},
                                          {"stride", AttrKind::ints}};
std::vector<AttrSpec> with(std::vector<AttrSpec> specs, std::initializer_list<AttrSpec> more) {
  specs.insert(specs.end(), more.begin(), more.end());
  std::sort(specs.begin(), specs.end(), [](const AttrSpec& l, const AttrSpec& r) { return l.name < r.name; });
  return specs;
}
const std::vector<AttrSpec> kConvInputGradAttrs =
    with(kConvAttrs, {{"height", AttrKind::integer}, {"width", AttrKind::integer}});
const std::vector<AttrSpec> kConvWeightGradAttrs =
    with(kConvAttrs, {{"kernel_h", AttrKind::integer}, {"kernel_w", AttrKind::integer}});

}  // namespace

// Defined in image_conv_samples.cpp.
std::optional<OpSample> conv2d_sample(SampleRng& rng, const std::optional<TensorType>& first);
std::optional<OpSample> conv2d_input_grad_sample(SampleRng& rng, const std::optional<TensorType>& first);
std::optional<OpSample> conv2d_weight_grad_sample(SampleRng& rng, const std::optional<TensorType>& first);

const OpDef& Conv2d_def() {
  static const OpDef def{.name = op_name(op::Conv2d),
                         .arity = 2,
                         .attrs = kConvAttrs,
                         .shape = conv2d_rule,
                         .grad = conv2d_grad,
                         .samples = conv2d_sample,
                         .tolerance = ToleranceClass::matmul,
                         .reduction_length = conv2d_reduction_length};
  return def;
}

const OpDef& Conv2dInputGrad_def() {
  static const OpDef def{.name = op_name(op::Conv2dInputGrad),
                         .arity = 2,
                         .attrs = kConvInputGradAttrs,
                         .shape = conv2d_input_grad_rule,
                         .grad = conv2d_input_grad_grad,
                         .samples = conv2d_input_grad_sample,
                         .tolerance = ToleranceClass::matmul,
                         .reduction_length = conv2d_input_grad_reduction_length};
  return def;
}

const OpDef& Conv2dWeightGrad_def() {
  static const OpDef def{.name = op_name(op::Conv2dWeightGrad),
                         .arity = 2,
                         .attrs = kConvWeightGradAttrs,
                         .shape = conv2d_weight_grad_rule,
                         .grad = conv2d_weight_grad_grad,
                         .samples = conv2d_weight_grad_sample,
                         .tolerance = ToleranceClass::matmul,
                         .reduction_length = conv2d_weight_grad_reduction_length};
  return def;
}

// ---- front-end ----

namespace {

// padding = same belongs to conv2d alone: the adjoints take the explicit padding it resolved to.
void refuse_same(std::string_view op, const Tensor& a, const Tensor& b, const Conv2dOptions& options,
                 const CallSite& loc) {
  if (options.padding.same) {
    throw ShapeError(std::string(op), {a.type(), b.type()},
                     "padding = same is for conv2d only; pass the explicit padding it resolved to",
                     frontend::site(loc));
  }
}

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, Conv2dOptions options, CallSite loc) {
  if (options.out) {
    const DType out = *options.out;
    options.out.reset();
    return frontend::product_in_dtype("conv2d", input, weight, out, loc,
                                      [&](const Tensor& x, const Tensor& w) { return conv2d(x, w, options, loc); });
  }
  if (options.padding.same && input.rank() == 4 && weight.rank() == 4) {
    const auto refuse = [&](const std::string& rule) {
      throw ShapeError("conv2d", {input.type(), weight.type()}, rule, frontend::site(loc));
    };
    // As PyTorch: the output keeps the input's size only at stride 1.
    if (options.stride.h != 1 || options.stride.w != 1) {
      refuse("padding = same needs stride 1, got stride [" + str(options.stride.h) + ", " + str(options.stride.w) +
             "] (PyTorch refuses it too)");
    }
    if (options.dilation.h < 1 || options.dilation.w < 1) {
      refuse("dilation must be >= 1, got [" + str(options.dilation.h) + ", " + str(options.dilation.w) + "]");
    }
    // The kernel's span minus one, split evenly; an odd remainder goes after the image (a pad op).
    Tensor x = input;
    std::int64_t before[2] = {0, 0};
    const std::int64_t dilation[2] = {options.dilation.h, options.dilation.w};
    for (int axis = 0; axis < 2; ++axis) {
      const std::int64_t kernel = weight.dim(2 + axis);
      if (kernel < 1) break;  // the rule names it
      const std::string what = "padding = same's total padding";
      std::int64_t total = 0;
      try {
        total = checked_mul(dilation[axis], kernel - 1, what);
      } catch (const RuleBroken& e) {
        refuse(e.rule);
      }
      before[axis] = total / 2;
      if (total % 2 != 0) x = pad(x, 2 + axis, 0, 1, loc);
    }
    options.padding = Conv2dPadding(before[0], before[1]);
    return frontend::emit(op::Conv2d, {x, weight}, conv_attrs(options), loc);
  }
  return frontend::emit(op::Conv2d, {input, weight}, conv_attrs(options), loc);
}

Tensor conv2d_input_grad(const Tensor& grad_output, const Tensor& weight, std::int64_t height, std::int64_t width,
                         Conv2dOptions options, CallSite loc) {
  refuse_same("conv2d_input_grad", grad_output, weight, options, loc);
  Attrs attrs = conv_attrs(options);
  attrs.set("height", height);
  attrs.set("width", width);
  return frontend::emit(op::Conv2dInputGrad, {grad_output, weight}, std::move(attrs), loc);
}

Tensor conv2d_weight_grad(const Tensor& input, const Tensor& grad_output, std::int64_t kernel_h, std::int64_t kernel_w,
                          Conv2dOptions options, CallSite loc) {
  refuse_same("conv2d_weight_grad", input, grad_output, options, loc);
  Attrs attrs = conv_attrs(options);
  attrs.set("kernel_h", kernel_h);
  attrs.set("kernel_w", kernel_w);
  return frontend::emit(op::Conv2dWeightGrad, {input, grad_output}, std::move(attrs), loc);
}

}  // namespace tg
