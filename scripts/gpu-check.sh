#!/usr/bin/env bash
# First contact with a GPU machine in one command: `smelt devices`, every GPU test binary, then
# the GPU benchmarks; writes the whole log and a JSON summary to its output folder and prints
# a short table last (docs/gpu.md: the order, what the JSON holds, how to read the table).
#
# How it is meant to be used (DESIGN.md, "The GPU machine"): that machine has the CUDA toolkit,
# CMake and ninja, but no MLIR and no package access, and receives at most 64 MiB with each
# command. So this script builds nothing. Here (no GPU needed), build the carried bundle:
#     scripts/gpu-bundle.sh     # -> gpu-bundle/{bin,lib,gpu-check.sh}, git-ignored, < 64 MiB
# (binaries linked statically against MLIR, LLVM and libstdc++; oneDNN, fmt and their needs in
# gpu-bundle/lib; NVRTC stays dynamic and is found below). Then, in a session whose task has
# the GPU machine, one call of the device tool runs it from the repository root there:
#     run(command="gpu-bundle/gpu-check.sh --budget 570", carry=["gpu-bundle"], timeout_s=600)
# The table comes back in output_tail, the logs and summary.json in $OUT/gpu-check/.
#
# Usage: gpu-check.sh [--out DIR] [--bin DIR] [--filter GTEST_FILTER] [--budget SECONDS]
#                     [--step-timeout SECONDS] [-- ARGS FOR EVERY TEST BINARY]
#   --out DIR        logs, gtest's JSON reports and summary.json (default $OUT/gpu-check, or
#                    /tmp/gpu-check without $OUT); emptied of a previous run's files first
#   --bin DIR        the binaries (default: bin/ beside this script in the bundle, else
#                    gpu-bundle/bin, else build/bin; SMELT_GPU_BIN also sets it)
#   --filter F       --gtest_filter=F for the test binaries
#   --budget S       the whole run's limit, 1200 s (20 minutes) by default: each binary runs
#                    under `timeout` with what is left (at most --step-timeout, 600 s), and
#                    those after the budget is spent are rows "not run"
# Record the table it prints, with the date and device, in bench/RESULTS.md.
#
# It finds what the binaries need at run time: NVRTC (libnvrtc.so.13: CUDA 13, linked, so
# found by the loader) and the CUDA libraries the runtime dlopens (SMELT_CUDA_LIBRARY_PATH,
# pip's nvidia/*/lib, /usr/local/cuda*: runtime/cuda/DynamicLibrary.h), cuda_fp16.h for NVRTC
# (SMELT_CUDA_INCLUDE) and ptxas (SMELT_PTXAS). The bundle's binaries need glibc 2.36 or newer
# (built on Debian 12; the GPU machine's image, with Python 3.12, is newer). A binary that
# cannot start (a shared library missing) is a row of its own, and a failing binary never
# stops the ones after it.
# On a machine with a GPU a skipped test counts as a failure: it means the GPU was not used.
# Exit status: 0 when every binary ran and no test failed (or was skipped beside a GPU).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

OUT_DIR=${OUT:-/tmp}/gpu-check
BIN_DIR=${SMELT_GPU_BIN:-}
filter=""
budget=1200
step_limit=600
while (($#)); do
  case $1 in
    --out) OUT_DIR=$2; shift 2 ;;
    --bin) BIN_DIR=$2; shift 2 ;;
    --filter) filter=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --step-timeout) step_limit=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,36p' "$here/$(basename "$0")"; exit 0 ;;
    *) break ;; # the rest goes to every test binary, as before the options existed
  esac
done
deadline=$((SECONDS + budget))
# Folders given relative to where it was started, before it moves to the repository root
# (from scripts/ or from gpu-bundle/), where the default bin/ folders are looked for.
OUT_DIR=$(realpath -m "$OUT_DIR")
[[ -n $BIN_DIR ]] && BIN_DIR=$(realpath -m "$BIN_DIR")
cd "$here/.."

