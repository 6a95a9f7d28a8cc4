#pragma once
// Copies of model-sized host buffers (a step's gradients read back from a device, packed for a
// reduction, uploaded again) spread over TBB's threads: one thread's memcpy moves ~5-10 GB/s, far
// below what the memory and the first touch of fresh pages allow with every core, and at hundreds of
// MB a step that is the difference between milliseconds and a step's worth of time.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace tg::interp {

inline void parallel_copy(void* dst, const void* src, std::size_t bytes) {
  constexpr std::size_t kBlock = std::size_t{1} << 20;
  if (bytes < 4 * kBlock) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return;
  }
  auto* to = static_cast<std::byte*>(dst);
  const auto* from = static_cast<const std::byte*>(src);
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, (bytes + kBlock - 1) / kBlock),
                    [&](const tbb::blocked_range<std::size_t>& blocks) {
                      for (std::size_t b = blocks.begin(); b < blocks.end(); ++b) {
                        const std::size_t at = b * kBlock;
                        std::memcpy(to + at, from + at, std::min(kBlock, bytes - at));
                      }
                    });
}

}  // namespace tg::interp
