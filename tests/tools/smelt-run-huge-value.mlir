// A value larger than every device's memory is refused before compiling, naming the op, its
// type and the largest limit, even where a fusion would never store it (issue 34: an rng of
// 1e11 elements summed to a scalar compiled into one reduction kernel that drew 1e11 numbers
// for minutes, past the buffer check, which only sees stored values). The limit follows
// --memory-limit; below it the same function runs.
// RUN: not timeout 60 smelt run %s 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: not timeout 60 smelt bench %s 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: not smelt run %s --entry=small --memory-limit=1MiB 2>&1 | FileCheck %s --check-prefix=LIMIT
// An AOT artifact holds no IR: its kernels carry their largest value, which the executor
// refuses as it refuses a buffer that large.
// RUN: smelt compile %s -o %t.smelt > /dev/null
// RUN: not timeout 60 smelt run %t.smelt 2>&1 | FileCheck %s --check-prefix=AOT
// AOT: error: cpu:0: kernel main_fusion{{[0-9]+}} (rng_uniform+reduce at {{.*}}smelt-run-huge-value.mlir:{{[0-9]+}}{{.*}}) computes a value of 372.53 GiB, more than the device's memory limit of
// RUN: smelt run %s --entry=small 2>&1 | FileCheck %s --check-prefix=SMALL

// HUGE: smelt-run-huge-value.mlir:[[@LINE+2]]:8: error: 'smelt.rng_uniform' op computes 'tensor<100000000000xf32>' (372.53 GiB), more than the memory limit of any device (cpu:0: {{.*}}); a value that large is refused even where a fusion would not store it
func.func @main() -> tensor<f32> {
  %0 = smelt.rng_uniform seed = 1, low = 0.0, high = 1.0 : tensor<100000000000xf32>
  %1 = smelt.reduce sum %0 axes = [0] : tensor<100000000000xf32>
  return %1 : tensor<f32>
}

// LIMIT: smelt-run-huge-value.mlir:[[@LINE+3]]:8: error: 'smelt.rng_uniform' op computes 'tensor<1024x1024xf32>' (4.0 MiB), more than the memory limit of any device (cpu:0: 1.0 MiB)
// SMALL: result0: tensor<1024xf32>
func.func @small() -> tensor<1024xf32> {
  %0 = smelt.rng_uniform seed = 2, low = -1.0, high = 1.0 : tensor<1024x1024xf32>
  %1 = smelt.reduce sum %0 axes = [1] : tensor<1024x1024xf32>
  return %1 : tensor<1024xf32>
}
