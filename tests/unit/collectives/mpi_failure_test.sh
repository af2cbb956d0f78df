#!/usr/bin/env bash
# A failing rank must end an MPI job quickly and say why, never hang it. Runs
#   MPIEXEC [MPIEXEC_ARGS...] -- BINARY MODE TIMEOUT
# and checks that the job ends within MAX_SECONDS, with a non-zero status, and that its output
# matches EXPECT (an extended regex).
# Usage: mpi_failure_test.sh MAX_SECONDS EXPECT MPIEXEC [ARGS...] -- BINARY MODE TIMEOUT
set -uo pipefail
max_seconds=$1 expect=$2
shift 2
launcher=()
while [[ $# -gt 0 && $1 != -- ]]; do
  launcher+=("$1")
  shift
done
shift # --
log=$(mktemp)
trap 'rm -f "$log"' EXIT

start=$(date +%s.%N)
# A hard limit past the bound, so a hang fails this test instead of stalling ctest.
timeout --kill-after=5 $((${max_seconds%.*} + 15)) "${launcher[@]}" "$@" >"$log" 2>&1
rc=$?
seconds=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {printf "%.1f", e - s}')
cat "$log"
echo "--- the job ended with status $rc after $seconds s"

status=0
if ((rc == 0)); then
  echo "FAILED: the job succeeded although a rank failed"
  status=1
fi
if ((rc == 124 || rc == 137)); then
  echo "FAILED: the job hung and was killed"
  status=1
fi
if ! awk -v s="$seconds" -v m="$max_seconds" 'BEGIN {exit !(s < m)}'; then
  echo "FAILED: the job took $seconds s, more than $max_seconds s"
  status=1
fi
if ! grep -qE "$expect" "$log"; then
  echo "FAILED: the output does not say /$expect/"
  status=1
fi
((status == 0)) && echo "ok: ended in $seconds s with status $rc, saying /$expect/"
exit $status
