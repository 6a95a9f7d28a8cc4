#pragma once
// Parallel loops whose results never depend on the thread count: each index is computed by exactly
// one body call, and reductions combine fixed-size blocks in a fixed order.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cstdint>
#include <vector>

#include "tensorgrad/ir/launch_paths.h"

namespace tg::interp {

// Whether a parallel loop ran as one chunk on the calling thread or was split over TBB's threads.
inline const LaunchPath kOneChunk("interp", "parallel_chunks", "one_chunk");
inline const LaunchPath kParallelFor("interp", "parallel_chunks", "parallel_for");

// Calls body(begin, end) over [0, n) in chunks of at least `grain`.
template <class Body>
void parallel_chunks(std::int64_t n, std::int64_t grain, Body&& body) {
  if (n <= 0) return;
  if (n <= grain) {
    kOneChunk.hit();
    body(std::int64_t{0}, n);
    return;
  }
  kParallelFor.hit();
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, n, grain),
                    [&](const tbb::blocked_range<std::int64_t>& r) { body(r.begin(), r.end()); });
}

// Sum of f(i) over [0, n) split into fixed blocks of kBlock terms, block partials added in block
// order: the same bits for any thread count.
template <class T, std::int64_t kBlock = 4096, class F>
T deterministic_sum(std::int64_t n, F&& f) {
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<T> partial(static_cast<std::size_t>(blocks), T(0));
  parallel_chunks(blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      T acc(0);
      const std::int64_t end = std::min(n, (b + 1) * kBlock);
      for (std::int64_t i = b * kBlock; i < end; ++i) acc += f(i);
      partial[static_cast<std::size_t>(b)] = acc;
    }
  });
  T total(0);
  for (const T& p : partial) total += p;
  return total;
}

}  // namespace tg::interp
