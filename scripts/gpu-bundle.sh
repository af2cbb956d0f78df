#!/usr/bin/env bash
# Builds what the GPU machine runs and puts it in gpu-bundle/ (git-ignored), to be carried there.
#
# The GPU machine has the CUDA toolkit, CMake and ninja but no MLIR/LLVM and no package access,
# and receives at most 64 MiB with each command (working tree and carried paths together). So:
#   - build-gpu-bundle/ is configured with SMELT_STATIC_BUNDLE=ON (CMakeLists.txt): MLIR, LLVM,
#     libstdc++ and libgcc linked statically; an RPATH of $ORIGIN/../lib;
#   - gpu-bundle/bin/ holds the stripped binaries (cuda-codegen-tests, nccl-gpu-tests, and smelt
#     when it builds; libnccl is dlopen'ed from the GPU machine's own CUDA or pip install),
#   - gpu-bundle/lib/ every shared library they load that is not libc/libm/libdl/libpthread/
#     librt or CUDA's (oneDNN, fmt, libgomp, OpenCL loader, zstd, libstdc++ for oneDNN ...),
#   - gpu-bundle/gpu-check.sh, a copy of scripts/gpu-check.sh, which finds bin/ beside itself,
#     and gpu-check-summary.py, which writes its summary.json and table;
#   - what does not fit 64 MiB uncompressed travels compressed: the MLIR-linked binaries in one
#     solid bin/large-binaries.tar.xz, then oneDNN and the rest as NAME.xz; gpu-check.sh
#     unpacks them there (with tar and xz, or Python's tarfile and lzma where those are missing).
# Then, in a session that has the GPU machine (see the top of scripts/gpu-check.sh):
#   run(command="gpu-bundle/gpu-check.sh", carry=["gpu-bundle"], timeout_s=480)
#
# Usage: scripts/gpu-bundle.sh            (JOBS=2 by default; SMELT_BUNDLE_SMELT=0 skips smelt)
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=build-gpu-bundle
BUNDLE=gpu-bundle
JOBS=${JOBS:-2}
LIMIT=$((64 * 1024 * 1024))

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -G Ninja -S . -B "$BUILD" -DSMELT_STATIC_BUNDLE=ON -DCMAKE_BUILD_TYPE=Release \
  "${launcher[@]}" >/dev/null
benchmarks=(smelt-bench-gemm smelt-bench-gpu-bandwidth smelt-bench-gpu-train)
ninja -C "$BUILD" -j"$JOBS" cuda-codegen-tests cuda-runtime-tests nccl-gpu-tests "${benchmarks[@]}"
targets=(cuda-codegen-tests cuda-runtime-tests nccl-gpu-tests "${benchmarks[@]}")
if [[ ${SMELT_BUNDLE_SMELT:-1} == 1 ]]; then
  if ninja -C "$BUILD" -j"$JOBS" smelt; then
    targets+=(smelt)
  else
    echo "gpu-bundle: smelt did not build; bundling cuda-codegen-tests alone" >&2
  fi
fi

rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/bin" "$BUNDLE/lib"
for name in "${targets[@]}"; do
  strip -o "$BUNDLE/bin/$name" "$BUILD/bin/$name"
done
cp scripts/gpu-check.sh "$BUNDLE/gpu-check.sh"
cp scripts/gpu-check-summary.py "$BUNDLE/gpu-check-summary.py"
# The first 12800 training examples of Fashion-MNIST (what the GPU training test and
# benchmark read; the GPU machine has no dataset package), as gzip'd IDX files.
mkdir -p "$BUNDLE/fashion-mnist"
python3 - "$BUNDLE/fashion-mnist" <<'PY'
import gzip, struct, sys
src, dst, keep = "/usr/share/datasets/fashion-mnist", sys.argv[1], 12800
for name, header in (("train-images-idx3-ubyte", 16), ("train-labels-idx1-ubyte", 8)):
    data = gzip.open(f"{src}/{name}.gz").read()
    head = bytearray(data[:header])
    struct.pack_into(">I", head, 4, keep)  # the count follows the magic
    item = 784 if header == 16 else 1
    gzip.open(f"{dst}/{name}.gz", "wb").write(bytes(head) + data[header:header + keep * item])
PY

