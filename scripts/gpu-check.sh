#!/usr/bin/env bash
# First contact with a GPU machine in one command: `smelt devices`, each GPU test suite in its
# own process, then the GPU benchmarks in their quick forms; leaves exactly two files in its
# output folder, gpu-check.tar.gz (every log and report) and summary.json, and prints a short
# table last (docs/gpu.md: the order, what the JSON holds, how to read the table).
#
# How it is meant to be used (DESIGN.md, "The GPU machine"): that machine has the CUDA toolkit,
# CMake and ninja, but no MLIR and no package access, receives at most 64 MiB with each command
# and returns at most 8 files from $OUT; a session gets about 15 minutes of device time in all.
# So this script builds nothing. Here (no GPU needed), build the carried bundle:
#     scripts/gpu-bundle.sh     # -> gpu-bundle/{bin,lib,gpu-check.sh}, git-ignored, < 64 MiB
# (binaries linked statically against MLIR, LLVM and libstdc++; oneDNN, fmt and their needs in
# gpu-bundle/lib; NVRTC stays dynamic and is found below). Then, in a session whose task has
# the GPU machine, one call of the device tool runs it from the repository root there:
#     run(command="gpu-bundle/gpu-check.sh", carry=["gpu-bundle"], timeout_s=480)
# The table comes back in output_tail; gpu-check.tar.gz and summary.json in $OUT (2 of the 8
# files allowed). The default budget, 420 s, keeps one run within 8 minutes of device time, so
# a second one (after a fix) still fits the session's 15.
# Dry run here on the emulated CUDA (tests/emucuda; slow: kernels run on a CPU SIMT emulator):
#     OUT=/tmp/gc-out SMELT_CUDA_LIBRARY_PATH=$PWD/build/emucuda \
#       SMELT_CUDA_SOURCE_DIR=/tmp/gc-kernels \
#       scripts/gpu-check.sh --bin build/bin --budget 900 --step-timeout 120
# (smelt-bench-gemm and -gpu-bandwidth time out there: the emulator is too slow for their sizes).
#
# Usage: gpu-check.sh [--out DIR] [--bin DIR] [--filter GTEST_FILTER] [--budget SECONDS]
#                     [--step-timeout SECONDS] [-- ARGS FOR EVERY TEST PROCESS]
#   --out DIR        where gpu-check.tar.gz and summary.json go, and nothing else (default $OUT,
#                    or /tmp/gpu-check without $OUT); the run works in a temporary folder and
#                    moves the two in at the end, replacing a previous run's
#   --bin DIR        the binaries (default: bin/ beside this script in the bundle, else
#                    gpu-bundle/bin, else build/bin; SMELT_GPU_BIN also sets it)
#   --filter F       run the tests gtest filter F picks instead of the GPU suites (CPU-only
#                    suites too, if it names them), still one process a suite
#   --budget S       the whole run's limit, 420 s by default: each suite and benchmark runs
#                    under `timeout` with what is left (at most --step-timeout, 120 s), and
#                    those after the budget is spent are rows "not run"
# Record the table it prints, with the date and device, in bench/RESULTS.md.
#
# It finds what the binaries need at run time: the CUDA libraries they dlopen, NVRTC
# (libnvrtc.so.13) among them (SMELT_CUDA_LIBRARY_PATH, pip's nvidia/*/lib, /usr/local/cuda*,
# LD_LIBRARY_PATH: runtime/cuda/DynamicLibrary.h), cuda_fp16.h for NVRTC
# (SMELT_CUDA_INCLUDE) and ptxas (SMELT_PTXAS). The bundle's binaries need glibc 2.36 or newer
# (built on Debian 12; the GPU machine's image, with Python 3.12, is newer). A binary that
# cannot start (a shared library missing) is a row of its own; a suite that crashes or times
# out is a row saying so, and never stops the ones after it (a sticky CUDA error dies with its
# process). Where the only GPU is the emulated one, the summary says so and the benchmark
# figures are marked "emulated": they measure the emulator, not a GPU.
# Beside a GPU (emulated too) SMELT_EXPECT_GPU=1 is set and a skipped test counts as a failure:
# it means the GPU was not used.
# Exit status: 0 when every step ran and no test failed (or was skipped beside a GPU).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

