// smelt-autodiff: the generated gradient IR for representative cases.
// RUN: smelt-opt %s -split-input-file -smelt-autodiff -verify-diagnostics | FileCheck %s

// d/dw sum(w * x) = x and d/dx = w.
// CHECK-LABEL: func.func @main_grad
// CHECK-SAME: (%[[W:.+]]: tensor<3xf32>, %[[X:.+]]: tensor<3xf32>)
// CHECK-SAME: {smelt.name = "loss"}
// CHECK-SAME: {smelt.name = "grad/arg0"}
// CHECK: %[[ONE:.+]] = smelt.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[G:.+]] = smelt.broadcast_in_dim %[[ONE]], dims = [] : tensor<f32> -> tensor<3xf32>
// CHECK: %[[DW:.+]] = smelt.mul %[[G]], %[[X]]
// CHECK: %[[DX:.+]] = smelt.mul %[[G]], %[[W]]
// CHECK: return %{{.+}}, %[[DW]], %[[DX]]
func.func @main(%w: tensor<3xf32>, %x: tensor<3xf32>) -> tensor<f32> {
  %0 = smelt.mul %w, %x : tensor<3xf32>
  %1 = smelt.reduce sum %0 axes = [0] : tensor<3xf32>
  return %1 : tensor<f32>
}

// -----

// Only smelt.param arguments are differentiated; a broadcast's gradient is a reduction; the
// matmul's weight gradient is x^T g (transpose_lhs), and nothing is built for the input x.
// CHECK-LABEL: func.func @main_grad
// CHECK-SAME: -> (tensor<f32> {smelt.name = "loss"}, tensor<4x2xf32> {smelt.name = "grad/w"}, tensor<2xf32> {smelt.name = "grad/b"})
// relu's gradient compares its result, not its operand, with zero.
// CHECK: %[[R:.+]] = smelt.relu
// CHECK: smelt.compare gt, %[[R]]
// CHECK: smelt.select
// CHECK-DAG: %[[DB:.+]] = smelt.reduce sum %{{.+}} axes = [0] : tensor<8x2xf32>
// CHECK-DAG: %[[DW:.+]] = smelt.matmul %arg0, %{{.+}} transpose_lhs : tensor<8x4xf32>, tensor<8x2xf32>
// CHECK-NOT: transpose_rhs
// CHECK: return %{{.+}}, %[[DW]], %[[DB]]
func.func @main(%x: tensor<8x4xf32> {smelt.name = "x"},
                %w: tensor<4x2xf32> {smelt.name = "w", smelt.param},
                %b: tensor<2xf32> {smelt.name = "b", smelt.param}) -> tensor<f32> {
  %0 = smelt.matmul %x, %w : tensor<8x4xf32>, tensor<4x2xf32>
  %1 = smelt.broadcast_in_dim %b, dims = [1] : tensor<2xf32> -> tensor<8x2xf32>
  %2 = smelt.add %0, %1 : tensor<8x2xf32>
  %3 = smelt.relu %2 : tensor<8x2xf32>
  %4 = smelt.reduce sum %3 axes = [0, 1] : tensor<8x2xf32>
  return %4 : tensor<f32>
}

// -----

// A parameter the loss does not use gets a zero gradient and no backward ops.
// CHECK-LABEL: func.func @main_grad
// CHECK: %[[Z:.+]] = smelt.constant dense<0.000000e+00> : tensor<5xf32>
// CHECK-NOT: smelt.mul
// CHECK: return %{{.+}}, %{{.+}}, %[[Z]]
func.func @main(%a: tensor<f32> {smelt.param}, %unused: tensor<5xf32> {smelt.param}) -> tensor<f32> {
  %0 = smelt.exp %a : tensor<f32>
  return %0 : tensor<f32>
}

// -----

// A value used twice accumulates both contributions; compare stops the gradient.
// CHECK-LABEL: func.func @main_grad
// CHECK: smelt.compare
// CHECK: %[[T1:.+]] = smelt.mul
// CHECK: %[[T2:.+]] = smelt.mul
// CHECK: smelt.add %[[T1]], %[[T2]]
func.func @main(%x: tensor<f32>) -> tensor<f32> {
  %0 = smelt.mul %x, %x : tensor<f32>
  %z = smelt.constant dense<0.0> : tensor<f32>
  %m = smelt.compare gt, %x, %z : tensor<f32>
  %1 = smelt.select %m, %0, %z : tensor<i1>, tensor<f32>
  return %1 : tensor<f32>
}

// -----

// The loss must be a float scalar.
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{autodiff needs a rank-0 float loss, got 'tensor<3xf32>'}}
  %0 = smelt.exp %x : tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// An op with no gradient rule between the argument and the loss is an error at that op.
func.func @main(%x: tensor<1x4x4x2xf32>, %w: tensor<2x2x2x2xf32>) -> tensor<f32> {
  // expected-error @+1 {{'smelt.conv2d_backward_filter' op has no gradient rule}}
  %0 = smelt.conv2d_backward_filter %x, %x strides = [1, 1] padding = [0, 0, 0, 0] dilation = [1, 1] : tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32> -> tensor<1x1x2x2xf32>
  %1 = smelt.reduce sum %0 axes = [0, 1, 2, 3] : tensor<1x1x2x2xf32>
  return %1 : tensor<f32>
}

// -----

