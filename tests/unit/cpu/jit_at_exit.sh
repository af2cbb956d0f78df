#!/usr/bin/env bash
# Runs jit-at-exit (JitAtExit.cpp) 20 times: each run must exit 0 and print its result, with no
# LLVM error from the JIT's teardown.
set -u
binary="$1"
for run in $(seq 1 20); do
  output=$("$binary" 2>&1)
  status=$?
  if [ "$status" -ne 0 ] || ! grep -q "tanh(0.375) = 0.358" <<<"$output"; then
    echo "run $run: exit status $status"
    echo "$output"
    exit 1
  fi
done
echo "20 runs exited cleanly"
