// Builds the kernel tables from every family's registration function: one call per TG_FAMILY line
// of ops.def (the generated families.inc), so a new family is registered without an edit here.
#include "families.h"
#include "ir/ops/family_tables.h"

namespace tg::interp {

namespace {

template <class T>
KernelTable<T> build_table() {
  KernelTable<T> table{};
#define TG_FAMILY(name)                                                                                      \
  register_family_kernels<KernelTable<T>>(table, #name, register_##name##_kernels<T>, "interpreter kernels", \
                                          "src/interp/kernels");
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
