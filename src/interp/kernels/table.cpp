// Builds the kernel tables from every family's registration function.
#include "families.h"

namespace tg::interp {

namespace {
template <class T>
KernelTable<T> build_table() {
  KernelTable<T> table{};
  register_elementwise_binary_kernels(table);
  register_elementwise_unary_kernels(table);
  register_reduce_kernels(table);
  register_softmax_kernels(table);
  register_matmul_kernels(table);
  register_layout_kernels(table);
  register_creation_kernels(table);
  register_structure_kernels(table);
  register_indexing_kernels(table);
  register_losses_kernels(table);
  register_image_kernels(table);
  register_random_kernels(table);
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
