#!/usr/bin/env bash
# Runs a mutant's GPU tests on the emulated GPU and passes only when the expected test fails
# (its "[  FAILED  ]" line), not when the binary crashes or the test passes.
# Usage: expect_failure.sh BINARY EMUCUDA_DIR GTEST_FILTER EXPECTED_FAILING_TEST
set -uo pipefail
binary=$1 emucuda=$2 filter=$3 expected=$4
log=$(mktemp)
trap 'rm -f "$log"' EXIT
SMELT_CUDA_LIBRARY_PATH=$emucuda SMELT_CUDA_SOURCE_DIR=$emucuda/kernels SMELT_EXPECT_GPU=1 \
  "$binary" --gtest_filter="$filter" >"$log" 2>&1
rc=$?
tail -n 25 "$log"
if ((rc == 0)); then
  echo "FAIL: the mutant passed $filter: the emulation did not catch it"
  exit 1
fi
if ((rc > 128)); then
  echo "FAIL: the mutant crashed (exit $rc) instead of failing a test"
  exit 1
fi
grep -qF "[  FAILED  ] $expected" "$log" ||
  { echo "FAIL: $expected did not fail (exit $rc)"; exit 1; }
echo "ok: the mutant fails $expected"
