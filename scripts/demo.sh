#!/usr/bin/env bash
# Setup, build, and run the main job: train the seed MLP on Fashion-MNIST for 5 epochs on the
# CPU. `--quick` (or SMELT_DEMO_QUICK=1) trains 1 epoch on the first 6000 examples instead, the
# form CI runs; other arguments go to `smelt train` (e.g. --model=cnn).
set -euo pipefail
cd "$(dirname "$0")/.."
quick="${SMELT_DEMO_QUICK:-0}"
args=()
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    -h|--help)
      sed -n '2,4s/^# //p' "$0"
      exit 0 ;;
    *) args+=("$arg") ;;
  esac
done
# smelt train takes each flag once, so the short form replaces the defaults rather than adding.
train=(--epochs=5)
[ "$quick" = 1 ] && train=(--epochs=1 --limit=6000)
scripts/setup.sh
scripts/build.sh smelt
exec "${SMELT_BUILD_DIR:-build}/bin/smelt" train --model=mlp "${train[@]}" "${args[@]}"
