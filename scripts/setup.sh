#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test Smelt. Idempotent; silent when
# nothing is missing.
set -euo pipefail
packages=(
  # ocl-icd-opencl-dev: oneDNN's CMake package looks for OpenCL (only a Recommends of libdnnl-dev)
  cmake ninja-build g++ ccache pkg-config zlib1g-dev python3-numpy
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  libdnnl-dev ocl-icd-opencl-dev libfmt-dev nlohmann-json3-dev googletest libgtest-dev libbenchmark-dev
  # libssl-dev: SHA-256 (OpenSSL's libcrypto) to pin an artifact's content
  libssl-dev
  dataset-fashion-mnist
  # fortunes-min: English text (/usr/share/games/fortunes/fortunes) the char-level GPT trains on
  fortunes-min
  # graphviz: dot renders the graph of a dump (smelt dump, --dump-dir) as graph.svg
  graphviz
  # OpenMPI: runtime/mpi (SmeltMpi, data-parallel training across processes) and the mpirun
  # that its tests and bench/all_reduce.cpp run under
  libopenmpi-dev openmpi-bin
  # The ONNX importer (frontend/onnx) and its conformance tests: ONNX's protobuf classes, the
  # node tests' models and data, and python3-onnx for tests/tools/onnx_tool.py
  libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata python3-onnx
  # Boost.Context: the fibers of the SIMT emulator that runs the CUDA kernels on the CPU
  # (tests/unit/simt)
  libboost-context-dev
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "setup: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
