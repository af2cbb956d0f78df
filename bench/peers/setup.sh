#!/usr/bin/env bash
# Creates the virtual environment bench/peers/run.py runs Smelt's peers in: PyTorch and JAX
# (CPU) from PyPI, at the versions bench/RESULTS.md records. PyPI's torch wheel brings CUDA
# libraries it does not use here (about 5 GB in all). Not part of scripts/setup.sh: only this
# benchmark needs it.
#   bench/peers/setup.sh [venv dir = $SMELT_PEERS_VENV or ~/.cache/smelt/peers-venv]
set -euo pipefail
venv="${1:-${SMELT_PEERS_VENV:-$HOME/.cache/smelt/peers-venv}}"
/usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install -q torch==2.15.0 jax==0.10.2 numpy
"$venv/bin/python" -c 'import torch, jax; print("torch", torch.__version__, "jax", jax.__version__)'
