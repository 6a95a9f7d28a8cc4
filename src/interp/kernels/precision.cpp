// The precision family's kernel: cast. The kernel copies each value as T; the interpreter rounds the
// stored result to a 16-bit output dtype (interpreter.cpp), so a cast to f16 or bf16 rounds once,
// from the input value, to nearest even. In f32 mode a cast to f32 from wider storage rounds
// through T = float too.
#include "tensorgrad/ir/ops/ids/precision.h"

#include "../parallel.h"
#include "families.h"
#include "tensorgrad/ir/launch_paths.h"
#include "tensorgrad/ir/low_precision.h"

namespace tg::interp {

namespace {

constexpr std::int64_t kGrain = 1 << 14;
const SizeThreshold kGrainThreshold("interp", "precision", "grain", kGrain);
const LaunchPath kCastFromFloat("interp", "cast", "from_float");
const LaunchPath kCastFromInts("interp", "cast", "from_ints");

template <class T>
void cast_kernel(const KernelCall<T>& call) {
  const std::span<T> out = call.output.real;
  if (is_float(call.in_type(0).dtype)) {
    kCastFromFloat.hit();
    const std::span<const T> in = call.real(0);
    parallel_chunks(call.output_type.size(), kGrain, [&](std::int64_t begin, std::int64_t end) {
      for (auto i = static_cast<std::size_t>(begin); i < static_cast<std::size_t>(end); ++i) out[i] = in[i];
    });
    return;
  }
  kCastFromInts.hit();
  // An i32 past 2^24 is not an f32: rounding it to f32 and then to a 16-bit dtype could round twice
  // (a value just past a bf16 tie lands on the tie). Round once, from the exact integer (to f32 the
  // cast to T does that; the oracle keeps f32 values unrounded, as everywhere).
  const std::span<const std::int32_t> in = call.ints(0);
  const DType to = call.output_type.dtype;
  parallel_chunks(call.output_type.size(), kGrain, [&](std::int64_t begin, std::int64_t end) {
    for (auto i = static_cast<std::size_t>(begin); i < static_cast<std::size_t>(end); ++i) {
      const auto exact = static_cast<double>(in[i]);
      out[i] = static_cast<T>(is_low_precision(to) ? round_to_dtype(exact, to) : exact);
    }
  });
}

}  // namespace

template <class T>
void register_precision_kernels(KernelTable<T>& table) {
  table[static_cast<std::size_t>(op::Cast)] = cast_kernel<T>;
}

template void register_precision_kernels<float>(KernelTable<float>&);
template void register_precision_kernels<double>(KernelTable<double>&);

}  // namespace tg::interp
