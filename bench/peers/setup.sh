#!/usr/bin/env bash
# Creates the virtual environment bench/peers/run.py runs Smelt's peers in: PyTorch and JAX
# (CPU) from PyPI, at the versions bench/RESULTS.md records, and what the model zoo needs.
# PyPI's torch wheel brings CUDA libraries it does not use here (about 5 GB in all). Not part
# of scripts/setup.sh: only the benchmarks and the zoo's generator need it.
#   bench/peers/setup.sh [venv dir = $SMELT_PEERS_VENV or ~/.cache/smelt/peers-venv]
set -euo pipefail
venv="${1:-${SMELT_PEERS_VENV:-$HOME/.cache/smelt/peers-venv}}"
/usr/bin/python3 -m venv "$venv"
# torchvision, transformers, onnxscript (the default ONNX exporter) and onnxruntime: the model
# zoo (tests/zoo/generate.py writes the mini zoo, bench/peers/zoo.py measures the full one).
"$venv/bin/pip" install -q torch==2.15.0 jax==0.10.2 numpy torchvision==0.29.2 \
  transformers==5.24.0 onnxscript==0.7.2 onnxruntime==1.32.0 onnx==1.23.2
"$venv/bin/python" -c 'import torch, jax, onnxruntime; print("torch", torch.__version__, "jax", jax.__version__,
                                                       "onnxruntime", onnxruntime.__version__)'
