// Vulkan kernels of the attention family (being written).
#include "kernels.h"

namespace tg::vk {

void register_attention_kernels(KernelPlanTable&) {}

}  // namespace tg::vk
