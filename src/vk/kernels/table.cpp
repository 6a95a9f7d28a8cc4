// The Vulkan kernel table: every family file registers its launches here.
#include "vk/kernels/kernels.h"

namespace tg::vk {

namespace {
// Past this many items a 256-invocation dispatch reaches the executor's kMaxGroups workgroups and
// its shader loops grid-stride (vulkan/grid.<shader>/grid_stride; ProgramOptions::max_workgroups
// reaches it at small sizes).
const SizeThreshold kGridThreshold{"vulkan", "grid", "one_pass_max_items_of_256_groups",
                                   static_cast<std::int64_t>(kMaxGroups) * 256};
}  // namespace

const KernelPlanTable& kernel_plan_table() {
  static const KernelPlanTable table = [] {
    KernelPlanTable t{};
    register_elementwise_binary_kernels(t);
    register_elementwise_unary_kernels(t);
    register_creation_kernels(t);
    register_layout_kernels(t);
    register_structure_kernels(t);
    register_reduce_kernels(t);
    register_softmax_kernels(t);
    register_matmul_kernels(t);
    register_indexing_kernels(t);
    register_losses_kernels(t);
    register_image_kernels(t);
    register_random_kernels(t);
    return t;
  }();
  return table;
}

std::vector<const KernelLaunch*> launch_steps(const KernelLaunch& launch) {
  std::vector<const KernelLaunch*> steps{&launch};
  for (const KernelLaunch& next : launch.then) steps.push_back(&next);
  return steps;
}

}  // namespace tg::vk
