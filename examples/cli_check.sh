#!/usr/bin/env bash
# Checks an example's command line (CTest label examples, examples/CMakeLists.txt):
#   cli_check.sh help BINARY FLAG...
#     BINARY --help exits 0, and its output lists every FLAG, each with its default (CLI11's
#     "--steps INT=300", or "default: ..." in the description of a switch).
#   cli_check.sh refuses BINARY "ARGS|FRAGMENT"...
#     for each case, BINARY ARGS (split on spaces) exits nonzero before choosing a backend, and its
#     output holds FRAGMENT (the flag or value that was wrong).
set -uo pipefail

mode=${1:?mode: help or refuses}
binary=${2:?the example binary}
shift 2
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

case $mode in
  help)
    out=$(timeout 30 "$binary" --help 2>&1)
    rc=$?
    printf '%s\n' "$out"
    [[ $rc == 0 ]] || fail "$binary --help exited $rc"
    for flag in "$@"; do
      # The flag's entry: its line, and the description wrapped onto the next when the line is full.
      entry=$(grep -E -A1 -- "^ +${flag}( |$)" <<<"$out")
      [[ -n $entry ]] || { fail "--help does not list $flag"; continue; }
      grep -qE -- "^ +${flag} [A-Z]+(:[^=]*)?=[^ ]|default: " <<<"$entry" || fail "--help lists $flag without its default: $entry"
    done
    ;;
  refuses)
    for case in "$@"; do
      args=${case%%|*}
      fragment=${case#*|}
      # shellcheck disable=SC2086  # ARGS is a list of words
      out=$(timeout 30 "$binary" $args 2>&1)
      rc=$?
      echo "== $binary $args -> exit $rc"
      printf '%s\n' "$out"
      [[ $rc != 0 && $rc != 124 ]] || fail "$binary $args exited $rc, want a usage error"
      grep -qF -- "$fragment" <<<"$out" || fail "$binary $args: the message does not name '$fragment'"
      ! grep -q '^backend:' <<<"$out" || fail "$binary $args started (chose a backend) before refusing"
    done
    ;;
  *)
    echo "unknown mode $mode" >&2
    exit 2
    ;;
esac
[[ $failures == 0 ]]
