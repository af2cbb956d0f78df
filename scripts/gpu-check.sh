#!/usr/bin/env bash
# Runs every GPU test binary on the GPU machine and prints a short table last.
#
# How it is meant to be used (DESIGN.md, "The GPU machine"): that machine has the CUDA toolkit,
# CMake and ninja, but no MLIR and no package access, and receives at most 64 MiB with each
# command. So this script builds nothing. Here (no GPU needed), build the carried bundle:
#     scripts/gpu-bundle.sh     # -> gpu-bundle/{bin,lib,gpu-check.sh}, git-ignored, < 64 MiB
# (binaries linked statically against MLIR, LLVM and libstdc++; oneDNN, fmt and their needs in
# gpu-bundle/lib; NVRTC stays dynamic and is found below). Then, in a session whose task has
# the GPU machine, one call of the device tool runs it from the repository root there:
#     run(command="gpu-bundle/gpu-check.sh", carry=["gpu-bundle"], timeout_s=600)
# The table comes back in output_tail and the logs in $OUT/gpu-check/. Other ways to run it:
#     gpu-bundle/gpu-check.sh               # bin/ beside this script (the bundle's copy)
#     scripts/gpu-check.sh                  # gpu-bundle/bin if present, else build/bin
#     SMELT_GPU_BIN=build-static/bin scripts/gpu-check.sh
# Extra arguments go to every binary (e.g. --gtest_filter='*Gpu*'). Logs go to
# $OUT/gpu-check (the device tool brings $OUT back) or /tmp/gpu-check.
# Record the table it prints, with the date and device, in bench/RESULTS.md.
#
# It finds what the binaries need at run time: NVRTC (libnvrtc.so.13: CUDA 13) and other CUDA
# libraries in LD_LIBRARY_PATH, /usr/local/cuda*/lib*, or Python's site-packages
# (nvidia/*/lib), cuda_fp16.h for NVRTC (SMELT_CUDA_INCLUDE) and ptxas (SMELT_PTXAS). The
# bundle's binaries need glibc 2.36 or newer (built on Debian 12; the GPU machine's image,
# with Python 3.12, is newer). A binary that cannot start (a shared library
# missing) is a row of its own.
# On a machine with a GPU a skipped test counts as a failure: it means the GPU was not used.
# Exit status: 0 when every binary ran and no test failed (or was skipped beside a GPU).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.." # the repository root, from scripts/ or from gpu-bundle/

# nccl-gpu-tests: NCCL all-reduce on the GPU(s); libnccl.so.2 comes from the machine (a pip
# wheel's nvidia/nccl/lib or /usr/local/cuda/lib64, both searched below), never the bundle.
# cuda-runtime-tests: GPU memory (limits, preallocation, logical GPUs), cuBLASLt and cuDNN.
BINARIES=(cuda-codegen-tests cuda-runtime-tests nccl-gpu-tests)
# Benchmarks run after the tests; their output follows the table (exit 77: no GPU):
# cuBLASLt GEMM TFLOP/s, fused-chain GB/s against a device copy, the MLP training step on the
# GPU against the CPU and mixed_bf16 against f32.
BENCHMARKS=(smelt-bench-gemm smelt-bench-gpu-bandwidth smelt-bench-gpu-train)
# The GPU machine has no dataset-fashion-mnist: the bundle carries the first examples of the
# training split, which the training test and benchmark read.
if [[ -z ${SMELT_FASHION_MNIST:-} && ! -d /usr/share/datasets/fashion-mnist && -d $here/fashion-mnist ]]; then
  export SMELT_FASHION_MNIST=$here/fashion-mnist
fi
if [[ -n ${SMELT_GPU_BIN:-} ]]; then
  BIN_DIR=$SMELT_GPU_BIN
elif [[ -d $here/bin ]]; then
  BIN_DIR=$here/bin # this is the bundle's copy
elif [[ -d gpu-bundle/bin ]]; then
  BIN_DIR=gpu-bundle/bin
