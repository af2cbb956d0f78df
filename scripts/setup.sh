#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test Smelt. Idempotent; silent when
# nothing is missing.
#
# scripts/setup.sh --cuda-wheels DIR also fetches the CUDA libraries Smelt uses on a GPU from
# PyPI's nvidia-* wheels, as JAX and PyTorch do, for a GPU machine that has the NVIDIA driver
# but not the CUDA toolkit: `pip install --target DIR` (no root, nothing outside DIR), then
# DIR/smelt-cuda.sh to source. The runtime finds them through SMELT_CUDA_LIBRARY_PATH
# (runtime/cuda/DynamicLibrary.h); NVRTC, which the binaries link, through LD_LIBRARY_PATH.
# About 1.08 GB of downloads and 1.5 GB installed (docs/gpu.md); SMELT_CUDA_WHEELS replaces
# the list below.
set -euo pipefail

# The versions Smelt is built and tested against here (/usr/local/cuda: CUDA 13.0, cuBLAS 13.1,
# cuDNN 9.19, NCCL 2.28). CUDA 13's wheels put NVRTC, cuBLAS and the headers in nvidia/cu13/.
cuda_wheels=(
  "nvidia-cuda-nvrtc==13.0.*"    # NVRTC: CUDA C++ to CUBIN/PTX (libnvrtc.so.13, linked)
  "nvidia-cuda-runtime==13.0.*"  # cuda_fp16.h and cuda_bf16.h, which NVRTC needs to include
  "nvidia-cublas==13.1.*"        # libcublasLt.so.13: matmuls
  "nvidia-cudnn-cu13==9.19.*"    # libcudnn.so.9: convolutions and pooling
  "nvidia-nccl-cu13==2.28.*"     # libnccl.so.2: all-reduce across GPUs
)
[[ -n ${SMELT_CUDA_WHEELS:-} ]] && read -ra cuda_wheels <<<"$SMELT_CUDA_WHEELS"

install_cuda_wheels() { # DIR
  local dir=$1
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  echo "setup: installing ${cuda_wheels[*]} into $dir"
  # --no-deps: the wheels' own dependencies are each other and nvidia-cuda-runtime, listed.
  python3 -m pip install --quiet --no-deps --upgrade --only-binary=:all: --target "$dir" \
    "${cuda_wheels[@]}"
  cat >"$dir/smelt-cuda.sh" <<ENV
# Source this (scripts/setup.sh --cuda-wheels wrote it) to run Smelt on CUDA from these wheels.
export SMELT_CUDA_LIBRARY_PATH="$dir\${SMELT_CUDA_LIBRARY_PATH:+:\$SMELT_CUDA_LIBRARY_PATH}"
export LD_LIBRARY_PATH="$dir/nvidia/cu13/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export SMELT_CUDA_INCLUDE="$dir/nvidia/cu13/include"
ENV
  echo "setup: $(du -sh "$dir" | cut -f1) in $dir; before running Smelt: source $dir/smelt-cuda.sh"
}

while (($#)); do
  case $1 in
    --cuda-wheels) install_cuda_wheels "$2"; shift 2 ;;
    --cuda-wheels=*) install_cuda_wheels "${1#*=}"; shift ;;
    *) echo "usage: scripts/setup.sh [--cuda-wheels DIR]" >&2; exit 2 ;;
  esac
done

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
  # (tests/unit/simt), which the emulated CUDA (tests/emucuda) runs kernels on too
  libboost-context-dev
  # patch: the emulated CUDA's mutants, runtime files broken on purpose (tests/emucuda/mutants)
  patch
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
