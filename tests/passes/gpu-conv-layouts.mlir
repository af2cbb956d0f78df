// smelt-gpu-conv-layouts: convolutions on a GPU read an OHWI filter and pad symmetrically; the
// transposes, the explicit pad and the input gradient's slice are ops of their own, on the
// convolution's device. CPU convolutions, and ones already in OHWI, are left alone.
// RUN: smelt-opt %s -split-input-file -smelt-gpu-conv-layouts | FileCheck %s

// Symmetric padding: only the filter's transposes. The forward and input-gradient
// convolutions read one transpose of the HWIO filter; the filter gradient is written in OHWI
// and transposed back.
// CHECK-LABEL: func.func @symmetric
// CHECK:      %[[K:.+]] = smelt.transpose %arg1, permutation = [3, 0, 1, 2] {smelt.device = "gpu:0"} : tensor<3x3x2x8xf32>
// CHECK-NEXT: %[[Y:.+]] = smelt.conv2d %arg0, %[[K]] strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1] filter_layout = ohwi {smelt.device = "gpu:0"} : tensor<4x6x6x2xf32>, tensor<8x3x3x2xf32>
// CHECK-NEXT: %[[DX:.+]] = smelt.conv2d_backward_input %[[Y]], %[[K]] strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1] filter_layout = ohwi {smelt.device = "gpu:0"} : tensor<4x6x6x8xf32>, tensor<8x3x3x2xf32> -> tensor<4x6x6x2xf32>
// CHECK-NEXT: %[[DW:.+]] = smelt.conv2d_backward_filter %arg0, %[[Y]] strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1] filter_layout = ohwi {smelt.device = "gpu:0"} : tensor<4x6x6x2xf32>, tensor<4x6x6x8xf32> -> tensor<8x3x3x2xf32>
// CHECK-NEXT: %[[W:.+]] = smelt.transpose %[[DW]], permutation = [1, 2, 3, 0] {smelt.device = "gpu:0"} : tensor<8x3x3x2xf32>
// CHECK-NEXT: return %[[DX]], %[[W]]
func.func @symmetric(%x: tensor<4x6x6x2xf32>, %w: tensor<3x3x2x8xf32>) -> (tensor<4x6x6x2xf32>, tensor<3x3x2x8xf32>) {
  %y = smelt.conv2d %x, %w strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1] {smelt.device = "gpu:0"} : tensor<4x6x6x2xf32>, tensor<3x3x2x8xf32>
  %dx = smelt.conv2d_backward_input %y, %w strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1] {smelt.device = "gpu:0"} : tensor<4x6x6x8xf32>, tensor<3x3x2x8xf32> -> tensor<4x6x6x2xf32>
  %dw = smelt.conv2d_backward_filter %x, %y strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1] {smelt.device = "gpu:0"} : tensor<4x6x6x2xf32>, tensor<4x6x6x8xf32> -> tensor<3x3x2x8xf32>
  return %dx, %dw : tensor<4x6x6x2xf32>, tensor<3x3x2x8xf32>
}

// -----

