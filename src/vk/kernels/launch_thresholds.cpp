// The launch choices' thresholds and their test-scale override (kernels.h).
#include "vk/kernels/kernels.h"

namespace tg::vk {

namespace {
LaunchThresholds g_thresholds;
}  // namespace

const LaunchThresholds& launch_thresholds() { return g_thresholds; }

ScopedSmallLaunchThresholdsForTesting::ScopedSmallLaunchThresholdsForTesting() : previous_(g_thresholds) {
  g_thresholds.large_tile_min_tiles = 1;
  g_thresholds.serial_combine_max_parts = 2;
  g_thresholds.one_dispatch_max_blocks = 4;
  g_thresholds.serial_pool_max_compares = 8;
  g_thresholds.conv_few_tiles_split_min_k = 32;
}

ScopedSmallLaunchThresholdsForTesting::~ScopedSmallLaunchThresholdsForTesting() { g_thresholds = previous_; }

ScopedConvKernelForTesting::ScopedConvKernelForTesting(LaunchThresholds::ConvKernel kernel)
    : previous_(g_thresholds.conv_kernel) {
  g_thresholds.conv_kernel = kernel;
}

ScopedConvKernelForTesting::~ScopedConvKernelForTesting() { g_thresholds.conv_kernel = previous_; }

ScopedMatmulKernelForTesting::ScopedMatmulKernelForTesting(LaunchThresholds::ConvKernel kernel)
    : previous_(g_thresholds.matmul_kernel) {
  g_thresholds.matmul_kernel = kernel;
}

ScopedMatmulKernelForTesting::~ScopedMatmulKernelForTesting() { g_thresholds.matmul_kernel = previous_; }

ScopedLongSumsForTesting::ScopedLongSumsForTesting(LaunchThresholds::LongSums sums)
    : previous_(g_thresholds.long_sums) {
  g_thresholds.long_sums = sums;
}

ScopedLongSumsForTesting::~ScopedLongSumsForTesting() { g_thresholds.long_sums = previous_; }

}  // namespace tg::vk
