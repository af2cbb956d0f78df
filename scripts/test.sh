#!/usr/bin/env bash
# Setup, configure, build and run every test (GoogleTest and lit through ctest). No GPU needed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
