#pragma once
// Internal: the launches of conv2d, conv2d_input_grad and conv2d_weight_grad as implicit GEMMs on
// shaders/conv2d_gemm.comp (defined in conv_gemm.cpp, registered by image.cpp).
#include "ir/ops/conv_geometry.h"
#include "vk/kernels/kernels.h"

namespace tg::vk {

KernelLaunch plan_conv_gemm(const Graph& graph, const Node& node, ConvRole role);

}  // namespace tg::vk
