#pragma once
// Internal: elementwise fusion. A run of consecutive nodes (in graph order) of the elementwise f32
// families whose outputs share one shape becomes a single launch of shaders/fused_elementwise.comp,
// attached to the run's last node; the other nodes' launches get items = 0 (no dispatch). Values
// the group's nodes produce and nobody outside the group reads are never written to memory.
// Constants (nodes without inputs) between the run's nodes keep their launches: they only feed it.
// docs/vulkan-fusion.md ("Elementwise fusion") gives the rules and the shader's limits.
#include <cstdint>
#include <vector>

#include "tensorgrad/ir/graph.h"
#include "vk/kernels/kernels.h"

namespace tg::vk {

// Storage buffers a fused launch binds (12 inputs and 4 outputs, unused ones repeated): a device
// must allow this many per dispatch for fusion to run (src/vk/executor.cpp).
inline constexpr std::uint32_t kFusedStorageBuffers = 16;

// `launches` holds one launch per node (the per-node kernels); returns them with every fusable run
// replaced as described above. Results are bit-identical to the unfused launches.
std::vector<KernelLaunch> fuse_elementwise(const Graph& graph, std::vector<KernelLaunch> launches);

}  // namespace tg::vk
