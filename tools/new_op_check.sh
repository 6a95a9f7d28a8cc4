#!/usr/bin/env bash
# Checks tools/new_op on a temporary copy of this tree (the tracked files plus untracked, non-ignored
# ones); the tree itself is never written. CTest runs both modes (tests/CMakeLists.txt, label scaffold).
#
#   tools/new_op_check.sh args               the argument checks and a dry run: refused names,
#                                            families, arities and --ew each exit 1 with a message and
#                                            write nothing; a missing insertion point names its file
#                                            and writes nothing; a real run marks every stub TODO
#   tools/new_op_check.sh build [BUILD_DIR]  scaffolds an elementwise_unary --ew op and a reduce op,
#                                            configures and builds the copy (the library and a probe
#                                            linked against it), then checks the generated family
#                                            headers declare the constants and front-ends, and the
#                                            probe finds both ops registered, traces them and gets the
#                                            kernel stubs' RuntimeError from the interpreter
#
# BUILD_DIR (CTest passes its own) is a configured build of this tree with the Makefile generator.
# The copy is configured with its compiler and flags, and its outputs that are up to date (newer
# than every file their depfiles list, as make decides, with the same generated headers) are copied
# in before the scaffold runs. make then rebuilds exactly what the two ops change, as a developer's
# incremental build does, and the check lists those objects: 11 objects and 3 shaders, ~10 s on 2
# cores. Without BUILD_DIR, or when its compile flags differ from the copy's, the whole library is
# built: 89 objects and 29 shaders, 55 s on 2 idle cores (112 s with other work on the machine).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODE=${1:-}
PRIME=${2:-}
JOBS=${TG_CHECK_JOBS:-2}

fail() {
  echo "new_op_check: FAIL: $*" >&2
  exit 1
}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/tg-new-op-check.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
SRC=$TMP/src
mkdir -p "$SRC"

# The tree as git sees it: tracked files still present and untracked files git does not ignore.
copy_tree() {
  if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
      while IFS= read -r -d '' f; do [[ -f $f ]] && printf '%s\0' "$f"; done |
      tar --null -T - -cf -) | tar -C "$SRC" -xf -
  else
    tar -C "$ROOT" --exclude=./build --exclude=./.git -cf - . | tar -C "$SRC" -xf -
  fi
}

# sha256 of every file of the copy, to show that a refused run wrote nothing.
tree_sum() { (cd "$SRC" && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum); }

# expect_refusal "what" "message fragment" new_op arguments...: exit status 1, the fragment on
# stderr, and the copy unchanged.
expect_refusal() {
  local what=$1 fragment=$2
  shift 2
  local before rc=0
  before=$(tree_sum)
  "$SRC/tools/new_op" --root "$SRC" "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
  [[ $rc == 1 ]] || fail "$what: tools/new_op $* exited $rc, expected 1 ($(cat "$TMP/err"))"
  grep -qF -- "$fragment" "$TMP/err" || fail "$what: the message lacks '$fragment': $(cat "$TMP/err")"
  [[ $(tree_sum) == "$before" ]] || fail "$what: tools/new_op $* changed the tree although it refused"
  echo "ok: $what -> $(head -1 "$TMP/err")"
}

