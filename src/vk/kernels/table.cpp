// The Vulkan kernel table: every family file registers its launches here, one call per TG_FAMILY
// line of ops.def (the generated families.inc), so a new family is registered without an edit here.
#include "ir/ops/family_tables.h"
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
#define TG_FAMILY(name) \
  register_family_kernels(t, #name, register_##name##_kernels, "Vulkan kernels", "src/vk/kernels");
#include "tensorgrad/ir/ops/families.inc"
#undef TG_FAMILY
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
