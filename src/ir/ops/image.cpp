// Image ops on NCHW tensors: dense 2-D convolution with its two adjoints (conv2d_input_grad, the
// transposed convolution, and conv2d_weight_grad), and max pooling with its gradient. Also the
// front-end functions, including the composite nearest_upsample2d.
#include "tensorgrad/ir/ops/ids/image.h"

#include <algorithm>

#include "result_dtype.h"
#include "rules.h"

namespace tg {

namespace {

using rules::kMaxSampleElements;

std::string str(std::int64_t v) { return std::to_string(v); }

void require_image(const TensorType& t, std::string_view what, std::string_view layout) {
  rules::require_dtype(t, DType::f32, what);
  if (t.rank() != 4) {
    rules::rule_broken(std::string(what) + " must be 4-D " + std::string(layout) + ", got " + t.to_string());
  }
}

void require_stride_padding(const Attrs& attrs) {
  const auto stride = attrs.integer("stride");
  const auto padding = attrs.integer("padding");
  if (stride < 1) rules::rule_broken("stride must be >= 1, got " + str(stride));
  if (padding < 0) rules::rule_broken("padding must be >= 0, got " + str(padding));
}

// Output length of a window of `kernel` sliding by `stride` over `extent` padded by `padding` on
// both sides; rule_broken when not even one window fits.
// Huge attributes break the rule (checked arithmetic) rather than overflow.
std::int64_t window_count(std::int64_t extent, std::int64_t kernel, std::int64_t stride, std::int64_t padding,
                          std::string_view axis) {
  const std::string what = "the padded input " + std::string(axis) + " " + str(extent) + " + 2*padding " + str(padding);
  const std::int64_t padded = checked_add(extent, checked_mul(2, padding, what), what);
  if (padded < kernel) {
    rules::rule_broken("kernel " + std::string(axis) + " " + str(kernel) + " exceeds the padded input " +
                       std::string(axis) + " " + str(padded) + " (" + str(extent) + " + 2*padding " + str(padding) +
                       "): no output");
  }
  return (padded - kernel) / stride + 1;
}

// ceil(a / b) for a >= 0 and b >= 1, without the a + b - 1 that overflows for a huge b.
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

void require_kernel_dims(std::int64_t kh, std::int64_t kw) {
  if (kh < 1 || kw < 1) rules::rule_broken("kernel size must be >= 1, got " + str(kh) + "x" + str(kw));
}

// grad_output's spatial dims must be those a convolution of the image produces.
void require_output_extent(const TensorType& grad_output, std::int64_t height, std::int64_t width, std::int64_t kh,
                           std::int64_t kw, const Attrs& attrs) {
  const auto stride = attrs.integer("stride");
  const auto padding = attrs.integer("padding");
  const auto oh = window_count(height, kh, stride, padding, "height");
  const auto ow = window_count(width, kw, stride, padding, "width");
  if (grad_output.shape[2] != oh || grad_output.shape[3] != ow) {
    rules::rule_broken("grad_output " + shape_to_string(grad_output.shape) + " has spatial size " +
                       str(grad_output.shape[2]) + "x" + str(grad_output.shape[3]) + " but a " + str(kh) + "x" +
                       str(kw) + " kernel over a " + str(height) + "x" + str(width) + " image (stride " + str(stride) +
                       ", padding " + str(padding) + ") gives " + str(oh) + "x" + str(ow));
  }
}

// ---- conv2d ----

TensorType conv2d_rule(const Attrs& attrs, std::span<const TensorType> inputs) {
  const TensorType& x = inputs[0];
  const TensorType& w = inputs[1];
  require_image(x, "input", "[N, C, H, W]");
  require_image(w, "weight", "[O, C, kh, kw]");
  require_stride_padding(attrs);
  if (x.shape[1] != w.shape[1]) {
    rules::rule_broken("channels differ: input " + shape_to_string(x.shape) + " has " + str(x.shape[1]) +
                       " but weight " + shape_to_string(w.shape) + " expects " + str(w.shape[1]));
  }
  require_kernel_dims(w.shape[2], w.shape[3]);
  const auto s = attrs.integer("stride");
  const auto p = attrs.integer("padding");
  return {DType::f32,
          {x.shape[0], w.shape[0], window_count(x.shape[2], w.shape[2], s, p, "height"),
           window_count(x.shape[3], w.shape[3], s, p, "width")}};
}

Conv2dOptions conv_options(const Attrs& attrs) {
  return {.stride = attrs.integer("stride"), .padding = attrs.integer("padding")};
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

// ---- conv2d_input_grad: grad_output [N,O,OH,OW], weight [O,C,kh,kw] -> [N,C,height,width] ----

TensorType conv2d_input_grad_rule(const Attrs& attrs, std::span<const TensorType> inputs) {
  const TensorType& g = inputs[0];
  const TensorType& w = inputs[1];
  require_image(g, "grad_output", "[N, O, OH, OW]");
  require_image(w, "weight", "[O, C, kh, kw]");
  require_stride_padding(attrs);
  if (g.shape[1] != w.shape[0]) {
    rules::rule_broken("output channels differ: grad_output " + shape_to_string(g.shape) + " has " + str(g.shape[1]) +
                       " but weight " + shape_to_string(w.shape) + " has " + str(w.shape[0]));
  }
  const auto height = attrs.integer("height");
  const auto width = attrs.integer("width");
  if (height < 1 || width < 1) rules::rule_broken("image size must be >= 1, got " + str(height) + "x" + str(width));
  require_kernel_dims(w.shape[2], w.shape[3]);
  require_output_extent(g, height, width, w.shape[2], w.shape[3], attrs);
  return {DType::f32, {g.shape[0], w.shape[1], height, width}};
}

std::vector<std::optional<Tensor>> conv2d_input_grad_grad(const GradArgs& args) {
  // y = conv2d_input_grad(g, w) is bilinear; <G, y> = <g, conv2d(G, w)> = <w, conv2d_weight_grad(G, g)>.
  const Shape w_shape = args.inputs[1].shape();
  const auto opts = conv_options(args.attrs);
  const Tensor& cot = args.cotangent;
  return {conv2d(cot, args.inputs[1], opts), conv2d_weight_grad(cot, args.inputs[0], w_shape[2], w_shape[3], opts)};
}

// Terms per input element: each of O channels meets at most ceil(kh/s) x ceil(kw/s) kernel taps.
std::int64_t conv2d_input_grad_reduction_length(const Attrs& attrs, std::span<const TensorType> inputs) {
  const Shape& w = inputs[1].shape;
  const auto s = attrs.integer("stride");
  return w[0] * ceil_div(w[2], s) * ceil_div(w[3], s);
}

// ---- conv2d_weight_grad: input [N,C,H,W], grad_output [N,O,OH,OW] -> [O,C,kernel_h,kernel_w] ----

TensorType conv2d_weight_grad_rule(const Attrs& attrs, std::span<const TensorType> inputs) {
  const TensorType& x = inputs[0];
  const TensorType& g = inputs[1];
  require_image(x, "input", "[N, C, H, W]");
  require_image(g, "grad_output", "[N, O, OH, OW]");
  require_stride_padding(attrs);
  if (x.shape[0] != g.shape[0]) {
    rules::rule_broken("batch sizes differ: input " + shape_to_string(x.shape) + " has " + str(x.shape[0]) +
                       " but grad_output " + shape_to_string(g.shape) + " has " + str(g.shape[0]));
  }
  const auto kh = attrs.integer("kernel_h");
  const auto kw = attrs.integer("kernel_w");
  require_kernel_dims(kh, kw);
  require_output_extent(g, x.shape[2], x.shape[3], kh, kw, attrs);
  return {DType::f32, {g.shape[1], x.shape[1], kh, kw}};
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

// ---- max_pool2d and max_pool2d_grad ----

void require_pool_options(const Attrs& attrs) {
  const auto kernel = attrs.integer("kernel");
  const auto padding = attrs.integer("padding");
  if (kernel < 1) rules::rule_broken("kernel must be >= 1, got " + str(kernel));
  require_stride_padding(attrs);
  // As in PyTorch; it also keeps a real element in every window, so padding is never chosen.
  if (padding > kernel / 2) {
    rules::rule_broken("padding " + str(padding) + " exceeds half the kernel " + str(kernel) + " (at most " +
                       str(kernel / 2) + ")");
  }
}

Shape pooled_shape(const Attrs& attrs, const Shape& x) {
  // An empty plane with padding would still give windows, all of padding: no element to choose.
  if (x[2] < 1 || x[3] < 1) {
    rules::rule_broken("max pooling needs a non-empty image, got height " + str(x[2]) + " and width " + str(x[3]));
  }
  const auto k = attrs.integer("kernel");
  const auto s = attrs.integer("stride");
  const auto p = attrs.integer("padding");
  return {x[0], x[1], window_count(x[2], k, s, p, "height"), window_count(x[3], k, s, p, "width")};
}

TensorType max_pool2d_rule(const Attrs& attrs, std::span<const TensorType> inputs) {
  require_image(inputs[0], "input", "[N, C, H, W]");
  require_pool_options(attrs);
  return {DType::f32, pooled_shape(attrs, inputs[0].shape)};
}

std::vector<std::optional<Tensor>> max_pool2d_vjp(const GradArgs& args) {
  return {max_pool2d_grad(args.inputs[0], args.cotangent, args.attrs.integer("kernel"), args.attrs.integer("stride"),
                          args.attrs.integer("padding"))};
}

TensorType max_pool2d_grad_rule(const Attrs& attrs, std::span<const TensorType> inputs) {
  require_image(inputs[0], "input", "[N, C, H, W]");
  require_image(inputs[1], "grad_output", "[N, C, OH, OW]");
  require_pool_options(attrs);
  const Shape pooled = pooled_shape(attrs, inputs[0].shape);
  if (inputs[1].shape != pooled) {
    rules::rule_broken("grad_output " + shape_to_string(inputs[1].shape) + " is not the pooled shape " +
                       shape_to_string(pooled) + " of input " + shape_to_string(inputs[0].shape));
  }
  return inputs[0];
}

// Windows that can cover one input element: the terms its gradient sums.
std::int64_t max_pool2d_grad_reduction_length(const Attrs& attrs, std::span<const TensorType>) {
  // The kernel can be huge (padding up to half of it lets a window fit a small image); the count is
  // at most the kernel, so cap it there, where the square still fits in int64.
  const auto per_axis =
      std::min<std::int64_t>(ceil_div(attrs.integer("kernel"), attrs.integer("stride")), std::int64_t{1} << 31);
  return per_axis * per_axis;
}

// ---- samples ----

struct ConvDraw {
  std::int64_t n, c, h, w, o, kh, kw, stride, padding;
  std::int64_t oh() const { return (h + 2 * padding - kh) / stride + 1; }
  std::int64_t ow() const { return (w + 2 * padding - kw) / stride + 1; }
};

// Small NCHW problems; a third of them tiny, so the full-Jacobian check has cases to run.
ConvDraw draw_conv(SampleRng& rng) {
  const bool tiny = rng.coin(0.35);
  ConvDraw d{};
  // Under the boundary profile the image and channel dims reach the kernels' size thresholds.
  d.n = tiny ? 1 : rules::sample_dim(rng, 1, 3);
  d.c = rules::sample_dim(rng, 1, tiny ? 2 : 3);
  d.h = rules::sample_dim(rng, 3, tiny ? 5 : 8);
  d.w = rules::sample_dim(rng, 3, tiny ? 5 : 8);
  d.o = rules::sample_dim(rng, 1, tiny ? 2 : 3);
  d.kh = rng.uniform_int(1, 3);
  d.kw = rng.uniform_int(1, 3);
  d.stride = rng.uniform_int(1, 2);
  d.padding = rng.uniform_int(0, 1);
  // Keep the image and the output (padding can make it the larger) within the element limit.
  while (std::max(d.n * d.c * d.h * d.w, d.n * d.o * d.oh() * d.ow()) > rules::sample_cap(rng)) {
    // Both stay >= 3 >= kernel: at 3x3 every tensor of a default draw is far below the limit. Only
    // boundary draws (large channel or batch dims) get past that and halve those.
    if (std::max(d.h, d.w) > 3) {
      (d.h >= d.w ? d.h : d.w) -= 1;
    } else if (d.c > 1) {
      d.c = (d.c + 1) / 2;
    } else if (d.o > 1) {
      d.o = (d.o + 1) / 2;
    } else {
      d.n = (d.n + 1) / 2;
    }
  }
  return d;
}

bool usable_image(const std::optional<TensorType>& first) {
  if (first->dtype != DType::f32 || first->rank() != 4) return false;
  return std::all_of(first->shape.begin(), first->shape.end(), [](std::int64_t d) { return d >= 1; });
}

Attrs conv_attrs(const ConvDraw& d) { return {{"padding", d.padding}, {"stride", d.stride}}; }
TensorType f32(Shape shape) { return {DType::f32, std::move(shape)}; }

// With a given image [N,C,H,W], kernels that fit it and an output channel count keeping the weight small.
void fit_to_image(SampleRng& rng, ConvDraw& d, const Shape& image) {
  d.n = image[0];
  d.c = image[1];
  d.h = image[2];
  d.w = image[3];
  d.kh = std::min(d.kh, d.h + 2 * d.padding);
  d.kw = std::min(d.kw, d.w + 2 * d.padding);
  d.o = std::clamp<std::int64_t>(rules::sample_cap(rng) / (d.c * d.kh * d.kw), 1, rng.uniform_int(1, 3));
}

std::optional<OpSample> conv2d_sample(SampleRng& rng, const std::optional<TensorType>& first) {
  ConvDraw d = draw_conv(rng);
  if (first) {
    if (!usable_image(first)) return std::nullopt;
    fit_to_image(rng, d, first->shape);
    if (d.o * d.c * d.kh * d.kw > rules::sample_cap(rng)) return std::nullopt;
  }
  const auto domain = ValueDomain::real_range(-2, 2);
  return OpSample{conv_attrs(d), {f32({d.n, d.c, d.h, d.w}), f32({d.o, d.c, d.kh, d.kw})}, {domain, domain}};
}

std::optional<OpSample> conv2d_input_grad_sample(SampleRng& rng, const std::optional<TensorType>& first) {
  ConvDraw d = draw_conv(rng);
  if (first) {
    // first is grad_output [N,O,OH,OW]: pick an image size whose convolution has exactly OH x OW outputs.
    if (!usable_image(first)) return std::nullopt;
    const Shape& g = first->shape;
    d.n = g[0];
    d.o = g[1];
    d.h = (g[2] - 1) * d.stride + d.kh - 2 * d.padding + rng.uniform_int(0, d.stride - 1);
    d.w = (g[3] - 1) * d.stride + d.kw - 2 * d.padding + rng.uniform_int(0, d.stride - 1);
    if (d.h < 1 || d.w < 1) return std::nullopt;
    d.c = std::clamp<std::int64_t>(rules::sample_cap(rng) / (d.n * d.h * d.w), 1, d.c);
    if (d.o * d.c * d.kh * d.kw > rules::sample_cap(rng) || d.n * d.c * d.h * d.w > rules::sample_cap(rng))
      return std::nullopt;
  }
  Attrs attrs = conv_attrs(d);
  attrs.set("height", d.h);
  attrs.set("width", d.w);
  const auto domain = ValueDomain::real_range(-2, 2);
  return OpSample{std::move(attrs), {f32({d.n, d.o, d.oh(), d.ow()}), f32({d.o, d.c, d.kh, d.kw})}, {domain, domain}};
}

std::optional<OpSample> conv2d_weight_grad_sample(SampleRng& rng, const std::optional<TensorType>& first) {
  ConvDraw d = draw_conv(rng);
  if (first) {
    if (!usable_image(first)) return std::nullopt;
    fit_to_image(rng, d, first->shape);
    if (d.n * d.o * d.oh() * d.ow() > rules::sample_cap(rng)) return std::nullopt;
    if (d.o * d.c * d.kh * d.kw > rules::sample_cap(rng)) return std::nullopt;
  }
  Attrs attrs = conv_attrs(d);
  attrs.set("kernel_h", d.kh);
  attrs.set("kernel_w", d.kw);
  const auto domain = ValueDomain::real_range(-2, 2);
  return OpSample{std::move(attrs), {f32({d.n, d.c, d.h, d.w}), f32({d.n, d.o, d.oh(), d.ow()})}, {domain, domain}};
}

// Pool attributes for an image; kernel and padding shrink until one window fits.
std::optional<std::pair<Attrs, Shape>> draw_pool(SampleRng& rng, const std::optional<TensorType>& first) {
  Shape x;
  if (first) {
    if (!usable_image(first)) return std::nullopt;
    x = first->shape;
  } else {
    const ConvDraw d = draw_conv(rng);
    x = {d.n, d.c, d.h, d.w};
  }
  auto kernel = std::min({rng.uniform_int(1, 3), x[2], x[3]});
  const auto stride = rng.uniform_int(1, 2);
  const auto padding = std::min(rng.uniform_int(0, 1), kernel / 2);
  Attrs attrs{{"kernel", kernel}, {"padding", padding}, {"stride", stride}};
  return std::pair{std::move(attrs), std::move(x)};
}

std::optional<OpSample> max_pool2d_sample(SampleRng& rng, const std::optional<TensorType>& first) {
  auto drawn = draw_pool(rng, first);
  if (!drawn) return std::nullopt;
  // Ties in a window would make the chosen element (and the gradient) depend on rounding.
  return OpSample{drawn->first, {f32(drawn->second)}, {ValueDomain::untied()}};
}

std::optional<OpSample> max_pool2d_grad_sample(SampleRng& rng, const std::optional<TensorType>& first) {
  auto drawn = draw_pool(rng, first);
  if (!drawn) return std::nullopt;
  const Shape pooled = pooled_shape(drawn->first, drawn->second);
  // Small integers freeze grad_output in gradient checks: the op is linear in it, but declared not
  // differentiable, so finite differences must not probe it.
  return OpSample{
      drawn->first, {f32(drawn->second), f32(pooled)}, {ValueDomain::untied(), ValueDomain::small_integers(-3, 3)}};
}

const std::vector<AttrSpec> kConvAttrs = {{"padding", AttrKind::integer}, {"stride", AttrKind::integer}};
const std::vector<AttrSpec> kConvInputGradAttrs = {{"height", AttrKind::integer},
                                                   {"padding", AttrKind::integer},
                                                   {"stride", AttrKind::integer},
                                                   {"width", AttrKind::integer}};
const std::vector<AttrSpec> kConvWeightGradAttrs = {{"kernel_h", AttrKind::integer},
                                                    {"kernel_w", AttrKind::integer},
                                                    {"padding", AttrKind::integer},
                                                    {"stride", AttrKind::integer}};
const std::vector<AttrSpec> kPoolAttrs = {
    {"kernel", AttrKind::integer}, {"padding", AttrKind::integer}, {"stride", AttrKind::integer}};

Attrs conv_attrs(const Conv2dOptions& options) { return {{"padding", options.padding}, {"stride", options.stride}}; }

}  // namespace

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

const OpDef& MaxPool2d_def() {
  static const OpDef def{.name = op_name(op::MaxPool2d),
                         .arity = 1,
                         .attrs = kPoolAttrs,
                         .shape = max_pool2d_rule,
                         .grad = max_pool2d_vjp,
                         .samples = max_pool2d_sample,
                         .tolerance = ToleranceClass::exact};
  return def;
}

// Second order through max pooling is not supported: the gradient is piecewise linear in grad_output
// with a selection that changes only at ties, and no op gathers by argmax yet.
const OpDef& MaxPool2dGrad_def() {
  static const OpDef def{.name = op_name(op::MaxPool2dGrad),
                         .arity = 2,
                         .attrs = kPoolAttrs,
                         .shape = max_pool2d_grad_rule,
                         .grad = nullptr,
                         .differentiable = false,
                         .samples = max_pool2d_grad_sample,
                         .tolerance = ToleranceClass::reduction,
                         .reduction_length = max_pool2d_grad_reduction_length};
  return def;
}

// ---- front-end ----

Tensor conv2d(const Tensor& input, const Tensor& weight, Conv2dOptions options, CallSite loc) {
  if (options.out) {
    const DType out = *options.out;
    options.out.reset();
    return frontend::product_in_dtype("conv2d", input, weight, out, loc,
                                      [&](const Tensor& x, const Tensor& w) { return conv2d(x, w, options, loc); });
  }
  return frontend::emit(op::Conv2d, {input, weight}, conv_attrs(options), loc);
}

Tensor conv2d_input_grad(const Tensor& grad_output, const Tensor& weight, std::int64_t height, std::int64_t width,
                         Conv2dOptions options, CallSite loc) {
  Attrs attrs = conv_attrs(options);
  attrs.set("height", height);
  attrs.set("width", width);
  return frontend::emit(op::Conv2dInputGrad, {grad_output, weight}, std::move(attrs), loc);
}

Tensor conv2d_weight_grad(const Tensor& input, const Tensor& grad_output, std::int64_t kernel_h, std::int64_t kernel_w,
                          Conv2dOptions options, CallSite loc) {
  Attrs attrs = conv_attrs(options);
  attrs.set("kernel_h", kernel_h);
  attrs.set("kernel_w", kernel_w);
  return frontend::emit(op::Conv2dWeightGrad, {input, grad_output}, std::move(attrs), loc);
}

Tensor max_pool2d(const Tensor& x, std::int64_t kernel, Pool2dOptions options, CallSite loc) {
  Attrs attrs{{"kernel", kernel}, {"padding", options.padding}, {"stride", options.stride.value_or(kernel)}};
  return frontend::emit(op::MaxPool2d, {x}, std::move(attrs), loc);
}

Tensor max_pool2d_grad(const Tensor& x, const Tensor& grad_output, std::int64_t kernel, std::int64_t stride,
                       std::int64_t padding, CallSite loc) {
  Attrs attrs{{"kernel", kernel}, {"padding", padding}, {"stride", stride}};
  return frontend::emit(op::MaxPool2dGrad, {x, grad_output}, std::move(attrs), loc);
}

// Each pixel repeated factor x factor times: [N,C,H,W] -> [N,C,H,1,W,1] -> broadcast -> [N,C,H*f,W*f],
// so the gradient (a sum over each block) comes from the layout ops' rules.
Tensor nearest_upsample2d(const Tensor& x, std::int64_t factor, CallSite loc) {
  const auto refuse = [&](const std::string& rule) {
    throw ShapeError("nearest_upsample2d", {x.type()}, rule, frontend::site(loc));
  };
  if (x.rank() != 4) refuse("input must be 4-D [N, C, H, W], got " + x.type().to_string());
  if (factor < 1) refuse("factor must be >= 1, got " + str(factor));
  if (factor == 1) return x;
  const Shape s = x.shape();
  // A huge factor would first break broadcast_to's rule; name the function the user called.
  if (std::string problem = shape_limit_problem({s[0], s[1], s[2], factor, s[3], factor}); !problem.empty()) {
    refuse("factor " + str(factor) + " makes the result past the size limits: " + problem);
  }
  const Tensor spread = reshape(x, {s[0], s[1], s[2], 1, s[3], 1}, loc);
  const Tensor blocks = broadcast_to(spread, {s[0], s[1], s[2], factor, s[3], factor}, loc);
  return reshape(blocks, {s[0], s[1], s[2] * factor, s[3] * factor}, loc);
}

}  // namespace tg
