// `smelt dump` where the CUDA back end is built: every dump also holds the fusions as CUDA
// source and PTX, and --target=cuda:sm_90 places ops on gpu:0 (green in the graph) with no GPU.
// REQUIRES: cuda-codegen
// RUN: rm -rf %t
// RUN: smelt dump %s --dump-dir %t
// RUN: %python %S/json_tool.py manifest %t/main-0 | FileCheck %s --check-prefix=FILES
// FILES-DAG: cuda-kernels.cu: cuda kernels (source for NVRTC)
// FILES-DAG: cuda-kernels.ptx: cuda kernels (ptx for sm_90)
// FILES-DAG: cpu-kernels.ll: cpu kernels (optimized LLVM IR)
// FILES-NOT: EMPTY
// RUN: FileCheck %s --check-prefix=CU < %t/main-0/cuda-kernels.cu
// CU: main_fusion0
// RUN: FileCheck %s --check-prefix=PTX < %t/main-0/cuda-kernels.ptx
// PTX: .target sm_90
// PTX: .entry main_fusion0

// RUN: smelt dump %s --dump-dir %t --target=cuda:sm_90 | FileCheck %s --check-prefix=GPU
// GPU: wrote {{.*}}main-1 (@main for cuda:sm_90
// RUN: FileCheck %s --check-prefix=GPUDOT < %t/main-1/graph.dot
// GPUDOT: gpu:0
// GPUDOT: fillcolor="#b7e1cd"

func.func @main(%x: tensor<64x128xf32>, %b: tensor<128xf32>) -> tensor<64x128xf32> {
  %0 = smelt.broadcast_in_dim %b, dims = [1] : tensor<128xf32> -> tensor<64x128xf32>
  %1 = smelt.add %x, %0 : tensor<64x128xf32>
  %2 = smelt.tanh %1 : tensor<64x128xf32>
  return %2 : tensor<64x128xf32>
}