// Epilogues are folded after autodiff: a matmul that has one is not differentiated.
func.func @main(%x: tensor<2x4xf32>, %w: tensor<4x3xf32>, %b: tensor<3xf32>) -> tensor<f32> {
  // expected-error @+1 {{'smelt.matmul' op has a folded epilogue (bias or activation) and no gradient rule: differentiate before smelt-fuse folds epilogues}}
  %0 = smelt.matmul %x, %w bias %b activation relu : tensor<2x4xf32>, tensor<4x3xf32>, tensor<3xf32>
  %1 = smelt.reduce sum %0 axes = [0, 1] : tensor<2x3xf32>
  return %1 : tensor<f32>
}

// -----

// An all_reduce's gradient is the same all_reduce of the result's gradient: the loss of every
// replica depends on every replica's operand.
// CHECK-LABEL: func.func @main_grad
// CHECK: %[[G:.+]] = smelt.broadcast_in_dim
// CHECK: %[[R:.+]] = smelt.all_reduce mean %[[G]] replicas = 4 : tensor<3xf32>
// CHECK: return %{{.+}}, %[[R]]
func.func @main(%w: tensor<3xf32>) -> tensor<f32> {
  %0 = smelt.all_reduce mean %w replicas = 4 : tensor<3xf32>
  %1 = smelt.reduce sum %0 axes = [0] : tensor<3xf32>
  return %1 : tensor<f32>
}

// -----

// A bucket (several results) has no gradient rule: differentiate first, bucket afterwards.
func.func @main(%w: tensor<3xf32>, %v: tensor<2xf32>) -> tensor<f32> {
  // expected-error @+1 {{'smelt.all_reduce' op has 2 results and no gradient rule for that; differentiate before the passes that make such ops (smelt-bucket-all-reduce, smelt-fuse)}}
  %0:2 = smelt.all_reduce sum %w, %v replicas = 2 : tensor<3xf32>, tensor<2xf32>
  %1 = smelt.reduce sum %0#0 axes = [0] : tensor<3xf32>
  return %1 : tensor<f32>
}

// -----

// A constant exponent: d(x^3)/dx = 3 x^2 with the constant 2 (no x^(3 - 1) computed at run
// time), and d(x^2)/dx = 2 x with no pow at all.
// CHECK-LABEL: func.func @main_grad
// CHECK: %[[TWO:.+]] = smelt.constant dense<2.000000e+00> : tensor<3xf32>
// CHECK: smelt.pow %{{.+}}, %[[TWO]] : tensor<3xf32>
// CHECK-NOT: smelt.sub
// CHECK-NOT: smelt.pow
// CHECK: return
func.func @main(%x: tensor<3xf32>) -> tensor<f32> {
  %c3 = smelt.constant dense<3.0> : tensor<f32>
  %e3 = smelt.broadcast_in_dim %c3, dims = [] : tensor<f32> -> tensor<3xf32>
  %c2 = smelt.constant dense<2.0> : tensor<f32>
  %e2 = smelt.broadcast_in_dim %c2, dims = [] : tensor<f32> -> tensor<3xf32>
  %0 = smelt.pow %x, %e3 : tensor<3xf32>
  %1 = smelt.pow %0, %e2 : tensor<3xf32>
  %2 = smelt.reduce sum %1 axes = [0] : tensor<3xf32>
  return %2 : tensor<f32>
}

// -----

// A value sliced several times gets its gradient once every slice's is built: the pads of
// pieces along one axis that do not overlap join into one concat in offset order, zeros in
// the gap (column 3); the slice that overlaps them (columns 1-2) keeps its pad, and the sum
// adds it once. No pad of the joined pieces is left.
// CHECK-LABEL: func.func @main_grad
// CHECK-DAG: %[[GAP:.+]] = smelt.constant dense<0.000000e+00> : tensor<2x1xf32>
// CHECK-DAG: %[[OVER:.+]] = smelt.pad %{{.+}} low = [0, 1] high = [0, 3] value = 0.000000e+00 : tensor<2x2xf32>
// CHECK: %[[JOINED:.+]] = smelt.concat %[[A:.+]], %[[B:.+]], %[[GAP]], %[[C:.+]] dim = 1 : tensor<2x2xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x2xf32>
// CHECK: %[[SUM:.+]] = smelt.add %[[JOINED]], %[[OVER]] : tensor<2x6xf32>
// CHECK-NOT: smelt.pad
// CHECK: return %{{.+}}, %[[SUM]]
func.func @main(%x: tensor<2x6xf32>) -> tensor<f32> {
  %a = smelt.slice %x [0:2:1, 0:2:1] : tensor<2x6xf32>
  %b = smelt.slice %x [0:2:1, 2:3:1] : tensor<2x6xf32>
  %c = smelt.slice %x [0:2:1, 4:6:1] : tensor<2x6xf32>
  %d = smelt.slice %x [0:2:1, 1:3:1] : tensor<2x6xf32>
  %sa = smelt.reduce sum %a axes = [0, 1] : tensor<2x2xf32>
  %sb = smelt.reduce sum %b axes = [0, 1] : tensor<2x1xf32>
  %sc = smelt.reduce sum %c axes = [0, 1] : tensor<2x2xf32>
  %sd = smelt.reduce sum %d axes = [0, 1] : tensor<2x2xf32>
  %0 = smelt.add %sa, %sb : tensor<f32>
  %1 = smelt.add %0, %sc : tensor<f32>
  %2 = smelt.add %1, %sd : tensor<f32>
  return %2 : tensor<f32>
}
