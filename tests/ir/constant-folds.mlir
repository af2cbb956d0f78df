// The folders of layout and type changes of constants (ir/ConstantFolds.cpp): transpose,
// reshape, slice, concat, broadcast_in_dim of a splat and convert of a smelt.constant become
// constants, with
// convert's rounding, saturation and NaN rules; what they do not fold stays an op.
// RUN: smelt-opt %s -split-input-file -canonicalize | FileCheck %s

// CHECK-LABEL: func.func @transpose_2d
// CHECK-NEXT: smelt.constant dense<{{\[}}[1.000000e+00, 4.000000e+00], [2.000000e+00, 5.000000e+00], [3.000000e+00, 6.000000e+00]]> : tensor<3x2xf32>
// CHECK-NOT: smelt.transpose
func.func @transpose_2d() -> tensor<3x2xf32> {
  %c = smelt.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %t = smelt.transpose %c, permutation = [1, 0] : tensor<2x3xf32>
  return %t : tensor<3x2xf32>
}

// -----

// Result [a][b][c] is operand [b][c][a].
// CHECK-LABEL: func.func @transpose_3d
// CHECK-NEXT: smelt.constant dense<{{\[}}{{\[}}[1, 3, 5, 7], [9, 11, 13, 15], [17, 19, 21, 23]], {{\[}}[2, 4, 6, 8], [10, 12, 14, 16], [18, 20, 22, 24]]]> : tensor<2x3x4xi64>
func.func @transpose_3d() -> tensor<2x3x4xi64> {
  %c = smelt.constant dense<[[[1, 2], [3, 4], [5, 6], [7, 8]], [[9, 10], [11, 12], [13, 14], [15, 16]], [[17, 18], [19, 20], [21, 22], [23, 24]]]> : tensor<3x4x2xi64>
  %t = smelt.transpose %c, permutation = [2, 0, 1] : tensor<3x4x2xi64>
  return %t : tensor<2x3x4xi64>
}

// -----

// CHECK-LABEL: func.func @reshape_and_splats
// CHECK-DAG: smelt.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, 5.000000e+00, 6.000000e+00]> : tensor<6xf32>
// CHECK-DAG: smelt.constant dense<2.500000e+00> : tensor<4x2xf32>
// CHECK-DAG: smelt.constant dense<2.500000e+00> : tensor<1x4xf32>
// CHECK-NOT: smelt.reshape
// CHECK-NOT: smelt.broadcast_in_dim
// CHECK-NOT: smelt.transpose
func.func @reshape_and_splats() -> (tensor<6xf32>, tensor<4x2xf32>, tensor<1x4xf32>) {
  %c = smelt.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %r = smelt.reshape %c : tensor<2x3xf32> -> tensor<6xf32>
  %s = smelt.constant dense<2.5> : tensor<4x1xf32>
  %b = smelt.broadcast_in_dim %s, dims = [0, 1] : tensor<4x1xf32> -> tensor<4x2xf32>
  %t = smelt.transpose %s, permutation = [1, 0] : tensor<4x1xf32>
  return %r, %b, %t : tensor<6xf32>, tensor<4x2xf32>, tensor<1x4xf32>
}

// -----

// Floats round to nearest even (65504 is 65536 in bf16); float to integer truncates toward
// zero, saturates and takes NaN to 0; anything to i1 is x != 0 (NaN too); i1 to float is 0
// or 1; 16777217 rounds to 16777216 (0x4B800000) in f32.
// CHECK-LABEL: func.func @converts
// CHECK-DAG: smelt.constant dense<{{\[}}[1.000000e+00, 3.140630e+00], [6.553600e+04, -2.502440e-03]]> : tensor<2x2xbf16>
// CHECK-DAG: smelt.constant dense<[-2, 2147483647, -2147483648, 0]> : tensor<4xi32>
// CHECK-DAG: smelt.constant dense<true> : tensor<4xi1>
// CHECK-DAG: smelt.constant dense<[1.000000e+00, 0.000000e+00]> : tensor<2xf32>
// CHECK-DAG: smelt.constant dense<[-1.000000e+00, 0x4B800000]> : tensor<2xf32>
// CHECK-NOT: smelt.convert
func.func @converts() -> (tensor<2x2xbf16>, tensor<4xi32>, tensor<4xi1>, tensor<2xf32>, tensor<2xf32>) {
  %h = smelt.constant dense<[[1.0, 3.14159], [65504.0, -2.5e-3]]> : tensor<2x2xf32>
  %hb = smelt.convert %h : tensor<2x2xf32> -> tensor<2x2xbf16>
  %f = smelt.constant dense<[-2.7, 3.9e10, -1.0e20, 0x7FC00000]> : tensor<4xf32>
  %fi = smelt.convert %f : tensor<4xf32> -> tensor<4xi32>
  %fb = smelt.convert %f : tensor<4xf32> -> tensor<4xi1>
  %b = smelt.constant dense<[true, false]> : tensor<2xi1>
  %bf = smelt.convert %b : tensor<2xi1> -> tensor<2xf32>
  %i = smelt.constant dense<[-1, 16777217]> : tensor<2xi64>
  %if = smelt.convert %i : tensor<2xi64> -> tensor<2xf32>
  return %hb, %fi, %fb, %bf, %if : tensor<2x2xbf16>, tensor<4xi32>, tensor<4xi1>, tensor<2xf32>, tensor<2xf32>
}