else
  BIN_DIR=build/bin
fi
LOG_DIR=${OUT:-/tmp}/gpu-check
mkdir -p "$LOG_DIR"

# Files the bundle carries compressed (scripts/gpu-bundle.sh): unpack. The binaries that link
# MLIR come in one solid archive (bin/large-binaries.tar.xz), the rest as bin/NAME.xz, lib/NAME.xz.
for archive in "$BIN_DIR"/*.tar.xz; do
  [[ -f $archive && ! -e $archive.unpacked ]] || continue
  tar -xJf "$archive" -C "$BIN_DIR" 2>/dev/null ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
      "$archive" "$BIN_DIR"
  touch "$archive.unpacked"
done
for packed in "$BIN_DIR"/*.xz "$BIN_DIR"/../lib/*.xz; do
  [[ -f $packed && $packed != *.tar.xz && ! -s ${packed%.xz} ]] || continue
  xz -dc "$packed" >"${packed%.xz}" 2>/dev/null ||
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
      "$packed" "${packed%.xz}"
  chmod a+rx "${packed%.xz}"
done

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
# The bundle's lib/ (also in the binaries' RPATH), CUDA's own folders, then every nvidia/*/lib
# inside Python's site-packages (pip's CUDA wheels), wherever a python3 or a usual prefix has one.
lib_dirs=()
[[ -d $BIN_DIR/../lib ]] && lib_dirs+=("$(cd "$BIN_DIR/../lib" && pwd)")
for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
    /usr/local/cuda-*/lib64 /usr/local/cuda-*/targets/x86_64-linux/lib; do
  [[ -d $dir ]] && lib_dirs+=("$dir")
done
site_dirs=$( {
  python3 -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null
  ls -d /opt/torch/.venv/lib/python3*/site-packages /usr/local/lib/python3*/*-packages /usr/lib/python3*/*-packages /opt/conda/lib/python3*/site-packages \
    "$HOME"/.local/lib/python3*/site-packages /usr/local/lib64/python3*/*-packages 2>/dev/null
} | awk '!seen[$0]++')
while IFS= read -r site; do
  [[ -n $site && -d "$site/nvidia" ]] || continue
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

nvrtc="libnvrtc: not found"
for name in "${BINARIES[@]}"; do
  if [[ -x $BIN_DIR/$name ]]; then
    found=$(ldd "$BIN_DIR/$name" 2>/dev/null | awk '/libnvrtc/ {sub(/^[ \t]+/, ""); sub(/ \(0x.*/, ""); print; exit}')
    [[ -n $found ]] && nvrtc=$found
    break
  fi
done

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
echo "binaries: $BIN_DIR; $nvrtc; cuda_fp16.h: ${SMELT_CUDA_INCLUDE:-not found}; ptxas: ${SMELT_PTXAS:-not found}"
printf '%-22s %6s %7s %7s %8s %8s  %s\n' binary tests passed failed skipped seconds note
for row in "${rows[@]}"; do
  IFS='|' read -r name total passed failed skipped seconds note <<<"$row"
  printf '%-22s %6s %7s %7s %8s %8s  %s\n' "$name" "$total" "$passed" "$failed" "$skipped" \
    "$seconds" "$note"
done

# --- benchmarks -----------------------------------------------------------------------------
for name in "${BENCHMARKS[@]}"; do
  binary=$BIN_DIR/$name
  log=$LOG_DIR/$name.log
  echo
  if [[ ! -x $binary ]]; then
    echo "$name: not found at $binary"
    status=1
    continue
  fi
  "$binary" >"$log" 2>&1
  rc=$?
  if ((rc == 77)); then
    echo "$(tail -n1 "$log")"
    ((have_gpu)) && status=1
  elif ((rc != 0)); then
    echo "$name: FAILED (exit $rc): see $log"
    tail -n 20 "$log"
    status=1
  else
    echo "$name:"
    cat "$log"
  fi
done
exit $status