check_args() {
  copy_tree
  local before
  before=$(tree_sum)
  "$SRC/tools/new_op" --root "$SRC" zz_scaffold_check --family elementwise_unary --arity 1 --ew --dry-run \
    >"$TMP/dry" || fail "the dry run exited nonzero"
  grep -qF 'TG_EW(ZzScaffoldCheck, "zz_scaffold_check", (const Tensor& x))' "$TMP/dry" ||
    fail "the dry run does not show the ops.def line"
  for f in include/tensorgrad/ir/ops/ops.def src/ir/ops/elementwise_unary.cpp \
    src/interp/kernels/elementwise_unary.cpp shaders/elementwise_math.glsl docs/ops.md; do
    grep -qF "+++ b/$f" "$TMP/dry" || fail "the dry run shows no edit of $f"
  done
  [[ $(tree_sum) == "$before" ]] || fail "the dry run wrote to the tree"
  echo "ok: --dry-run prints the six edits and writes nothing"

  # Every family's files still have the insertion points the scaffold looks for.
  local family
  for family in $(sed -n 's/^TG_FAMILY(\([a-z0-9_]*\)).*/\1/p' "$SRC/include/tensorgrad/ir/ops/ops.def"); do
    "$SRC/tools/new_op" --root "$SRC" zz_scaffold_dry --family "$family" --arity 1 --dry-run >"$TMP/out" 2>&1 ||
      fail "tools/new_op --dry-run for the $family family: $(cat "$TMP/out")"
  done
  [[ $(tree_sum) == "$before" ]] || fail "the dry runs wrote to the tree"
  echo "ok: a dry run finds every insertion point in each family of ops.def"

  expect_refusal "unknown family" "unknown family 'nosuchfamily'" zz_op --family nosuchfamily --arity 1
  expect_refusal "name not snake_case" "not lower_snake_case" ZzOp --family reduce --arity 1
  expect_refusal "double underscore" "not lower_snake_case" zz__op --family reduce --arity 1
  expect_refusal "C++ keyword" "C++ keyword" delete --family reduce --arity 1
  expect_refusal "existing op" "already an op of the elementwise_unary family" relu --family reduce --arity 1
  expect_refusal "existing front-end" "already a front-end function" stack --family structure --arity 2
  expect_refusal "arity 0" "--arity must be 1, 2 or 3" zz_op --family reduce --arity 0
  expect_refusal "arity not a number" "--arity must be 1, 2 or 3" zz_op --family reduce --arity many
  expect_refusal "--ew outside the elementwise families" "--ew is only for" zz_op --family reduce --arity 1 --ew
  expect_refusal "--ew binary with one input" "take 2 input(s)" zz_op --family elementwise_binary --arity 1 --ew

  # A missing insertion point names the file, and nothing is written (every point is found first).
  sed -i 's/void register_reduce_kernels(KernelTable<T>& table) {/void register_reduce(KernelTable<T>\& table) {/' \
    "$SRC/src/interp/kernels/reduce.cpp"
  expect_refusal "missing register function" "src/interp/kernels/reduce.cpp: no 'template <class T> void register_reduce_kernels" \
    zz_op --family reduce --arity 1
  rm -rf "$SRC" && mkdir -p "$SRC" && copy_tree

  # A real run: every file it names carries the op's TODO marker, and a second run is refused.
  "$SRC/tools/new_op" --root "$SRC" zz_scaffold_pair --family elementwise_binary --arity 2 --ew >"$TMP/out" ||
    fail "tools/new_op zz_scaffold_pair exited nonzero: $(cat "$TMP/out")"
  local edited
  edited=$(sed -n 's/^  \([^ :]*\): .*/\1/p' "$TMP/out" | sort -u)
  [[ $(wc -l <<<"$edited") -ge 5 ]] || fail "tools/new_op listed fewer than five edited files: $edited"
  for f in $edited; do
    [[ $f == */ops.def ]] && continue
    grep -qF 'TODO(zz_scaffold_pair)' "$SRC/$f" || fail "$f has no TODO(zz_scaffold_pair) after the scaffold"
  done
  grep -qF 'TG_EW(ZzScaffoldPair, "zz_scaffold_pair", (Operand a, Operand b))' "$SRC/include/tensorgrad/ir/ops/ops.def" ||
    fail "ops.def has no TG_EW line for zz_scaffold_pair"
  # The docs section has the six fields OpsDoc.EveryOpSectionHasTheSixFields asks for.
  awk '/^### `zz_scaffold_pair`$/{on=1; next} /^#/{on=0} on' "$SRC/docs/ops.md" >"$TMP/section"
  for field in "Seed name:" "Signature:" "Semantics:" "Gradient:" "PyTorch:" "Bad input:"; do
    grep -qF "$field" "$TMP/section" || fail "docs/ops.md: the zz_scaffold_pair section has no '$field' line"
  done
  echo "ok: a real run edits $(wc -l <<<"$edited") files, each marked TODO(zz_scaffold_pair)"
  if command -v clang-format >/dev/null; then
    local cpp
    cpp=$(grep '\.cpp$' <<<"$edited" | sed "s|^|$SRC/|")
    # shellcheck disable=SC2086
    clang-format --dry-run --Werror $cpp 2>"$TMP/format" || fail "the scaffold's C++ is not clang-format clean: $(cat "$TMP/format")"
    echo "ok: the edited C++ files are clang-format clean"
  fi
  expect_refusal "second run" "already an op of the elementwise_binary family" \
    zz_scaffold_pair --family elementwise_binary --arity 2 --ew
  echo "new_op_check args: OK"
}