OUT_DIR=${OUT:-/tmp/gpu-check}
BIN_DIR=${SMELT_GPU_BIN:-}
filter=""
budget=420
step_limit=120
while (($#)); do
  case $1 in
    --out) OUT_DIR=$2; shift 2 ;;
    --bin) BIN_DIR=$2; shift 2 ;;
    --filter) filter=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --step-timeout) step_limit=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1' "$here/$(basename "$0")"; exit 0 ;;
    *) break ;; # the rest goes to every test process, as before the options existed
  esac
done
# The steps stop 15 s before the budget: time for `timeout` to kill a hung one (5 s) and for
# the summary and the archive.
deadline=$((SECONDS + budget - 15))
# Folders given relative to where it was started, before it moves to the repository root
# (from scripts/ or from gpu-bundle/), where the default bin/ folders are looked for.
OUT_DIR=$(realpath -m "$OUT_DIR")
[[ -n $BIN_DIR ]] && BIN_DIR=$(realpath -m "$BIN_DIR")
cd "$here/.." || exit 1

# cuda-codegen-tests: NVRTC's kernels on the GPU against the CPU, the GPU executor, placed
# execution; cuda-runtime-tests: GPU memory (limits, preallocation, logical GPUs), cuBLASLt,
# cuDNN, the GPU executor on a hand-built matmul chain; nccl-gpu-tests: NCCL all-reduce on the
# GPU(s) (libnccl.so.2 comes from the machine: a pip wheel's nvidia/nccl/lib or
# /usr/local/cuda/lib64, both searched below, never the bundle).
BINARIES=(cuda-codegen-tests cuda-runtime-tests nccl-gpu-tests)
# The suites that need a device, one process each: the only ones run here (without --filter).
# The rest of these binaries only compile (NVRTC, ptxas), render or check arguments, with no
# device, and CI runs them already (against the emulated CUDA too); they are CPU_SUITES.
# The rule is these two explicit lists: a new GPU suite must be added to GPU_SUITES, a new
# CPU-only one to CPU_SUITES. A suite in neither still runs, noted "unlisted" in the table, so
# that a new GPU suite is not left out unseen; a GPU_SUITES name the binary lacks is a row "not
# run" (the list is stale). A parameterized suite is named as gtest lists it: Prefix/Suite.
declare -A GPU_SUITES=(
  [cuda-codegen-tests]="CudaGpu Cases/CudaGpuNumerics GpuExecutor PlacedExecutionOnGpu Models/TrainStepOnGpu"
  [cuda-runtime-tests]="CublasLt CudnnGpu GpuExecutorChain GpuMemory"
  [nccl-gpu-tests]="NcclGpu NcclReplicas"
)
declare -A CPU_SUITES=(
  [cuda-codegen-tests]="CudaCompile Cases/CudaCompile CudaCorpus CudaRender Models/CudaModelCorpus Models/CudaRegisterSpills Targets PlacedExecution"
  [cuda-runtime-tests]="CublasLtErrors CudnnValidation"
  [nccl-gpu-tests]=""
)
# Benchmarks run after the tests, each with its quick form's arguments where it has one; their
# figures follow the table (exit 77: no GPU): cuBLASLt GEMM TFLOP/s, fused-chain GB/s against a
# device copy, the MLP training step on the GPU against the CPU and mixed_bf16 against f32.
BENCHMARKS=(smelt-bench-gemm smelt-bench-gpu-bandwidth smelt-bench-gpu-train)
declare -A BENCHMARK_ARGS=([smelt-bench-gpu-train]="--small")
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

