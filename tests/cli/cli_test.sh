#!/usr/bin/env bash
# CTest label cli: the `tg` tool (docs/cli.md) end to end on a small graph written here.
#   cli_test.sh TG help                    --help on the tool and every subcommand exits 0
#   cli_test.sh TG backend B               run (against a Python computation), check, bench, dot on backend B
#   cli_test.sh TG errors                  bad inputs exit with the documented codes and messages
#   cli_test.sh TG devices                 lists lavapipe; with no Vulkan driver exits 4
# Vulkan modes exit 77 (CTest's skip) when the machine has no usable Vulkan device.
set -uo pipefail

tg=${1:?usage: cli_test.sh TG MODE [BACKEND]}
mode=${2:?usage: cli_test.sh TG MODE [BACKEND]}
here=$(cd "$(dirname "$0")" && pwd)
st=(python3 "$here/st.py")
work=$(mktemp -d "${TMPDIR:-/tmp}/tg-cli-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0

source "$(dirname "$0")/expect.sh"
vulkan_usable() { "$tg" devices >/dev/null 2>&1; }

cat >"$work/tiny.graph" <<'GRAPH'
# loss = sum(tanh(x @ w)); e = embedding(table, idx)
graph tiny(%x: f32[2,3], param %w: f32[3,4], %idx: i32[5], %table: f32[6,2]) {
  %0 = matmul(%x, %w) : f32[2,4]
  %1 = tanh(%0) : f32[2,4]
  %2 = sum(%1) {axes=[0,1], keep_dims=false} : f32[]
  %3 = embedding(%table, %idx) : f32[5,2]
  return loss=%2, h=%1, e=%3
}
GRAPH
graph=$work/tiny.graph

case $mode in
  help)
    expect_rc 0 "$tg" --help
    expect_text "Exit codes"
    for sub in run check bench dot devices; do
      expect_rc 0 "$tg" "$sub" --help
      expect_text "Usage: .*$sub"
    done
    ;;

  backend)
    backend=${3:?backend mode needs a backend}
    if [[ $backend == vulkan ]] && ! vulkan_usable; then
      echo "SKIP: no usable Vulkan device"
      exit 77
    fi
    # run with given inputs: the outputs file against the same computation in Python.
    "${st[@]}" write-inputs "$work/in.safetensors"
    expect_rc 0 "$tg" run "$graph" --backend "$backend" --inputs "$work/in.safetensors" --out "$work/out.safetensors"
    expect_text "^loss  f32\[\]  min "
    expect_text "^h  f32\[2,4\]"
    "${st[@]}" check-outputs "$work/in.safetensors" "$work/out.safetensors" || fail "run --out on $backend: wrong outputs"
    # Drawn inputs: the same seed draws the same inputs, another seed others; indices stay in range.
    expect_rc 0 "$tg" run "$graph" --backend "$backend" --seed 5 --out "$work/a.safetensors" -q
    expect_rc 0 "$tg" run "$graph" --backend "$backend" --seed 5 --out "$work/b.safetensors" -q
    expect_rc 0 "$tg" run "$graph" --backend "$backend" --seed 6 --out "$work/c.safetensors" -q
    "${st[@]}" same "$work/a.safetensors" "$work/b.safetensors" || fail "same seed, different outputs"
    "${st[@]}" differ "$work/a.safetensors" "$work/c.safetensors" || fail "different seeds, same outputs"
    # Progress goes to stderr, silenced by --quiet.
    progress=$("$tg" run "$graph" --backend "$backend" 2>&1 >/dev/null)
    grep -q "^tg run: .*running" <<<"$progress" || fail "no progress lines: $progress"
    [[ -z $("$tg" run "$graph" --backend "$backend" -q 2>&1 >/dev/null) ]] || fail "--quiet still prints on stderr"
    # check: forward and autodiff graphs within the tolerance classes.
    expect_rc 0 "$tg" check "$graph" --backend "$backend"
    expect_text "^  ok   grad\.w  f32\[3,4\]"
    expect_text "^check passed$"
    # A graph without a "loss" output is differentiated through the sum of its f32 outputs.
    sed 's/return loss=%2, h=%1, e=%3/return h=%1, e=%3/' "$graph" >"$work/noloss.graph"
    expect_rc 0 "$tg" check "$work/noloss.graph" --backend "$backend" -q
    expect_text "^  ok   tg_check\.loss"
    expect_text "^  ok   grad\.table"
    if [[ $backend != interp_f64 ]]; then
      # Exact agreement demanded: tanh and matmul round differently in f32, so the check fails.
      expect_rc 1 "$tg" check "$graph" --backend "$backend" --tolerance-scale 0 -q
      expect_text "^  FAIL h  f32\[2,4\]"
      expect_text "^check FAILED$"
    fi
    # bench: Google Benchmark-shaped JSON with one entry per node, and the table on stderr.
    "$tg" bench "$graph" --backend "$backend" --repetitions 3 >"$work/bench.json" 2>"$work/bench.err"
    [[ $? == 0 ]] || fail "bench on $backend exited nonzero: $(cat "$work/bench.err")"
    python3 - "$work/bench.json" "$backend" <<'PY' || fail "bench JSON on $backend"
