#!/usr/bin/env bash
# The `install` CTest: installs the build tree into a temporary prefix, then configures, builds and
# runs tests/install/consumer against it through find_package(tensorgrad) -- with the same compiler,
# generator, build type and flags (sanitizer flags included) as the build under test -- and then runs
# the installed `tg` tool from <prefix>/bin.
#
# Settings come from the environment (tests/CMakeLists.txt sets them):
#   TG_BUILD_DIR  the configured and built tensorgrad build tree (required)
#   TG_CMAKE      cmake to use (default: cmake)       TG_CXX       C++ compiler
#   TG_GENERATOR  CMake generator                     TG_BUILD_TYPE  CMAKE_BUILD_TYPE
#   TG_CXX_FLAGS  CMAKE_CXX_FLAGS                     TG_LINKER_FLAGS  CMAKE_EXE_LINKER_FLAGS
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build_dir=${TG_BUILD_DIR:?TG_BUILD_DIR must name the tensorgrad build tree}
cmake=${TG_CMAKE:-cmake}

work=$(mktemp -d "${TMPDIR:-/tmp}/tg-install-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

echo "== install $build_dir -> $prefix"
"$cmake" --install "$build_dir" --prefix "$prefix"

for f in include/tensorgrad/tensorgrad.h include/tensorgrad/ir/ops/ids.h include/tensorgrad/ir/ops/ids/matmul.h; do
  [[ -f $prefix/$f ]] || { echo "FAIL: $f was not installed" >&2; exit 1; }
done
compgen -G "$prefix/lib*/libtensorgrad.*" >/dev/null || { echo "FAIL: no libtensorgrad installed" >&2; exit 1; }
compgen -G "$prefix/lib*/cmake/tensorgrad/tensorgradConfig.cmake" >/dev/null ||
  { echo "FAIL: no tensorgradConfig.cmake installed" >&2; exit 1; }

configure=("$cmake" -S "$here/consumer" -B "$work/build" "-DCMAKE_PREFIX_PATH=$prefix")
[[ -n ${TG_GENERATOR:-} ]] && configure+=(-G "$TG_GENERATOR")
[[ -n ${TG_CXX:-} ]] && configure+=("-DCMAKE_CXX_COMPILER=$TG_CXX")
[[ -n ${TG_BUILD_TYPE:-} ]] && configure+=("-DCMAKE_BUILD_TYPE=$TG_BUILD_TYPE")
[[ -n ${TG_CXX_FLAGS:-} ]] && configure+=("-DCMAKE_CXX_FLAGS=$TG_CXX_FLAGS")
[[ -n ${TG_LINKER_FLAGS:-} ]] && configure+=("-DCMAKE_EXE_LINKER_FLAGS=$TG_LINKER_FLAGS")

echo "== configure consumer"
"${configure[@]}"
echo "== build consumer"
"$cmake" --build "$work/build" -j 2
echo "== run consumer"
"$work/build/tg_install_consumer"

# The tg tool (tools/tg, docs/cli.md): installed into <prefix>/bin, exported by the package as
# tensorgrad::tg (the consumer's configure wrote where that target points), and working from there:
# --help, and run and check on a small graph with given inputs.
echo "== the installed tg tool"
tg=$prefix/bin/tg
[[ -x $tg ]] || { echo "FAIL: $tg was not installed" >&2; exit 1; }
[[ $(cat "$work/build/tg_path.txt") == "$tg" ]] ||
  { echo "FAIL: tensorgrad::tg names $(cat "$work/build/tg_path.txt"), not $tg" >&2; exit 1; }
"$tg" --help >/dev/null || { echo "FAIL: tg --help exited $?" >&2; exit 1; }
cat >"$work/consumer.graph" <<'GRAPH'
graph consumer(%x: f32[2,2], param %w: f32[2,1]) {
  %0 = matmul(%x, %w) : f32[2,1]
  %1 = sum(%0) {axes=[0,1], keep_dims=false} : f32[]
  return loss=%1
}
GRAPH
# The inputs as safetensors, x = [[1,2],[3,4]] and w = [[1],[1]]: loss = 10.
python3 - "$work/xw.safetensors" <<'PY'
import struct, json, sys
data = struct.pack("<4f", 1, 2, 3, 4) + struct.pack("<2f", 1, 1)
header = json.dumps({"x": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
                     "w": {"dtype": "F32", "shape": [2, 1], "data_offsets": [16, 24]}}).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(header)) + header + data)
PY
"$tg" run "$work/consumer.graph" --backend interp_f32 --inputs "$work/xw.safetensors" --out "$work/out.safetensors" \
  >"$work/run.txt" || { echo "FAIL: tg run exited $?" >&2; exit 1; }
cat "$work/run.txt"
grep -q '^loss  f32\[\]  min 10  max 10  mean 10 ' "$work/run.txt" || { echo "FAIL: tg run: loss is not 10" >&2; exit 1; }
[[ -s $work/out.safetensors ]] || { echo "FAIL: tg run --out wrote nothing" >&2; exit 1; }
"$tg" check "$work/consumer.graph" --backend interp_f32 -q | tail -1 | grep -q '^check passed$' ||
  { echo "FAIL: tg check did not pass" >&2; exit 1; }
echo "install test: OK"
