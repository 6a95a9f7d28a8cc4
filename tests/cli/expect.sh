# Shared by the cli test scripts (sourced): failure counting and expectations on one command's
# output. The caller sets `work` (a temporary directory) and `failures=0` before using them.

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
# expect_rc CODE CMD...: runs CMD, keeps its stdout+stderr in $work/out, fails unless it exits CODE.
expect_rc() {
  local want=$1
  shift
  "$@" >"$work/out" 2>&1
  local rc=$?
  if [[ $rc != "$want" ]]; then
    fail "exit $rc (expected $want): $*"
    sed 's/^/    /' "$work/out" >&2
  fi
}
# expect_text PATTERN: the last command's output matches the extended regex.
expect_text() {
  grep -Eq -- "$1" "$work/out" || { fail "output lacks /$1/:"; sed 's/^/    /' "$work/out" >&2; }
}
# expect_fixed STRING: the last command's output holds STRING (fixed text, not a regex).
expect_fixed() {
  grep -Fq -- "$1" "$work/out" || { fail "output lacks '$1':"; sed 's/^/    /' "$work/out" >&2; }
}