import json, sys
report = json.load(open(sys.argv[1]))
assert report["context"]["backend"] == sys.argv[2] and report["context"]["nodes"] == 4, report["context"]
entries = report["benchmarks"]
assert [e["op"] for e in entries] == ["matmul", "tanh", "sum", "embedding"], entries
for e in entries:
    assert e["name"].startswith(sys.argv[2] + "/%"), e["name"]
    assert e["iterations"] == 3 and e["time_unit"] == "us", e
    assert e["real_time"] >= 0 and e["oracle_real_time"] > 0, e
assert sum(e["real_time"] for e in entries) > 0
PY
    grep -q "speedup" "$work/bench.err" || fail "bench printed no table on stderr"
    expect_rc 0 "$tg" bench "$graph" --backend "$backend" --repetitions 2 --json "$work/b2.json" -q
    python3 -c 'import json,sys; assert len(json.load(open(sys.argv[1]))["benchmarks"]) == 4' "$work/b2.json" ||
      fail "bench --json"
    # dot
    expect_rc 0 "$tg" dot "$graph"
    head -c 7 "$work/out" | grep -q '^digraph' || fail "dot output does not start with digraph"
    # 16-bit dtypes: drawn f16 inputs, a cast to bf16, the types shown by run and dot.
    cat >"$work/half.graph" <<'GRAPH'
graph half(%x: f16[2,3]) {
  %0 = cast(%x) {dtype=bf16} : bf16[2,3]
  %1 = sum(%0) {axes=[1], keep_dims=false} : bf16[2]
  return y=%1, x16=%x
}
GRAPH
    expect_rc 0 "$tg" run "$work/half.graph" --backend "$backend" -q
    expect_text "^y  bf16\[2\]  min "
    expect_text "^x16  f16\[2,3\]  min "
    expect_rc 0 "$tg" dot "$work/half.graph"
    expect_text "cast.*dtype=bf16.*bf16\[2,3\]"
    ;;

  errors)
    expect_rc 3 "$tg" run "$work/missing.graph" --backend interp_f32
    expect_text "graph file '.*missing\.graph': no such file"
    expect_rc 3 "$tg" run "$work" --backend interp_f32
    expect_text "not a regular file"
    printf 'graph g(%%x: f32[2]) {\n  %%0 = bogus(%%x) : f32[2]\n  return y=%%0\n}\n' >"$work/bad.graph"
    expect_rc 3 "$tg" check "$work/bad.graph" --backend interp_f32
    expect_text "bad\.graph': parse error at line 2, column [0-9]+: unknown op 'bogus'"
    expect_rc 2 "$tg" run "$graph" --backend cuda
    expect_text "cuda not in"
    expect_rc 2 "$tg" run "$graph"
    expect_text "--backend is required"
    expect_rc 2 "$tg"
    expect_rc 2 "$tg" run "$graph" --backend interp_f32 --no-such-flag
    "${st[@]}" write "$work/type.safetensors" x I32 2,3 0 1 2 3 4 5
    expect_rc 3 "$tg" run "$graph" --backend interp_f32 --inputs "$work/type.safetensors"
    expect_text "input 'x' is i32\[2,3\] \(stored as I32\), the graph takes f32\[2,3\]"
    "${st[@]}" write "$work/shape.safetensors" x F32 3,2 0 1 2 3 4 5
    expect_rc 3 "$tg" bench "$graph" --backend interp_f32 --inputs "$work/shape.safetensors"
    expect_text "input 'x' is f32\[3,2\].*the graph takes f32\[2,3\]"
    "${st[@]}" write "$work/extra.safetensors" zz F32 1 1
    expect_rc 3 "$tg" check "$graph" --backend interp_f32 --inputs "$work/extra.safetensors"
    expect_text "tensor 'zz' is not an input of graph 'tiny'"
    echo garbage >"$work/garbage.safetensors"
    expect_rc 3 "$tg" run "$graph" --backend interp_f32 --inputs "$work/garbage.safetensors"
    expect_text "garbage\.safetensors"
    expect_rc 3 "$tg" run "$graph" --backend interp_f32 --inputs "$work/none.safetensors"
    expect_text "none\.safetensors"
    "${st[@]}" write "$work/index.safetensors" idx I32 5 0 1 2 3 99
    expect_rc 5 "$tg" run "$graph" --backend interp_f32 --inputs "$work/index.safetensors"
    expect_text "index 99 is out of range \[0, 6\)"
    expect_rc 4 env VK_ICD_FILENAMES="$work/no-driver.json" "$tg" run "$graph" --backend vulkan
    expect_text "backend vulkan unavailable"
    ;;

  devices)
    expect_rc 4 env VK_ICD_FILENAMES="$work/no-driver.json" "$tg" devices
    expect_text "no Vulkan devices"
    if ! vulkan_usable; then
      echo "SKIP: no usable Vulkan device"
      exit 77
    fi
    expect_rc 0 "$tg" devices
    expect_text "max storage buffer range"
    if ! grep -q "llvmpipe" "$work/out"; then
      # A machine with a GPU need not have lavapipe; lavapipe CI machines must list it.
      grep -q "\[cpu" "$work/out" && fail "a CPU Vulkan device that is not llvmpipe"
      echo "note: no lavapipe among the devices"
    fi
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
echo "cli $mode ${3:-}: all passed"
