// softmax and log_softmax along one axis, numerically stable (the row maximum is subtracted before
// exp). Rows run in parallel; each row's max and sum are taken sequentially in index order.
#include "tensorgrad/ir/ops/ids/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "../parallel.h"
#include "families.h"
#include "softmax_rows_f32.h"
#include "tensorgrad/ir/launch_paths.h"

namespace tg::interp {

namespace {

// Rows along a non-last axis are strided; a tile of this many neighbouring rows is processed
// together so every pass reads memory contiguously.
constexpr std::int64_t kInnerTile = 256;
constexpr std::int64_t kWorkGrain = 16384;
const SizeThreshold kInnerTileThreshold("interp", "softmax", "inner tile", kInnerTile);
const SizeThreshold kWorkGrainThreshold("interp", "softmax", "work grain", kWorkGrain);

// One tile per outer position (inner <= kInnerTile, the last axis among them) or several.
const LaunchPath kSoftmaxOneTile("interp", "softmax", "one_tile");
const LaunchPath kSoftmaxSeveralTiles("interp", "softmax", "several_tiles");
const LaunchPath kLogSoftmaxOneTile("interp", "log_softmax", "one_tile");
const LaunchPath kLogSoftmaxSeveralTiles("interp", "log_softmax", "several_tiles");
// f32 over the last axis: the vectorized row kernel (softmax_rows_f32.h).
const LaunchPath kSoftmaxRowsF32("interp", "softmax", "rows_f32");
const LaunchPath kLogSoftmaxRowsF32("interp", "log_softmax", "rows_f32");

template <class T, bool kLog>
void softmax_kernel(const KernelCall<T>& call) {
  const Shape& shape = call.in_type(0).shape;
  const auto axis = static_cast<std::size_t>(call.attrs().integer("axis"));
  const auto [outer, length, inner] = split_at_axis(shape, static_cast<std::int64_t>(axis));
  const T* x = call.real(0).data();
  T* y = call.output.real.data();
  if (outer * inner == 0) return;  // no rows (a zero dim: no named path)
  if constexpr (std::is_same_v<T, float>) {
    if (inner == 1) {
      (kLog ? kLogSoftmaxRowsF32 : kSoftmaxRowsF32).hit();
      const std::int64_t grain = std::max<std::int64_t>(1, kWorkGrain / std::max<std::int64_t>(length, 1));
      parallel_chunks(outer, grain,
                      [&](std::int64_t r0, std::int64_t r1) { softmax_rows_f32(x, y, r0, r1, length, kLog); });
      return;
    }
  }
  if constexpr (kLog) {
    (inner > kInnerTile ? kLogSoftmaxSeveralTiles : kLogSoftmaxOneTile).hit();
  } else {
    (inner > kInnerTile ? kSoftmaxSeveralTiles : kSoftmaxOneTile).hit();
  }

  const std::int64_t tiles_per_outer = (inner + kInnerTile - 1) / kInnerTile;
  const std::int64_t tile_work = std::min(inner, kInnerTile) * std::max<std::int64_t>(length, 1);
  const std::int64_t grain = std::max<std::int64_t>(1, kWorkGrain / std::max<std::int64_t>(tile_work, 1));
  parallel_chunks(outer * tiles_per_outer, grain, [&](std::int64_t t0, std::int64_t t1) {
    T row_max[kInnerTile];
    T row_sum[kInnerTile];
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t o = t / tiles_per_outer;
      const std::int64_t j0 = (t % tiles_per_outer) * kInnerTile;
      const std::int64_t width = std::min(kInnerTile, inner - j0);
      const std::int64_t start = o * length * inner + j0;
      const T* src = x + start;
      T* dst = y + start;
      std::fill(row_max, row_max + width, -std::numeric_limits<T>::infinity());
      std::fill(row_sum, row_sum + width, T(0));
      for (std::int64_t a = 0; a < length; ++a) {
        const T* row = src + a * inner;
        for (std::int64_t j = 0; j < width; ++j) row_max[j] = std::max(row_max[j], row[j]);
      }
      // softmax stores exp(x - max) on the way and scales it afterwards; log_softmax needs only the sum.
      for (std::int64_t a = 0; a < length; ++a) {
        const T* row = src + a * inner;
        T* out_row = dst + a * inner;
        for (std::int64_t j = 0; j < width; ++j) {
          const T e = std::exp(row[j] - row_max[j]);
          row_sum[j] += e;
          if constexpr (!kLog) out_row[j] = e;
        }
      }
      // (x - max) - log(sum) rather than x - (max + log(sum)): with large x the second form would
      // round max + log(sum) at the scale of x and lose the small result's precision.
      if constexpr (kLog) {
        for (std::int64_t j = 0; j < width; ++j) row_sum[j] = std::log(row_sum[j]);
      }
      for (std::int64_t a = 0; a < length; ++a) {
        const T* row = src + a * inner;
        T* out_row = dst + a * inner;
        for (std::int64_t j = 0; j < width; ++j) {
          if constexpr (kLog) {
            out_row[j] = (row[j] - row_max[j]) - row_sum[j];
          } else {
            out_row[j] /= row_sum[j];
          }
        }
      }
    }
  });
}

}  // namespace

template <class T>
void register_softmax_kernels(KernelTable<T>& table) {
  table[static_cast<std::size_t>(op::Softmax)] = softmax_kernel<T, false>;
  table[static_cast<std::size_t>(op::LogSoftmax)] = softmax_kernel<T, true>;
}

template void register_softmax_kernels<float>(KernelTable<float>&);
template void register_softmax_kernels<double>(KernelTable<double>&);

}  // namespace tg::interp
