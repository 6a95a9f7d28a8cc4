#!/usr/bin/env bash
# The Vulkan random-graph properties as several processes in parallel, each with its own RapidCheck
# seed: for a machine with many cores (the GPU machine's 16), where one process leaves most idle.
# A calibration run at scale 1 first, then PROCS processes at a scale sized to fill about 420 s.
#
#   scripts/soak_parallel.sh OUT_DIR [TESTS_DIR] [PROCS]   # TESTS_DIR default build/release/tests
#
# Writes calib.log, soak_<k>.log and plan.txt (the plan, every "checked N graphs" line, the seeds and
# the results) under OUT_DIR; exits non-zero when any run failed.
set -u
out=$1
bin=${2:-build/release/tests}/tg_vk_tests
procs=${3:-6}
filter='VkTest.Random*'
mkdir -p "$out"
t0=$(date +%s)
TG_PROPERTY_SCALE=1 "$bin" --gtest_filter="$filter" >"$out/calib.log" 2>&1
status=$?
t1=$(date +%s)
calib=$((t1 - t0))
[ "$calib" -lt 1 ] && calib=1
# Parallel processes share the cores: about twice the calibration time per scale unit.
scale=$((420 / (calib * 2)))
[ "$scale" -lt 1 ] && scale=1
[ "$scale" -gt 30 ] && scale=30
echo "calibration: scale 1 took ${calib}s; running $procs processes at scale $scale" | tee "$out/plan.txt"
pids=()
for p in $(seq 1 "$procs"); do
  TG_PROPERTY_SCALE=$scale timeout 500 "$bin" --gtest_filter="$filter" >"$out/soak_$p.log" 2>&1 &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
t2=$(date +%s)
echo "soak wall: $((t2 - t1)) s" >>"$out/plan.txt"
grep -h "^checked\|Using configuration\|PASSED\|FAILED\|passed" "$out"/calib.log "$out"/soak_*.log >>"$out/plan.txt"
total=$(grep -h "^checked" "$out"/soak_*.log | awk '{s += $2} END {print s + 0}')
echo "soak: $total Vulkan graphs in $((t2 - t1)) s" | tee -a "$out/plan.txt"
exit $status
