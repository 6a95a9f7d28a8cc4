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

LaunchThresholds& launch_thresholds_for_testing() { return g_thresholds; }

}  // namespace tg::vk
