// smelt-autodiff's wrt option given as argument numbers (JAX's argnums), what the builder's
// Graph::gradients passes, and the error for a number that names no argument.
// RUN: smelt-opt %s -smelt-autodiff=wrt=1 | FileCheck %s
// RUN: smelt-opt %s -smelt-autodiff=wrt=1,0 | FileCheck %s --check-prefix=BOTH
// RUN: not smelt-opt %s -smelt-autodiff=wrt=0,7 2>&1 | FileCheck %s --check-prefix=BAD

// Only d/dx = w is built.
// CHECK-LABEL: func.func @main_grad
// CHECK-SAME: (%[[W:[^:]+]]: tensor<3xf32> {smelt.name = "w"}, %{{[^:]+}}: tensor<3xf32> {smelt.name = "x"}) -> (tensor<f32> {smelt.name = "loss"}, tensor<3xf32> {smelt.name = "grad/x"})
// CHECK: %[[DX:.+]] = smelt.mul %{{.+}}, %[[W]]
// CHECK: return %{{.+}}, %[[DX]]
// Gradients come in argument order, whatever order wrt names them in.
// BOTH-LABEL: func.func @main_grad
// BOTH-SAME: -> (tensor<f32> {smelt.name = "loss"}, tensor<3xf32> {smelt.name = "grad/w"}, tensor<3xf32> {smelt.name = "grad/x"})
// BAD: error: 'func.func' op smelt-autodiff: wrt='0,7' must be 'params', 'all' or argument numbers below 2 ('0,2')
func.func @main(%w: tensor<3xf32> {smelt.name = "w"}, %x: tensor<3xf32> {smelt.name = "x"}) -> tensor<f32> {
  %0 = smelt.mul %w, %x : tensor<3xf32>
  %1 = smelt.reduce sum %0 axes = [0] : tensor<3xf32>
  return %1 : tensor<f32>
}
