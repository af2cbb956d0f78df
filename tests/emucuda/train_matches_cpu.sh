#!/usr/bin/env bash
# `smelt train` on the emulated gpu:0 against the same run on the CPU: the placement puts every
# op on gpu:0 (argmax, scatter_add and a data-parallel step's replica_id included), and every
# loss and accuracy the GPU run prints is the CPU run's within the GPU numerics tolerance
# (docs/ops.md: relative 1e-3 of a printed f32 loss, 2e-2 in mixed precision, plus the 4
# printed decimals).
# Usage: train_matches_cpu.sh SMELT EMUCUDA_DIR TOLERANCE -- ARGS FOR smelt train
# SMELT_TRAIN_LAUNCHER, when set, starts the GPU run ("mpirun -np 2 ..."): its ranks then train
# on their own emulated GPUs, each with its gpu:0, against the CPU run's replicas as threads.
set -euo pipefail
smelt=$1 emucuda=$2 tolerance=$3
shift 3
[[ ${1:-} == -- ]] && shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The CPU run must not find a driver: the emulated one is named only for the GPU run.
env -u SMELT_CUDA_LIBRARY_PATH -u SMELT_EXPECT_GPU "$smelt" train "$@" >"$work/cpu.log" 2>&1 ||
  { cat "$work/cpu.log"; echo "FAIL: the CPU run failed"; exit 1; }
read -ra launcher <<<"${SMELT_TRAIN_LAUNCHER:-}"
# With --profile, which also prints the step's traffic through the host.
SMELT_CUDA_LIBRARY_PATH=$emucuda SMELT_CUDA_SOURCE_DIR=${SMELT_CUDA_SOURCE_DIR:-$emucuda/kernels} \
  "${launcher[@]}" "$smelt" train "$@" --profile="$work/trace.json" >"$work/gpu.log" 2>&1 ||
  { cat "$work/gpu.log"; echo "FAIL: the emulated GPU run failed"; exit 1; }
cat "$work/gpu.log"
only='in the only full-batch step \(the first: it uploads the state; graphs replay from the second\)'
grep -qE "^host<->device (per step|$only)( of each replica)?: [0-9.]+ [KMG]?i?B up, [0-9.]+ [KMG]?i?B down, [1-9][0-9]* host syncs?$" \
  "$work/gpu.log" || { echo "FAIL: --profile printed no host<->device traffic per step"; exit 1; }

# From the second step on, a step is one CUDA graph (the first warms the libraries up), the
# data-parallel step's all_reduces inside it: what --profile reports of a full batch's last run.
# A run with a single full batch has only that first run to report, and must say so.
steps=$(sed 's/.*\r//' "$work/gpu.log" | grep -m1 -oE '^[0-9]+/[0-9]+ - ' | cut -d/ -f2 | tr -dc 0-9)
if grep -qE "^host<->device $only" "$work/gpu.log"; then
  grep -qE '^GPU launches in that step: 0 CUDA graphs, [1-9][0-9]* single launches$' \
    "$work/gpu.log" || { echo "FAIL: a first step is reported as one CUDA graph"; exit 1; }
elif (( ${steps:-0} >= 2 )); then
  grep -q '^GPU launches per step: 1 CUDA graph, 0 single launches$' "$work/gpu.log" ||
    { echo "FAIL: a step of a run of $steps steps is not one CUDA graph"; exit 1; }
fi

placement=$(grep -m1 '^placement:' "$work/gpu.log")
[[ $placement == *" on gpu:0"* ]] || { echo "FAIL: nothing placed on gpu:0: $placement"; exit 1; }
# No op stays on cpu:0: a step wholly on the GPU names no fallback.
[[ $placement != *"on cpu:0"* ]] || { echo "FAIL: an op fell back to the CPU: $placement"; exit 1; }

# The metrics of each line, in order: loss, accuracy, val_loss, val_accuracy, test ... (of a
# line a progress bar rewrote with carriage returns, what it says last), each with its name.
numbers() { sed 's/.*\r//' "$1" | grep -E '^[0-9]+/[0-9]+ - |^test loss' |
  grep -oE '(loss|accuracy): [-0-9.e+]+' | awk '{print $1, $2}'; }
# An accuracy counts examples: two correct roundings may put one example of the smallest set
# on either side of a tie (a conv2d's bias added inside oneDNN's call on the CPU, by a kernel
# after cuDNN's on the GPU), which moves it by 1/count, more than the tolerance of a loss.
fewest=$(grep -m1 -oE '[0-9]+ training, [0-9]+ validation, [0-9]+ test' "$work/gpu.log" |
  grep -oE '[0-9]+' | sort -n | awk '$1 > 0' | head -1)
paste <(numbers "$work/cpu.log") <(numbers "$work/gpu.log") |
  awk -v tol="$tolerance" -v fewest="${fewest:-0}" '
  NF != 4 || $1 != $3 { print "FAIL: the runs print different metrics"; bad = 1; exit }
  { d = $2 - $4; if (d < 0) d = -d; m = ($2 < 0 ? -$2 : $2);
    slack = ($1 ~ /accuracy/ && fewest > 0) ? 1.0 / fewest : 0;
    if (d > tol * m + 1e-4 + slack) {
      printf "FAIL: %s %s on the CPU, %s on the emulated GPU\n", $1, $2, $4; bad = 1 }
    n++ }
  END { if (!bad && n == 0) { print "FAIL: no metrics printed"; bad = 1 }
        if (!bad) printf "ok: %d metrics within %s of the CPU run\n", n, tol; exit bad }'