// -----

// A strided slice: rows 1 and 3 of the last three, columns 0 and 2; and a whole one.
// CHECK-LABEL: func.func @slices
// CHECK-DAG: smelt.constant dense<{{\[}}[4, 6], [10, 12]]> : tensor<2x2xi32>
// CHECK-DAG: smelt.constant dense<3.000000e+00> : tensor<1x2xf32>
// CHECK-NOT: smelt.slice
func.func @slices() -> (tensor<2x2xi32>, tensor<1x2xf32>, tensor<4x3xi32>) {
  %c = smelt.constant dense<[[1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12]]> : tensor<4x3xi32>
  %s = smelt.slice %c [1:4:2, 0:3:2] : tensor<4x3xi32>
  %splat = smelt.constant dense<3.0> : tensor<4x5xf32>
  %t = smelt.slice %splat [2:3:1, 1:3:1] : tensor<4x5xf32>
  %all = smelt.slice %c [0:4:1, 0:3:1] : tensor<4x3xi32>
  return %s, %t, %all : tensor<2x2xi32>, tensor<1x2xf32>, tensor<4x3xi32>
}

// -----

// Along the last dimension (operand blocks interleave per row), with a splat among them; along
// the first.
// CHECK-LABEL: func.func @concats
// CHECK-DAG: smelt.constant dense<{{\[}}[1.000000e+00, 2.000000e+00, 7.000000e+00, 5.000000e+00], [3.000000e+00, 4.000000e+00, 7.000000e+00, 6.000000e+00]]> : tensor<2x4xf32>
// CHECK-DAG: smelt.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00], [7.000000e+00, 7.000000e+00]]> : tensor<3x2xf32>
// CHECK-NOT: smelt.concat
func.func @concats() -> (tensor<2x4xf32>, tensor<3x2xf32>) {
  %a = smelt.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %b = smelt.constant dense<7.0> : tensor<2x1xf32>
  %c = smelt.constant dense<[[5.0], [6.0]]> : tensor<2x1xf32>
  %x = smelt.concat %a, %b, %c dim = 1 : tensor<2x2xf32>, tensor<2x1xf32>, tensor<2x1xf32>
  %s = smelt.constant dense<7.0> : tensor<1x2xf32>
  %y = smelt.concat %a, %s dim = 0 : tensor<2x2xf32>, tensor<1x2xf32>
  return %x, %y : tensor<2x4xf32>, tensor<3x2xf32>
}

// -----

// A transpose of i1 (MLIR packs the bits) and of a function argument stay ops; so do a slice
// and a concat of an argument, and a concat of i1 constants.
// CHECK-LABEL: func.func @not_folded
// CHECK: smelt.transpose
// CHECK: smelt.transpose
// CHECK: smelt.slice
// CHECK: smelt.concat
// CHECK: smelt.concat
func.func @not_folded(%x: tensor<2x3xf32>) -> (tensor<3x2xi1>, tensor<3x2xf32>, tensor<1x3xf32>, tensor<4x3xf32>, tensor<4x3xi1>) {
  %c = smelt.constant dense<[[true, false, true], [false, false, true]]> : tensor<2x3xi1>
  %t = smelt.transpose %c, permutation = [1, 0] : tensor<2x3xi1>
  %u = smelt.transpose %x, permutation = [1, 0] : tensor<2x3xf32>
  %s = smelt.slice %x [1:2:1, 0:3:1] : tensor<2x3xf32>
  %k = smelt.constant dense<1.0> : tensor<2x3xf32>
  %j = smelt.concat %x, %k dim = 0 : tensor<2x3xf32>, tensor<2x3xf32>
  %b = smelt.concat %c, %c dim = 0 : tensor<2x3xi1>, tensor<2x3xi1>
  return %t, %u, %s, %j, %b : tensor<3x2xi1>, tensor<3x2xf32>, tensor<1x3xf32>, tensor<4x3xf32>, tensor<4x3xi1>
}
