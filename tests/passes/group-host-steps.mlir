// smelt-group-host-steps: host steps that need a device's result sink to their first user,
// past the device work that does not need them; those that need nothing from a device are
// hoisted to the top; all_reduces and functions without GPU steps stay as they are.
// RUN: smelt-opt %s -split-input-file -smelt-group-host-steps | FileCheck %s

// The noise needs the GPU's exp; the tanh does not need the noise, so it joins exp's segment:
// gpu (exp, tanh), cpu (rng_normal), gpu (mul) where it was gpu, cpu, gpu (tanh, mul).
// CHECK-LABEL: func.func @sink
// CHECK:      %[[E:.+]] = smelt.exp %arg0 {smelt.device = "gpu:0"}
// CHECK-NEXT: %[[S:.+]] = smelt.reduce sum %[[E]]
// CHECK-NEXT: %[[T:.+]] = smelt.tanh %[[E]] {smelt.device = "gpu:0"}
// CHECK-NEXT: %[[DOWN:.+]] = smelt.copy %[[S]] {smelt.device = "cpu:0"}
// CHECK-NEXT: %[[C:.+]] = smelt.convert %[[DOWN]] {smelt.device = "cpu:0"}
// CHECK-NEXT: %[[N:.+]] = smelt.rng_normal {{.*}} offset %[[C]] {smelt.device = "cpu:0"}
// CHECK-NEXT: %[[UP:.+]] = smelt.copy %[[N]] {smelt.device = "gpu:0"}
// CHECK-NEXT: %[[M:.+]] = smelt.mul %[[UP]], %[[T]] {smelt.device = "gpu:0"}
func.func @sink(%x: tensor<16xf32>) -> tensor<16xf32> {
  %e = smelt.exp %x {smelt.device = "gpu:0"} : tensor<16xf32>
  %s = smelt.reduce sum %e axes = [0] {smelt.device = "gpu:0"} : tensor<16xf32>
  %down = smelt.copy %s {smelt.device = "cpu:0"} : tensor<f32>
  %c = smelt.convert %down {smelt.device = "cpu:0"} : tensor<f32> -> tensor<i64>
  %n = smelt.rng_normal seed = 5, mean = 0.0, stddev = 1.0 offset %c {smelt.device = "cpu:0"} : tensor<16xf32>
  %up = smelt.copy %n {smelt.device = "gpu:0"} : tensor<16xf32>
  %t = smelt.tanh %e {smelt.device = "gpu:0"} : tensor<16xf32>
  %m = smelt.mul %up, %t {smelt.device = "gpu:0"} : tensor<16xf32>
  return %m : tensor<16xf32>
}

// -----

// Noise from the step's offset (an argument) needs no device: it goes to the top with the
// constant it reads, and the GPU's work is one segment after it. The result's copy to the host
// sinks to the return.
// CHECK-LABEL: func.func @hoist
// CHECK:      %[[K:.+]] = smelt.constant dense<3>
// CHECK-NEXT: %[[O:.+]] = smelt.add %arg1, %[[K]] {smelt.device = "cpu:0"}
// CHECK-NEXT: %[[N:.+]] = smelt.rng_normal {{.*}} offset %[[O]] {smelt.device = "cpu:0"}
// CHECK-NEXT: %[[E:.+]] = smelt.exp %arg0 {smelt.device = "gpu:0"}
// CHECK-NEXT: %[[UP:.+]] = smelt.copy %[[N]] {smelt.device = "gpu:0"}
// CHECK-NEXT: %[[M:.+]] = smelt.mul %[[E]], %[[UP]] {smelt.device = "gpu:0"}
// CHECK-NEXT: %[[T:.+]] = smelt.tanh %[[M]] {smelt.device = "gpu:0"}
// CHECK-NEXT: %[[DOWN:.+]] = smelt.copy %[[M]] {smelt.device = "cpu:0"}
// CHECK-NEXT: return %[[DOWN]], %[[T]]
func.func @hoist(%x: tensor<16xf32>, %step: tensor<i64>) -> (tensor<16xf32>, tensor<16xf32>) {
  %e = smelt.exp %x {smelt.device = "gpu:0"} : tensor<16xf32>
  %k = smelt.constant dense<3> : tensor<i64>
  %o = smelt.add %step, %k {smelt.device = "cpu:0"} : tensor<i64>
  %n = smelt.rng_normal seed = 5, mean = 0.0, stddev = 1.0 offset %o {smelt.device = "cpu:0"} : tensor<16xf32>
  %up = smelt.copy %n {smelt.device = "gpu:0"} : tensor<16xf32>
  %m = smelt.mul %e, %up {smelt.device = "gpu:0"} : tensor<16xf32>
  %down = smelt.copy %m {smelt.device = "cpu:0"} : tensor<16xf32>
  %t = smelt.tanh %m {smelt.device = "gpu:0"} : tensor<16xf32>
  return %down, %t : tensor<16xf32>, tensor<16xf32>
}

// -----

// An all_reduce on the host keeps its place; the exp after it, which needs it, stays after it.
// CHECK-LABEL: func.func @collective
// CHECK:      smelt.exp %arg0 {smelt.device = "gpu:0"}
// CHECK-NEXT: smelt.copy
// CHECK-NEXT: smelt.all_reduce
// CHECK-NEXT: smelt.exp
func.func @collective(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %e = smelt.exp %x {smelt.device = "gpu:0"} : tensor<16xf32>
  %down = smelt.copy %e {smelt.device = "cpu:0"} : tensor<16xf32>
  %r = smelt.all_reduce sum %down replicas = 2 {smelt.device = "cpu:0"} : tensor<16xf32>
  %h = smelt.exp %r {smelt.device = "cpu:0"} : tensor<16xf32>
  return %h, %e : tensor<16xf32>, tensor<16xf32>
}

// -----

// On the CPU alone nothing moves.
// CHECK-LABEL: func.func @cpu_only
// CHECK:      smelt.exp
// CHECK-NEXT: smelt.rng_normal
// CHECK-NEXT: smelt.mul
func.func @cpu_only(%x: tensor<16xf32>) -> tensor<16xf32> {
  %e = smelt.exp %x {smelt.device = "cpu:0"} : tensor<16xf32>
  %n = smelt.rng_normal seed = 5, mean = 0.0, stddev = 1.0 {smelt.device = "cpu:0"} : tensor<16xf32>
  %m = smelt.mul %e, %n {smelt.device = "cpu:0"} : tensor<16xf32>
  return %m : tensor<16xf32>
}
