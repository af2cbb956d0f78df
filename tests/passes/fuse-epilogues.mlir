// smelt-fuse's epilogue folding: the bias add and activation after a matmul or conv2d move into
// the op where its library applies them (oneDNN on the CPU, cuBLASLt on the GPU), and each
// matmul and conv2d gets a line in the report saying what was folded, or why not.
// RUN: smelt-opt %s -split-input-file -smelt-fuse | FileCheck %s
// RUN: smelt-opt %s -split-input-file -smelt-fuse=report=- -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: smelt-opt %s -split-input-file -smelt-fuse=epilogues=false | FileCheck %s --check-prefix=OFF
// RUN: smelt-opt %s -split-input-file -smelt-fuse=one-op-per-kernel | FileCheck %s --check-prefix=OFF
// RUN: smelt-opt %s -split-input-file -smelt-fuse="conv-epilogues=false report=-" | FileCheck %s --check-prefix=NOCONV

// The MLP layer on the CPU: bias and relu become oneDNN's bias and eltwise post-op, and the
// broadcast goes with them; what follows the relu is fused as before.
// CHECK-LABEL: func.func @bias_relu
// CHECK-NEXT: %[[MM:.+]] = smelt.matmul %arg0, %arg1 bias %arg2 activation relu : tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>
// CHECK-NEXT: smelt.fusion loop(%[[MM]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: smelt.exp
// CHECK-NOT: smelt.broadcast_in_dim
// REPORT-LABEL: report for @bias_relu
// REPORT-NEXT: epilogue: 'matmul' at {{.*}}fuse-epilogues.mlir:{{[0-9]+}} tensor<4x16xf32>: bias add and relu folded into the oneDNN call (bias argument and eltwise post-op)
// REPORT-NEXT: fusion 0 (loop over 4x16, 1 result, 1 ops)
// OFF-LABEL: func.func @bias_relu
// OFF: smelt.matmul %arg0, %arg1 : tensor<4x8xf32>, tensor<8x16xf32>
// OFF-NOT: bias %
func.func @bias_relu(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %0 = smelt.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32>
  %1 = smelt.broadcast_in_dim %b, dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %2 = smelt.add %1, %0 : tensor<4x16xf32>
  %3 = smelt.relu %2 : tensor<4x16xf32>
  %4 = smelt.exp %3 : tensor<4x16xf32>
  return %4 : tensor<4x16xf32>
}

// -----

// The logits layer: the sum has two users, so only the bias folds; tanh and logistic fold on
// their own; a batched matmul's bias is along its last dimension.
// CHECK-LABEL: func.func @bias_only_and_activations
// CHECK: smelt.matmul %arg0, %arg1 bias %arg2 : tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>
// CHECK: smelt.matmul %arg0, %arg1 activation tanh : tensor<4x8xf32>, tensor<8x16xf32>
// CHECK: smelt.matmul %arg3, %arg4 bias %arg2 activation logistic : tensor<2x4x8xf32>, tensor<2x8x16xf32>, tensor<16xf32>
// REPORT-LABEL: report for @bias_only_and_activations
// REPORT-NEXT: epilogue: 'matmul' {{.*}}: bias add folded into the oneDNN call (bias argument); no activation: the bias add's result has 2 users
// REPORT-NEXT: epilogue: 'matmul' {{.*}}: tanh folded into the oneDNN call (eltwise post-op)
// REPORT-NEXT: epilogue: 'matmul' {{.*}} tensor<2x4x16xf32>: bias add and logistic folded into the oneDNN call
func.func @bias_only_and_activations(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>, %xs: tensor<2x4x8xf32>, %ws: tensor<2x8x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<2x4x16xf32>) {
  %0 = smelt.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32>
  %1 = smelt.broadcast_in_dim %b, dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %2 = smelt.add %0, %1 : tensor<4x16xf32>
  %3 = smelt.exp %2 : tensor<4x16xf32>
  %4 = smelt.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32>
  %5 = smelt.tanh %4 : tensor<4x16xf32>
  %6 = smelt.matmul %xs, %ws : tensor<2x4x8xf32>, tensor<2x8x16xf32>
  %7 = smelt.broadcast_in_dim %b, dims = [2] : tensor<16xf32> -> tensor<2x4x16xf32>
  %8 = smelt.add %6, %7 : tensor<2x4x16xf32>
  %9 = smelt.logistic %8 : tensor<2x4x16xf32>
  return %2, %3, %5, %9 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<2x4x16xf32>
}