# nccl-gpu-tests: NCCL all-reduce on the GPU(s); libnccl.so.2 comes from the machine (a pip
# wheel's nvidia/nccl/lib or /usr/local/cuda/lib64, both searched below), never the bundle.
# cuda-runtime-tests: GPU memory (limits, preallocation, logical GPUs), cuBLASLt and cuDNN.
BINARIES=(cuda-codegen-tests cuda-runtime-tests nccl-gpu-tests)
# Benchmarks run after the tests; their figures follow the table (exit 77: no GPU):
# cuBLASLt GEMM TFLOP/s, fused-chain GB/s against a device copy, the MLP training step on the
# GPU against the CPU and mixed_bf16 against f32.
BENCHMARKS=(smelt-bench-gemm smelt-bench-gpu-bandwidth smelt-bench-gpu-train)
# The GPU machine has no dataset-fashion-mnist: the bundle carries the first examples of the
# training split, which the training test and benchmark read.
if [[ -z ${SMELT_FASHION_MNIST:-} && ! -d /usr/share/datasets/fashion-mnist && -d $here/fashion-mnist ]]; then
  export SMELT_FASHION_MNIST=$here/fashion-mnist
fi
if [[ -z $BIN_DIR ]]; then
  if [[ -d $here/bin ]]; then
    BIN_DIR=$here/bin # this is the bundle's copy
  elif [[ -d gpu-bundle/bin ]]; then
    BIN_DIR=gpu-bundle/bin
  else
    BIN_DIR=build/bin
  fi
