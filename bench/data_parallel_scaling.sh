#!/usr/bin/env bash
# Data-parallel scaling of `smelt train` on the CPU: 1 vs 2 MPI ranks (and 2 replicas as
# threads of one process), MLP on Fashion-MNIST. Prints the median examples/s of the second
# epoch over REPS runs of each configuration, and the scaling efficiencies:
#   weak:   the per-replica batch stays 128 (global 128 -> 256), one core per replica;
#           efficiency = throughput(2) / (2 x throughput(1)).
#   strong: the global batch stays 256; 1 rank with 2 threads vs 2 ranks with 1 thread each.
# Usage: bench/data_parallel_scaling.sh [build dir] (REPS=5, LIMIT=16384 examples by default)
set -euo pipefail
build=${1:-build}
smelt="$build/bin/smelt"
reps=${REPS:-5}
limit=${LIMIT:-16384}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
train=(train --epochs=2 --limit="$limit" --validation-split=0)

# Median of the second epoch's examples/s over $reps runs of "$@".
median_rate() {
  for _ in $(seq "$reps"); do
    "$@" | tr '\r' '\n' | grep -o '[0-9]* examples/s' | tail -1 | cut -d' ' -f1
  done | sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'
}

one_core=(env SMELT_CPU_THREADS=1)
w1=$(median_rate "${one_core[@]}" "$smelt" "${train[@]}" --batch=128)
w2=$(median_rate mpirun -n 2 "${one_core[@]}" "$smelt" "${train[@]}" --batch=256)
s1=$(median_rate env SMELT_CPU_THREADS=2 "$smelt" "${train[@]}" --batch=256)
s2=$w2
t2=$(median_rate "$smelt" "${train[@]}" --batch=256 --replicas=2)
echo "examples/s, median of $reps (second epoch of $limit examples):"
printf '  1 rank,  batch 128, 1 core          %8s\n' "$w1"
printf '  2 ranks, batch 2x128, 1 core each   %8s\n' "$w2"
printf '  1 rank,  batch 256, 2 cores         %8s\n' "$s1"
printf '  2 threads (--replicas=2), batch 256 %8s\n' "$t2"
awk -v w1="$w1" -v w2="$w2" -v s1="$s1" -v s2="$s2" 'BEGIN {
  printf "weak scaling efficiency (2 ranks):   %.0f%%\n", 100 * w2 / (2 * w1)
  printf "strong scaling, 2 ranks vs 1 rank:   %.2fx\n", s2 / s1 }'
