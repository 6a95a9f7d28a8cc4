// interp::parallel_copy: below 4 MiB one memcpy, from 4 MiB on 1-MiB blocks over TBB's threads
// (the last one partial). Every byte must arrive on both sides of the threshold and of the blocks.
#include "interp/parallel_copy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tg::interp {
namespace {

TEST(ParallelCopy, CopiesEveryByteOnBothSidesOfItsThresholds) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  for (const std::size_t bytes : {std::size_t{0}, std::size_t{1}, 4 * kMiB - 1, 4 * kMiB, 4 * kMiB + 1, 5 * kMiB - 3,
                                  5 * kMiB, 9 * kMiB + 12345}) {
    std::vector<std::uint8_t> from(bytes), to(bytes + 1, 0xAB);
    for (std::size_t i = 0; i < bytes; ++i) from[i] = static_cast<std::uint8_t>((i * 131 + i / 4099) & 0xFF);
    parallel_copy(to.data(), from.data(), bytes);
    EXPECT_TRUE(std::equal(from.begin(), from.end(), to.begin())) << bytes << " bytes";
    EXPECT_EQ(to[bytes], 0xAB) << "wrote past " << bytes << " bytes";
  }
}

}  // namespace
}  // namespace tg::interp
