#!/usr/bin/env bash
# The `install` CTest: installs the build tree into a temporary prefix, then configures, builds and
# runs tests/install/consumer against it through find_package(tensorgrad) -- with the same compiler,
# generator, build type and flags (sanitizer flags included) as the build under test.
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
