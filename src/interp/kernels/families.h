#pragma once
// Each op family's kernel file registers its kernels here; table.cpp calls every function below.
// Same family names as src/ir/ops.
#include "../kernel.h"

namespace tg::interp {

template <class T>
void register_elementwise_binary_kernels(KernelTable<T>& table);
template <class T>
void register_elementwise_unary_kernels(KernelTable<T>& table);
template <class T>
void register_reduce_kernels(KernelTable<T>& table);
template <class T>
void register_softmax_kernels(KernelTable<T>& table);
template <class T>
void register_matmul_kernels(KernelTable<T>& table);
template <class T>
void register_layout_kernels(KernelTable<T>& table);
template <class T>
void register_creation_kernels(KernelTable<T>& table);
template <class T>
void register_structure_kernels(KernelTable<T>& table);
template <class T>
void register_indexing_kernels(KernelTable<T>& table);
template <class T>
void register_losses_kernels(KernelTable<T>& table);
template <class T>
void register_image_kernels(KernelTable<T>& table);
template <class T>
void register_random_kernels(KernelTable<T>& table);

}  // namespace tg::interp
