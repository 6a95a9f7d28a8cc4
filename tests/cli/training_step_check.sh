#!/usr/bin/env bash
# CTest label cli: `tg check` and `tg run` on a training step graph (docs/cli.md, "Checking a
# training step graph").
#   training_step_check.sh TG GRAPH
# GRAPH is the printed step graph of a Training (a 1-64-1 MLP, batch 64, Adam): tg draws its
# optimizer inputs from valid values (no NaN anywhere in the step), `tg check` without --no-grad
# refuses it (its gradients are already outputs), and with --no-grad passes, each output under the
# bound of its own cone, with the relative error next to the ulps.
set -uo pipefail

tg=${1:?usage: training_step_check.sh TG GRAPH}
graph=${2:?usage: training_step_check.sh TG GRAPH}
work=$(mktemp -d "${TMPDIR:-/tmp}/tg-step-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0

source "$(dirname "$0")/expect.sh"

for seed in 0 1 2; do
  # Adam's second moment under sqrt, the bias corrections and eps: drawn valid, so no output is NaN
  # (a NaN on both sides would pass the check and hide any error behind it).
  expect_rc 0 "$tg" run "$graph" --backend interp_f64 --seed "$seed" --show 0 -q
  expect_text "l1.b.new .*non-finite 0"
  if grep -Eq "non-finite [1-9]" "$work/out"; then
    fail "seed $seed: a step output holds NaN or Inf:"
    sed 's/^/    /' "$work/out" >&2
  fi
  expect_rc 0 "$tg" check "$graph" --backend interp_f32 --no-grad --seed "$seed" -q
  expect_text "^  ok   l1\.b\.new  f32\[64\]  0 of 64 elements off, largest error [0-9.e+-]+ ulps \(relative [0-9.e+-]+\); bound [0-9.]+ ulps of scale [0-9.]+ = "
  expect_text "^check passed$"
done

# Without --no-grad, tg check's own gradients (grad.<input>) collide with the step's.
expect_rc 3 "$tg" check "$graph" --backend interp_f32 -q
expect_text "already has an output named 'grad\.l1\.W' \(--no-grad checks the forward graph only\)"

if ((failures)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all training step checks passed"
