// Image ops on NCHW tensors: max pooling with its gradient, and the front-end functions, including
// the composite nearest_upsample2d. The convolutions are in image_conv.cpp.
#include "tensorgrad/ir/ops/ids/image.h"

#include <algorithm>

#include "rules.h"

namespace tg {

namespace {

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

bool usable_image(const std::optional<TensorType>& first) {
  if (first->dtype != DType::f32 || first->rank() != 4) return false;
  return std::all_of(first->shape.begin(), first->shape.end(), [](std::int64_t d) { return d >= 1; });
}

TensorType f32(Shape shape) { return {DType::f32, std::move(shape)}; }

// Pool attributes for an image; kernel and padding shrink until one window fits.
std::optional<std::pair<Attrs, Shape>> draw_pool(SampleRng& rng, const std::optional<TensorType>& first) {
  Shape x;
  if (first) {
    if (!usable_image(first)) return std::nullopt;
    x = first->shape;
  } else {
    x = {rules::sample_dim(rng, 1, 3), rules::sample_dim(rng, 1, 3), rules::sample_dim(rng, 3, 8),
         rules::sample_dim(rng, 3, 8)};
    while (x[0] * x[1] * x[2] * x[3] > rules::sample_cap(rng)) {
      auto& largest = *std::max_element(x.begin(), x.end());
      largest = (largest + 1) / 2;
    }
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

const std::vector<AttrSpec> kPoolAttrs = {
    {"kernel", AttrKind::integer}, {"padding", AttrKind::integer}, {"stride", AttrKind::integer}};

}  // namespace

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
