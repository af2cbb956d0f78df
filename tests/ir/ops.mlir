// Round trip of every smelt op: parse, print, parse again.
// RUN: smelt-opt %s | smelt-opt | FileCheck %s

// CHECK-LABEL: func.func @sources
func.func @sources() -> (tensor<2xf32>, tensor<2x3xi64>, tensor<4x5xf32>, tensor<4x5xbf16>) {
  // CHECK: smelt.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
  %c = smelt.constant dense<[1.0, 2.0]> : tensor<2xf32>
  // CHECK: smelt.iota dim = 1 : tensor<2x3xi64>
  %i = smelt.iota dim = 1 : tensor<2x3xi64>
  // CHECK: smelt.rng_uniform seed = 7, low = -1.000000e+00, high = 1.000000e+00 : tensor<4x5xf32>
  %u = smelt.rng_uniform seed = 7, low = -1.0, high = 1.0 : tensor<4x5xf32>
  // CHECK: smelt.rng_normal seed = 3, mean = 0.000000e+00, stddev = 2.000000e+00 : tensor<4x5xbf16>
  %n = smelt.rng_normal seed = 3, mean = 0.0, stddev = 2.0 : tensor<4x5xbf16>
  %step = smelt.constant dense<7> : tensor<i64>
  // CHECK: smelt.rng_uniform seed = 7, low = 0.000000e+00, high = 1.000000e+00 offset %{{.*}} : tensor<4x5xf32>
  %o = smelt.rng_uniform seed = 7, low = 0.0, high = 1.0 offset %step : tensor<4x5xf32>
  return %c, %i, %u, %n : tensor<2xf32>, tensor<2x3xi64>, tensor<4x5xf32>, tensor<4x5xbf16>
}

