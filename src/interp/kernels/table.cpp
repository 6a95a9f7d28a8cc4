// Builds the kernel tables from every family's registration function: one call per TG_FAMILY line
// of ops.def (the generated families.inc), so a new family is registered without an edit here.
#include <string>
#include <string_view>

#include "families.h"
#include "tensorgrad/ir/error.h"

namespace tg::interp {

namespace {

// Runs one family's registration and refuses one that set a slot of another family's op: the
// tables are indexed by OpId, so such a slot would silently replace (or be replaced by) the
// owner's kernel, depending on the order of the families.
template <class T>
void register_family(KernelTable<T>& table, std::string_view family, void (*register_kernels)(KernelTable<T>&)) {
  const KernelTable<T> before = table;
  register_kernels(table);
  for (std::size_t slot = 0; slot < table.size(); ++slot) {
    if (table[slot] == before[slot]) continue;
    const auto op = static_cast<OpId>(slot);
    if (op_family(op) != family) {
      throw Error("interpreter kernels: register_" + std::string(family) + "_kernels (src/interp/kernels/" +
                  std::string(family) + ".cpp) registers a kernel for op '" + std::string(op_name(op)) +
                  "' of family '" + std::string(op_family(op)) + "'");
    }
  }
}

template <class T>
KernelTable<T> build_table() {
  KernelTable<T> table{};
#define TG_FAMILY(name) register_family<T>(table, #name, register_##name##_kernels<T>);
#include "tensorgrad/ir/ops/families.inc"
#undef TG_FAMILY
  return table;
}

}  // namespace

template <class T>
const KernelTable<T>& kernel_table() {
  static const KernelTable<T> table = build_table<T>();
  return table;
}

template const KernelTable<float>& kernel_table<float>();
template const KernelTable<double>& kernel_table<double>();

}  // namespace tg::interp
