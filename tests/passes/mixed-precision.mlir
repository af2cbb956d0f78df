// smelt-mixed-precision: allow, infer and deny lists, cast folding, f32 results, and gradients
// that reach the master weights in f32 when autodiff runs afterwards.
// RUN: smelt-opt %s -split-input-file -smelt-mixed-precision | FileCheck %s
// RUN: smelt-opt %s -split-input-file -smelt-mixed-precision=policy=mixed_f16 | FileCheck %s --check-prefix=F16
// RUN: smelt-opt %s -split-input-file -smelt-mixed-precision=keep-replaced=true | FileCheck %s --check-prefix=KEEP
// RUN: smelt-opt %s -smelt-mixed-precision -smelt-autodiff=func=mlp | FileCheck %s --check-prefix=GRAD
// RUN: not smelt-opt %s -split-input-file -smelt-mixed-precision=policy=fp8 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: smelt-mixed-precision: policy 'fp8' must be f32, mixed_bf16 or mixed_f16

// The matmuls compute in bf16; the bias add and relu follow them (the bias, a master weight,
// is cast); exp and the reduction stay f32, so the one cast back sits before exp.
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: %[[X:[^:]+]]: tensor<4x8xf32>, %[[W:[^:]+]]: tensor<8x16xf32> {smelt.param}
// CHECK-DAG: %[[WL:.+]] = smelt.convert %[[W]] : tensor<8x16xf32> -> tensor<8x16xbf16>
// CHECK-DAG: %[[XL:.+]] = smelt.convert %[[X]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK: %[[MM:.+]] = smelt.matmul %[[XL]], %[[WL]] : tensor<4x8xbf16>, tensor<8x16xbf16>
// CHECK: %[[S:.+]] = smelt.add %[[MM]], %{{.+}} : tensor<4x16xbf16>
// CHECK: %[[R:.+]] = smelt.relu %[[S]] : tensor<4x16xbf16>
// CHECK: %[[MM2:.+]] = smelt.matmul %[[R]], %{{.+}} : tensor<4x16xbf16>, tensor<16x3xbf16>
// CHECK: %[[BACK:.+]] = smelt.convert %[[MM2]] : tensor<4x3xbf16> -> tensor<4x3xf32>
// CHECK: smelt.exp %[[BACK]] : tensor<4x3xf32>
// CHECK: smelt.reduce sum %{{.+}} : tensor<4x3xf32>
// CHECK: return %{{.+}} : tensor<f32>
// F16-LABEL: func.func @mlp
// F16: smelt.matmul %{{.+}}, %{{.+}} : tensor<4x8xf16>, tensor<8x16xf16>
// F16: smelt.relu %{{.+}} : tensor<4x16xf16>
// The gradients of the weights come back in f32 through the casts; the backward matmuls run
// in bf16 too.
// GRAD-LABEL: func.func @mlp_grad
// GRAD-SAME: -> (tensor<f32> {smelt.name = "loss"}, tensor<8x16xf32> {smelt.name = "grad/arg1"}, tensor<16xf32> {smelt.name = "grad/arg2"}, tensor<16x3xf32> {smelt.name = "grad/arg3"})
// GRAD: smelt.matmul %{{.+}}, %{{.+}} transpose_rhs : tensor<4x3xbf16>, tensor<16x3xbf16>
// GRAD: %[[DW:.+]] = smelt.matmul %{{.+}}, %{{.+}} transpose_lhs : tensor<4x8xbf16>, tensor<4x16xbf16>
// GRAD: %[[DW32:.+]] = smelt.convert %[[DW]] : tensor<8x16xbf16> -> tensor<8x16xf32>
// GRAD: return %{{.+}}, %[[DW32]]
func.func @mlp(%x: tensor<4x8xf32>, %w: tensor<8x16xf32> {smelt.param}, %b: tensor<16xf32> {smelt.param}, %w2: tensor<16x3xf32> {smelt.param}) -> tensor<f32> {
  %0 = smelt.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32>
  %1 = smelt.broadcast_in_dim %b, dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %2 = smelt.add %0, %1 : tensor<4x16xf32>
  %3 = smelt.relu %2 : tensor<4x16xf32>
  %4 = smelt.matmul %3, %w2 : tensor<4x16xf32>, tensor<16x3xf32>
  %5 = smelt.exp %4 : tensor<4x3xf32>
  %6 = smelt.reduce sum %5 axes = [0, 1] : tensor<4x3xf32>
  return %6 : tensor<f32>
}

// -----

