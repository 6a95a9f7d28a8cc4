#pragma once
// interp_f32's convolutions as matrix products on the blocked kernel of gemm.h (im2col + GEMM):
// conv2d, conv2d_input_grad and conv2d_weight_grad for every geometry conv_geometry() describes
// (stride, padding, dilation per axis, groups). The f64 oracle keeps its plain loops (image.cpp).
//
// The bits never depend on the thread count: every output is summed in one order fixed by the
// shape alone (conv_gemm.cpp says which); they differ from the plain loops' order, within the
// f32 tolerance of a sum of the op's reduction length.
#include "ir/ops/conv_geometry.h"

namespace tg::interp {

// y [N,O,OH,OW] from x [N,C,H,W] and w [O,C/groups,KH,KW].
void conv2d_f32(const ConvGeometry& geo, const float* x, const float* w, float* y);
// dx [N,C,H,W] from g [N,O,OH,OW] and w.
void conv2d_input_grad_f32(const ConvGeometry& geo, const float* g, const float* w, float* dx);
// dw [O,C/groups,KH,KW] from x and g.
void conv2d_weight_grad_f32(const ConvGeometry& geo, const float* x, const float* g, float* dw);

}  // namespace tg::interp
