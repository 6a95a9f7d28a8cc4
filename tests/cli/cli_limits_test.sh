#!/usr/bin/env bash
# CTest label cli: what `tg` refuses at the edges (docs/cli.md, "Numeric options", "tg run").
#   cli_limits_test.sh TG numbers       every numeric flag: plain decimals only, finite, in range (exit 2)
#   cli_limits_test.sh TG out_targets   --out replaces only a regular file (or one a symlink names): exit 3
#   cli_limits_test.sh TG memory        an input or value too large for the host: exit 6 with its bytes
set -uo pipefail

tg=${1:?usage: cli_limits_test.sh TG MODE}
mode=${2:?usage: cli_limits_test.sh TG MODE}
[[ $tg == */* ]] && tg=$(cd "$(dirname "$tg")" && pwd)/$(basename "$tg")  # out_targets changes directory
work=$(mktemp -d "${TMPDIR:-/tmp}/tg-cli-limits.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0

source "$(dirname "$0")/expect.sh"

cat >"$work/tiny.graph" <<'GRAPH'
graph tiny(%x: f32[2,3], param %w: f32[3,4], %idx: i32[5], %table: f32[6,2]) {
  %0 = matmul(%x, %w) : f32[2,4]
  %1 = tanh(%0) : f32[2,4]
  %2 = sum(%1) {axes=[0,1], keep_dims=false} : f32[]
  %3 = embedding(%table, %idx) : f32[5,2]
  return loss=%2, h=%1, e=%3
}
GRAPH
graph=$work/tiny.graph
run=("$tg" run "$graph" --backend interp_f32 -q)

case $mode in
  numbers)
    # --seed: an integer in [0, 2^64 - 1], nothing wrapped or saturated.
    for bad in -1 18446744073709551616 100000000000000000000000 1e3 0x10 1.5 abc ""; do
      expect_rc 2 "${run[@]}" --seed "$bad"
      expect_fixed "--seed: '$bad'"
    done
    expect_rc 2 "${run[@]}" --seed -1
    expect_fixed "is not a decimal integer in [0, 18446744073709551615]"
    expect_rc 2 "${run[@]}" --seed 18446744073709551616
    expect_fixed "is out of the range [0, 18446744073709551615]"
    # The largest seed works, and a leading zero is decimal: 010 draws what 10 draws.
    expect_rc 0 "${run[@]}" --seed 18446744073709551615
    "${run[@]}" --seed 010 >"$work/seed010" 2>&1 || fail "--seed 010 refused"
    "${run[@]}" --seed 10 >"$work/seed10" 2>&1 || fail "--seed 10 refused"
    cmp -s "$work/seed010" "$work/seed10" || fail "--seed 010 drew other inputs than --seed 10"
    "${run[@]}" --seed 8 >"$work/seed8" 2>&1
    cmp -s "$work/seed010" "$work/seed8" && fail "--seed 010 was read as octal 8"

    # --tolerance-scale: finite and >= 0 (0 stays: it demands exact agreement).
    for bad in nan NaN inf -inf 1e400 -1 -0.5 0x1p3; do
      expect_rc 2 "$tg" check "$graph" --backend interp_f32 -q --tolerance-scale "$bad"
      expect_fixed "--tolerance-scale: '$bad'"
    done
    expect_rc 2 "$tg" check "$graph" --backend interp_f32 -q --tolerance-scale nan
    expect_fixed "is not a finite number"
    expect_rc 2 "$tg" check "$graph" --backend interp_f32 -q --tolerance-scale -1
    expect_fixed "is negative: a value >= 0 is needed"
    expect_rc 0 "$tg" check "$graph" --backend interp_f32 -q --tolerance-scale 1.5

    # --f32-range: both bounds finite as floats, LO <= HI.
    expect_rc 2 "${run[@]}" --f32-range -1e39 1e39
    expect_fixed "is not finite as a float"
    expect_rc 2 "${run[@]}" --f32-range 0 3.5e38
    expect_fixed "--f32-range: '3.5e+38' is not finite as a float"
    expect_rc 2 "${run[@]}" --f32-range nan 1
    expect_fixed "--f32-range: 'nan' is not a finite number"
    expect_rc 2 "${run[@]}" --f32-range 3 1
    expect_fixed "--f32-range: need LO <= HI"
    expect_rc 0 "${run[@]}" --f32-range -3.4028234e38 3.4028234e38
    expect_rc 0 "${run[@]}" --f32-range 1 1

    # The integer flags of every subcommand: decimal, in range, with their sign rule.
    expect_rc 2 "${run[@]}" --show -1
    expect_fixed "--show: '-1' is negative"
    expect_rc 2 "${run[@]}" --show 0x5
    expect_fixed "--show: '0x5' is not a decimal integer"
    expect_rc 2 "$tg" check "$graph" --backend interp_f32 -q --worst 99999999999
    expect_fixed "--worst"
    expect_fixed "99999999999"
    expect_rc 2 "$tg" bench "$graph" --backend interp_f32 -q --repetitions 0
    expect_fixed "--repetitions: '0' is not positive"
    expect_rc 2 "$tg" bench "$graph" --backend interp_f32 -q --repetitions 2147483648
    expect_fixed "--repetitions"
    expect_rc 2 "$tg" bench "$graph" --backend interp_f32 -q --warmup 1.5
    expect_fixed "--warmup: '1.5' is not a decimal integer"
    expect_rc 0 "$tg" bench "$graph" --backend interp_f32 -q --repetitions 1 --warmup 0 --json "$work/b.json"
    ;;

  out_targets)
    cd "$work" || exit 1
    mkfifo fifo
    mkdir dir
    ln -s nowhere.safetensors dangling
    ln -s fifo to_fifo
    ln -s loop_b loop_a
    ln -s loop_a loop_b
    expect_rc 3 "${run[@]}" --out fifo
    expect_fixed "--out: safetensors file 'fifo': cannot save: it is a FIFO (named pipe), not a regular file"
    [[ -p fifo ]] || fail "--out replaced the FIFO"
    expect_rc 3 "${run[@]}" --out dir
    expect_fixed "it is a directory, not a regular file"
    [[ -d dir ]] || fail "--out replaced the directory"
    expect_rc 3 "${run[@]}" --out dangling
    expect_fixed "a symbolic link to 'nowhere.safetensors', which cannot be followed"
    [[ -e nowhere.safetensors ]] && fail "--out created the dangling link's target"
    expect_rc 3 "${run[@]}" --out to_fifo
    expect_fixed "a symbolic link to a FIFO (named pipe), not to a regular file"
    expect_rc 3 "${run[@]}" --out loop_a
    expect_fixed "Too many levels of symbolic links"
    # A device node: made here (tests run as root), so a broken save can replace only this copy.
    if mknod null c 1 3 2>"$work/mknod.err"; then
      expect_rc 3 "${run[@]}" --out null
      expect_fixed "it is a character device, not a regular file"
      [[ -c null ]] || fail "--out replaced the device node"
    else
      echo "note: device-node case skipped: mknod failed ($(cat "$work/mknod.err")); it needs root or CAP_MKNOD"
    fi
    # A symlink to a regular file: the file gets the outputs, the link stays.
    mkdir store
    echo old >store/outputs.safetensors
    ln -s store/outputs.safetensors latest.safetensors
    expect_rc 0 "${run[@]}" --out latest.safetensors
    [[ -L latest.safetensors && $(readlink latest.safetensors) == store/outputs.safetensors ]] ||
      fail "--out replaced the symlink"
    expect_rc 0 "${run[@]}" --out plain.safetensors
    cmp -s store/outputs.safetensors plain.safetensors || fail "the linked file does not hold the outputs"
    leftovers=$(find . -name '.*.tmp-*')
    [[ -z $leftovers ]] || fail "temporary files left behind: $leftovers"
    ;;

  memory)
    # 2^48 elements (the size limit of one tensor): 1 PiB as f32, past any host.
    printf 'graph big(%%x: f32[281474976710656]) {\n  %%0 = neg(%%x) : f32[281474976710656]\n  return y=%%0\n}\n' \
      >"$work/big_input.graph"
    expect_rc 6 "$tg" run "$work/big_input.graph" --backend interp_f32 -q
    expect_fixed "cannot draw input 'x' (f32[281474976710656]): its 281474976710656 elements need 1.00 PiB (1125899906842624 bytes)"
    # A small input broadcast to 2^48 elements: the run itself runs out of memory.
    printf 'graph wide(%%x: f32[1]) {\n  %%0 = broadcast_to(%%x) {shape=[281474976710656]} : f32[281474976710656]\n  return y=%%0\n}\n' \
      >"$work/big_value.graph"
    expect_rc 6 "$tg" run "$work/big_value.graph" --backend interp_f32 -q
    expect_fixed "out of host memory running graph 'wide' (its largest value, %0 = broadcast_to : f32[281474976710656], alone needs 1.00 PiB (1125899906842624 bytes) at 4 bytes an element)"
    expect_rc 6 "$tg" bench "$work/big_value.graph" --backend interp_f64 -q
    expect_fixed "alone needs 2.00 PiB (2251799813685248 bytes) at 8 bytes an element"
    ;;

  *)
    echo "unknown mode $mode" >&2
    exit 2
    ;;
esac

if [[ $failures != 0 ]]; then
  echo "$failures failures" >&2
  exit 1
fi
echo "cli limits $mode: all passed"
