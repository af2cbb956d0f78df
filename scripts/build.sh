#!/usr/bin/env bash
# Configures and builds Smelt into build/ (or $SMELT_BUILD_DIR; Release, ninja, ccache when
# present). Arguments are targets to build (`scripts/build.sh smelt smelt-opt`); with none,
# everything is built.
set -euo pipefail
cd "$(dirname "$0")/.."
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
build="${SMELT_BUILD_DIR:-build}"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
fi
targets=()
[ $# -gt 0 ] && targets=(--target "$@")
cmake --build "$build" "${targets[@]}"