// CHECK-LABEL: func.func @unary
func.func @unary(%x: tensor<4x8xf32>, %k: tensor<3xi32>, %d: tensor<4x8xf64>,
                  %h: tensor<4x8xbf16>) -> tensor<4x8xf32> {
  // CHECK: smelt.neg %{{.*}} : tensor<3xi32>
  %0 = smelt.neg %k : tensor<3xi32>
  // CHECK: smelt.abs %{{.*}} : tensor<3xi32>
  %1 = smelt.abs %0 : tensor<3xi32>
  // CHECK: smelt.relu %{{.*}} : tensor<4x8xf32>
  %2 = smelt.relu %x : tensor<4x8xf32>
  // CHECK: smelt.exp
  %3 = smelt.exp %2 : tensor<4x8xf32>
  // CHECK: smelt.log
  %4 = smelt.log %3 : tensor<4x8xf32>
  // CHECK: smelt.tanh
  %5 = smelt.tanh %4 : tensor<4x8xf32>
  // CHECK: smelt.logistic
  %6 = smelt.logistic %5 : tensor<4x8xf32>
  // CHECK: smelt.sqrt
  %7 = smelt.sqrt %6 : tensor<4x8xf32>
  // CHECK: smelt.rsqrt
  %8 = smelt.rsqrt %7 : tensor<4x8xf32>
  // CHECK: smelt.erf
  %9 = smelt.erf %8 : tensor<4x8xf32>
  // CHECK: smelt.sin %{{.*}} : tensor<4x8xf64>
  %sin = smelt.sin %d : tensor<4x8xf64>
  // CHECK: smelt.cos %{{.*}} : tensor<4x8xbf16>
  %cos = smelt.cos %h : tensor<4x8xbf16>
  // CHECK: smelt.neg %{{.*}} : tensor<4x8xf32>
  %10 = smelt.neg %9 : tensor<4x8xf32>
  // CHECK: smelt.abs %{{.*}} : tensor<4x8xf32>
  %11 = smelt.abs %10 : tensor<4x8xf32>
  return %11 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @binary
func.func @binary(%x: tensor<4xf16>, %y: tensor<4xf16>, %a: tensor<4xi64>) -> (tensor<4xf16>, tensor<4xi64>) {
  // CHECK: smelt.add %{{.*}}, %{{.*}} : tensor<4xf16>
  %0 = smelt.add %x, %y : tensor<4xf16>
  // CHECK: smelt.sub
  %1 = smelt.sub %0, %y : tensor<4xf16>
  // CHECK: smelt.mul
  %2 = smelt.mul %1, %y : tensor<4xf16>
  // CHECK: smelt.div
  %3 = smelt.div %2, %y : tensor<4xf16>
  // CHECK: smelt.max
  %4 = smelt.max %3, %y : tensor<4xf16>
  // CHECK: smelt.min
  %5 = smelt.min %4, %y : tensor<4xf16>
  // CHECK: smelt.pow
  %6 = smelt.pow %5, %y : tensor<4xf16>
  // CHECK: smelt.div %{{.*}}, %{{.*}} : tensor<4xi64>
  %7 = smelt.div %a, %a : tensor<4xi64>
  return %6, %7 : tensor<4xf16>, tensor<4xi64>
}

// CHECK-LABEL: func.func @compare_select_convert
func.func @compare_select_convert(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xbf16> {
  // CHECK: smelt.compare eq, %{{.*}}, %{{.*}} : tensor<4xf32>
  %eq = smelt.compare eq, %x, %y : tensor<4xf32>
  // CHECK: smelt.compare ne
  %ne = smelt.compare ne, %x, %y : tensor<4xf32>
  // CHECK: smelt.compare lt
  %lt = smelt.compare lt, %x, %y : tensor<4xf32>
  // CHECK: smelt.compare le
  %le = smelt.compare le, %x, %y : tensor<4xf32>
  // CHECK: smelt.compare gt
  %gt = smelt.compare gt, %x, %y : tensor<4xf32>
  // CHECK: smelt.compare ge, %{{.*}}, %{{.*}} : tensor<4xf32>
  %ge = smelt.compare ge, %x, %y : tensor<4xf32>
  // CHECK: smelt.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<4xi1>, tensor<4xf32>
  %s = smelt.select %lt, %x, %y : tensor<4xi1>, tensor<4xf32>
  // CHECK: smelt.convert %{{.*}} : tensor<4xf32> -> tensor<4xbf16>
  %c = smelt.convert %s : tensor<4xf32> -> tensor<4xbf16>
  return %c : tensor<4xbf16>
}

// CHECK-LABEL: func.func @shape
func.func @shape(%x: tensor<3x4xf32>, %b: tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<12xf32>, tensor<4x3xf32>, tensor<2x2xf32>, tensor<6x4xf32>, tensor<5x6xf32>) {
  // CHECK: smelt.broadcast_in_dim %{{.*}}, dims = [2] : tensor<4xf32> -> tensor<2x3x4xf32>
  %0 = smelt.broadcast_in_dim %b, dims = [2] : tensor<4xf32> -> tensor<2x3x4xf32>
  // CHECK: smelt.reshape %{{.*}} : tensor<3x4xf32> -> tensor<12xf32>
  %1 = smelt.reshape %x : tensor<3x4xf32> -> tensor<12xf32>
  // CHECK: smelt.transpose %{{.*}}, permutation = [1, 0] : tensor<3x4xf32>
  %2 = smelt.transpose %x, permutation = [1, 0] : tensor<3x4xf32>
  // CHECK: smelt.slice %{{.*}} [0:2:1, 1:4:2] : tensor<3x4xf32>
  %3 = smelt.slice %x [0:2:1, 1:4:2] : tensor<3x4xf32>
  // CHECK: smelt.concat %{{.*}}, %{{.*}} dim = 0 : tensor<3x4xf32>, tensor<3x4xf32>
  %4 = smelt.concat %x, %x dim = 0 : tensor<3x4xf32>, tensor<3x4xf32>
  // CHECK: smelt.pad %{{.*}} low = [1, 0] high = [1, 2] value = 5.000000e-01 : tensor<3x4xf32>
  %5 = smelt.pad %x low = [1, 0] high = [1, 2] value = 0.5 : tensor<3x4xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<2x3x4xf32>, tensor<12xf32>, tensor<4x3xf32>, tensor<2x2xf32>, tensor<6x4xf32>, tensor<5x6xf32>
}

// CHECK-LABEL: func.func @reductions
func.func @reductions(%x: tensor<2x3x4xf32>) -> (tensor<3xf32>, tensor<2x3xf32>, tensor<f32>, tensor<2x4xi64>) {
  // CHECK: smelt.reduce sum %{{.*}} axes = [0, 2] : tensor<2x3x4xf32>
  %0 = smelt.reduce sum %x axes = [0, 2] : tensor<2x3x4xf32>
  // CHECK: smelt.reduce max %{{.*}} axes = [2] : tensor<2x3x4xf32>
  %1 = smelt.reduce max %x axes = [2] : tensor<2x3x4xf32>
  // CHECK: smelt.reduce min %{{.*}} axes = [0, 1, 2] : tensor<2x3x4xf32>
  %2 = smelt.reduce min %x axes = [0, 1, 2] : tensor<2x3x4xf32>
  // CHECK: smelt.argmax %{{.*}} axis = 1 : tensor<2x3x4xf32>
  %3 = smelt.argmax %x axis = 1 : tensor<2x3x4xf32>
  return %0, %1, %2, %3 : tensor<3xf32>, tensor<2x3xf32>, tensor<f32>, tensor<2x4xi64>
}

// CHECK-LABEL: func.func @gather_scatter
func.func @gather_scatter(%t: tensor<10x4xbf16>, %i: tensor<3x2xi32>, %j: tensor<5xi64>, %u: tensor<5x4xf32>) -> (tensor<3x2x4xbf16>, tensor<7x4xf32>) {
  // CHECK: smelt.gather %{{.*}}[%{{.*}}] : tensor<10x4xbf16>, tensor<3x2xi32>
  %0 = smelt.gather %t[%i] : tensor<10x4xbf16>, tensor<3x2xi32>
  // CHECK: smelt.scatter_add %{{.*}}[%{{.*}}] size = 7 : tensor<5x4xf32>, tensor<5xi64>
  %1 = smelt.scatter_add %u[%j] size = 7 : tensor<5x4xf32>, tensor<5xi64>
  return %0, %1 : tensor<3x2x4xbf16>, tensor<7x4xf32>
}

// CHECK-LABEL: func.func @contractions
func.func @contractions(%a: tensor<5x8x16xf32>, %b: tensor<5x16x4xf32>, %c: tensor<5x4x16xf32>) -> (tensor<5x8x4xf32>, tensor<5x16x16xf32>) {
  // CHECK: smelt.matmul %{{.*}}, %{{.*}} : tensor<5x8x16xf32>, tensor<5x16x4xf32>
  %0 = smelt.matmul %a, %b : tensor<5x8x16xf32>, tensor<5x16x4xf32>
  // CHECK: smelt.matmul %{{.*}}, %{{.*}} transpose_lhs transpose_rhs : tensor<5x4x16xf32>, tensor<5x16x4xf32>
  %1 = smelt.matmul %c, %b transpose_lhs transpose_rhs : tensor<5x4x16xf32>, tensor<5x16x4xf32>
  return %0, %1 : tensor<5x8x4xf32>, tensor<5x16x16xf32>
}

// Epilogues, as smelt-fuse folds them: a bias, an activation, or both.
// CHECK-LABEL: func.func @epilogues
func.func @epilogues(%a: tensor<5x8x16xf32>, %b: tensor<5x16x4xf32>, %c: tensor<5x4x16xf32>, %bias: tensor<4xf32>, %x: tensor<2x9x9x3xf32>, %w: tensor<3x3x3x8xf32>, %cb: tensor<8xf32>) -> (tensor<5x8x4xf32>, tensor<5x8x4xf32>, tensor<2x5x5x8xf32>) {
  // CHECK: smelt.matmul %{{.*}}, %{{.*}} transpose_rhs bias %{{.*}} activation relu : tensor<5x8x16xf32>, tensor<5x4x16xf32>, tensor<4xf32>
  %0 = smelt.matmul %a, %c transpose_rhs bias %bias activation relu : tensor<5x8x16xf32>, tensor<5x4x16xf32>, tensor<4xf32>
  // CHECK: smelt.matmul %{{.*}}, %{{.*}} activation logistic : tensor<5x8x16xf32>, tensor<5x16x4xf32>
  %1 = smelt.matmul %a, %b activation logistic : tensor<5x8x16xf32>, tensor<5x16x4xf32>
  // CHECK: smelt.conv2d %{{.*}}, %{{.*}} strides = [2, 2] padding = [1, 1, 1, 1] dilation = [1, 1] bias %{{.*}} activation tanh : tensor<2x9x9x3xf32>, tensor<3x3x3x8xf32>, tensor<8xf32>
  %2 = smelt.conv2d %x, %w strides = [2, 2] padding = [1, 1, 1, 1] dilation = [1, 1] bias %cb activation tanh : tensor<2x9x9x3xf32>, tensor<3x3x3x8xf32>, tensor<8xf32>
  return %0, %1, %2 : tensor<5x8x4xf32>, tensor<5x8x4xf32>, tensor<2x5x5x8xf32>
}

// CHECK-LABEL: func.func @convolution
func.func @convolution(%x: tensor<2x9x9x3xf32>, %w: tensor<3x3x3x8xf32>, %dy: tensor<2x5x5x8xf32>) -> (tensor<2x5x5x8xf32>, tensor<2x9x9x3xf32>, tensor<3x3x3x8xf32>) {
  // CHECK: smelt.conv2d %{{.*}}, %{{.*}} strides = [2, 2] padding = [1, 1, 1, 1] dilation = [1, 1] : tensor<2x9x9x3xf32>, tensor<3x3x3x8xf32>
  %y = smelt.conv2d %x, %w strides = [2, 2] padding = [1, 1, 1, 1] dilation = [1, 1] : tensor<2x9x9x3xf32>, tensor<3x3x3x8xf32>
  // CHECK: smelt.conv2d_backward_input %{{.*}}, %{{.*}} strides = [2, 2] padding = [1, 1, 1, 1] dilation = [1, 1] : tensor<2x5x5x8xf32>, tensor<3x3x3x8xf32> -> tensor<2x9x9x3xf32>
  %dx = smelt.conv2d_backward_input %dy, %w strides = [2, 2] padding = [1, 1, 1, 1] dilation = [1, 1] : tensor<2x5x5x8xf32>, tensor<3x3x3x8xf32> -> tensor<2x9x9x3xf32>
  // CHECK: smelt.conv2d_backward_filter %{{.*}}, %{{.*}} strides = [2, 2] padding = [1, 1, 1, 1] dilation = [1, 1] : tensor<2x9x9x3xf32>, tensor<2x5x5x8xf32> -> tensor<3x3x3x8xf32>
  %dw = smelt.conv2d_backward_filter %x, %dy strides = [2, 2] padding = [1, 1, 1, 1] dilation = [1, 1] : tensor<2x9x9x3xf32>, tensor<2x5x5x8xf32> -> tensor<3x3x3x8xf32>
  return %y, %dx, %dw : tensor<2x5x5x8xf32>, tensor<2x9x9x3xf32>, tensor<3x3x3x8xf32>
}

// Grouped (two groups of 3 channels into 4 filters each) and depthwise (6 groups of one).
// CHECK-LABEL: func.func @grouped_convolution
func.func @grouped_convolution(%x: tensor<2x9x9x6xf32>, %w: tensor<3x3x3x8xf32>, %dy: tensor<2x5x5x8xf32>, %d: tensor<3x3x1x6xf32>) -> (tensor<2x5x5x8xf32>, tensor<2x9x9x6xf32>, tensor<3x3x3x8xf32>, tensor<2x9x9x6xf32>) {
  // CHECK: smelt.conv2d %{{.*}}, %{{.*}} strides = [2, 2] padding = [1, 1, 1, 1] dilation = [1, 1] feature_group_count = 2 : tensor<2x9x9x6xf32>, tensor<3x3x3x8xf32>
  %y = smelt.conv2d %x, %w strides = [2, 2] padding = [1, 1, 1, 1] dilation = [1, 1] feature_group_count = 2 : tensor<2x9x9x6xf32>, tensor<3x3x3x8xf32>
  // CHECK: smelt.conv2d_backward_input %{{.*}}, %{{.*}} strides = [2, 2] padding = [1, 1, 1, 1] dilation = [1, 1] feature_group_count = 2 : tensor<2x5x5x8xf32>, tensor<3x3x3x8xf32> -> tensor<2x9x9x6xf32>
  %dx = smelt.conv2d_backward_input %dy, %w strides = [2, 2] padding = [1, 1, 1, 1] dilation = [1, 1] feature_group_count = 2 : tensor<2x5x5x8xf32>, tensor<3x3x3x8xf32> -> tensor<2x9x9x6xf32>
  // CHECK: smelt.conv2d_backward_filter %{{.*}}, %{{.*}} strides = [2, 2] padding = [1, 1, 1, 1] dilation = [1, 1] feature_group_count = 2 : tensor<2x9x9x6xf32>, tensor<2x5x5x8xf32> -> tensor<3x3x3x8xf32>
  %dw = smelt.conv2d_backward_filter %x, %dy strides = [2, 2] padding = [1, 1, 1, 1] dilation = [1, 1] feature_group_count = 2 : tensor<2x9x9x6xf32>, tensor<2x5x5x8xf32> -> tensor<3x3x3x8xf32>
  // CHECK: smelt.conv2d %{{.*}}, %{{.*}} strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1] feature_group_count = 6 bias %{{.*}} activation relu : tensor<2x9x9x6xf32>, tensor<3x3x1x6xf32>, tensor<6xf32>
  %b = smelt.constant dense<0.5> : tensor<6xf32>
  %z = smelt.conv2d %x, %d strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1] feature_group_count = 6 bias %b activation relu : tensor<2x9x9x6xf32>, tensor<3x3x1x6xf32>, tensor<6xf32>
  return %y, %dx, %dw, %z : tensor<2x5x5x8xf32>, tensor<2x9x9x6xf32>, tensor<3x3x3x8xf32>, tensor<2x9x9x6xf32>
}

// CHECK-LABEL: func.func @pooling
func.func @pooling(%x: tensor<2x8x8x4xf32>, %dy: tensor<2x4x4x4xf32>) -> (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>, tensor<2x8x8x4xf32>, tensor<2x8x8x4xf32>) {
  // CHECK: smelt.max_pool2d %{{.*}} window = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] : tensor<2x8x8x4xf32>
  %0 = smelt.max_pool2d %x window = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] : tensor<2x8x8x4xf32>
  // CHECK: smelt.avg_pool2d %{{.*}} window = [3, 3] strides = [2, 2] padding = [1, 0, 1, 0] : tensor<2x8x8x4xf32>
  %1 = smelt.avg_pool2d %x window = [3, 3] strides = [2, 2] padding = [1, 0, 1, 0] : tensor<2x8x8x4xf32>
  // CHECK: smelt.max_pool2d_backward %{{.*}}, %{{.*}} window = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] : tensor<2x8x8x4xf32>, tensor<2x4x4x4xf32>
  %2 = smelt.max_pool2d_backward %x, %dy window = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] : tensor<2x8x8x4xf32>, tensor<2x4x4x4xf32>
  // CHECK: smelt.avg_pool2d_backward %{{.*}} window = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] : tensor<2x4x4x4xf32> -> tensor<2x8x8x4xf32>
  %3 = smelt.avg_pool2d_backward %dy window = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] : tensor<2x4x4x4xf32> -> tensor<2x8x8x4xf32>
  return %0, %1, %2, %3 : tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>, tensor<2x8x8x4xf32>, tensor<2x8x8x4xf32>
}