// -----

// Nothing folds when the product has other users, when the add is no bias broadcast along the
// last dimension, or when the user is not an activation.
// CHECK-LABEL: func.func @vetoes
// CHECK-NOT: bias
// CHECK-NOT: activation
// CHECK: return
// REPORT-LABEL: report for @vetoes
// REPORT-NEXT: epilogue: 'matmul' {{.*}}: nothing folded: its result has 2 users
// REPORT-NEXT: epilogue: 'matmul' {{.*}}: nothing folded: its user 'add' adds no vector broadcast along the last dimension
// REPORT-NEXT: epilogue: 'matmul' {{.*}}: nothing folded: its user 'add' adds no vector broadcast along the last dimension
// REPORT-NEXT: epilogue: 'matmul' {{.*}}: nothing folded: its user 'exp' {{.*}} is not relu, tanh, logistic, relu6 (min(max(x, 0), 6)), hardswish or swish
func.func @vetoes(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %full: tensor<4x16xf32>, %rows: tensor<4xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %0 = smelt.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32>
  %1 = smelt.relu %0 : tensor<4x16xf32>
  %2 = smelt.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32>
  %3 = smelt.add %2, %full : tensor<4x16xf32>
  %4 = smelt.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32>
  %5 = smelt.broadcast_in_dim %rows, dims = [0] : tensor<4xf32> -> tensor<4x16xf32>
  %6 = smelt.add %4, %5 : tensor<4x16xf32>
  %7 = smelt.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32>
  %8 = smelt.exp %7 : tensor<4x16xf32>
  return %0, %1, %3, %6, %8 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// On the GPU: cuBLASLt takes bias and relu, not tanh (the bias still folds), nor f64; the cuDNN
// convolution takes nothing; an activation on another device stays there.
// CHECK-LABEL: func.func @gpu
// CHECK: smelt.matmul %arg0, %arg1 bias %arg2 activation relu {smelt.device = "gpu:0"}
// CHECK: smelt.matmul %arg0, %arg1 bias %arg2 {smelt.device = "gpu:0"}
// CHECK: smelt.tanh
// CHECK: smelt.matmul %arg3, %arg3 {smelt.device = "gpu:0"}
// CHECK: smelt.conv2d %arg4, %arg5 strides = [1, 1] padding = [0, 0, 0, 0] dilation = [1, 1] {smelt.device = "gpu:0"}
// CHECK: smelt.matmul %arg0, %arg1 {smelt.device = "gpu:0"}
// REPORT-LABEL: report for @gpu
// REPORT-NEXT: epilogue: 'matmul' {{.*}}: bias add and relu folded into the cuBLASLt call (epilogue RELU_BIAS)
// REPORT-NEXT: epilogue: 'matmul' {{.*}}: bias add folded into the cuBLASLt call (epilogue BIAS); no activation: cuBLASLt has no tanh epilogue
// REPORT-NEXT: epilogue: 'matmul' {{.*}}: nothing folded: cuBLASLt's epilogues are used for f32, f16 and bf16 only
// REPORT-NEXT: epilogue: 'conv2d' {{.*}}: nothing folded: the cuDNN convolution here takes no epilogue
// REPORT-NEXT: epilogue: 'matmul' {{.*}}: nothing folded: the user of its result, 'relu' {{.*}}, is on another device
func.func @gpu(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>, %d: tensor<4x4xf64>, %in: tensor<1x4x4x2xf32>, %f: tensor<2x2x2x3xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x4xf64>, tensor<1x3x3x3xf32>, tensor<4x16xf32>) {
  %0 = smelt.matmul %x, %w {smelt.device = "gpu:0"} : tensor<4x8xf32>, tensor<8x16xf32>
  %1 = smelt.broadcast_in_dim %b, dims = [1] {smelt.device = "gpu:0"} : tensor<16xf32> -> tensor<4x16xf32>
  %2 = smelt.add %0, %1 {smelt.device = "gpu:0"} : tensor<4x16xf32>
  %3 = smelt.relu %2 {smelt.device = "gpu:0"} : tensor<4x16xf32>
  %4 = smelt.matmul %x, %w {smelt.device = "gpu:0"} : tensor<4x8xf32>, tensor<8x16xf32>
  %5 = smelt.add %4, %1 {smelt.device = "gpu:0"} : tensor<4x16xf32>
  %6 = smelt.tanh %5 {smelt.device = "gpu:0"} : tensor<4x16xf32>
  %7 = smelt.matmul %d, %d {smelt.device = "gpu:0"} : tensor<4x4xf64>, tensor<4x4xf64>
  %8 = smelt.relu %7 {smelt.device = "gpu:0"} : tensor<4x4xf64>
  %9 = smelt.conv2d %in, %f strides = [1, 1] padding = [0, 0, 0, 0] dilation = [1, 1] {smelt.device = "gpu:0"} : tensor<1x4x4x2xf32>, tensor<2x2x2x3xf32>
  %10 = smelt.relu %9 {smelt.device = "gpu:0"} : tensor<1x3x3x3xf32>
  %11 = smelt.matmul %x, %w {smelt.device = "gpu:0"} : tensor<4x8xf32>, tensor<8x16xf32>
  %12 = smelt.relu %11 {smelt.device = "cpu:0"} : tensor<4x16xf32>
  return %3, %6, %8, %10, %12 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x4xf64>, tensor<1x3x3x3xf32>, tensor<4x16xf32>
}

// -----

// A CNN layer on the CPU: oneDNN's convolution takes the bias and relu (conv-epilogues=false
// leaves them to a fused kernel after it).
// REPORT-LABEL: report for @conv_bias_relu
// REPORT-NEXT: epilogue: 'conv2d' {{.*}} tensor<2x6x6x8xf32>: bias add and relu folded into the oneDNN call (bias argument and eltwise post-op)
// CHECK-LABEL: func.func @conv_bias_relu
// CHECK-NEXT: %[[C:.+]] = smelt.conv2d %arg0, %arg1 strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1] bias %arg2 activation relu : tensor<2x6x6x3xf32>, tensor<3x3x3x8xf32>, tensor<8xf32>
// CHECK-NEXT: return %[[C]]
// NOCONV-LABEL: report for @conv_bias_relu
// NOCONV-NEXT: epilogue: 'conv2d' {{.*}} tensor<2x6x6x8xf32>: nothing folded: conv-epilogues=false leaves them to a kernel
// NOCONV-LABEL: func.func @conv_bias_relu
// NOCONV-NEXT: smelt.conv2d %arg0, %arg1 strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1] : tensor<2x6x6x3xf32>, tensor<3x3x3x8xf32>
// NOCONV-NEXT: smelt.fusion loop
func.func @conv_bias_relu(%x: tensor<2x6x6x3xf32>, %w: tensor<3x3x3x8xf32>, %b: tensor<8xf32>) -> tensor<2x6x6x8xf32> {
  %0 = smelt.conv2d %x, %w strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1] : tensor<2x6x6x3xf32>, tensor<3x3x3x8xf32>
  %1 = smelt.broadcast_in_dim %b, dims = [3] : tensor<8xf32> -> tensor<2x6x6x8xf32>
  %2 = smelt.add %0, %1 : tensor<2x6x6x8xf32>
  %3 = smelt.relu %2 : tensor<2x6x6x8xf32>
  return %3 : tensor<2x6x6x8xf32>
}

