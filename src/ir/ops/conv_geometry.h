#pragma once
// The geometry of the 2-D convolution behind conv2d and its two adjoints, shared by the shape
// rules (src/ir/ops/image.cpp) and every backend's kernels (src/interp/kernels, src/vk/kernels), so
// a rule and a kernel cannot disagree about which input element meets which tap.
//
// PyTorch's semantics (torch.nn.functional.conv2d), NCHW:
//   image  x [N, C, H, W]
//   weight w [O, C / groups, KH, KW]
//   output y [N, O, OH, OW],  OH = (H + 2 * pad_h - dil_h * (KH - 1) - 1) / stride_h + 1 (W alike)
//   y[n, o, i, j] = sum_{c' < C/groups, a < KH, b < KW}
//                   x[n, g * C/groups + c', i * stride_h + a * dil_h - pad_h, j * stride_w + b * dil_w - pad_w]
//                   * w[o, c', a, b],   g = o / (O / groups)
// with zeros outside the image. conv2d_input_grad is its adjoint in x (the transposed convolution)
// and conv2d_weight_grad its adjoint in w. Padding is symmetric per axis; the front end's
// padding = same adds the odd extra row or column with a pad op, as PyTorch does.
//
// Attributes (all required): stride, padding, dilation as ints [h, w]; groups as an integer;
// conv2d_input_grad adds height and width (the image's), conv2d_weight_grad kernel_h and kernel_w.
#include <cstdint>

#include "tensorgrad/ir/attrs.h"
#include "tensorgrad/ir/shape.h"

namespace tg {

enum class ConvRole { forward, input_grad, weight_grad };

struct ConvGeometry {
  std::int64_t n = 0, c = 0, h = 0, w = 0;  // image [N, C, H, W]
  std::int64_t o = 0, kh = 0, kw = 0;       // weight [O, C / groups, KH, KW]
  std::int64_t oh = 0, ow = 0;              // output grid [N, O, OH, OW]
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t pad_h = 0, pad_w = 0;
  std::int64_t dil_h = 1, dil_w = 1;
  std::int64_t groups = 1;

  std::int64_t c_per_group() const { return c / groups; }
  std::int64_t o_per_group() const { return o / groups; }
  // Multiply-adds of the forward product per output element (C/groups * KH * KW): the K of the
  // matrix product y = w x cols.
  std::int64_t taps() const { return c_per_group() * kh * kw; }
  bool padded() const { return pad_h > 0 || pad_w > 0; }
  bool strided() const { return stride_h > 1 || stride_w > 1; }
  bool dilated() const { return dil_h > 1 || dil_w > 1; }
  bool grouped() const { return groups > 1; }
};

// The geometry of a node of the given role from its attributes, its two input shapes and its
// output shape (forward: x, w -> y; input_grad: g, w -> dx; weight_grad: x, g -> dw). The shapes
// must already satisfy the op's shape rule.
inline ConvGeometry conv_geometry(ConvRole role, const Attrs& attrs, const Shape& in0, const Shape& in1,
                                  const Shape& out) {
  ConvGeometry g;
  const auto& stride = attrs.ints("stride");
  const auto& padding = attrs.ints("padding");
  const auto& dilation = attrs.ints("dilation");
  g.stride_h = stride[0];
  g.stride_w = stride[1];
  g.pad_h = padding[0];
  g.pad_w = padding[1];
  g.dil_h = dilation[0];
  g.dil_w = dilation[1];
  g.groups = attrs.integer("groups");
  switch (role) {
    case ConvRole::forward:  // x [N,C,H,W], w [O,C/g,KH,KW] -> y [N,O,OH,OW]
      g.n = in0[0], g.c = in0[1], g.h = in0[2], g.w = in0[3];
      g.o = in1[0], g.kh = in1[2], g.kw = in1[3];
      g.oh = out[2], g.ow = out[3];
      break;
    case ConvRole::input_grad:  // g [N,O,OH,OW], w [O,C/g,KH,KW] -> dx [N,C,H,W]
      g.n = in0[0], g.o = in0[1], g.oh = in0[2], g.ow = in0[3];
      g.kh = in1[2], g.kw = in1[3];
      g.c = out[1], g.h = out[2], g.w = out[3];
      break;
    case ConvRole::weight_grad:  // x [N,C,H,W], g [N,O,OH,OW] -> dw [O,C/g,KH,KW]
      g.n = in0[0], g.c = in0[1], g.h = in0[2], g.w = in0[3];
      g.o = in1[1], g.oh = in1[2], g.ow = in1[3];
      g.kh = out[2], g.kw = out[3];
      break;
  }
  return g;
}

}  // namespace tg