# The probe: compiled and linked against the scaffolded library like a user's program.
write_probe() {
  cat >"$SRC/examples/zz_scaffold_probe.cpp" <<'EOF'
// Written by tools/new_op_check.sh into a scaffolded copy of the tree: the scaffold's ops are declared
// by their ops.def lines, defined, registered, traceable, and their interpreter kernels are stubs.
#include <functional>
#include <iostream>
#include <string>

#include "tensorgrad/interp/interpreter.h"
#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/ids/elementwise_unary.h"
#include "tensorgrad/ir/ops/ids/reduce.h"
#include "tensorgrad/ir/ops/op_def.h"
#include "tensorgrad/ir/tensor.h"
#include "tensorgrad/vk/executor.h"

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::cerr << "probe: " << what << "\n";
    ++failures;
  }
}

// A TG_EW op gets its Vulkan kernel from its ops.def line; any other op has none until one is written.
void probe(tg::OpId op, const std::string& name, const std::string& family, bool vk_kernel,
           const std::function<tg::Tensor(const tg::Tensor&)>& front_end) {
  expect(tg::find_op(name) == op, name + ": find_op does not return its constant");
  expect(tg::op_name(op) == name, name + ": op_name is '" + std::string(tg::op_name(op)) + "'");
  expect(tg::op_family(op) == family, name + ": op_family is '" + std::string(tg::op_family(op)) + "'");
  expect(tg::op_def(op).name == name && tg::op_def(op).arity == 1, name + ": op_def has another name or arity");
  expect(tg::interp_has_kernel(op), name + ": no interpreter kernel registered");
  expect(tg::vk::has_kernel(op) == vk_kernel, name + (vk_kernel ? ": no" : ": a") + " Vulkan kernel registered");
  tg::GraphBuilder builder;
  const tg::Tensor x = builder.input("x", tg::TensorType{tg::DType::f32, {2, 3}});
  builder.output("y", front_end(x));
  const tg::TensorMap inputs{{"x", tg::HostTensor::f32({2, 3}, {1, 2, 3, 4, 5, 6})}};
  try {
    tg::interpret(builder.graph(), inputs);
    expect(false, name + ": the interpreter ran the kernel stub without an error");
  } catch (const tg::RuntimeError& error) {
    expect(std::string(error.what()).find(name + ": kernel not written yet") != std::string::npos,
           name + ": unexpected RuntimeError: " + error.what());
  }
}

}  // namespace

int main() {
  probe(tg::op::ZzScaffoldCheck, "zz_scaffold_check", "elementwise_unary", true,
        [](const tg::Tensor& x) { return tg::zz_scaffold_check(x); });
  probe(tg::op::ZzScaffoldReduce, "zz_scaffold_reduce", "reduce", false,
        [](const tg::Tensor& x) { return tg::zz_scaffold_reduce(x); });
  if (failures == 0) {
    std::cout << "probe: both scaffolded ops are registered (Vulkan: the TG_EW op only) and run into their kernel "
                 "stubs\n";
  }
  return failures == 0 ? 0 : 1;
}
EOF
  cat >>"$SRC/CMakeLists.txt" <<'EOF'

# tools/new_op_check.sh: a program using the scaffolded ops, built and run against the library.
add_executable(tg_zz_scaffold_probe examples/zz_scaffold_probe.cpp)
target_link_libraries(tg_zz_scaffold_probe PRIVATE tensorgrad)
target_compile_options(tg_zz_scaffold_probe PRIVATE ${TG_WARNINGS})
EOF
}

# The cache entries of BUILD_DIR that decide the library's compile and link lines.
cache_args() {
  local cache=$1/CMakeCache.txt var value
  for var in CMAKE_BUILD_TYPE CMAKE_CXX_COMPILER CMAKE_CXX_FLAGS CMAKE_CXX_FLAGS_DEBUG CMAKE_CXX_FLAGS_RELEASE \
    CMAKE_CXX_FLAGS_RELWITHDEBINFO CMAKE_EXE_LINKER_FLAGS TG_WERROR; do
    value=$(sed -n "s/^$var:[A-Z]*=//p" "$cache")
    [[ -n $value ]] && printf '%s\0' "-D$var=$value"
  done
}

