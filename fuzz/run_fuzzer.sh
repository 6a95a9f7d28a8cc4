#!/usr/bin/env bash
# Runs one libFuzzer target as CTest's fuzz label does (cmake/fuzz.cmake), or for as long as asked.
#
#   fuzz/run_fuzzer.sh fuzz <fuzzer binary> <target> <work dir> [libFuzzer flags...]
#       Fuzzes for TG_FUZZ_SECONDS (default 30) seconds. New inputs go to <work dir>/corpus (kept
#       between runs), crashes to <work dir>/artifacts/; the seeds in fuzz/corpus/<target>/ and the
#       inputs in fuzz/regressions/<target>/ are read, never written. Extra flags pass through,
#       e.g. -jobs=8 -workers=8 (each job then runs TG_FUZZ_SECONDS and logs to <work dir>/fuzz-N.log).
#   fuzz/run_fuzzer.sh regressions <fuzzer binary> <target>
#       Runs each file of fuzz/regressions/<target>/ once, without fuzzing.
#
# Exits non-zero on a crash, a sanitizer report, a leak, an input running past 10 s or using more
# than 2 GiB.
set -euo pipefail

usage() { sed -n '2,12p' "$0" >&2; exit 2; }
[[ $# -ge 3 ]] || usage
mode=$1 fuzzer=$2 target=$3
shift 3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
regressions=$here/regressions/$target
limits=(-timeout=10 -rss_limit_mb=2048)
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
[[ -x $fuzzer ]] || { echo "run_fuzzer: $fuzzer is not built (target tg_fuzzers)" >&2; exit 2; }
fuzzer=$(readlink -f "$fuzzer")  # absolute: the fuzz mode changes directory

case $mode in
  regressions)
    shopt -s nullglob
    inputs=()
    for f in "$regressions"/*; do [[ -f $f && $(basename "$f") != README* ]] && inputs+=("$f"); done
    if [[ ${#inputs[@]} -eq 0 ]]; then
      echo "run_fuzzer: no regression inputs in $regressions"
      exit 0
    fi
    echo "run_fuzzer: replaying ${#inputs[@]} regression inputs of $target"
    exec "$fuzzer" "${limits[@]}" "${inputs[@]}"
    ;;
  fuzz)
    [[ $# -ge 1 ]] || usage
    work=$1
    shift
    seconds=${TG_FUZZ_SECONDS:-30}
    [[ $seconds =~ ^[0-9]+$ && $seconds -gt 0 ]] || { echo "run_fuzzer: TG_FUZZ_SECONDS must be a positive integer" >&2; exit 2; }
    mkdir -p "$work/corpus" "$work/artifacts"
    work=$(readlink -f "$work")
    dirs=("$work/corpus" "$here/corpus/$target")
    [[ -d $regressions ]] && dirs+=("$regressions")
    dict=()
    [[ -f $here/dict/$target.dict ]] && dict=("-dict=$here/dict/$target.dict")
    cd "$work"  # -jobs writes its fuzz-N.log files here
    status=0
    # libFuzzer stops itself after max_total_time; the outer timeout only catches a hung process.
    timeout --kill-after=30 $((seconds * 2 + 120)) "$fuzzer" -max_total_time="$seconds" "${limits[@]}" \
      -print_final_stats=1 -artifact_prefix="$work/artifacts/" "${dict[@]}" "$@" "${dirs[@]}" || status=$?
    if [[ $status -ne 0 ]]; then
      echo "run_fuzzer: $target failed (exit $status); the input is in $work/artifacts/." >&2
      echo "  Replay: $fuzzer <input>. Keep it as a regression: copy it to fuzz/regressions/$target/" >&2
      echo "  (docs/testing.md, \"Fuzzing\")." >&2
    fi
    exit $status
    ;;
  *) usage ;;
esac
