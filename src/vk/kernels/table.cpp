// The Vulkan kernel table: every family file registers its launches here, one call per TG_FAMILY
// line of ops.def (the generated families.inc), so a new family is registered without an edit here.
#include <string>
#include <string_view>

#include "tensorgrad/ir/error.h"
#include "vk/kernels/kernels.h"

namespace tg::vk {

namespace {
// Past this many items a 256-invocation dispatch reaches the executor's kMaxGroups workgroups and
// its shader loops grid-stride (vulkan/grid.<shader>/grid_stride; ProgramOptions::max_workgroups
// reaches it at small sizes).
const SizeThreshold kGridThreshold{"vulkan", "grid", "one_pass_max_items_of_256_groups",
                                   static_cast<std::int64_t>(kMaxGroups) * 256};

// Runs one family's registration and refuses one that set a slot of another family's op: the table
// is indexed by OpId, so such a slot would silently replace (or be replaced by) the owner's launch,
// depending on the order of the families.
void register_family(KernelPlanTable& table, std::string_view family, void (*register_kernels)(KernelPlanTable&)) {
  const KernelPlanTable before = table;
  register_kernels(table);
  for (std::size_t slot = 0; slot < table.size(); ++slot) {
    if (table[slot] == before[slot]) continue;
    const auto op = static_cast<OpId>(slot);
    if (op_family(op) != family) {
      throw Error("Vulkan kernels: register_" + std::string(family) + "_kernels (src/vk/kernels/" +
                  std::string(family) + ".cpp) registers a launch for op '" + std::string(op_name(op)) +
                  "' of family '" + std::string(op_family(op)) + "'");
    }
  }
}
}  // namespace

const KernelPlanTable& kernel_plan_table() {
  static const KernelPlanTable table = [] {
    KernelPlanTable t{};
#define TG_FAMILY(name) register_family(t, #name, register_##name##_kernels);
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
