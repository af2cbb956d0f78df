#!/usr/bin/env bash
# Setup, build, and run the main job: train the seed MLP on Fashion-MNIST for 5 epochs on the
# CPU (extra arguments go to `smelt train`, e.g. --model=cnn).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh smelt
build/bin/smelt train --model=mlp --epochs=5 "$@"
