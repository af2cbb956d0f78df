#!/usr/bin/env bash
# Setup, build, and run the main job: the seed MLP forward over the Fashion-MNIST test set on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh smelt-mlp-forward
build/examples/smelt-mlp-forward "$@"
