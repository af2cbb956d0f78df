// `smelt dump`: a directory per compile holding the IR before the pipeline and after every
// pass, the fusion report, the graph (fusions as clusters, devices as colours), the executable
// plan and the CPU kernels' LLVM IR, all listed in manifest.json. smelt-dump-cuda.mlir checks
// the CUDA files added where the CUDA back end is built.
// RUN: rm -rf %t
// RUN: smelt dump %s --dump-dir %t | FileCheck %s --check-prefix=OUT
// RUN: smelt dump %s --dump-dir %t | FileCheck %s --check-prefix=AGAIN
// OUT: wrote {{.*}}main-0 (@main for cpu; manifest.json lists the files)
// AGAIN: wrote {{.*}}main-1 (@main for cpu

// RUN: %python %S/json_tool.py manifest %t/main-0 | FileCheck %s --check-prefix=FILES
// FILES: 000-input.mlir: ir before the pipeline
// FILES: {{[0-9]+}}-smelt-fuse.mlir: ir after smelt-fuse
// FILES: fusion-report.txt: fusion decisions
// FILES-DAG: executable.txt: executable plan
// FILES-DAG: cpu-kernels.ll: cpu kernels (optimized LLVM IR)
// FILES-DAG: graph.dot: graphviz dot
// FILES-NOT: EMPTY
// FILES: peak bytes on cpu:0: {{[1-9][0-9]*}}

// Every module in the dump parses back, with its source locations, and its file name is a
// plain one (a pass without an argument once gave "008-mlir::detail::OpToOpPassAdaptor.mlir").
// RUN: for f in %t/main-0/*.mlir; do smelt-opt --mlir-print-debuginfo "$f" > /dev/null || exit 1; done
// RUN: ls %t/main-0 | FileCheck %s --check-prefix=NAMES
// NAMES-NOT: :
// RUN: smelt-opt --mlir-print-debuginfo %t/main-0/000-input.mlir | FileCheck %s --check-prefix=LOCS
// LOCS: loc({{.*}}smelt-dump.mlir":{{[0-9]+}}:{{[0-9]+}})

// RUN: FileCheck %s --check-prefix=REPORT < %t/main-0/fusion-report.txt
// REPORT: fused

// RUN: FileCheck %s --check-prefix=DOT < %t/main-0/graph.dot
// DOT: digraph "main"
// DOT: subgraph cluster_0
// DOT: label="fusion 0 (reduction)"
// DOT: fillcolor="#c9daf8"

// RUN: FileCheck %s --check-prefix=LLVM < %t/main-0/cpu-kernels.ll
// LLVM: define {{.*}}main_fusion0

// RUN: not smelt dump %s --dump-dir %t --target=tpu 2>&1 | FileCheck %s --check-prefix=TARGET
// TARGET: error: --target=tpu is not cpu or cuda:sm_<NN> (cuda:sm_90)

func.func @main(%x: tensor<16x32xf32> {smelt.name = "x"}, %w: tensor<32x8xf32> {smelt.name = "w"},
                %b: tensor<8xf32> {smelt.name = "b"}) -> (tensor<16x8xf32>, tensor<16xf32>) {
  %0 = smelt.matmul %x, %w : tensor<16x32xf32>, tensor<32x8xf32>
  %1 = smelt.broadcast_in_dim %b, dims = [1] : tensor<8xf32> -> tensor<16x8xf32>
  %2 = smelt.add %0, %1 : tensor<16x8xf32>
  %3 = smelt.relu %2 : tensor<16x8xf32>
  %4 = smelt.reduce sum %3 axes = [1] : tensor<16x8xf32>
  return %3, %4 : tensor<16x8xf32>, tensor<16xf32>
}
