#!/usr/bin/env bash
# Installs the Debian 12 packages tensorgrad needs to build and test. Idempotent: a package that is
# already installed is skipped, and apt-get (update included) runs only when something is missing.
# Works as root (CI) or through sudo. TG_SKIP_SETUP=1 skips it (for machines set up another way).
set -euo pipefail

if [[ "${TG_SKIP_SETUP:-0}" == "1" ]]; then
  echo "setup: TG_SKIP_SETUP=1, not checking packages"
  exit 0
fi

packages=(
  build-essential cmake make          # compiler, CMake >= 3.25, make
  libtbb-dev                          # the interpreter's thread pool
  librapidcheck-dev libgtest-dev googletest  # property and unit tests
  libbenchmark-dev                    # benchmarks (TG_BUILD_BENCH)
  libvulkan-dev glslang-dev glslang-tools  # Vulkan executor, shader compiler
  mesa-vulkan-drivers vulkan-validationlayers  # lavapipe (Vulkan on the CPU) and validation
  libboost-dev python3
  libcli11-dev                        # command-line parsing: the tg tool (tools/tg) and examples/
  nlohmann-json3-dev                  # JSON: safetensors headers (src/train), tg bench output
  clang-format                        # the style check .ci/run makes (make format-check)
  clang-16 libclang-rt-16-dev llvm-16 # libFuzzer targets (fuzz/, label fuzz; llvm-symbolizer for stacks)
  libopenmpi-dev openmpi-bin          # MPI: tensorgrad_mpi, training across processes (src/distributed, label mpi)
)

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup: dpkg-query not found; this script targets Debian 12. Install the equivalents of:" >&2
  echo "  ${packages[*]}" >&2
  exit 1
fi

missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "installed" ]] || missing+=("$pkg")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
if [[ $(id -u) -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "setup: not root and no sudo; install these packages and rerun: ${missing[*]}" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
echo "setup: done"
