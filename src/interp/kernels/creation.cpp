// Creation kernels: constant fills and arange, written to .real for f32 outputs and to .ints for
// i32 and bool outputs (the shape rule already checked the value fits the dtype).
#include "tensorgrad/ir/ops/ids/creation.h"

#include <type_traits>

#include "../parallel.h"
#include "families.h"
#include "tensorgrad/ir/launch_paths.h"

namespace tg::interp {

namespace {

constexpr std::int64_t kGrain = 4096;
const SizeThreshold kGrainThreshold("interp", "creation", "grain", kGrain);

// One fill loop per op: one path each.
const LaunchPath kFull("interp", "full", "kernel");
const LaunchPath kZeros("interp", "zeros", "kernel");
const LaunchPath kOnes("interp", "ones", "kernel");
const LaunchPath kArange("interp", "arange", "kernel");

// out[i] = value_at(i) on the storage the output dtype lives in.
template <class T, class ValueAt>
void fill(const KernelCall<T>& call, ValueAt&& value_at) {
  auto write = [&](auto& out) {
    using Element = typename std::remove_reference_t<decltype(out)>::value_type;
    parallel_chunks(call.output_type.size(), kGrain, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) out[static_cast<std::size_t>(i)] = static_cast<Element>(value_at(i));
    });
  };
  if (is_float(call.output_type.dtype)) {
    write(call.output.real);
  } else {
    write(call.output.ints);
  }
}

template <class T>
void full_kernel(const KernelCall<T>& call) {
  kFull.hit();
  const double value = call.attrs().real("value");
  fill(call, [value](std::int64_t) { return value; });
}

template <class T>
void zeros_kernel(const KernelCall<T>& call) {
  kZeros.hit();
  fill(call, [](std::int64_t) { return 0.0; });
}

template <class T>
void ones_kernel(const KernelCall<T>& call) {
  kOnes.hit();
  fill(call, [](std::int64_t) { return 1.0; });
}

template <class T>
void arange_kernel(const KernelCall<T>& call) {
  kArange.hit();
  fill(call, [](std::int64_t i) { return i; });
}

}  // namespace

template <class T>
void register_creation_kernels(KernelTable<T>& table) {
  table[static_cast<std::size_t>(op::Full)] = full_kernel<T>;
  table[static_cast<std::size_t>(op::Zeros)] = zeros_kernel<T>;
  table[static_cast<std::size_t>(op::Ones)] = ones_kernel<T>;
  table[static_cast<std::size_t>(op::Arange)] = arange_kernel<T>;
}

template void register_creation_kernels<float>(KernelTable<float>&);
template void register_creation_kernels<double>(KernelTable<double>&);

}  // namespace tg::interp
