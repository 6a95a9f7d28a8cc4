#!/usr/bin/env bash
# Soak run of the random-graph properties: the Vulkan ones (tg_vk_tests, VkTest.Random*) and the
# interpreter's (tg_property_tests, RandomGraph.*) at TG_PROPERTY_SCALE times their CI counts. At
# the default scale of 45 the two Vulkan properties check over 100,000 graphs (about 2,400 per
# scale unit). Prints each property's count and the total Vulkan graphs per second at the end.
#
#   scripts/soak.sh [BUILD_DIR]          # default build/release; `make soak` builds first
#   TG_SOAK_SCALE=5 scripts/soak.sh      # a shorter run (about 12,000 Vulkan graphs)
#   RC_PARAMS="seed=..." scripts/soak.sh # a given seed (the run prints the seed it used)
#
# A failure prints the shrunk graph; with TG_WRITE_REGRESSIONS naming a directory it is also
# written there as a regression file (tests/golden/regressions/README.md).
set -euo pipefail
build_dir=${1:-build/release}
scale=${TG_SOAK_SCALE:-45}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

start=$(date +%s)
status=0
echo "== Vulkan random-graph properties at TG_PROPERTY_SCALE=$scale"
TG_PROPERTY_SCALE=$scale TG_VK_VALIDATION=${TG_VK_VALIDATION:-1} \
  "$build_dir/tests/tg_vk_tests" --gtest_filter='VkTest.Random*' 2>&1 | tee "$log" || status=1
vk_end=$(date +%s)
echo "== interpreter random-graph properties at TG_PROPERTY_SCALE=$scale"
TG_PROPERTY_SCALE=$scale "$build_dir/tests/tg_property_tests" --gtest_filter='RandomGraph.*' || status=1
end=$(date +%s)

# The Vulkan properties print "checked N graphs in M batches (...)".
graphs=$(awk '/^checked [0-9]+ graphs/ {sum += $2} END {print sum + 0}' "$log")
vk_seconds=$((vk_end - start))
rate=$(awk -v g="$graphs" -v s="$vk_seconds" 'BEGIN { printf "%.1f", (s > 0) ? g / s : 0 }')
echo "== soak: $graphs Vulkan graphs in ${vk_seconds} s ($rate graphs/s); interpreter properties $((end - vk_end)) s"
exit $status