# Shared libraries the GPU machine has (or must provide itself): glibc's, and CUDA's.
system_lib='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libnvrtc|libnvrtc-builtins|libcuda)\.so'
for name in "${targets[@]}"; do
  # ldd lists the whole tree (oneDNN's own needs too); copy each library under its soname.
  while read -r soname _ path _; do
    [[ $soname =~ $system_lib ]] && continue
    [[ $path == /* && -f $path ]] || continue
    [[ -f $BUNDLE/lib/$soname ]] || cp -L "$path" "$BUNDLE/lib/$soname"
  done < <(env -u LD_LIBRARY_PATH ldd "$BUILD/bin/$name" | grep '=>')
done
chmod -R a+rX "$BUNDLE"

# Check: with LD_LIBRARY_PATH unset, every library resolves, and each one is either glibc's,
# NVRTC (found on the GPU machine by gpu-check.sh) or in the bundle's lib/.
status=0
for name in "${targets[@]}"; do
  echo "== ldd $BUNDLE/bin/$name"
  env -u LD_LIBRARY_PATH ldd "$BUNDLE/bin/$name" | tee /tmp/gpu-bundle-ldd.$$
  while read -r soname _ path _; do
    [[ $soname =~ $system_lib ]] && continue
    if [[ $path != "$(realpath "$BUNDLE/lib")"/* && $path != "$BUNDLE/lib/"* && $path != *"/$BUNDLE/bin/../lib/"* ]]; then
      echo "gpu-bundle: $name loads $soname from $path, not from the bundle" >&2
      status=1
    fi
  done < <(grep '=>' /tmp/gpu-bundle-ldd.$$)
  if grep -q 'not found' /tmp/gpu-bundle-ldd.$$; then
    echo "gpu-bundle: $name has unresolved libraries (above)" >&2
    status=1
  fi
  rm -f /tmp/gpu-bundle-ldd.$$
done

# Check: each test binary starts here (the GPU tests themselves skip without a GPU), and the
# benchmark gets as far as looking for the GPU (exit 77 here: no GPU).
for name in "${benchmarks[@]}"; do
  rc=0
  env -u LD_LIBRARY_PATH "$BUNDLE/bin/$name" >/dev/null 2>&1 || rc=$?
  if ((rc == 0 || rc == 77)); then
    echo "gpu-bundle: $BUNDLE/bin/$name starts"
  else
    echo "gpu-bundle: $BUNDLE/bin/$name does not start" >&2
    status=1
  fi
done
for name in cuda-codegen-tests cuda-runtime-tests nccl-gpu-tests; do
  if env -u LD_LIBRARY_PATH "$BUNDLE/bin/$name" --gtest_list_tests >/dev/null; then
    echo "gpu-bundle: $BUNDLE/bin/$name starts ($(env -u LD_LIBRARY_PATH \
      "$BUNDLE/bin/$name" --gtest_list_tests | grep -c '^  ') tests listed)"
  else
    echo "gpu-bundle: $BUNDLE/bin/$name does not start" >&2
    status=1
  fi
done

glibc=$(for f in "$BUNDLE"/bin/* "$BUNDLE"/lib/*; do objdump -T "$f"; done 2>/dev/null |
  grep -oE 'GLIBC_[0-9.]+' | sort -uV | tail -n1)
echo "gpu-bundle: needs ${glibc:-GLIBC_?} or newer on the GPU machine"

# The limit covers the working tree that travels with it (tracked and untracked-not-ignored
# files). If bin/ and lib/ do not fit beside it:
#   - the binaries that link MLIR and LLVM statically (every one over 8 MiB, ~55 MB each) go
#     into one solid archive, bin/large-binaries.tar.xz: they are mostly the same code, and xz
#     -9's 64 MiB dictionary reaches from one to the next, so all of them take little more
#     than one compressed alone (4 of them: 24 MB, against 54 MB compressed one by one);
#   - then the largest other files (oneDNN first) travel xz-compressed as NAME.xz.
# gpu-check.sh unpacks both before running anything.
tree=$(git ls-files -co --exclude-standard -z | du --files0-from=- -cb 2>/dev/null | tail -n1 | cut -f1)
size=$(du -sb "$BUNDLE" | cut -f1)
if ((size + tree >= LIMIT)); then
  mapfile -t large < <(find "$BUNDLE/bin" -type f ! -name '*.xz' -size +8M -printf '%f\n' | sort)
  if ((${#large[@]})); then
    tar -C "$BUNDLE/bin" -cf - "${large[@]}" | xz -9 -T1 >"$BUNDLE/bin/large-binaries.tar.xz"
    for name in "${large[@]}"; do rm "$BUNDLE/bin/$name"; done
    echo "gpu-bundle: ${large[*]} travel in bin/large-binaries.tar.xz (gpu-check.sh unpacks it)"
    size=$(du -sb "$BUNDLE" | cut -f1)
  fi
fi
while ((size + tree >= LIMIT)); do
  big=$(find "$BUNDLE/bin" "$BUNDLE/lib" -type f ! -name '*.xz' \
    -printf '%s %p\n' | sort -rn | head -n1 | cut -d' ' -f2-)
  [[ -n $big ]] || break
  xz -T"$JOBS" -6 "$big" # -> $big.xz
  echo "gpu-bundle: ${big#"$BUNDLE"/} travels as ${big#"$BUNDLE"/}.xz (gpu-check.sh unpacks it)"
  size=$(du -sb "$BUNDLE" | cut -f1)
done
echo
du -ab "$BUNDLE" | sort -n | awk '$1 > 100000 {printf "%10.1f MiB  %s\n", $1 / 1048576, $2}'
mib() { awk -v s="$1" 'BEGIN {printf "%.1f", s / 1048576}'; }
echo "gpu-bundle: $BUNDLE is $(mib "$size") MiB; with the working tree ($(mib "$tree") MiB)" \
  "$(mib $((size + tree))) MiB of the 64 MiB a command may carry"
if ((size + tree >= LIMIT)); then
  echo "gpu-bundle: too large to carry" >&2
  status=1
fi
echo 'next: run(command="gpu-bundle/gpu-check.sh", carry=["gpu-bundle"], timeout_s=480) in a session with the GPU machine'
exit $status
