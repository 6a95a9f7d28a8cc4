#pragma once
// Each op family's kernel file registers its kernels here; table.cpp calls every function below.
// The families are ops.def's TG_FAMILY lines (the generated families.inc), so a new family needs
// only its kernel file, src/interp/kernels/<family>.cpp, defining register_<family>_kernels for
// float and double: without it the library does not link, and the linker names the function.
#include "../kernel.h"

namespace tg::interp {

#define TG_FAMILY(name) \
  template <class T>    \
  void register_##name##_kernels(KernelTable<T>& table);
#include "tensorgrad/ir/ops/families.inc"
#undef TG_FAMILY

}  // namespace tg::interp