# Everything is written in a temporary folder, archived whole at the end (finish, below), and
# only the archive and summary.json go into OUT_DIR: the device tool returns at most 8 files.
mkdir -p "$OUT_DIR"
rm -f "$OUT_DIR/gpu-check.tar.gz" "$OUT_DIR/summary.json"
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
LOGS=$work/gpu-check # the archive's one folder
mkdir -p "$LOGS"
exec 3>&1 4>&2 # the terminal, for after the log is closed
exec > >(tee "$LOGS/gpu-check.log") 2>&1 # the whole log, as printed
tee_pid=$!

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

# --- the device -----------------------------------------------------------------------------
# nvidia-smi names a real GPU. `smelt devices` (step 1, below) says what the runtime found, and
# whether it is the emulated CUDA (tests/emucuda): that counts as a GPU for the skip rule, but
# its timings measure a CPU emulator, so the summary and the table say "emulated".
device="no GPU found (nvidia-smi missing or failed)"
have_gpu=0
emulated=0
if command -v nvidia-smi >/dev/null &&
    smi=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null) &&
    [[ -n "$smi" ]]; then
  device=$(head -n1 <<<"$smi")
  have_gpu=1
fi

fact() { printf '%s\t%s\n' "$1" "$2" >>"$LOGS/facts.tsv"; }
echo "gpu-check: binaries in $BIN_DIR, output in $OUT_DIR (gpu-check.tar.gz, summary.json)," \
  "budget ${budget}s, at most ${step_limit}s a step"

# 1. smelt devices: the GPUs as Smelt sees them and the versions of the libraries it loads.
echo; echo "=== smelt devices ==="
if [[ -x $BIN_DIR/smelt ]]; then
  timeout 60 "$BIN_DIR/smelt" devices 2>&1 | tee "$LOGS/smelt-devices.log"
  while IFS= read -r line; do
    [[ $line =~ ^(CUDA\ driver|NVRTC|cuBLASLt|cuDNN|NCCL):\ (.*)$ ]] &&
      fact "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
  done <"$LOGS/smelt-devices.log"
  fact smelt_devices "$(awk '{printf "%s\\n", $0}' "$LOGS/smelt-devices.log")"
  gpus=$(grep -E '^gpu:[0-9]+ ' "$LOGS/smelt-devices.log")
  if grep -q '(emulated)' <<<"$gpus"; then
    emulated=1
    have_gpu=1
    device="emulated: $(head -n1 <<<"$gpus" | sed -E 's/^gpu:[0-9]+ +//; s/ \(emulated\)//')"
    device+=" ($(wc -l <<<"$gpus") GPUs)"
  fi
else
  # Without smelt (which names the NVRTC it opens), the one the loader would find.
  nvrtc=$(ldconfig -p 2>/dev/null | awk '/libnvrtc\.so\.13 / {print $NF; exit}')
  echo "smelt: not found at $BIN_DIR/smelt; NVRTC: ${nvrtc:-not found by ldconfig}"
  fact NVRTC "${nvrtc:-not found by ldconfig}"
fi
echo "device: $device"
((emulated)) && echo "(the emulated CUDA: kernels run on a CPU SIMT emulator; no timing here measures a GPU)"
# Beside a GPU a test that skips fails instead, saying why (tests/unit/GpuSkip.h).
((have_gpu)) && export SMELT_EXPECT_GPU=${SMELT_EXPECT_GPU:-1}

# --- the facts the summary starts with ------------------------------------------------------
fact date "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
fact host "$(hostname)"
fact have_gpu "$have_gpu"
fact emulated "$emulated"
fact device "$device"
if ((emulated)); then
  fact driver "emulated"
else
  fact driver "$( ((have_gpu)) && cut -d, -f2 <<<"$device" | tr -d ' ')"
fi
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

