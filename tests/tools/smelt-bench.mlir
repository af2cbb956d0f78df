// `smelt bench`: the roofs it measured, then per step its median time, bytes, GB/s, GFLOP/s,
// share of the roofline and the fusion or op it came from, then the steps' sum beside the whole
// run's wall time and what lies between; --json the same for scripts, with the peak resident
// memory of the model (the roofs' buffers left out).
// RUN: smelt bench %s --repeat 3 --warmup 1 | FileCheck %s
// The bias add and relu run inside the matmul (an epilogue smelt-fuse folds), the reduce as a kernel.
// CHECK: @main: 2 steps, median of 3 runs after 1 warm-up (seed 0)
// CHECK-NEXT: roofs: copy {{[0-9.]+}} GB/s (memcpy of 128 MiB), {{[0-9.]+}} GFLOP/s (1024x1024x1024 f32 matmul)
// CHECK: step  kind     name              median us      bytes     GB/s   GFLOP/s roofline  from
// CHECK-NEXT: 0  library  matmul {{[0-9.]+}} 3.5 KiB {{.*}}%  matmul+bias+relu at {{.*}}smelt-bench.mlir:{{[0-9]+}}:8
// CHECK-NEXT: 1  kernel   main_fusion0 {{[0-9.]+}} 576 B {{.*}}%  reduce at
// CHECK-NEXT: sum {{[0-9.]+}}  the step medians above
// CHECK-NEXT: wall {{[0-9.]+}}  median of whole runs (inputs in, outputs out)
// CHECK-NEXT: between {{-?[0-9.]+}}  wall - sum: time outside the steps ({{-?[0-9.]+}}% of wall)

// RUN: smelt bench %s --repeat 2 --warmup 0 --seed 7 --json | %python %S/json_tool.py bench - | FileCheck %s --check-prefix=JSON
// JSON: function main runs 2 steps 2
// JSON-NEXT: step 0 library matmul: matmul+bias+relu
// JSON-NEXT: step 1 kernel main_fusion0: reduce
// JSON-NEXT: steps_sum_us is the sum of the steps; wall_median_us and between_steps_us agree
// JSON-NEXT: peak resident memory below 200 MiB

// RUN: not smelt bench %s --repeat 0 2>&1 | FileCheck %s --check-prefix=REPEAT
// REPEAT: error: --repeat must be at least 1 and --warmup at least 0

func.func @main(%x: tensor<16x32xf32>, %w: tensor<32x8xf32>, %b: tensor<8xf32>)
    -> (tensor<16x8xf32>, tensor<16xf32>) {
  %0 = smelt.matmul %x, %w : tensor<16x32xf32>, tensor<32x8xf32>
  %1 = smelt.broadcast_in_dim %b, dims = [1] : tensor<8xf32> -> tensor<16x8xf32>
  %2 = smelt.add %0, %1 : tensor<16x8xf32>
  %3 = smelt.relu %2 : tensor<16x8xf32>
  %4 = smelt.reduce sum %3 axes = [1] : tensor<16x8xf32>
  return %3, %4 : tensor<16x8xf32>, tensor<16xf32>
}