// -----

// After smelt-mixed-precision the bias is a cast of the broadcast f32 master weight: the vector
// is cast instead (a kernel over 16 elements, not 4x16).
// CHECK-LABEL: func.func @mixed_precision
// CHECK: %[[F:.+]] = smelt.fusion loop(%arg2)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: smelt.convert %{{.+}} : tensor<16xf32> -> tensor<16xbf16>
// CHECK: smelt.matmul %arg0, %arg1 bias %[[F]] activation relu : tensor<4x8xbf16>, tensor<8x16xbf16>, tensor<16xbf16>
// REPORT-LABEL: report for @mixed_precision
// REPORT-NEXT: epilogue: 'matmul' {{.*}}: bias add and relu folded into the oneDNN call
func.func @mixed_precision(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xf32>) -> tensor<4x16xbf16> {
  %0 = smelt.matmul %x, %w : tensor<4x8xbf16>, tensor<8x16xbf16>
  %1 = smelt.broadcast_in_dim %b, dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %2 = smelt.convert %1 : tensor<4x16xf32> -> tensor<4x16xbf16>
  %3 = smelt.add %0, %2 : tensor<4x16xbf16>
  %4 = smelt.relu %3 : tensor<4x16xbf16>
  return %4 : tensor<4x16xbf16>
}

