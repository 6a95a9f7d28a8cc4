// STUB: to be replaced by the real kernels of this family.
#include "families.h"

namespace tg::interp {

template <class T>
void register_matmul_kernels(KernelTable<T>&) {}

template void register_matmul_kernels<float>(KernelTable<float>&);
template void register_matmul_kernels<double>(KernelTable<double>&);

}  // namespace tg::interp
