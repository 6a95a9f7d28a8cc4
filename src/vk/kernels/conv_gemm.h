#pragma once
// Internal: the launches of conv2d, conv2d_input_grad and conv2d_weight_grad as implicit GEMMs:
// shaders/conv2d_gemm.comp's tiles (conv_gemm.cpp, registered by image.cpp) everywhere, and on CPU
// devices shaders/conv2d_rows.comp's row blocks (conv_rows.cpp, chosen by route_convolutions).
#include <vector>

#include "ir/ops/conv_geometry.h"
#include "vk/kernels/kernels.h"

namespace tg::vk {

// The shaders' push constants (conv2d_common.glsl's Push).
struct ConvGemmPush {
  std::int32_t c = 0, h = 0, w = 0;
  std::int32_t o = 0, kh = 0, kw = 0;
  std::int32_t oh = 0, ow = 0;
  std::int32_t sh = 0, sw = 0, ph = 0, pw = 0, dh = 0, dw = 0;
  std::int32_t cg = 0, og = 0;
  std::uint32_t m = 0, nc = 0, k = 0;
  std::uint32_t k_range = 0;
  std::uint32_t groups = 0;
  std::uint32_t tiles_m = 0, tiles_n = 0;
  std::uint32_t flags = 0;
  std::uint32_t split_stride = 0;
};
static_assert(sizeof(ConvGemmPush) == 100);  // Vulkan guarantees 128 bytes of push constants

// A node's product C[M, NC] = A[M, K] B[K, NC] per group, checked against the shaders' 32-bit
// indexing (a LimitError naming the op and its operands otherwise), and the push constants every
// launch shares (k_range, tiles_m, tiles_n and flags are the launch's to fill).
struct ConvProduct {
  ConvGeometry geometry;
  std::int64_t m = 0, nc = 0, k = 0, out_size = 0;
  bool vec_a = false;  // A's rows and K blocks start on vec4 boundaries
  bool vec_c = false;  // C's planes start on vec4 boundaries
  ConvGemmPush push;
};
ConvProduct conv_product(const Graph& graph, const Node& node, ConvRole role);
// The product of a geometry without conv_product's limit checks (the caller's to make): the
// matmuls routed to the row blocks are 1x1 convolutions.
ConvProduct conv_product_of(const ConvGeometry& geometry, ConvRole role, std::int64_t out_size);
// Refuses (LimitError) more split-K partials or workgroup items than 32-bit indices reach.
void refuse_conv_splits(const Graph& graph, const Node& node, std::uint64_t out_size, std::uint64_t tiles,
                        std::uint64_t splits);
// B's operand, A's, then the output (the node's scratch when split); an empty operand binds the output.
std::vector<ValueId> conv_bindings(const Graph& graph, const Node& node, bool split);

KernelLaunch plan_conv_gemm(const Graph& graph, const Node& node, ConvRole role);
KernelLaunch plan_conv_rows(const Graph& graph, const Node& node, ConvRole role);

// Replaces the tiled launches of the convolutions by plan_conv_rows' on CPU devices (or as
// launch_thresholds().conv_kernel forces, for tests).
void route_convolutions(const Graph& graph, const DeviceInfo& device, std::vector<KernelLaunch>& launches);
// Replaces the portable fp32 launches of the matmuls that are 1x1 convolutions (A B, A Bt, At B,
// equal batches as groups) by row-block launches on CPU devices (or as
// launch_thresholds().matmul_kernel forces, for tests); after route_matmuls.
void route_matmuls_to_rows(const Graph& graph, const DeviceInfo& device, std::vector<KernelLaunch>& launches);

}  // namespace tg::vk