// -----

// The same on the GPU: the cast of the bias vector stays on the matmul's device. (It once came
// out with no device, so placement sent it to the CPU and the step went through the host.)
// CHECK-LABEL: func.func @mixed_precision_gpu
// CHECK: %[[F:.+]] = smelt.fusion loop(%arg2) {smelt.device = "gpu:0"
// CHECK-NEXT: ^bb0
// CHECK-NEXT: smelt.convert %{{.+}} {smelt.device = "gpu:0"} : tensor<16xf32> -> tensor<16xbf16>
// CHECK: smelt.matmul %arg0, %arg1 bias %[[F]] activation relu {smelt.device = "gpu:0"}
func.func @mixed_precision_gpu(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xf32>) -> tensor<4x16xbf16> {
  %0 = smelt.matmul %x, %w {smelt.device = "gpu:0"} : tensor<4x8xbf16>, tensor<8x16xbf16>
  %1 = smelt.broadcast_in_dim %b, dims = [1] {smelt.device = "gpu:0"} : tensor<16xf32> -> tensor<4x16xf32>
  %2 = smelt.convert %1 {smelt.device = "gpu:0"} : tensor<4x16xf32> -> tensor<4x16xbf16>
  %3 = smelt.add %0, %2 {smelt.device = "gpu:0"} : tensor<4x16xbf16>
  %4 = smelt.relu %3 {smelt.device = "gpu:0"} : tensor<4x16xbf16>
  return %4 : tensor<4x16xbf16>
}

// -----

