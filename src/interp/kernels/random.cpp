// Kernels of the random family. Element i's draw is Philox4x32-10 at counter i under the key
// (seed, salt) (../philox.h), so chunks can run on any thread in any order and give the same bits.
// The uniforms are exact in float, and dropout's keep test compares them with p in double, so the
// f32 and f64 interpreters keep exactly the same elements.
#include "tensorgrad/ir/ops/ids/random.h"

#include "../parallel.h"
#include "../philox.h"
#include "families.h"
#include "tensorgrad/ir/launch_paths.h"

namespace tg::interp {

namespace {

constexpr std::int64_t kGrain = 4096;
const SizeThreshold kGrainThreshold("interp", "random", "grain", kGrain);

const LaunchPath kRandn("interp", "randn", "kernel");
const LaunchPath kDropout("interp", "dropout", "kernel");

template <class T>
philox::Key call_key(const KernelCall<T>& call, std::size_t seed_input) {
  return philox::stream_key(call.ints(seed_input)[0], call.attrs().integer("salt"));
}

template <class T>
void randn_kernel(const KernelCall<T>& call) {
  kRandn.hit();
  const philox::Key key = call_key(call, 0);
  T* out = call.output.real.data();
  parallel_chunks(static_cast<std::int64_t>(call.output.real.size()), kGrain,
                  [&](std::int64_t begin, std::int64_t end) {
                    for (std::int64_t i = begin; i < end; ++i) {
                      const philox::Counter words = philox::draw(key, static_cast<std::uint64_t>(i));
                      out[i] = philox::box_muller<T>(words[0], words[1]);
                    }
                  });
}

template <class T>
void dropout_kernel(const KernelCall<T>& call) {
  kDropout.hit();
  const philox::Key key = call_key(call, 1);
  const double p = call.attrs().real("p");
  // 1 - p is formed in double and rounded once to T, as an f32 constant would be.
  const T keep_scale_denominator = static_cast<T>(1.0 - p);
  const T* x = call.real(0).data();
  T* out = call.output.real.data();
  parallel_chunks(static_cast<std::int64_t>(call.output.real.size()), kGrain,
                  [&](std::int64_t begin, std::int64_t end) {
                    for (std::int64_t i = begin; i < end; ++i) {
                      const philox::Counter words = philox::draw(key, static_cast<std::uint64_t>(i));
                      const bool keep = philox::uniform_closed_open<double>(words[0]) >= p;
                      out[i] = keep ? x[i] / keep_scale_denominator : T(0);
                    }
                  });
}

}  // namespace

template <class T>
void register_random_kernels(KernelTable<T>& table) {
  table[static_cast<std::size_t>(op::Randn)] = randn_kernel<T>;
  table[static_cast<std::size_t>(op::Dropout)] = dropout_kernel<T>;
}

template void register_random_kernels<float>(KernelTable<float>&);
template void register_random_kernels<double>(KernelTable<double>&);

}  // namespace tg::interp
