#!/usr/bin/env bash
# Setup, configure, build and run every test (GoogleTest and lit through ctest). No GPU needed.
# Builds into build/ (or $SMELT_BUILD_DIR); arguments go to ctest (e.g. -R lit).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h|--help) sed -n '2,3s/^# //p' "$0"; exit 0 ;;
esac
scripts/setup.sh
scripts/build.sh
ctest --test-dir "${SMELT_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
