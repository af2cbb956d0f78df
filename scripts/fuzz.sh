#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (ASan + UBSan) and runs each for a given
# time on a corpus seeded from the tests' inputs; prints one line a target and exits non-zero
# on a finding (the reproducer is left as crash-*/timeout-*/oom-* in the fuzz dir).
#   scripts/fuzz.sh [SECONDS_PER_TARGET=60] [FUZZ_DIR=build-fuzz] [SMELT_BUILD=build] [TARGET...]
# FUZZ_TIMEOUT (seconds, default 20) is libFuzzer's limit for one input: raise it when the
# machine is busy, where a slow input is starvation rather than a hang. FUZZ_MAX_LEN (bytes)
# replaces each target's input length limit (4096; the artifact's 65536).
# Exit code 77 (ctest's skip) when clang or libFuzzer is missing. The readers' targets build
# standalone; mlir-fuzz and onnx-fuzz are linked to the Smelt build's libraries (see below).
# onnx-fuzz runs only when named (`scripts/fuzz.sh 1800 build-fuzz build onnx`): its build
# instruments the importer's 20 sources, minutes that ctest's fuzz-smoke leaves out (ctest's
# onnx-fuzz-replay runs the same target, built by gcc, on its seeds).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-60}"
dir="$(mkdir -p "${2:-$repo/build-fuzz}" && cd "${2:-$repo/build-fuzz}" && pwd)"
smelt_build="${3:-$repo/build}"
shift $(( $# < 3 ? $# : 3 ))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(artifact elf npy safetensors idx mlir)

clangxx="$(command -v clang++ || true)"
if [ -z "$clangxx" ] || ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char *, long) { return 0; }' |
    "$clangxx" -x c++ -fsanitize=fuzzer - -o "$dir/.libfuzzer-check" 2>/dev/null; then
  echo "SKIP: no clang++ with libFuzzer (-fsanitize=fuzzer)"
  exit 77
fi

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if [ ! -f "$dir/build.ninja" ]; then
  cmake -S "$repo/tests/fuzz" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER="$clangxx" "${launcher[@]}" >/dev/null
fi
cmake --build "$dir" >/dev/null

# mlir-fuzz from a gcc build of Smelt: the harness alone compiled by clang and linked to that
# build's libraries, which are not instrumented, so coverage guides it only through the harness
# and the MLIR headers it inlines; crashes anywhere are findings, ASan and UBSan watch the
# harness. (A whole clang build with -DSMELT_FUZZ=ON builds an mlir-fuzz of its own.)
libs=""
[ -f "$smelt_build/build.ninja" ] &&
  libs="$(grep -A8 '^build bin/smelt-quickstart:' "$smelt_build/build.ninja" |
    sed -n 's/^  LINK_LIBRARIES = //p' | head -1)"
if [ ! -x "$dir/mlir-fuzz" ] && [ -n "$libs" ]; then
  (cd "$smelt_build" && "$clangxx" -std=c++20 -w -O1 -g -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=undefined -I"$repo" -I. -I/usr/lib/llvm-22/include \
    "$repo/tests/fuzz/mlir_fuzz.cpp" -o "$dir/mlir-fuzz" $libs)
fi

