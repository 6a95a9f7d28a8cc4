// Launches of the matmul family (shaders/matmul.comp): [..., M, K] x [K, N] with the lhs's leading
// dims folded into M, or batched [B..., M, K] x [B..., K, N]. One workgroup of 256 invocations per
// output tile (items = tiles * 256): 128x128 tiles (the fast path) when M and N reach 128, else
// 64x64, so small products do not compute mostly padding. The shader decodes (batch, tile row, tile
// column) from the workgroup id and loops grid-stride when the tiles exceed the executor's 65535
// groups.
#include <algorithm>
#include <limits>

#include "tensorgrad/ir/error.h"
#include "vk/kernels/kernels.h"

namespace tg::vk {

namespace {

constexpr std::int64_t kSmallTile = 64;
constexpr std::int64_t kLargeTile = 128;
constexpr std::uint32_t kGroupSize = 256;

// Must match the FLAG_* constants of shaders/matmul.comp.
constexpr std::uint32_t kFlagLarge = 1;  // 128x128 tiles
constexpr std::uint32_t kFlagVecA = 2;   // K % 4 == 0: rows of A move as vec4
constexpr std::uint32_t kFlagVecBC = 4;  // N % 4 == 0: rows of B and C move as vec4

struct MatmulPush {
  std::uint32_t m = 0;
  std::uint32_t n = 0;
  std::uint32_t k = 0;
  std::uint32_t batches = 0;
  std::uint32_t tiles_m = 0;
  std::uint32_t tiles_n = 0;
  std::uint32_t a_batch_stride = 0;
  std::uint32_t b_batch_stride = 0;
  std::uint32_t flags = 0;
};
static_assert(sizeof(MatmulPush) == 36);

KernelLaunch plan_matmul(const Graph& graph, const Node& node) {
  const Shape& a = graph.type(node.inputs[0]).shape;
  const Shape& b = graph.type(node.inputs[1]).shape;
  const std::int64_t k = a.back();
  const std::int64_t n = b.back();
  const bool batched = b.size() > 2;
  // Rows: with a 2-D rhs every leading lhs dim folds into M (computed from the shape, so K = 0 works).
  const std::int64_t m = batched ? a[a.size() - 2] : num_elements(Shape(a.begin(), a.end() - 1));
  const std::int64_t batches = batched ? num_elements(Shape(a.begin(), a.end() - 2)) : 1;

  const std::int64_t largest = std::max({num_elements(a), num_elements(b), batches * m * n, m, n, k});
  if (largest > std::numeric_limits<std::uint32_t>::max()) {
    throw Error("Vulkan kernel for 'matmul': operands " + graph.type(node.inputs[0]).to_string() + " x " +
                graph.type(node.inputs[1]).to_string() + " exceed the shader's 32-bit indexing");
  }

  MatmulPush push;
  push.m = static_cast<std::uint32_t>(m);
  push.n = static_cast<std::uint32_t>(n);
  push.k = static_cast<std::uint32_t>(k);
  push.batches = static_cast<std::uint32_t>(batches);
  const bool large = m >= kLargeTile && n >= kLargeTile;
  const std::int64_t tile = large ? kLargeTile : kSmallTile;
  push.tiles_m = static_cast<std::uint32_t>((m + tile - 1) / tile);
  push.tiles_n = static_cast<std::uint32_t>((n + tile - 1) / tile);
  push.a_batch_stride = static_cast<std::uint32_t>(m * k);
  push.b_batch_stride = batched ? static_cast<std::uint32_t>(k * n) : 0u;
  // vec4 rows: with K (N) a multiple of 4 every row and batch of A (B and C) starts on a vec4 of its
  // binding. Only the large tiles use vec4; the small ones always move scalars.
  push.flags = (large ? kFlagLarge : 0u) | (k % 4 == 0 ? kFlagVecA : 0u) | (n % 4 == 0 ? kFlagVecBC : 0u);

  KernelLaunch launch;
  launch.shader = "matmul";
  launch.bindings = {node.inputs[0], node.inputs[1], node.output};
  // K = 0: the operands are empty (a zero-byte binding is invalid) and never read; the shader
  // writes zeros. Bind the output in their slots.
  if (k == 0) launch.bindings = {node.output, node.output, node.output};
  append_pod(launch.push, push);
  const std::uint64_t tiles = std::uint64_t{push.tiles_m} * push.tiles_n * push.batches;
  if (tiles > std::numeric_limits<std::uint32_t>::max()) {
    throw Error("Vulkan kernel for 'matmul': " + std::to_string(tiles) + " output tiles exceed 32-bit indexing");
  }
  launch.items = tiles * kGroupSize;  // 0 when the output is empty: the executor skips the dispatch
  launch.group_size = kGroupSize;
  return launch;
}

}  // namespace

void register_matmul_kernels(KernelPlanTable& table) { table[static_cast<std::size_t>(OpId::Matmul)] = plan_matmul; }

}  // namespace tg::vk
