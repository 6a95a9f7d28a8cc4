// Launches of the precision family: cast (in progress: see the Vulkan part of docs/dtypes.md).
#include "tensorgrad/ir/ops/ids/precision.h"

#include "vk/kernels/kernels.h"

namespace tg::vk {

void register_precision_kernels(KernelPlanTable&) {}

}  // namespace tg::vk