# --- 2. the test suites, 3. the benchmarks --------------------------------------------------
# What is left of the budget for one step, at most the step limit; 0 when it is spent.
step_timeout() {
  local left=$((deadline - SECONDS))
  ((left > step_limit)) && left=$step_limit
  ((left > 0)) && echo "$left" || echo 0
}
# Each row of steps.tsv: kind (test|benchmark), binary, suite (empty: the whole binary), exit
# status ("missing": not run; "none": nothing to run), seconds, why it did not run (empty if
# it ran), a note.
step() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$LOGS/steps.tsv"; }
# A step's log and report: BINARY.log, or BINARY.Prefix_Suite.log for a suite
# (gpu-check-summary.py names them the same way).
stem() { local suite=${2//\//_}; echo "$1${2:+.$suite}"; }
seconds_since() { awk -v s="$1" -v e="$(date +%s%N)" 'BEGIN {printf "%.1f", (e - s) / 1e9}'; }

startable() { # kind name: the binary is there and its libraries are; else a row, and false
  local binary=$BIN_DIR/$2 missing
  if [[ ! -x $binary ]]; then
    echo; echo "=== $2 ==="; echo "not found at $binary (build it here and carry it)"
    step "$1" "$2" "" missing "" "not found at $binary (build it here and carry it)" ""
    return 1
  fi
  missing=$(ldd "$binary" 2>/dev/null | awk '/not found/ {print $1}' | tr '\n' ' ')
  if [[ -n $missing ]]; then
    echo; echo "=== $2 ==="; echo "cannot start, missing: $missing"
    step "$1" "$2" "" missing "" "cannot start, missing: $missing" ""
    return 1
  fi
}

run_step() { # kind binary suite note [arguments...]: one process under timeout, one row
  local kind=$1 name=$2 suite=$3 note=$4 binary=$BIN_DIR/$2
  shift 4
  local log limit rc start_ns seconds
  log=$LOGS/$(stem "$name" "$suite").log
  echo; echo "=== $name${suite:+ $suite} ==="
  limit=$(step_timeout)
  if ((limit == 0)); then
    echo "not run: the ${budget}s budget is spent"
    step "$kind" "$name" "$suite" missing "" "not run: the ${budget}s budget is spent" "$note"
    return
  fi
  start_ns=$(date +%s%N)
  timeout --kill-after=5 "$limit" "$binary" "$@" >"$log" 2>&1
  rc=$?
  seconds=$(seconds_since "$start_ns")
  ((rc == 124 || rc == 137)) && echo "timed out after ${limit}s" >>"$log"
  if [[ $kind == benchmark ]]; then
    cat "$log"
  else
    tail -n 3 "$log"
  fi
  if [[ $kind == test && $rc != 0 ]]; then
    echo "--- $name${suite:+ $suite}: failures (exit $rc) ---"
    # gtest's failure lines and the message under each ("Expected: ...").
    grep -E -A1 '^\[  FAILED  \]|Failure$|error' "$log" | grep -v '^--$' | head -n 40
  fi
  step "$kind" "$name" "$suite" "$rc" "$seconds" "" "$note"
}

in_words() { [[ " $2 " == *" $1 "* ]]; } # word list: is $1 one of the words of $2?

run_tests() { # binary [arguments for every process]: its suites, one process each
  local name=$1 binary=$BIN_DIR/$1
  shift
  startable test "$name" || return
  # Its suites and tests as gtest lists them: "Suite." (or "Prefix/Suite.") then "  Test".
  local list=$LOGS/$name.list limit rc start_ns
  limit=$(step_timeout)
  ((limit > 60)) && limit=60
  if ((limit == 0)); then
    step test "$name" "" missing "" "not run: the ${budget}s budget is spent" ""
    return
  fi
  start_ns=$(date +%s%N)
  timeout --kill-after=5 "$limit" "$binary" --gtest_list_tests ${filter:+"--gtest_filter=$filter"} \
    >"$list" 2>&1
  rc=$?
  if ((rc == 124 || rc == 137)); then
    echo; echo "=== $name ==="; echo "timed out listing its tests after ${limit}s" | tee -a "$list"
    cp "$list" "$LOGS/$name.log"
    step test "$name" "" "$rc" "$(seconds_since "$start_ns")" "" "while listing its tests"
    return
  fi
  if ((rc != 0)); then # not a gtest binary, or it dies at start: run it whole, as one row
    echo; echo "$name: cannot list its tests (exit $rc): running it whole"
    run_step test "$name" "" "cannot list its tests: run whole" \
      "--gtest_output=json:$LOGS/$name.json" ${filter:+"--gtest_filter=$filter"} "$@"
    return
  fi
  local suites=() chosen=() suite
  mapfile -t suites < <(awk '/^[^ ]/ { suite = ($1 ~ /\.$/) ? substr($1, 1, length($1) - 1) : ""; next }
    suite != "" && /^  / && !seen[suite]++ { print suite }' "$list")
  if [[ -n $filter ]]; then
    chosen=("${suites[@]}")
  else
    for suite in ${GPU_SUITES[$name]:-}; do
      in_words "$suite" "${suites[*]}" && continue
      echo "$name: no suite $suite (GPU_SUITES in gpu-check.sh is stale)"
      step test "$name" "$suite" missing "" "not in the binary: GPU_SUITES in gpu-check.sh is stale" ""
    done
    for suite in "${suites[@]}"; do
      in_words "$suite" "${CPU_SUITES[$name]:-}" || chosen+=("$suite")
    done
  fi
  if ((${#chosen[@]} == 0)); then
    step test "$name" "" none "" "" "${filter:+--filter picks none of its tests}"
    return
  fi
  for suite in "${chosen[@]}"; do
    local pick="$suite.*" note=""
    if [[ -n $filter ]]; then # only the tests the filter picked in this suite, one by one
      pick=$(awk -v want="$suite" '/^[^ ]/ { suite = ($1 ~ /\.$/) ? substr($1, 1, length($1) - 1) : ""; next }
        suite == want && /^  / { print suite "." $1 }' "$list" | paste -sd:)
    elif ! in_words "$suite" "${GPU_SUITES[$name]:-}"; then
      note="unlisted: add it to GPU_SUITES or CPU_SUITES in gpu-check.sh"
    fi
    run_step test "$name" "$suite" "$note" "--gtest_filter=$pick" \
      "--gtest_output=json:$LOGS/$(stem "$name" "$suite").json" "$@"
  done
}

for name in "${BINARIES[@]}"; do
  run_tests "$name" "$@"
done
for name in "${BENCHMARKS[@]}"; do
  startable benchmark "$name" || continue
  # shellcheck disable=SC2086 # the quick form's arguments are words
  run_step benchmark "$name" "" "" ${BENCHMARK_ARGS[$name]:-}
done

# --- the summary and the table, last; then the two files into OUT_DIR -----------------------
finish() {
  trap - TERM INT
  local status=0
  if command -v python3 >/dev/null; then
    python3 "$here/gpu-check-summary.py" "$LOGS" "$OUT_DIR" || status=$?
  else
    echo "gpu-check: no python3 here to read gtest's reports; the rows (steps.tsv):"
    cat "$LOGS/steps.tsv"
    status=1
  fi
  # Close the log before archiving it: tee ends once nothing writes to it (waited for a few
  # seconds at most, so that a stray process holding the pipe cannot stop the archive).
  exec >&3 2>&4
  for _ in {1..50}; do
    kill -0 "$tee_pid" 2>/dev/null || break
    sleep 0.1
  done
  if tar -czf "$work/gpu-check.tar.gz" -C "$work" gpu-check &&
      mv "$work/gpu-check.tar.gz" "$OUT_DIR/"; then
    [[ -f $LOGS/summary.json ]] && cp "$LOGS/summary.json" "$OUT_DIR/summary.json"
  else
    echo "gpu-check: could not write $OUT_DIR/gpu-check.tar.gz; the logs stay in $LOGS" >&2
    exit 1
  fi
  rm -rf "$work"
  exit "$status"
}
# Stopped from outside (the device tool's timeout, ^C): still leave what there is.
trap 'echo "gpu-check: stopped; archiving what ran"; finish' TERM INT
finish