fi
mkdir -p "$OUT_DIR"
rm -f "$OUT_DIR"/*.log "$OUT_DIR"/*.json "$OUT_DIR"/steps.tsv "$OUT_DIR"/facts.tsv
exec > >(tee "$OUT_DIR/gpu-check.log") 2>&1 # the whole log, as printed

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
# scripts/setup.sh --cuda-wheels DIR: DIR itself or its nvidia/*/lib (NVRTC is linked, so the
# loader must find it; the runtime searches SMELT_CUDA_LIBRARY_PATH itself for the rest).
IFS=: read -ra smelt_paths <<<"${SMELT_CUDA_LIBRARY_PATH:-}"
for dir in "${smelt_paths[@]}"; do
  [[ -n $dir ]] || continue
  for lib in "$dir" "$dir"/nvidia/*/lib; do
    [[ -d $lib ]] && lib_dirs+=("$lib")
  done
done
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
  for dir in "${smelt_paths[@]}"; do # scripts/setup.sh --cuda-wheels: nvidia/cu13/include
    for include in "$dir"/nvidia/cu*/include; do
      [[ -f $include/cuda_fp16.h ]] && { export SMELT_CUDA_INCLUDE=$include; break 2; }
    done
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

# --- the facts the summary starts with ------------------------------------------------------
fact() { printf '%s\t%s\n' "$1" "$2" >>"$OUT_DIR/facts.tsv"; }
fact date "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
fact host "$(hostname)"
fact have_gpu "$have_gpu"
fact device "$device"
fact driver "$( ((have_gpu)) && cut -d, -f2 <<<"$device" | tr -d ' ')"
toolkit=""
for version in /usr/local/cuda/version.json /usr/local/cuda/version.txt; do
  [[ -f $version ]] || continue
  toolkit=$(grep -m1 -oE '"cuda"[^}]*"version" *: *"[0-9.]+"|CUDA Version [0-9.]+' "$version" |
    grep -oE '[0-9]+(\.[0-9]+)+' | tail -n1)
  break
done
[[ -z $toolkit ]] && command -v nvcc >/dev/null &&
  toolkit=$(nvcc --version | grep -oE 'release [0-9.]+' | cut -d' ' -f2)
fact cuda_toolkit "${toolkit:-not found (the runtime uses the CUDA libraries it finds: docs/gpu.md)}"
fact binaries "$BIN_DIR"
fact cuda_include "${SMELT_CUDA_INCLUDE:-not found}"
fact ptxas "${SMELT_PTXAS:-not found}"
echo "gpu-check: binaries in $BIN_DIR, output in $OUT_DIR, budget ${budget}s"
echo "device: $device"

# What is left of the budget for one binary, at most the step limit; 0 when it is spent.
step_timeout() {
  local left=$((deadline - SECONDS))
  ((left > step_limit)) && left=$step_limit
  ((left > 0)) && echo "$left" || echo 0
}

# 1. smelt devices: the GPUs as Smelt sees them and the versions of the libraries it loads.
echo; echo "=== smelt devices ==="
if [[ -x $BIN_DIR/smelt ]]; then
  timeout 60 "$BIN_DIR/smelt" devices 2>&1 | tee "$OUT_DIR/smelt-devices.log"
  while IFS= read -r line; do
    [[ $line =~ ^(CUDA\ driver|NVRTC|cuBLASLt|cuDNN|NCCL):\ (.*)$ ]] &&
      fact "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
  done <"$OUT_DIR/smelt-devices.log"
  fact smelt_devices "$(awk '{printf "%s\\n", $0}' "$OUT_DIR/smelt-devices.log")"
else
  # Without smelt, at least the NVRTC that the test binaries link, as the loader resolves it.
  nvrtc=$(ldd "$BIN_DIR/${BINARIES[0]}" 2>/dev/null | awk '/libnvrtc/ {sub(/^[ \t]+/, ""); sub(/ \(0x.*/, ""); print; exit}')
  echo "smelt: not found at $BIN_DIR/smelt; NVRTC: ${nvrtc:-not found}"
  fact NVRTC "${nvrtc:-not found}"
fi

# --- 2. the test binaries, 3. the benchmarks ------------------------------------------------
# Each row of steps.tsv: kind, name, exit status, seconds, why it did not run (empty if it did).
step() { printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$OUT_DIR/steps.tsv"; }
run_binary() { # kind name [arguments...]
  local kind=$1 name=$2 binary=$BIN_DIR/$2 log=$OUT_DIR/$2.log
  shift 2
  echo; echo "=== $name ==="
  if [[ ! -x $binary ]]; then
    echo "not found at $binary (build it here and carry it)"
    step "$kind" "$name" missing "" "not found at $binary (build it here and carry it)"
    return
  fi
  local missing
  missing=$(ldd "$binary" 2>/dev/null | awk '/not found/ {print $1}' | tr '\n' ' ')
  if [[ -n $missing ]]; then
    echo "cannot start, missing: $missing"
    step "$kind" "$name" missing "" "cannot start, missing: $missing"
    return
  fi
  local limit
  limit=$(step_timeout)
  if ((limit == 0)); then
    echo "not run: the ${budget}s budget is spent"
    step "$kind" "$name" missing "" "not run: the ${budget}s budget is spent"
    return
  fi
  local start=$SECONDS rc start_ns
  start_ns=$(date +%s%N)
  timeout --kill-after=10 "$limit" "$binary" "$@" >"$log" 2>&1
  rc=$?
  local seconds
  seconds=$(awk -v s="$start_ns" -v e="$(date +%s%N)" 'BEGIN {printf "%.1f", (e - s) / 1e9}')
  ((rc == 124 || rc == 137)) && echo "timed out after ${limit}s" >>"$log"
  if [[ $kind == benchmark ]]; then
    cat "$log"
  else
    tail -n 3 "$log"
  fi
  if [[ $kind == test && $rc != 0 ]]; then
    echo "--- $name: failures (exit $rc) ---"
    grep -E '^\[  FAILED  \]|Failure|error' "$log" | head -n 40
  fi
  step "$kind" "$name" "$rc" "$seconds" ""
}

test_args=()
[[ -n $filter ]] && test_args+=("--gtest_filter=$filter")
for name in "${BINARIES[@]}"; do
  run_binary test "$name" "--gtest_output=json:$OUT_DIR/$name.json" "${test_args[@]}" "$@"
done
for name in "${BENCHMARKS[@]}"; do
  run_binary benchmark "$name"
done

# --- the summary and the table, last --------------------------------------------------------
if ! command -v python3 >/dev/null; then
  echo "gpu-check: no python3 here to read gtest's reports; the rows are in $OUT_DIR/steps.tsv"
  cat "$OUT_DIR/steps.tsv"
  exit 1
fi
python3 "$here/gpu-check-summary.py" "$OUT_DIR"
