#!/usr/bin/env bash
# Times Debian's oneDNN (the system's libdnnl) against one or more other oneDNN installs on the
# ResNet's and the CNN's convolutions (conv_bench.cpp), 1 and 2 threads, the libraries
# interleaved in each round (their order reversed every other round, so that a drift in the
# machine's load favours none), and prints the markdown tables (table.py). Downloads nothing.
#   bench/onednn/run.sh [--rounds N] [--budget SECONDS] [--only TEXT] PREFIX...
# PREFIX: a oneDNN install with include/ and lib/ (pip install --prefix of the wheels, README.md).
# Raw lines go to $OUT_DIR/raw.tsv (default: a new folder under /tmp).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
rounds=5 budget=0.15 only=""
prefixes=()
while [ $# -gt 0 ]; do
  case "$1" in
  --rounds) rounds=$2; shift 2 ;;
  --budget) budget=$2; shift 2 ;;
  --only) only=$2; shift 2 ;;
  *) prefixes+=("$(cd "$1" && pwd)"); shift ;;
  esac
done
if [ ${#prefixes[@]} -eq 0 ]; then
  echo "usage: $0 [--rounds N] [--budget SECONDS] [--only TEXT] PREFIX..." >&2
  exit 2
fi
out=${OUT_DIR:-$(mktemp -d /tmp/smelt-onednn-bench.XXXXXX)}
mkdir -p "$out/bin"

# One binary per library: bin/0 against the system's oneDNN, bin/I against PREFIX I.
g++ -O2 -std=c++17 "$here/conv_bench.cpp" -o "$out/bin/0" -ldnnl
libdirs=("")
for i in "${!prefixes[@]}"; do
  p=${prefixes[$i]}
  g++ -O2 -std=c++17 -I"$p/include" "$here/conv_bench.cpp" -o "$out/bin/$((i + 1))" \
    -L"$p/lib" -Wl,-rpath,"$p/lib" -ldnnl
  libdirs+=("$p/lib")
done

# One library's run. A build whose CPU engine is SYCL (PyPI's onednn) finds its libraries, and
# the CPU's OpenCL driver that SYCL needs, in its own lib/. One thread: OMP_NUM_THREADS for
# OpenMP builds, and the process pinned to one core for TBB builds, which size themselves by
# the cores they may use; every library runs the same way.
run_one() {
  local index=$1 threads=$2 libdir=${libdirs[$1]}
  local -a env=(OMP_NUM_THREADS="$threads")
  if [ -n "$libdir" ]; then
    env+=(LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
    [ -f "$libdir/libintelocl.so" ] && env+=(OCL_ICD_FILENAMES="$libdir/libintelocl.so")
  fi
  local -a pin=()
  [ "$threads" = 1 ] && pin=(taskset -c 0)
  local args=(--threads "$threads" --budget "$budget")
  [ -n "$only" ] && args+=(--only "$only")
  env "${env[@]}" "${pin[@]}" "$out/bin/$index" "${args[@]}" 2>>"$out/stderr.log" |
    grep -P '^\d+\.\d+\.\d+\t' | sed "s/^/$round\t/" >>"$out/raw.tsv" ||
    echo "library $index failed at $threads threads (see $out/stderr.log)" >&2
}

: >"$out/raw.tsv"
: >"$out/load.txt"
count=$((${#prefixes[@]} + 1))
for round in $(seq 1 "$rounds"); do
  order=$(seq 0 $((count - 1)))
  [ $((round % 2)) -eq 0 ] && order=$(seq $((count - 1)) -1 0)
  for threads in 1 2; do
    for index in $order; do
      echo "round $round threads $threads lib $index load $(cut -d' ' -f1-3 /proc/loadavg)" |
        tee -a "$out/load.txt" >&2
      run_one "$index" "$threads"
    done
  done
done
echo "raw results: $out/raw.tsv, load: $out/load.txt" >&2
python3 "$here/table.py" "$out/raw.tsv"
