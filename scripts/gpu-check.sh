#!/usr/bin/env bash
# Runs every GPU test binary on the GPU machine and prints a short table last.
#
# How it is meant to be used (DESIGN.md, "The GPU machine"): that machine has the CUDA toolkit,
# CMake and ninja, but no MLIR and no package access, and receives at most 64 MiB with each
# command. So this script builds nothing. Build the test binaries here, statically linked
# against MLIR and LLVM (CUDA libraries stay dynamic), then send the repository with the
# binaries carried and run this script from its root there, in one command:
#     scripts/gpu-check.sh                  # runs build/bin/<each binary below>
#     SMELT_GPU_BIN=build-static/bin scripts/gpu-check.sh
# Extra arguments go to every binary (e.g. --gtest_filter='*Gpu*'). Logs go to
# $OUT/gpu-check (the device tool brings $OUT back) or /tmp/gpu-check.
# Record the table it prints, with the date and device, in bench/RESULTS.md.
#
# It finds what the binaries need at run time: CUDA libraries in the toolkit or in Python's
# site-packages (nvidia/*/lib), cuda_fp16.h for NVRTC (SMELT_CUDA_INCLUDE) and ptxas
# (SMELT_PTXAS). A binary that cannot start (a shared library missing) is a row of its own.
# On a machine with a GPU a skipped test counts as a failure: it means the GPU was not used.
# Exit status: 0 when every binary ran and no test failed (or was skipped beside a GPU).
set -uo pipefail
cd "$(dirname "$0")/.."

BINARIES=(cuda-codegen-tests)
BIN_DIR=${SMELT_GPU_BIN:-build/bin}
LOG_DIR=${OUT:-/tmp}/gpu-check
mkdir -p "$LOG_DIR"

# --- the device -----------------------------------------------------------------------------
device="no GPU found (nvidia-smi missing or failed)"
have_gpu=0
if command -v nvidia-smi >/dev/null &&
    smi=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null) &&
    [[ -n "$smi" ]]; then
  device=$(head -n1 <<<"$smi")
  have_gpu=1
fi

# --- what the binaries load -----------------------------------------------------------------
# CUDA's own folders first, then every nvidia/*/lib inside Python's site-packages.
lib_dirs=()
for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
  [[ -d $dir ]] && lib_dirs+=("$dir")
done
site_dirs=$(python3 -c 'import site, sys; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null || true)
while IFS= read -r site; do
  [[ -d "$site/nvidia" ]] || continue
  for dir in "$site"/nvidia/*/lib; do
    [[ -d $dir ]] && lib_dirs+=("$dir")
  done
done <<<"$site_dirs"
if ((${#lib_dirs[@]})); then
  export LD_LIBRARY_PATH="$(IFS=:; echo "${lib_dirs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

if [[ -z "${SMELT_CUDA_INCLUDE:-}" ]]; then
  for dir in /usr/local/cuda/include /usr/local/cuda/targets/x86_64-linux/include; do
    [[ -f $dir/cuda_fp16.h ]] && { export SMELT_CUDA_INCLUDE=$dir; break; }
  done
fi
if [[ -z "${SMELT_CUDA_INCLUDE:-}" ]]; then
  while IFS= read -r site; do
    for dir in "$site"/nvidia/cuda_runtime/include "$site"/nvidia/cu*/include; do
      [[ -f $dir/cuda_fp16.h ]] && { export SMELT_CUDA_INCLUDE=$dir; break 2; }
    done
  done <<<"$site_dirs"
fi
if [[ -z "${SMELT_PTXAS:-}" ]]; then
  for ptxas in /usr/local/cuda/bin/ptxas "$(command -v ptxas 2>/dev/null)"; do
    [[ -n $ptxas && -x $ptxas ]] && { export SMELT_PTXAS=$ptxas; break; }
  done
fi

# --- run each binary ------------------------------------------------------------------------
rows=()
status=0
for name in "${BINARIES[@]}"; do
  binary=$BIN_DIR/$name
  log=$LOG_DIR/$name.log
  if [[ ! -x $binary ]]; then
    rows+=("$name|-|-|-|-|-|not found at $binary (build it here and carry it)")
    status=1
    continue
  fi
  missing=$(ldd "$binary" 2>/dev/null | awk '/not found/ {print $1}' | tr '\n' ' ')
  if [[ -n $missing ]]; then
    rows+=("$name|-|-|-|-|-|cannot start, missing: $missing")
    status=1
    continue
  fi
  start=$(date +%s.%N)
  "$binary" "$@" >"$log" 2>&1
  rc=$?
  seconds=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {printf "%.1f", e - s}')
  count() { grep -oE "^\[  $1 *\] [0-9]+ test" "$log" | grep -oE '[0-9]+' | head -n1; }
  passed=$(count PASSED) failed=$(count FAILED) skipped=$(count SKIPPED)
  passed=${passed:-0} failed=${failed:-0} skipped=${skipped:-0}
  total=$((passed + failed + skipped))
  note="ok"
  if ((rc != 0 || failed > 0)); then
    note="FAILED (exit $rc): see $log"
    status=1
    echo "=== $name: failures ==="
    grep -E '^\[  FAILED  \]|Failure|error' "$log" | head -n 40
  elif ((skipped > 0 && have_gpu)); then
    note="SKIPPED beside a GPU: $(grep -m1 -A1 'Skipped' "$log" | tail -n1)"
    status=1
  elif ((skipped > 0)); then
    note="skipped: no GPU"
  fi
  corpus=$(grep -m1 -oE 'NVRTC rendered and compiled .*' "$log")
  [[ -n $corpus ]] && note="$note; $corpus"
  rows+=("$name|$total|$passed|$failed|$skipped|$seconds|$note")
done

# --- the table ------------------------------------------------------------------------------
echo
echo "gpu-check $(date -u +%Y-%m-%d) on $(hostname): $device"
printf '%-22s %6s %7s %7s %8s %8s  %s\n' binary tests passed failed skipped seconds note
for row in "${rows[@]}"; do
  IFS='|' read -r name total passed failed skipped seconds note <<<"$row"
  printf '%-22s %6s %7s %7s %8s %8s  %s\n' "$name" "$total" "$passed" "$failed" "$skipped" \
    "$seconds" "$note"
done
exit $status