// CHECK-LABEL: func.func @fusions
func.func @fusions(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>, tensor<4xf32>) {
  // CHECK: %[[L:.+]]:2 = smelt.fusion loop(%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>) {
  // CHECK-NEXT: ^bb0(%{{.*}}: tensor<4x8xf32>, %{{.*}}: tensor<8xf32>):
  // CHECK: smelt.yield %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<4x8xi1>
  %0:2 = smelt.fusion loop (%x, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>) {
  ^bb0(%xs: tensor<4x8xf32>, %bs: tensor<8xf32>):
    %1 = smelt.broadcast_in_dim %bs, dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
    %2 = smelt.add %xs, %1 : tensor<4x8xf32>
    %3 = smelt.compare gt, %2, %xs : tensor<4x8xf32>
    smelt.yield %2, %3 : tensor<4x8xf32>, tensor<4x8xi1>
  }
  // CHECK: smelt.fusion reduction(%{{.*}}) : (tensor<4x8xf32>) -> tensor<4xf32>
  // CHECK: smelt.reduce sum
  %4 = smelt.fusion reduction (%x) : (tensor<4x8xf32>) -> tensor<4xf32> {
  ^bb0(%xs: tensor<4x8xf32>):
    %5 = smelt.exp %xs : tensor<4x8xf32>
    %6 = smelt.reduce sum %5 axes = [1] : tensor<4x8xf32>
    smelt.yield %6 : tensor<4xf32>
  }
  return %0#0, %0#1, %4 : tensor<4x8xf32>, tensor<4x8xi1>, tensor<4xf32>
}