# onnx-fuzz: the ONNX importer's sources compiled by clang with the sanitizers and coverage (so
# the fuzzer sees inside the importer), with std::source_location supplied for clang 14
# (tests/fuzz/SourceLocationShim.h), linked to the build's other libraries as above.
if [[ " ${targets[*]} " == *" onnx "* && ! -x "$dir/onnx-fuzz" && -f "$smelt_build/build.ninja" ]]; then
  onnx_libs="$(grep -A8 '^build bin/onnx-fuzz-replay:' "$smelt_build/build.ninja" |
    sed -n 's/^  LINK_LIBRARIES = //p' | head -1 | sed 's|frontend/onnx/libSmeltOnnxImport.a||g')"
  mkdir -p "$dir/onnx-objects"
  printf '%s\n' "$repo/tests/fuzz/onnx_fuzz.cpp" "$repo"/frontend/onnx/*.cpp |
    (cd "$smelt_build" && xargs -P "$(nproc)" -I{} sh -c '$4 "$0" -std=c++20 -w -O1 -g \
      -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined \
      -DONNX_ML=1 -DONNX_NAMESPACE=onnx -include "$1/tests/fuzz/SourceLocationShim.h" \
      -I"$1" -I"$1/tests/fuzz" -I. -isystem /usr/lib/llvm-22/include \
      -c "$2" -o "$3/onnx-objects/$(basename "$2" .cpp).o"' "$clangxx" "$repo" {} "$dir" \
      "$(command -v ccache || true)")
  (cd "$smelt_build" && "$clangxx" -fsanitize=fuzzer,address,undefined "$dir"/onnx-objects/*.o \
    -o "$dir/onnx-fuzz" $onnx_libs)
fi

# Seeds: fresh each run beside the growing corpus (corpus/<target>), which libFuzzer keeps.
python="$(command -v /usr/bin/python3 || command -v python3)"
"$python" "$repo/tests/fuzz/make_seeds.py" "$repo" "$dir/corpus"
artifact_seeds="$dir/corpus/artifact-seeds"
rm -rf "$artifact_seeds" && mkdir -p "$artifact_seeds"
if [ -x "$smelt_build/bin/runtime-tests" ]; then
  SMELT_ARTIFACT_SEED_DIR="$artifact_seeds" "$smelt_build/bin/runtime-tests" \
    --gtest_filter='Artifact.*' >/dev/null 2>&1 || true
fi
if [ -x "$smelt_build/bin/smelt" ]; then
  "$smelt_build/bin/smelt" compile "$repo/tests/tools/smelt-run.mlir" --target=cpu \
    -o "$artifact_seeds/dense.smelt" >/dev/null 2>&1 || true
fi

# The ELF checks start from the kernel library of the compiled artifact (as `smelt dump` writes
# it) and the test kernels.
elf_seeds="$dir/corpus/elf-seeds"
rm -rf "$elf_seeds" && mkdir -p "$elf_seeds"
if [ -f "$artifact_seeds/dense.smelt" ]; then
  "$smelt_build/bin/smelt" dump "$artifact_seeds/dense.smelt" --dump-dir "$dir/dense-dump" >/dev/null 2>&1 &&
    cp "$dir/dense-dump/main-0/cpu-kernels.so" "$elf_seeds/dense.so" || true
fi
cp "$smelt_build/tests/unit/runtime/libartifact-test-kernels.so" "$elf_seeds/" 2>/dev/null || true

status=0
printf '%-12s %10s %8s  %s\n' target runs seconds result
for target in "${targets[@]}"; do
  binary="$dir/$target-fuzz"
  if [ ! -x "$binary" ]; then
    printf '%-12s %10s %8s  %s\n' "$target" - - "not built (see tests/fuzz/CMakeLists.txt)"
    continue
  fi
  mkdir -p "$dir/corpus/$target"
  log="$dir/$target.log"
  max_len=4096
  [ "$target" = artifact ] && max_len=65536
  [ "$target" = onnx ] && max_len=65536 # the node tests' models are 100 B to 40 KB
  # FUZZ_MAX_LEN overrides, for long inputs (a safetensors header nested 100,000 deep).
  max_len="${FUZZ_MAX_LEN:-$max_len}"
  # Leak checks off for mlir-fuzz only: LLVM and MLIR keep global state they never free.
  asan="${ASAN_OPTIONS:-}"
  [ "$target" = mlir ] && asan="detect_leaks=0${asan:+:$asan}"
  start=$(date +%s)
  if (cd "$dir" && ASAN_OPTIONS="$asan" "$binary" -max_total_time="$seconds" \
        -timeout="${FUZZ_TIMEOUT:-20}" -rss_limit_mb=4096 \
        -max_len="$max_len" -print_final_stats=1 "$dir/corpus/$target" \
        "$dir/corpus/$target-seeds" >"$log" 2>&1); then
    result="no finding"
  else
    result="FINDING: see $log"
    status=1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  printf '%-12s %10s %8s  %s\n' "$target" "$runs" "$(( $(date +%s) - start ))" "$result"
done
exit $status