// TensorFlow's SAME at stride 2 (one more row and column after): cuDNN pads nothing itself,
// the input is padded by [0, 1] in H and W (one pad, read by the forward and filter-gradient
// convolutions), and the input gradient of the padded input is sliced back to 7x7. Grouped:
// the filter keeps C/G = 1 per group.
// CHECK-LABEL: func.func @asymmetric
// CHECK:      %[[P:.+]] = smelt.pad %arg0 low = [0, 0, 0, 0] high = [0, 1, 1, 0] value = 0.000000e+00 {smelt.device = "gpu:1"} : tensor<2x7x7x4xf32>
// CHECK-NEXT: %[[K:.+]] = smelt.transpose %arg1, permutation = [3, 0, 1, 2] {smelt.device = "gpu:1"}
// CHECK-NEXT: %[[Y:.+]] = smelt.conv2d %[[P]], %[[K]] strides = [2, 2] padding = [0, 0, 0, 0] dilation = [1, 1] feature_group_count = 4 filter_layout = ohwi {smelt.device = "gpu:1"} : tensor<2x8x8x4xf32>, tensor<4x3x3x1xf32>
// CHECK-NEXT: %[[DXP:.+]] = smelt.conv2d_backward_input %[[Y]], %[[K]] strides = [2, 2] padding = [0, 0, 0, 0] {{.*}} -> tensor<2x8x8x4xf32>
// CHECK-NEXT: %[[DX:.+]] = smelt.slice %[[DXP]] [0:2:1, 0:7:1, 0:7:1, 0:4:1] {smelt.device = "gpu:1"}
// CHECK-NEXT: %[[DW:.+]] = smelt.conv2d_backward_filter %[[P]], %[[Y]] strides = [2, 2] padding = [0, 0, 0, 0] {{.*}} -> tensor<4x3x3x1xf32>
// CHECK-NEXT: %[[W:.+]] = smelt.transpose %[[DW]], permutation = [1, 2, 3, 0]
// CHECK-NEXT: return %[[DX]], %[[W]]
func.func @asymmetric(%x: tensor<2x7x7x4xf32>, %w: tensor<3x3x1x4xf32>) -> (tensor<2x7x7x4xf32>, tensor<3x3x1x4xf32>) {
  %y = smelt.conv2d %x, %w strides = [2, 2] padding = [0, 1, 0, 1] dilation = [1, 1] feature_group_count = 4 {smelt.device = "gpu:1"} : tensor<2x7x7x4xf32>, tensor<3x3x1x4xf32>
  %dx = smelt.conv2d_backward_input %y, %w strides = [2, 2] padding = [0, 1, 0, 1] dilation = [1, 1] feature_group_count = 4 {smelt.device = "gpu:1"} : tensor<2x3x3x4xf32>, tensor<3x3x1x4xf32> -> tensor<2x7x7x4xf32>
  %dw = smelt.conv2d_backward_filter %x, %y strides = [2, 2] padding = [0, 1, 0, 1] dilation = [1, 1] feature_group_count = 4 {smelt.device = "gpu:1"} : tensor<2x7x7x4xf32>, tensor<2x3x3x4xf32> -> tensor<3x3x1x4xf32>
  return %dx, %dw : tensor<2x7x7x4xf32>, tensor<3x3x1x4xf32>
}

// -----

// On the CPU, and already in OHWI on a GPU: unchanged.
// CHECK-LABEL: func.func @left_alone
// CHECK-NEXT: smelt.conv2d %arg0, %arg1 strides = [2, 2] padding = [0, 1, 0, 1] dilation = [1, 1] {smelt.device = "cpu:0"}
// CHECK-NEXT: smelt.conv2d %arg0, %arg2 strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1] filter_layout = ohwi {smelt.device = "gpu:0"}
// CHECK-NEXT: return
func.func @left_alone(%x: tensor<1x5x5x3xf32>, %w: tensor<3x3x3x2xf32>, %k: tensor<2x3x3x3xf32>) -> (tensor<1x2x2x2xf32>, tensor<1x5x5x2xf32>) {
  %a = smelt.conv2d %x, %w strides = [2, 2] padding = [0, 1, 0, 1] dilation = [1, 1] {smelt.device = "cpu:0"} : tensor<1x5x5x3xf32>, tensor<3x3x3x2xf32>
  %b = smelt.conv2d %x, %k strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1] filter_layout = ohwi {smelt.device = "gpu:0"} : tensor<1x5x5x3xf32>, tensor<2x3x3x3xf32>
  return %a, %b : tensor<1x2x2x2xf32>, tensor<1x5x5x2xf32>
}

// -----

// A constant filter (inference) is transposed at compile time: one constant, OHWI
// (w[f][kh][0][c]), no transpose op, and the HWIO constant gone.
// CHECK-LABEL: func.func @constant_filter
// CHECK-NEXT: %[[K:.+]] = smelt.constant dense<{{\[\[\[\[}}1.000000e+00, 3.000000e+00]], {{\[\[}}5.000000e+00, 7.000000e+00]]], {{\[\[\[}}2.000000e+00, 4.000000e+00]], {{\[\[}}6.000000e+00, 8.000000e+00]]]]> : tensor<2x2x1x2xf32>
// CHECK-NOT: smelt.transpose
// CHECK: smelt.conv2d %arg0, %[[K]] strides = [1, 1] padding = [0, 0, 0, 0] dilation = [1, 1] filter_layout = ohwi
func.func @constant_filter(%x: tensor<1x4x4x2xf32>) -> tensor<1x3x4x2xf32> {
  // HWIO [2, 1, 2, 2]: w[kh][0][c][f] = 1 + 4 kh + 2 c + f.
  %w = smelt.constant dense<[[[[1.0, 2.0], [3.0, 4.0]]], [[[5.0, 6.0], [7.0, 8.0]]]]> : tensor<2x1x2x2xf32>
  %y = smelt.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] dilation = [1, 1] {smelt.device = "gpu:0"} : tensor<1x4x4x2xf32>, tensor<2x1x2x2xf32>
  return %y : tensor<1x3x4x2xf32>
}
