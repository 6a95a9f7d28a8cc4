#!/usr/bin/env bash
# expect_job_ends.sh SECONDS RANK COMMAND...: runs COMMAND (an mpiexec line in which rank RANK dies)
# under a time limit, and passes only when the job ends by itself, with a non-zero exit code and a
# launcher message naming RANK. CTests mpi.lost_rank and mpi.killed_rank: a rank that dies must end
# the whole job with an error that names it, never leave the other ranks waiting in a collective.
set -uo pipefail

limit=${1:?seconds}
rank=${2:?the rank that dies}
shift 2

# What Open MPI 4's mpirun prints: for a rank that exits non-zero,
#   "mpiexec detected that one or more processes exited with non-zero status ... Process name: [[61013,1],1]"
# (the last number is the rank); for one killed by a signal or exiting 0 without MPI_Finalize,
#   "mpiexec noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed)."
pattern="Process name: \[\[[0-9]+,[0-9]+\],$rank\]|process rank $rank with PID"

log=$(mktemp "${TMPDIR:-/tmp}/tg-mpi-job.XXXXXX")
trap 'rm -f "$log"' EXIT

start=$SECONDS
timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
rc=$?
elapsed=$((SECONDS - start))
cat "$log"
echo "== the job ended with exit code $rc after $elapsed s"

# 124: timeout stopped it. 137 is also what mpirun returns for a rank killed by SIGKILL, so only
# the clock tells that one apart from timeout's own KILL.
if [[ $rc -eq 124 || ($rc -eq 137 && $elapsed -ge $limit) ]]; then
  echo "FAIL: the job was still running after $limit s: the surviving ranks hang instead of ending" >&2
  exit 1
fi
if [[ $rc -eq 0 ]]; then
  echo "FAIL: the job exited 0 although rank $rank was lost" >&2
  exit 1
fi
if ! grep -Eq "$pattern" "$log"; then
  echo "FAIL: the job's output does not name rank $rank (no match for /$pattern/)" >&2
  exit 1
fi
echo "PASS: the job ended (exit code $rc) and its output names rank $rank"
