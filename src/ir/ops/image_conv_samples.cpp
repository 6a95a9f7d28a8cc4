// Random problems for the convolution ops (src/ir/ops/image_conv.cpp): small NCHW images with every
// attribute drawn, per axis (stride, padding, dilation), and grouped channels, so the property
// suites reach each kernel branch.
#include <algorithm>

#include "rules.h"

namespace tg {

namespace {

struct ConvDraw {
  std::int64_t n, c, h, w, o, kh, kw;
  std::int64_t stride[2], padding[2], dilation[2], groups;
  std::int64_t span(int axis) const { return dilation[axis] * ((axis == 0 ? kh : kw) - 1) + 1; }
  std::int64_t extent(int axis) const {
    return ((axis == 0 ? h : w) + 2 * padding[axis] - span(axis)) / stride[axis] + 1;
  }
  std::int64_t oh() const { return extent(0); }
  std::int64_t ow() const { return extent(1); }
  std::int64_t weight_size() const { return o * (c / groups) * kh * kw; }
};

// Shrinks dilation, then the kernel, until the dilated kernel fits the padded image on `axis`.
void fit_kernel(ConvDraw& d, int axis) {
  std::int64_t& k = axis == 0 ? d.kh : d.kw;
  const std::int64_t padded = (axis == 0 ? d.h : d.w) + 2 * d.padding[axis];
  while (d.span(axis) > padded) {
    if (d.dilation[axis] > 1) {
      --d.dilation[axis];
    } else {
      --k;  // k = 1 spans 1 <= any image
    }
  }
}

// Small problems; a third of them tiny, so the full-Jacobian check has cases to run.
ConvDraw draw_conv(SampleRng& rng) {
  const bool tiny = rng.coin(0.35);
  ConvDraw d{};
  // Under the boundary profile the image and channel dims reach the kernels' size thresholds.
  d.groups = rng.coin(0.7) ? 1 : rng.uniform_int(2, 3);
  d.n = tiny ? 1 : rules::sample_dim(rng, 1, 3);
  d.c = d.groups * rules::sample_dim(rng, 1, tiny ? 2 : 3);
  d.h = rules::sample_dim(rng, 3, tiny ? 5 : 8);
  d.w = rules::sample_dim(rng, 3, tiny ? 5 : 8);
  d.o = d.groups * rules::sample_dim(rng, 1, tiny ? 2 : 3);
  d.kh = rng.uniform_int(1, 3);
  d.kw = rng.uniform_int(1, 3);
  for (int axis = 0; axis < 2; ++axis) {
    d.stride[axis] = rng.uniform_int(1, 2);
    d.padding[axis] = rng.uniform_int(0, 1);
    d.dilation[axis] = rng.coin(0.75) ? 1 : 2;
  }
  // Keep the image and the output (padding can make it the larger) within the element limit.
  const auto too_big = [&] {
    return std::max({d.n * d.c * d.h * d.w, d.n * d.o * d.oh() * d.ow(), d.weight_size()}) > rules::sample_cap(rng);
  };
  fit_kernel(d, 0);
  fit_kernel(d, 1);
  while (too_big()) {
    // Only boundary draws (large channel or batch dims) get past the limit at 3x3 images.
    if (std::max(d.h, d.w) > 3) {
      (d.h >= d.w ? d.h : d.w) -= 1;
      fit_kernel(d, 0);
      fit_kernel(d, 1);
    } else if (d.c > d.groups) {
      d.c = d.groups * std::max<std::int64_t>(1, d.c / d.groups / 2);
    } else if (d.o > d.groups) {
      d.o = d.groups * std::max<std::int64_t>(1, d.o / d.groups / 2);
    } else if (d.groups > 1) {
      d.c /= d.groups;
      d.o /= d.groups;
      d.groups = 1;
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

Attrs conv_attrs(const ConvDraw& d) {
  using V = std::vector<std::int64_t>;
  return {{"dilation", V{d.dilation[0], d.dilation[1]}},
          {"groups", d.groups},
          {"padding", V{d.padding[0], d.padding[1]}},
          {"stride", V{d.stride[0], d.stride[1]}}};
}
TensorType f32(Shape shape) { return {DType::f32, std::move(shape)}; }

// The largest of 3, 2, 1 dividing `channels`, at most `limit`.
std::int64_t groups_dividing(std::int64_t channels, std::int64_t limit) {
  for (std::int64_t g = std::min<std::int64_t>(3, limit); g > 1; --g) {
    if (channels % g == 0) return g;
  }
  return 1;
}

// With a given image [N,C,H,W]: groups dividing C, kernels that fit it and an output channel count
// keeping the weight small.
void fit_to_image(SampleRng& rng, ConvDraw& d, const Shape& image) {
  d.n = image[0];
  d.c = image[1];
  d.h = image[2];
  d.w = image[3];
  d.groups = groups_dividing(d.c, d.groups);
  fit_kernel(d, 0);
  fit_kernel(d, 1);
  const std::int64_t per_group = rules::sample_cap(rng) / ((d.c / d.groups) * d.kh * d.kw);
  d.o = d.groups * std::clamp<std::int64_t>(per_group / d.groups, 1, rng.uniform_int(1, 3));
}

}  // namespace

std::optional<OpSample> conv2d_sample(SampleRng& rng, const std::optional<TensorType>& first) {
  ConvDraw d = draw_conv(rng);
  if (first) {
    if (!usable_image(first)) return std::nullopt;
    fit_to_image(rng, d, first->shape);
    if (d.weight_size() > rules::sample_cap(rng)) return std::nullopt;
    if (d.n * d.o * d.oh() * d.ow() > rules::sample_cap(rng)) return std::nullopt;
  }
  const auto domain = ValueDomain::real_range(-2, 2);
  return OpSample{conv_attrs(d), {f32({d.n, d.c, d.h, d.w}), f32({d.o, d.c / d.groups, d.kh, d.kw})}, {domain, domain}};
}

std::optional<OpSample> conv2d_input_grad_sample(SampleRng& rng, const std::optional<TensorType>& first) {
  ConvDraw d = draw_conv(rng);
  if (first) {
    // first is grad_output [N,O,OH,OW]: pick an image size whose convolution has exactly OH x OW outputs.
    if (!usable_image(first)) return std::nullopt;
    const Shape& g = first->shape;
    d.n = g[0];
    d.o = g[1];
    d.groups = groups_dividing(d.o, d.groups);
    d.c = d.groups * std::max<std::int64_t>(1, d.c / std::max<std::int64_t>(d.groups, 1));
    d.h = (g[2] - 1) * d.stride[0] + d.span(0) - 2 * d.padding[0] + rng.uniform_int(0, d.stride[0] - 1);
    d.w = (g[3] - 1) * d.stride[1] + d.span(1) - 2 * d.padding[1] + rng.uniform_int(0, d.stride[1] - 1);
    if (d.h < 1 || d.w < 1) return std::nullopt;
    if (d.weight_size() > rules::sample_cap(rng) || d.n * d.c * d.h * d.w > rules::sample_cap(rng)) return std::nullopt;
  }
  Attrs attrs = conv_attrs(d);
  attrs.set("height", d.h);
  attrs.set("width", d.w);
  const auto domain = ValueDomain::real_range(-2, 2);
  return OpSample{
      std::move(attrs), {f32({d.n, d.o, d.oh(), d.ow()}), f32({d.o, d.c / d.groups, d.kh, d.kw})}, {domain, domain}};
}

std::optional<OpSample> conv2d_weight_grad_sample(SampleRng& rng, const std::optional<TensorType>& first) {
  ConvDraw d = draw_conv(rng);
  if (first) {
    if (!usable_image(first)) return std::nullopt;
    fit_to_image(rng, d, first->shape);
    if (d.n * d.o * d.oh() * d.ow() > rules::sample_cap(rng)) return std::nullopt;
    if (d.weight_size() > rules::sample_cap(rng)) return std::nullopt;
  }
  Attrs attrs = conv_attrs(d);
  attrs.set("kernel_h", d.kh);
  attrs.set("kernel_w", d.kw);
  const auto domain = ValueDomain::real_range(-2, 2);
  return OpSample{std::move(attrs), {f32({d.n, d.c, d.h, d.w}), f32({d.n, d.o, d.oh(), d.ow()})}, {domain, domain}};
}

}  // namespace tg