// MobileNet's activations after a convolution and its bias, as the ONNX importer writes them:
// Clip(0, 6) (max then min with splat bounds) and HardSwish (x * min(max(x / 6 + 0.5, 0), 1),
// x read twice) become oneDNN's clip and hardswish post-ops; their constants go too.
// REPORT-LABEL: report for @conv_relu6_hardswish
// REPORT-NEXT: epilogue: 'conv2d' {{.*}}: bias add and relu6 folded into the oneDNN call (bias argument and eltwise post-op)
// REPORT-NEXT: epilogue: 'conv2d' {{.*}}: bias add and hardswish folded into the oneDNN call (bias argument and eltwise post-op)
// CHECK-LABEL: func.func @conv_relu6_hardswish
// CHECK-NEXT: %[[A:.+]] = smelt.conv2d %arg0, %arg1 {{.*}} bias %arg2 activation relu6
// CHECK-NEXT: %[[B:.+]] = smelt.conv2d %[[A]], %arg3 {{.*}} feature_group_count = 8 bias %arg4 activation hardswish
// CHECK-NEXT: return %[[B]]
// A clip to other bounds is no relu6: it stays a kernel after the convolution.
// REPORT-LABEL: report for @conv_clip_other_bounds
// REPORT-NEXT: epilogue: 'conv2d' {{.*}}: bias add folded into the oneDNN call (bias argument); no activation: its user 'max' {{.*}} is not relu, tanh, logistic, relu6 (min(max(x, 0), 6)), hardswish or swish
// CHECK-LABEL: func.func @conv_clip_other_bounds
// CHECK: smelt.conv2d {{.*}} bias %arg2 :
// CHECK-NEXT: smelt.fusion loop
func.func @conv_relu6_hardswish(%x: tensor<2x6x6x3xf32>, %w: tensor<3x3x3x8xf32>, %b: tensor<8xf32>, %d: tensor<3x3x1x8xf32>, %e: tensor<8xf32>) -> tensor<2x6x6x8xf32> {
  %0 = smelt.conv2d %x, %w strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1] : tensor<2x6x6x3xf32>, tensor<3x3x3x8xf32>
  %1 = smelt.broadcast_in_dim %b, dims = [3] : tensor<8xf32> -> tensor<2x6x6x8xf32>
  %2 = smelt.add %0, %1 : tensor<2x6x6x8xf32>
  %zero = smelt.constant dense<0.0> : tensor<2x6x6x8xf32>
  %six = smelt.constant dense<6.0> : tensor<2x6x6x8xf32>
  %3 = smelt.max %2, %zero : tensor<2x6x6x8xf32>
  %4 = smelt.min %3, %six : tensor<2x6x6x8xf32>
  %5 = smelt.conv2d %4, %d strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1] feature_group_count = 8 : tensor<2x6x6x8xf32>, tensor<3x3x1x8xf32>
  %6 = smelt.broadcast_in_dim %e, dims = [3] : tensor<8xf32> -> tensor<2x6x6x8xf32>
  %7 = smelt.add %5, %6 : tensor<2x6x6x8xf32>
  %sixth = smelt.constant dense<0.166666672> : tensor<2x6x6x8xf32>
  %half = smelt.constant dense<0.5> : tensor<2x6x6x8xf32>
  %one = smelt.constant dense<1.0> : tensor<2x6x6x8xf32>
  %8 = smelt.mul %7, %sixth : tensor<2x6x6x8xf32>
  %9 = smelt.add %8, %half : tensor<2x6x6x8xf32>
  %10 = smelt.max %9, %zero : tensor<2x6x6x8xf32>
  %11 = smelt.min %10, %one : tensor<2x6x6x8xf32>
  %12 = smelt.mul %7, %11 : tensor<2x6x6x8xf32>
  return %12 : tensor<2x6x6x8xf32>
}

func.func @conv_clip_other_bounds(%x: tensor<2x6x6x3xf32>, %w: tensor<3x3x3x8xf32>, %b: tensor<8xf32>) -> tensor<2x6x6x8xf32> {
  %0 = smelt.conv2d %x, %w strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1] : tensor<2x6x6x3xf32>, tensor<3x3x3x8xf32>
  %1 = smelt.broadcast_in_dim %b, dims = [3] : tensor<8xf32> -> tensor<2x6x6x8xf32>
  %2 = smelt.add %0, %1 : tensor<2x6x6x8xf32>
  %lo = smelt.constant dense<-1.0> : tensor<2x6x6x8xf32>
  %hi = smelt.constant dense<6.0> : tensor<2x6x6x8xf32>
  %3 = smelt.max %2, %lo : tensor<2x6x6x8xf32>
  %4 = smelt.min %3, %hi : tensor<2x6x6x8xf32>
  return %4 : tensor<2x6x6x8xf32>
}
