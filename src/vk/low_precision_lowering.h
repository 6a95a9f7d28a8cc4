#pragma once
// Internal: how the Vulkan executor runs f16 and bf16 graphs. A 16-bit value is a storage format
// (tensorgrad/ir/dtype.h): an op computes in f32 and rounds its 16-bit result once, to nearest
// even, when it stores it. So before planning, every node other than a cast that reads or writes a
// 16-bit value is re-emitted in f32: each 16-bit input through a cast to f32, a creation op's
// 16-bit dtype attribute replaced by f32, and a 16-bit result through a cast back to its dtype.
// Only cast nodes (src/vk/kernels/precision.cpp, shaders/cast.comp) then touch 16-bit buffers and
// every other kernel runs unchanged: the interpreters' semantics, bit for bit where the f32 kernels
// match them. docs/vulkan.md ("f16 and bf16") describes it.
#include "tensorgrad/ir/graph.h"
#include "tensorgrad/vk/device.h"

namespace tg::vk {

// Whether any value of `graph` (an input or a node's result) is f16 or bf16.
bool has_low_precision_values(const Graph& graph);

// The graph the executor plans for `graph` on `device`: a copy of it when no value is 16-bit (no
// change), else the lowered graph described above, whose inputs and outputs keep their names,
// kinds, order and types. Throws LimitError naming the feature, the dtype and the value when a
// value is 16-bit and the device lacks storageBuffer16BitAccess (DeviceInfo), before anything is
// allocated.
Graph prepare_low_precision(const Graph& graph, const DeviceInfo& device);

// The lowering alone (no device check), for tests and plan-only callers.
Graph lower_low_precision(const Graph& graph);

}  // namespace tg::vk
