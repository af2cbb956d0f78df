// smelt-bucket-all-reduce: all_reduces combined into buckets in the order their operands are
// ready, each bucket moved up to its last operand's producer; the size cap, what may not share
// a bucket, and a bucket that would come too late for a user.
// RUN: smelt-opt %s -split-input-file -smelt-bucket-all-reduce | FileCheck %s
// RUN: smelt-opt %s -split-input-file -smelt-bucket-all-reduce=bucket-bytes=64 | FileCheck %s --check-prefix=SMALL
// RUN: smelt-opt %s -split-input-file -smelt-bucket-all-reduce=bucket-bytes=0 | FileCheck %s --check-prefix=ALONE
// RUN: not smelt-opt %s -split-input-file -smelt-bucket-all-reduce=bucket-bytes=-1 2>&1 | FileCheck %s --check-prefix=BAD

// A backward pass makes the last layer's gradients first (%g2, then %g1); the all_reduces at
// the end become one, right after %g1's producer, with its operands in readiness order.
// CHECK-LABEL: func.func @two_layers
// CHECK: %[[G2:.+]] = smelt.mul %arg1, %arg1
// CHECK-NEXT: %[[G1:.+]] = smelt.exp %arg0
// CHECK-NEXT: %[[R:.+]]:2 = smelt.all_reduce mean %[[G2]], %[[G1]] replicas = 2 : tensor<10xf32>, tensor<4x8xf32>
// CHECK-NEXT: %[[U:.+]] = smelt.neg %arg0
// CHECK: smelt.sub %arg0, %[[R]]#1
// CHECK: smelt.sub %arg1, %[[R]]#0
// CHECK-NOT: smelt.all_reduce
// With 64 bytes a bucket: the 40-byte gradient is alone, the 128-byte one is too.
// SMALL-LABEL: func.func @two_layers
// SMALL: %[[G2:.+]] = smelt.mul %arg1, %arg1
// SMALL-NEXT: smelt.all_reduce mean %[[G2]] replicas = 2 : tensor<10xf32>
// SMALL-NEXT: %[[G1:.+]] = smelt.exp %arg0
// SMALL-NEXT: smelt.all_reduce mean %[[G1]] replicas = 2 : tensor<4x8xf32>
// ALONE-LABEL: func.func @two_layers
// ALONE-COUNT-2: smelt.all_reduce mean %{{[0-9a-z]+}} replicas
// BAD: error: smelt-bucket-all-reduce: bucket-bytes = -1 must be >= 0
func.func @two_layers(%w1: tensor<4x8xf32>, %w2: tensor<10xf32>) -> (tensor<4x8xf32>, tensor<10xf32>) {
  %g2 = smelt.mul %w2, %w2 : tensor<10xf32>
  %g1 = smelt.exp %w1 : tensor<4x8xf32>
  %unrelated = smelt.neg %w1 : tensor<4x8xf32>
  %r1 = smelt.all_reduce mean %g1 replicas = 2 : tensor<4x8xf32>
  %r2 = smelt.all_reduce mean %g2 replicas = 2 : tensor<10xf32>
  %n1 = smelt.sub %w1, %r1 : tensor<4x8xf32>
  %n2 = smelt.sub %w2, %r2 : tensor<10xf32>
  %s = smelt.add %n1, %unrelated : tensor<4x8xf32>
  return %s, %n2 : tensor<4x8xf32>, tensor<10xf32>
}

// -----

// Different kinds, element types and replica counts never share a collective.
// CHECK-LABEL: func.func @incompatible
// CHECK-DAG: smelt.all_reduce sum %arg0 replicas = 2 : tensor<4xf32>
// CHECK-DAG: smelt.all_reduce mean %arg1 replicas = 2 : tensor<4xf32>
// CHECK-DAG: smelt.all_reduce sum %arg2 replicas = 2 : tensor<4xf16>
// CHECK-DAG: smelt.all_reduce sum %arg3 replicas = 4 : tensor<4xf32>
func.func @incompatible(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf16>, %d: tensor<4xf32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf16>, tensor<4xf32>) {
  %0 = smelt.all_reduce sum %a replicas = 2 : tensor<4xf32>
  %1 = smelt.all_reduce mean %b replicas = 2 : tensor<4xf32>
  %2 = smelt.all_reduce sum %c replicas = 2 : tensor<4xf16>
  %3 = smelt.all_reduce sum %d replicas = 4 : tensor<4xf32>
  return %0, %1, %2, %3 : tensor<4xf32>, tensor<4xf32>, tensor<4xf16>, tensor<4xf32>
}

// -----

// %x's result is needed before %z is even computed, so they cannot share a bucket: waiting
// for %z would delay %x's user (and moving the bucket after it would break dominance).
// CHECK-LABEL: func.func @needed_early
// CHECK: %[[RX:.+]] = smelt.all_reduce sum %arg0 replicas = 2
// CHECK-NEXT: %[[Z:.+]] = smelt.exp %[[RX]]
// CHECK-NEXT: smelt.all_reduce sum %[[Z]] replicas = 2
func.func @needed_early(%x: tensor<4xf32>) -> tensor<4xf32> {
  %rx = smelt.all_reduce sum %x replicas = 2 : tensor<4xf32>
  %z = smelt.exp %rx : tensor<4xf32>
  %rz = smelt.all_reduce sum %z replicas = 2 : tensor<4xf32>
  return %rz : tensor<4xf32>
}

// -----

// One replica: the all_reduce is the identity and canonicalization removes it.
// RUN: smelt-opt %s -split-input-file -canonicalize | FileCheck %s --check-prefix=ONE
// ONE-LABEL: func.func @one_replica
// ONE-NOT: smelt.all_reduce
// ONE: return %arg0
func.func @one_replica(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = smelt.all_reduce mean %x replicas = 1 : tensor<4xf32>
  return %0 : tensor<4xf32>
}
