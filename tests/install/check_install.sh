#!/usr/bin/env bash
# ctest `install`: installs this build into a fresh prefix and builds examples/standalone against
# it as an outside project would, then runs its programs: jit_model (Smelt::Smelt) builds, JIT-
# compiles and checks a model and writes it as an artifact, which run_artifact (Smelt::Runtime)
# runs and checks. Both compare with float64 and exit non-zero on a mismatch. Also checked: the
# project found Smelt in the prefix, its build names neither Smelt's source nor its build folder
# (no include path leaked in), run_artifact links no MLIR or LLVM, no installed binary has an
# empty or relative RUNPATH entry, and the installed tools start.
# Usage: check_install.sh SOURCE_DIR BUILD_DIR WORK_DIR (WORK_DIR is emptied first). ctest sets
# $CMAKE to the cmake that configured the build (else the one on the PATH) and
# $CMAKE_GENERATOR, which cmake itself reads, to the build's generator.
set -euo pipefail
src=$(cd "$1" && pwd) build=$(cd "$2" && pwd) work=$3
rm -rf "$work" && mkdir -p "$work" && work=$(cd "$work" && pwd)
prefix=$work/prefix consumer=$work/standalone-build
cmake=${CMAKE:-cmake}
fail() { echo "FAIL: $*" >&2; exit 1; }

"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log"
echo "installed into $prefix: $(find "$prefix" -type f | wc -l) files"

# The sources copied out of the tree, so anything in the consumer's build that points into Smelt's
# source or build folder is a leak, whatever the work folder's own path.
cp -r "$src/examples/standalone" "$work/standalone"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
"$cmake" -S "$work/standalone" -B "$consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  "${launcher[@]}" >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configure"; }
found=$(sed -n 's/^Smelt_DIR:PATH=//p' "$consumer/CMakeCache.txt")
[ "$found" = "$prefix/lib/cmake/Smelt" ] || fail "Smelt found in '$found', not in the prefix"
"$cmake" --build "$consumer" -j2 || fail "build"
# Any text file of the consumer's build (flags, link lines, cache) that names a path there.
leaks=$(grep -rIohE "($src|$build)[^ \";]*" "$consumer" | grep -v "^$work" | sort -u || true)
[ -z "$leaks" ] || fail "the consumer's build uses paths outside the prefix: $leaks"
if ldd "$consumer/run_artifact" | grep -E 'lib(MLIR|LLVM)'; then
  fail "run_artifact links MLIR or LLVM"
fi

"$consumer/jit_model" "$work/model.smelt" || fail "jit_model"
"$consumer/run_artifact" "$work/model.smelt" || fail "run_artifact"
python3 "$src/tests/tools/check_runpath.py" "$prefix" || fail "an installed binary searches an empty or relative folder"
"$prefix/bin/smelt" --help >/dev/null || fail "installed smelt does not start"
"$prefix/bin/smelt-opt" --version >/dev/null || fail "installed smelt-opt does not start"
echo "install check passed"