// CHECK-LABEL: func.func @placement
func.func @placement(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: smelt.copy %{{.*}} {smelt.device = "gpu:0"} : tensor<4x8xf32>
  %0 = smelt.copy %x {smelt.device = "gpu:0"} : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @collectives
func.func @collectives(%g: tensor<4x8xf32>, %b: tensor<8xf32>, %n: tensor<3xi32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<3xi32>, tensor<i64>) {
  // CHECK: smelt.all_reduce mean %{{.*}} replicas = 2 : tensor<4x8xf32>
  %0 = smelt.all_reduce mean %g replicas = 2 : tensor<4x8xf32>
  // CHECK: smelt.all_reduce sum %{{.*}}, %{{.*}} replicas = 4 : tensor<4x8xf32>, tensor<8xf32>
  %1:2 = smelt.all_reduce sum %g, %b replicas = 4 : tensor<4x8xf32>, tensor<8xf32>
  // CHECK: smelt.all_reduce sum %{{.*}} replicas = 2 : tensor<3xi32>
  %2 = smelt.all_reduce sum %n replicas = 2 : tensor<3xi32>
  // CHECK: smelt.replica_id : tensor<i64>
  %3 = smelt.replica_id : tensor<i64>
  return %0, %1#0, %1#1, %2, %3 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<3xi32>, tensor<i64>
}