# Copies BUILD_DIR's up-to-date objects, SPIR-V and embedded shader source into the copy's build,
# with their depfiles' paths moved to the copy, all dated just after the configure step.
prime_build() {
  python3 - "$ROOT" "$PRIME" "$SRC" "$BLD" <<'EOF'
import os, re, shutil, sys, time
root, prime, src, bld = (os.path.realpath(p) for p in sys.argv[1:])
target = "CMakeFiles/tensorgrad.dir"

def moved(text):
    # The build directory may sit inside the source tree: move its paths first.
    return text.replace(prime + "/", bld + "/").replace(root + "/", src + "/")

def read(path):
    with open(path) as f:
        return f.read()

flags = moved(read(f"{prime}/{target}/flags.make"))
if flags != read(f"{bld}/{target}/flags.make"):
    print(f"prime: {prime}'s compile flags differ from the copy's: building everything")
    sys.exit(0)
flags_time = os.stat(f"{prime}/{target}/flags.make").st_mtime_ns

def deps_of(depfile):
    text = read(depfile).replace("\\\n", " ")
    _, _, rest = text.partition(": ")
    return [p.replace("\\ ", " ") for p in re.findall(r"(?:\\ |\S)+", rest)]

same_cache = {}

def same_in_copy(dep):
    """A file of the build directory (a generated header) has the same text as the copy's own."""
    if dep not in same_cache:
        mine = moved(dep)
        same_cache[dep] = os.path.exists(mine) and read(dep) == read(mine)
    return same_cache[dep]

def up_to_date(output, depfile):
    """make's rule (newer than every dependency), plus: headers generated from ops.def read the same
    in the copy (a build directory not rebuilt since ops.def changed has older ones)."""
    if not os.path.exists(output) or not os.path.exists(depfile):
        return False
    built = os.stat(output).st_mtime_ns
    if built < flags_time:
        return False
    for dep in deps_of(depfile):
        if not os.path.exists(dep) or os.stat(dep).st_mtime_ns > built:
            return False
        if dep.startswith(prime + "/") and not same_in_copy(dep):
            return False
    return True

base = time.time()
primed, stale = [], []

def copy(rel, stamp, depfile_rel=None):
    os.makedirs(os.path.dirname(f"{bld}/{rel}"), exist_ok=True)
    shutil.copyfile(f"{prime}/{rel}", f"{bld}/{rel}")
    os.utime(f"{bld}/{rel}", (stamp, stamp))
    if depfile_rel:
        with open(f"{bld}/{depfile_rel}", "w") as f:
            f.write(moved(read(f"{prime}/{depfile_rel}")))
        os.utime(f"{bld}/{depfile_rel}", (stamp, stamp))
    primed.append(rel)

spvs = sorted(f"shaders/{n}" for n in os.listdir(f"{prime}/shaders") if n.endswith(".spv"))
all_spv = True
for spv in spvs:
    if up_to_date(f"{prime}/{spv}", f"{prime}/{spv}.d"):
        copy(spv, base, f"{spv}.d")
    else:
        all_spv = False
        stale.append(spv)
embedded = "shaders/embedded_shaders.cpp"
if all_spv and os.path.exists(f"{prime}/{embedded}") and all(
        os.stat(f"{prime}/{embedded}").st_mtime_ns >= os.stat(f"{prime}/{s}").st_mtime_ns for s in spvs):
    copy(embedded, base + 0.5)
for dirpath, _, names in os.walk(f"{prime}/{target}"):
    for name in sorted(names):
        if not name.endswith(".o"):
            continue
        rel = os.path.relpath(f"{dirpath}/{name}", prime)
        if up_to_date(f"{prime}/{rel}", f"{prime}/{rel}.d"):
            copy(rel, base + 1.0, f"{rel}.d")
        else:
            stale.append(rel)
print(f"prime: {len(primed)} up-to-date outputs copied from {prime}, {len(stale)} left to build"
      + (": " + " ".join(os.path.basename(s) for s in stale[:8]) if stale else ""))
# Whatever the scaffold writes next must be newer than every primed output.
time.sleep(max(0.0, base + 2.0 - time.time()))
EOF
}

