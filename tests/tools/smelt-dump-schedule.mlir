// The schedule the compiler fixes (codegen/PlanSchedule.h), as `smelt dump` lists it in
// executable.txt: per step the buffers given back after it ("frees"), and the device segments
// with what each reads and hands on. On the CPU one segment holds every step; placed for a GPU,
// rng_normal, placed on the CPU by its scope (smelt.device), cuts the function into gpu:0, cpu:0,
// gpu:0.
// REQUIRES: cuda-codegen
// RUN: rm -rf %t
// RUN: smelt dump %s --dump-dir %t > /dev/null
// RUN: FileCheck %s --check-prefix=CPU < %t/main-0/executable.txt
// CPU:      = matmul(b0{{.*}}) {{.*}} frees b0
// CPU-NEXT: = argmax(b2{{.*}}) {axis=1, kernel=-1}{{$}}
// The noise is drawn in the kernel that multiplies it.
// CPU-NEXT: = fusion(b3{{.*}}) {kernel=0} frees b3
// CPU-NEXT: = fusion(b4{{.*}}, b2{{.*}}) {kernel=1} frees b4
// CPU-NEXT: = matmul(b2{{.*}}, b1{{.*}}) {{.*}} frees b1
// CPU:      segment on cpu:0: steps [0, 5), reads [b0 b1], writes [b2 b5 b6]
// CPU-NOT:  segment

// RUN: smelt dump %s --dump-dir %t --target=cuda:sm_90 > /dev/null
// RUN: FileCheck %s --check-prefix=GPU < %t/main-1/executable.txt
// The second matmul, written after the noise but not needing it, runs in the first GPU segment
// (smelt-group-host-steps); the tanh (b5) goes to the caller and to the last segment, so no
// step frees it.
// GPU:      b5:{{.*}} = fusion(b4{{.*}}) {kernel=0} on gpu:0 frees b4
// GPU:      b8:{{.*}} = matmul(b5{{.*}}, b2{{.*}}) {{.*}} on gpu:0 frees b1
// GPU-NEXT: = copy(b7{{.*}}) {}
// GPU-NEXT: = fusion(b9{{.*}}) {kernel=2} frees b7
// GPU:      segment on gpu:0: steps [0, 8), reads [b0 b1], writes [b5 b7 b8]
// GPU-NEXT: segment on cpu:0: steps [8, 10), reads [b7], writes [b10]
// GPU-NEXT: segment on gpu:0: steps [10, 14), reads [b10 b5], writes [b12]

func.func @main(%x: tensor<16x8xf32>, %w: tensor<8x8xf32>) -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>) {
  %0 = smelt.matmul %x, %w : tensor<16x8xf32>, tensor<8x8xf32>
  %1 = smelt.tanh %0 : tensor<16x8xf32>
  %2 = smelt.argmax %1 axis = 1 : tensor<16x8xf32>
  %3 = smelt.reduce sum %2 axes = [0] : tensor<16xi64>
  %4 = smelt.rng_normal seed = 5, mean = 0.0, stddev = 1.0 offset %3 {smelt.device = "cpu:0"} : tensor<16x8xf32>
  %6 = smelt.matmul %1, %w : tensor<16x8xf32>, tensor<8x8xf32>
  %5 = smelt.mul %4, %1 : tensor<16x8xf32>
  return %5, %1, %6 : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>
}