// An elementwise op stays f32 when an operand was computed in f32 (the max of a softmax), and
// a result the function returns is converted back to f32.
// CHECK-LABEL: func.func @stays_f32
// CHECK: %[[MM:.+]] = smelt.matmul {{.*}} : tensor<2x4xbf16>, tensor<4x4xbf16>
// CHECK: %[[MM32:.+]] = smelt.convert %[[MM]] : tensor<2x4xbf16> -> tensor<2x4xf32>
// CHECK: smelt.reduce max %[[MM32]]
// CHECK: smelt.sub %[[MM32]], %{{.+}} : tensor<2x4xf32>
// CHECK: return %[[MM32]], %{{.+}} : tensor<2x4xf32>, tensor<2x4xf32>
func.func @stays_f32(%x: tensor<2x4xf32>, %w: tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %0 = smelt.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32>
  %1 = smelt.reduce max %0 axes = [1] : tensor<2x4xf32>
  %2 = smelt.broadcast_in_dim %1, dims = [0] : tensor<2xf32> -> tensor<2x4xf32>
  %3 = smelt.sub %0, %2 : tensor<2x4xf32>
  return %0, %3 : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// f64 and integer ops are left alone; a matmul already in bf16 is not touched.
// CHECK-LABEL: func.func @leaves_alone
// CHECK: smelt.matmul %arg0, %arg0 : tensor<2x2xf64>, tensor<2x2xf64>
// CHECK: smelt.matmul %arg1, %arg1 : tensor<2x2xbf16>, tensor<2x2xbf16>
// CHECK-NOT: smelt.convert
func.func @leaves_alone(%a: tensor<2x2xf64>, %b: tensor<2x2xbf16>, %i: tensor<2xi32>) -> (tensor<2x2xf64>, tensor<2x2xbf16>, tensor<2xi32>) {
  %0 = smelt.matmul %a, %a : tensor<2x2xf64>, tensor<2x2xf64>
  %1 = smelt.matmul %b, %b : tensor<2x2xbf16>, tensor<2x2xbf16>
  %2 = smelt.add %i, %i : tensor<2xi32>
  return %0, %1, %2 : tensor<2x2xf64>, tensor<2x2xbf16>, tensor<2xi32>
}

// -----

// Each op's class comes from its ODS facts (Smelt_Precision): sin and cos keep f32 (a position
// times a frequency needs more digits than bf16 has), tanh follows its bf16 operand.
// CHECK-LABEL: func.func @facts_decide
// CHECK: %[[MM:.+]] = smelt.matmul {{.*}} : tensor<2x4xbf16>, tensor<4x4xbf16>
// CHECK-DAG: %[[MM32:.+]] = smelt.convert %[[MM]] : tensor<2x4xbf16> -> tensor<2x4xf32>
// CHECK-DAG: smelt.tanh %[[MM]] : tensor<2x4xbf16>
// CHECK: smelt.sin %[[MM32]] : tensor<2x4xf32>
// CHECK: smelt.cos %[[MM32]] : tensor<2x4xf32>
func.func @facts_decide(%x: tensor<2x4xf32>, %w: tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %0 = smelt.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32>
  %1 = smelt.tanh %0 : tensor<2x4xf32>
  %2 = smelt.sin %0 : tensor<2x4xf32>
  %3 = smelt.cos %0 : tensor<2x4xf32>
  return %1, %2, %3 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// keep-replaced (what the builder asks for: its tensors still name the f32 ops) leaves the
// replaced f32 op in place, unused.
// KEEP-LABEL: func.func @keep
// KEEP: smelt.matmul %{{.+}}, %{{.+}} : tensor<2x4xbf16>, tensor<4x4xbf16>
// KEEP: smelt.matmul %{{.+}}, %{{.+}} : tensor<2x4xf32>, tensor<4x4xf32>
// CHECK-LABEL: func.func @keep
// CHECK-NOT: tensor<2x4xf32>, tensor<4x4xf32>
func.func @keep(%x: tensor<2x4xf32>, %w: tensor<4x4xf32>) -> tensor<2x4xf32> {
  %0 = smelt.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// gather follows its table (infer): a bf16 table is gathered in bf16, an f32 master table in
// f32. scatter_add stays f32 (deny): a bf16 gradient's sum is not rounded on every add.
// CHECK-LABEL: func.func @gather_follows_its_table
// CHECK: %[[G:.+]] = smelt.gather %arg0[%arg1] : tensor<10x4xbf16>, tensor<3xi32>
// CHECK: smelt.gather %arg2[%arg1] : tensor<10x4xf32>, tensor<3xi32>
// CHECK: smelt.scatter_add %{{.+}}[%arg1] size = 10 : tensor<3x4xf32>, tensor<3xi32>
// CHECK-NOT: smelt.scatter_add {{.*}}bf16
func.func @gather_follows_its_table(%low: tensor<10x4xbf16>, %ids: tensor<3xi32>, %master: tensor<10x4xf32> {smelt.param}) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<10x4xf32>) {
  %t = smelt.convert %low : tensor<10x4xbf16> -> tensor<10x4xf32>
  %0 = smelt.gather %t[%ids] : tensor<10x4xf32>, tensor<3xi32>
  %1 = smelt.gather %master[%ids] : tensor<10x4xf32>, tensor<3xi32>
  %2 = smelt.scatter_add %0[%ids] size = 10 : tensor<3x4xf32>, tensor<3xi32>
  return %0, %1, %2 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<10x4xf32>
}
