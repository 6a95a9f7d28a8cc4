#!/usr/bin/env bash
# CTest codegen.generate_ops: cmake/generate_ops.cmake on the real ops.def and on broken copies.
# Checks that the real list generates, that a rerun rewrites nothing (what keeps rebuilds small),
# that adding an op rewrites only its family's header and the lists, and that each malformed list
# is refused with a message naming the line.
#   generate_ops_test.sh <cmake> <source root>
set -euo pipefail
cmake=$1
root=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/tg-generate-ops.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

generate() {  # generate <ops.def> <out dir>: prints the generator's output, returns its status
  "$cmake" -DTG_OPS_DEF="$1" -DTG_OUT="$2" -P "$root/cmake/generate_ops.cmake" 2>&1
}

def=$root/include/tensorgrad/ir/ops/ops.def
generate "$def" "$work/out" >/dev/null || fail "the real ops.def does not generate"
header=$work/out/include/tensorgrad/ir/ops/ids/elementwise_unary.h
grep -q 'inline constexpr OpId Exp{' "$header" || fail "no op::Exp in $header"
grep -q 'const uint EW_EXP = ' "$work/out/shaders/ew_codes.glsl" || fail "no EW_EXP in ew_codes.glsl"

# A rerun leaves every file untouched (same mtime), so make sees no change.
find "$work/out" -type f -exec touch -d '2000-01-01' {} +
generate "$def" "$work/out" >/dev/null
changed=$(find "$work/out" -type f -newermt '2000-01-02')
[[ -z $changed ]] || fail "a rerun on the same ops.def rewrote: $changed"

# Adding an op to elementwise_unary rewrites its header, the lists and the op codes, nothing else.
sed 's/^TG_OP(StopGradient, "stop_gradient")$/&\nTG_EW(ZzProbe, "zz_probe", (const Tensor\& x))  \/\/ a probe/' "$def" >"$work/added.def"
grep -q ZzProbe "$work/added.def" || fail "could not insert the probe op (stop_gradient line moved?)"
generate "$work/added.def" "$work/out" >/dev/null || fail "ops.def with an added op does not generate"
changed=$(cd "$work/out" && find . -type f -newermt '2000-01-02' | sort | tr '\n' ' ')
expected="./include/tensorgrad/ir/ops/ids/elementwise_unary.h ./include/tensorgrad/ir/ops/op_list.inc ./private/vk/ew_codes.h ./shaders/ew_codes.glsl "
[[ $changed == "$expected" ]] || fail "adding an op rewrote [$changed], expected [$expected]"
grep -q 'Tensor zz_probe(const Tensor& x, TG_CALL_SITE);' "$header" || fail "no front-end declaration for zz_probe"
grep -q '^// a probe$' "$header" || fail "the trailing comment did not become the doc comment"
grep -q 'const uint EW_ZZ_PROBE = 15u;' "$work/out/shaders/ew_codes.glsl" || fail "EW_ZZ_PROBE is not the next unary code"
grep -q 'const uint EW_COPY = 16u;' "$work/out/shaders/ew_codes.glsl" || fail "EW_COPY did not move past the new code"

# Each broken list fails with its message.
expect_refusal() {  # expect_refusal <name> <ops.def text> <message fragment>
  printf '%s\n' "$2" >"$work/$1.def"
  if out=$(generate "$work/$1.def" "$work/bad-$1"); then fail "$1: a broken ops.def was accepted"; fi
  grep -qF -- "$3" <<<"$out" || fail "$1: message lacks '$3': $out"
}
expect_refusal before_family 'TG_OP(Add, "add")' 'ops.def:1: Add comes before any TG_FAMILY line'
expect_refusal duplicate_id $'TG_FAMILY(a)\nTG_OP(Add, "add")\nTG_OP(Add, "plus")' 'ops.def:3: identifier Add appears twice'
expect_refusal duplicate_name $'TG_FAMILY(a)\nTG_OP(Add, "add")\nTG_OP(Plus, "add")' 'ops.def:3: op name "add" appears twice'
expect_refusal duplicate_family $'TG_FAMILY(a)\nTG_FAMILY(a)' "ops.def:2: family 'a' appears twice"
expect_refusal ew_elsewhere $'TG_FAMILY(reduce)\nTG_EW(Sum, "sum")' 'ops.def:2: TG_EW(Sum) is only for the elementwise_unary and'
expect_refusal malformed $'TG_FAMILY(a)\nTG_OP(add, "add")' "ops.def:2: cannot read 'TG_OP(add, \"add\")'"
expect_refusal no_family '// nothing' 'ops.def: no TG_FAMILY line'
many=$'TG_FAMILY(elementwise_binary)'
for i in $(seq 0 16); do many+=$'\n'"TG_EW(B$i, \"b$i\")"; done
expect_refusal binary_codes "$many" 'ops.def: 17 TG_EW binary ops, more than the 16 codes'
echo "generate_ops: OK"