check_build() {
  local t0 t1 log=$TMP/build.log
  t0=$(date +%s)
  copy_tree
  write_probe
  BLD=$SRC/build
  local -a config=()
  local prime_ok=0
  if [[ -n $PRIME && -f $PRIME/CMakeCache.txt && -f $PRIME/CMakeFiles/tensorgrad.dir/flags.make ]] &&
    grep -q '^CMAKE_GENERATOR:INTERNAL=Unix Makefiles$' "$PRIME/CMakeCache.txt"; then
    PRIME=$(cd "$PRIME" && pwd)
    mapfile -d '' config < <(cache_args "$PRIME")
    prime_ok=1
  else
    config=(-DCMAKE_BUILD_TYPE=Release)
    echo "no Makefile build directory to reuse objects from: building the whole library"
  fi
  cmake -S "$SRC" -B "$BLD" -G "Unix Makefiles" "${config[@]}" -DTG_BUILD_TESTS=OFF -DTG_BUILD_BENCH=OFF \
    -DTG_BUILD_FUZZERS=OFF >"$TMP/configure.log" 2>&1 || {
    tail -30 "$TMP/configure.log"
    fail "configuring the copy failed"
  }
  t1=$(date +%s)
  echo "copied and configured in $((t1 - t0)) s"
  [[ $prime_ok == 1 ]] && prime_build

  "$SRC/tools/new_op" --root "$SRC" zz_scaffold_check --family elementwise_unary --arity 1 --ew >"$TMP/new_op.log" ||
    fail "tools/new_op zz_scaffold_check failed: $(cat "$TMP/new_op.log")"
  "$SRC/tools/new_op" --root "$SRC" zz_scaffold_reduce --family reduce --arity 1 >>"$TMP/new_op.log" ||
    fail "tools/new_op zz_scaffold_reduce failed: $(cat "$TMP/new_op.log")"
  grep -E '^tools/new_op: added' "$TMP/new_op.log"

  t0=$(date +%s)
  if ! cmake --build "$BLD" --target tensorgrad tg_zz_scaffold_probe -j"$JOBS" >"$log" 2>&1; then
    grep -E -B2 -A12 'error|Error' "$log" | head -60
    fail "the scaffolded copy does not build (tools/new_op's stubs must compile; log above)"
  fi
  t1=$(date +%s)
  echo "built in $((t1 - t0)) s: $(grep -c 'Building CXX object' "$log") objects compiled," \
    "$(grep -c 'Compiling shader' "$log") shaders:"
  sed -n 's/.*Building CXX object CMakeFiles\/[^/]*\.dir\/\(.*\)\.o$/  \1/p; s/.*Compiling shader \(.*\) to SPIR-V$/  \1/p' "$log"

  local gen=$BLD/generated/include/tensorgrad/ir/ops/ids
  grep -qF 'inline constexpr OpId ZzScaffoldCheck{' "$gen/elementwise_unary.h" ||
    fail "$gen/elementwise_unary.h does not declare op::ZzScaffoldCheck"
  grep -qF 'Tensor zz_scaffold_check(const Tensor& x, TG_CALL_SITE);' "$gen/elementwise_unary.h" ||
    fail "$gen/elementwise_unary.h does not declare the front-end tg::zz_scaffold_check"
  grep -qF 'inline constexpr OpId ZzScaffoldReduce{' "$gen/reduce.h" ||
    fail "$gen/reduce.h does not declare op::ZzScaffoldReduce"
  grep -qF 'Tensor zz_scaffold_reduce(const Tensor& x, TG_CALL_SITE);' "$gen/reduce.h" ||
    fail "$gen/reduce.h does not declare the front-end tg::zz_scaffold_reduce"
  grep -qE '^const uint EW_ZZ_SCAFFOLD_CHECK = [0-9]+u;' "$BLD/generated/shaders/ew_codes.glsl" ||
    fail "generated/shaders/ew_codes.glsl has no EW_ZZ_SCAFFOLD_CHECK"
  echo "ok: the generated family headers declare both constants and front-ends, ew_codes.glsl the op code"
  "$BLD/tg_zz_scaffold_probe" || fail "the probe program failed (above)"
  echo "new_op_check build: OK"
}

case $MODE in
  args) check_args ;;
  build) check_build ;;
  *)
    echo "usage: tools/new_op_check.sh args | build [BUILD_DIR]" >&2
    exit 2
    ;;
esac
