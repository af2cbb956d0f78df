// Every verifier and shape rule of the smelt dialect rejects bad IR with a message that names
// the operand or attribute and the shapes.
// RUN: smelt-opt %s -split-input-file -verify-diagnostics

func.func @iota_dim(%x: tensor<2xf32>) {
  // expected-error @+1 {{'smelt.iota' op dimension 2 is out of range for result 'tensor<2x3xi64>' of rank 2}}
  %0 = smelt.iota dim = 2 : tensor<2x3xi64>
  return
}

// -----

func.func @rng_bounds() {
  // expected-error @+1 {{'smelt.rng_uniform' op low = 1.000000e+00 must be below high = 1.000000e+00}}
  %0 = smelt.rng_uniform seed = 1, low = 1.0, high = 1.0 : tensor<4xf32>
  return
}

// -----

func.func @rng_stddev() {
  // expected-error @+1 {{'smelt.rng_normal' op stddev = -1.000000e+00 must be >= 0}}
  %0 = smelt.rng_normal seed = 1, mean = 0.0, stddev = -1.0 : tensor<4xf32>
  return
}

// -----

func.func @rng_int() {
  // expected-error @+1 {{'smelt.rng_uniform' op result #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type or 64-bit float values, but got 'tensor<4xi32>'}}
  %0 = smelt.rng_uniform seed = 1, low = 0.0, high = 1.0 : tensor<4xi32>
  return
}

// -----

func.func @binary_shapes(%a: tensor<3x4xf32>, %b: tensor<3x5xf32>) {
  // expected-error @+1 {{'smelt.add' op operand #1 (rhs) has type 'tensor<3x5xf32>' but lhs has type 'tensor<3x4xf32>'}}
  %0 = smelt.add %a, %b : tensor<3x4xf32>, tensor<3x5xf32>
  return
}

// -----

func.func @binary_dtypes(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{'smelt.mul' op operand #1 (rhs) has type 'tensor<4xf16>' but lhs has type 'tensor<4xf32>'}}
  %0 = smelt.mul %a, %b : tensor<4xf32>, tensor<4xf16>
  return
}

// -----

func.func @exp_int(%a: tensor<4xi32>) {
  // expected-error @+1 {{'smelt.exp' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type or 64-bit float values, but got 'tensor<4xi32>'}}
  %0 = smelt.exp %a : tensor<4xi32>
  return
}

// -----

func.func @add_bool(%a: tensor<4xi1>) {
  // expected-error @+1 {{'smelt.add' op operand #0 must be statically shaped tensor of}}
  %0 = smelt.add %a, %a : tensor<4xi1>
  return
}

// -----

func.func @pow_int(%a: tensor<4xi64>) {
  // expected-error @+1 {{'smelt.pow' op operand #0 must be statically shaped tensor of 32-bit float}}
  %0 = smelt.pow %a, %a : tensor<4xi64>
  return
}

// -----

func.func @dynamic(%a: tensor<?xf32>) {
  // expected-error @+1 {{'smelt.neg' op operand #0 must be statically shaped tensor}}
  %0 = smelt.neg %a : tensor<?xf32>
  return
}

// -----

func.func @compare_types(%a: tensor<4xf32>, %b: tensor<4xi32>) {
  // expected-error @+1 {{'smelt.compare' op operand #1 (rhs) has type 'tensor<4xi32>' but lhs has type 'tensor<4xf32>'}}
  %0 = smelt.compare lt, %a, %b : tensor<4xf32>, tensor<4xi32>
  return
}

// -----

func.func @compare_direction(%a: tensor<4xf32>) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'direction' [eq, ne, lt, le, gt, ge]}}
  %0 = smelt.compare 3, %a, %a : tensor<4xf32>
  return
}

// -----

func.func @compare_unknown(%a: tensor<4xf32>) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'direction' [eq, ne, lt, le, gt, ge]}}
  %0 = smelt.compare foo, %a, %a : tensor<4xf32>
  return
}

// -----

func.func @select_pred_shape(%p: tensor<3xi1>, %a: tensor<4xf32>) {
  // expected-error @+1 {{'smelt.select' op operand #0 (pred) has type 'tensor<3xi1>' but on_true has type 'tensor<4xf32>': shapes must match}}
  %0 = smelt.select %p, %a, %a : tensor<3xi1>, tensor<4xf32>
  return
}

// -----

func.func @select_branches(%p: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xf64>) {
  // expected-error @+1 {{'smelt.select' op operand #1 (on_false) has type 'tensor<4xf64>' but on_true has type 'tensor<4xf32>'}}
  %0 = smelt.select %p, %a, %b : tensor<4xi1>, tensor<4xf32>, tensor<4xf64>
  return
}

// -----

func.func @convert_shape(%a: tensor<4xf32>) {
  // expected-error @+1 {{'smelt.convert' op result 'tensor<5xf16>' must have the shape of operand 'tensor<4xf32>'}}
  %0 = smelt.convert %a : tensor<4xf32> -> tensor<5xf16>
  return
}

// -----

func.func @broadcast_dtype(%a: tensor<4xf32>) {
  // expected-error @+1 {{'smelt.broadcast_in_dim' op result 'tensor<3x4xf16>' must have the element type of operand 'tensor<4xf32>'}}
  %0 = smelt.broadcast_in_dim %a, dims = [1] : tensor<4xf32> -> tensor<3x4xf16>
  return
}

// -----

func.func @broadcast_count(%a: tensor<4xf32>) {
  // expected-error @+1 {{'smelt.broadcast_in_dim' op dims = [0, 1] needs one entry per dimension of operand 'tensor<4xf32>'}}
  %0 = smelt.broadcast_in_dim %a, dims = [0, 1] : tensor<4xf32> -> tensor<3x4xf32>
  return
}

// -----

func.func @broadcast_range(%a: tensor<4xf32>) {
  // expected-error @+1 {{'smelt.broadcast_in_dim' op dims = [2]: entry 0 is out of range for result 'tensor<3x4xf32>'}}
  %0 = smelt.broadcast_in_dim %a, dims = [2] : tensor<4xf32> -> tensor<3x4xf32>
  return
}

// -----

func.func @broadcast_order(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{'smelt.broadcast_in_dim' op dims = [1, 0] must be strictly increasing}}
  %0 = smelt.broadcast_in_dim %a, dims = [1, 0] : tensor<4x3xf32> -> tensor<3x4xf32>
  return
}

// -----

func.func @broadcast_size(%a: tensor<5xf32>) {
  // expected-error @+1 {{'smelt.broadcast_in_dim' op operand 'tensor<5xf32>' dimension 0 (size 5) cannot broadcast to result 'tensor<3x4xf32>' dimension 1 (size 4)}}
  %0 = smelt.broadcast_in_dim %a, dims = [1] : tensor<5xf32> -> tensor<3x4xf32>
  return
}

// -----

func.func @reshape_count(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'smelt.reshape' op operand 'tensor<3x4xf32>' has 12 elements but result 'tensor<13xf32>' has 13}}
  %0 = smelt.reshape %a : tensor<3x4xf32> -> tensor<13xf32>
  return
}

// -----

func.func @reshape_dtype(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'smelt.reshape' op result 'tensor<12xi32>' must have the element type of operand 'tensor<3x4xf32>'}}
  %0 = smelt.reshape %a : tensor<3x4xf32> -> tensor<12xi32>
  return
}

// -----

func.func @transpose_perm(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'smelt.transpose' op permutation = [0, 0] is not a permutation of the 2 dimensions of 'tensor<3x4xf32>'}}
  %0 = smelt.transpose %a, permutation = [0, 0] : tensor<3x4xf32>
  return
}

// -----

func.func @slice_count(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'smelt.slice' op needs one start:limit:stride per dimension of 'tensor<3x4xf32>', got 1/1/1}}
  %0 = smelt.slice %a [0:2:1] : tensor<3x4xf32>
  return
}

// -----

func.func @slice_limit(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'smelt.slice' op range 0:5:1 of dimension 1 is invalid for 'tensor<3x4xf32>' (need 0 <= start <= limit <= size and stride >= 1)}}
  %0 = smelt.slice %a [0:3:1, 0:5:1] : tensor<3x4xf32>
  return
}

// -----

func.func @slice_start(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'smelt.slice' op range 2:1:1 of dimension 0 is invalid}}
  %0 = smelt.slice %a [2:1:1, 0:4:1] : tensor<3x4xf32>
  return
}

// -----

func.func @slice_stride(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'smelt.slice' op range 0:3:0 of dimension 0 is invalid}}
  %0 = smelt.slice %a [0:3:0, 0:4:1] : tensor<3x4xf32>
  return
}

// -----

func.func @slice_syntax(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{expected ':'}}
  %0 = smelt.slice %a [0:3, 0:4:1] : tensor<3x4xf32>
  return
}

// -----

func.func @concat_dim(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'smelt.concat' op dimension 2 is out of range for 'tensor<3x4xf32>'}}
  %0 = smelt.concat %a, %a dim = 2 : tensor<3x4xf32>, tensor<3x4xf32>
  return
}

// -----

func.func @concat_mismatch(%a: tensor<3x4xf32>, %b: tensor<3x5xf32>) {
  // expected-error @+1 {{'smelt.concat' op operand #1 has type 'tensor<3x5xf32>' which does not match operand #0 'tensor<3x4xf32>' outside dimension 0}}
  %0 = smelt.concat %a, %b dim = 0 : tensor<3x4xf32>, tensor<3x5xf32>
  return
}

// -----

// The custom syntax cannot even spell an empty concat; the generic form reaches the verifier.
func.func @concat_empty() {
  // expected-error @+2 {{'smelt.concat' op needs at least one operand}}
  // expected-error @+1 {{'smelt.concat' op failed to infer returned types}}
  %0 = "smelt.concat"() <{dimension = 0 : i64}> : () -> tensor<3xf32>
  return
}

// -----

func.func @pad_count(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'smelt.pad' op low = [1] and high = [1, 1] need one entry per dimension of 'tensor<3x4xf32>'}}
  %0 = smelt.pad %a low = [1] high = [1, 1] value = 0.0 : tensor<3x4xf32>
  return
}

// -----

func.func @pad_negative(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'smelt.pad' op low = [1, -1] and high = [0, 0] must not be negative}}
  %0 = smelt.pad %a low = [1, -1] high = [0, 0] value = 0.0 : tensor<3x4xf32>
  return
}

// -----

func.func @reduce_axis(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'smelt.reduce' op axes = [2]: axis 2 is out of range for 'tensor<3x4xf32>'}}
  %0 = smelt.reduce sum %a axes = [2] : tensor<3x4xf32>
  return
}

// -----

func.func @reduce_order(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'smelt.reduce' op axes = [1, 0] must be strictly increasing}}
  %0 = smelt.reduce max %a axes = [1, 0] : tensor<3x4xf32>
  return
}

// -----

func.func @argmax_axis(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'smelt.argmax' op axis -1 is out of range for 'tensor<3x4xf32>'}}
  %0 = smelt.argmax %a axis = -1 : tensor<3x4xf32>
  return
}

// -----

func.func @argmax_empty(%a: tensor<3x0xf32>) {
  // expected-error @+1 {{'smelt.argmax' op axis 1 of 'tensor<3x0xf32>' is empty}}
  %0 = smelt.argmax %a axis = 1 : tensor<3x0xf32>
  return
}

// -----

func.func @matmul_rank(%a: tensor<4xf32>, %b: tensor<4x3xf32>) {
  // expected-error @+1 {{'smelt.matmul' op operands must have the same rank >= 2, got lhs 'tensor<4xf32>' and rhs 'tensor<4x3xf32>'}}
  %0 = smelt.matmul %a, %b : tensor<4xf32>, tensor<4x3xf32>
  return
}

// -----

func.func @matmul_dtype(%a: tensor<2x4xf32>, %b: tensor<4x3xbf16>) {
  // expected-error @+1 {{'smelt.matmul' op lhs 'tensor<2x4xf32>' and rhs 'tensor<4x3xbf16>' have different element types}}
  %0 = smelt.matmul %a, %b : tensor<2x4xf32>, tensor<4x3xbf16>
  return
}

// -----

func.func @matmul_bias(%a: tensor<2x4xf32>, %b: tensor<4x3xf32>, %bias: tensor<2xf32>) {
  // expected-error @+1 {{'smelt.matmul' op bias has type 'tensor<2xf32>' but the result 'tensor<2x3xf32>' needs 'tensor<3xf32>': one value per element of its last dimension}}
  %0 = smelt.matmul %a, %b bias %bias : tensor<2x4xf32>, tensor<4x3xf32>, tensor<2xf32>
  return
}

// -----

func.func @conv_bias_dtype(%x: tensor<1x4x4x2xf32>, %w: tensor<2x2x2x3xf32>, %bias: tensor<3xbf16>) {
  // expected-error @+1 {{'smelt.conv2d' op bias has type 'tensor<3xbf16>' but the result 'tensor<1x3x3x3xf32>' needs 'tensor<3xf32>'}}
  %0 = smelt.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] dilation = [1, 1] bias %bias : tensor<1x4x4x2xf32>, tensor<2x2x2x3xf32>, tensor<3xbf16>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x2x4xf32>, %b: tensor<3x4x3xf32>) {
  // expected-error @+1 {{'smelt.matmul' op batch dimensions of lhs 'tensor<2x2x4xf32>' and rhs 'tensor<3x4x3xf32>' differ}}
  %0 = smelt.matmul %a, %b : tensor<2x2x4xf32>, tensor<3x4x3xf32>
  return
}

// -----

func.func @matmul_k(%a: tensor<2x4xf32>, %b: tensor<4x3xf32>) {
  // expected-error @+1 {{'smelt.matmul' op contracting dimensions differ: lhs 'tensor<2x4xf32>' (transposed) has K = 2 but rhs 'tensor<4x3xf32>' has K = 4}}
  %0 = smelt.matmul %a, %b transpose_lhs : tensor<2x4xf32>, tensor<4x3xf32>
  return
}

// -----

func.func @matmul_int(%a: tensor<2x4xi32>) {
  // expected-error @+1 {{'smelt.matmul' op operand #0 must be statically shaped tensor of 32-bit float}}
  %0 = smelt.matmul %a, %a transpose_rhs : tensor<2x4xi32>, tensor<2x4xi32>
  return
}

// -----

func.func @conv_rank(%x: tensor<8x8x3xf32>, %w: tensor<3x3x3x4xf32>) {
  // expected-error @+1 {{'smelt.conv2d' op operand 'input' must be rank 4 (NHWC), got 'tensor<8x8x3xf32>'}}
  %0 = smelt.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] dilation = [1, 1] : tensor<8x8x3xf32>, tensor<3x3x3x4xf32>
  return
}

// -----

func.func @conv_filter_rank(%x: tensor<1x8x8x3xf32>, %w: tensor<3x3x4xf32>) {
  // expected-error @+1 {{'smelt.conv2d' op operand 'filter' must be rank 4 (HWIO), got 'tensor<3x3x4xf32>'}}
  %0 = smelt.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] dilation = [1, 1] : tensor<1x8x8x3xf32>, tensor<3x3x4xf32>
  return
}

// -----

func.func @conv_strides(%x: tensor<1x8x8x3xf32>, %w: tensor<3x3x3x4xf32>) {
  // expected-error @+1 {{'smelt.conv2d' op attribute 'strides' = [1, 0] has a value below 1}}
  %0 = smelt.conv2d %x, %w strides = [1, 0] padding = [0, 0, 0, 0] dilation = [1, 1] : tensor<1x8x8x3xf32>, tensor<3x3x3x4xf32>
  return
}

// -----

func.func @conv_padding_count(%x: tensor<1x8x8x3xf32>, %w: tensor<3x3x3x4xf32>) {
  // expected-error @+1 {{'smelt.conv2d' op attribute 'padding' needs 4 values, got [1, 1]}}
  %0 = smelt.conv2d %x, %w strides = [1, 1] padding = [1, 1] dilation = [1, 1] : tensor<1x8x8x3xf32>, tensor<3x3x3x4xf32>
  return
}

// -----

func.func @conv_padding_negative(%x: tensor<1x8x8x3xf32>, %w: tensor<3x3x3x4xf32>) {
  // expected-error @+1 {{'smelt.conv2d' op attribute 'padding' = [0, -1, 0, 0] has a value below 0}}
  %0 = smelt.conv2d %x, %w strides = [1, 1] padding = [0, -1, 0, 0] dilation = [1, 1] : tensor<1x8x8x3xf32>, tensor<3x3x3x4xf32>
  return
}

// -----

func.func @conv_dilation(%x: tensor<1x8x8x3xf32>, %w: tensor<3x3x3x4xf32>) {
  // expected-error @+1 {{'smelt.conv2d' op attribute 'dilation' = [0, 1] has a value below 1}}
  %0 = smelt.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] dilation = [0, 1] : tensor<1x8x8x3xf32>, tensor<3x3x3x4xf32>
  return
}

// -----

func.func @conv_groups_zero(%x: tensor<1x8x8x4xf32>, %w: tensor<3x3x4x4xf32>) {
  // expected-error @+1 {{'smelt.conv2d' op feature_group_count = 0 must be at least 1}}
  %0 = smelt.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] dilation = [1, 1] feature_group_count = 0 : tensor<1x8x8x4xf32>, tensor<3x3x4x4xf32>
  return
}

// -----

func.func @conv_groups_divide_filters(%x: tensor<1x8x8x4xf32>, %w: tensor<3x3x2x3xf32>) {
  // expected-error @+1 {{'smelt.conv2d' op feature_group_count = 2 must divide the input's 4 channels ('tensor<1x8x8x4xf32>') and the filter's 3 output channels ('tensor<3x3x2x3xf32>')}}
  %0 = smelt.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] dilation = [1, 1] feature_group_count = 2 : tensor<1x8x8x4xf32>, tensor<3x3x2x3xf32>
  return
}

// -----

func.func @conv_groups_channels(%x: tensor<1x8x8x4xf32>, %w: tensor<3x3x4x4xf32>) {
  // expected-error @+1 {{'smelt.conv2d' op input has 4 channels ('tensor<1x8x8x4xf32>') but filter expects 8 ('tensor<3x3x4x4xf32>', 4 per group of 2)}}
  %0 = smelt.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] dilation = [1, 1] feature_group_count = 2 : tensor<1x8x8x4xf32>, tensor<3x3x4x4xf32>
  return
}

// -----

// An OHWI filter is [F, KH, KW, C/G]: this one, read so, expects 3 input channels.
func.func @conv_ohwi_channels(%x: tensor<1x5x5x4xf32>, %k: tensor<2x3x3x3xf32>) {
  // expected-error @+1 {{'smelt.conv2d' op input has 4 channels ('tensor<1x5x5x4xf32>') but filter expects 3 ('tensor<2x3x3x3xf32>')}}
  %0 = smelt.conv2d %x, %k strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1] filter_layout = ohwi : tensor<1x5x5x4xf32>, tensor<2x3x3x3xf32>
  return
}

// -----

func.func @conv_backward_filter_groups(%x: tensor<1x8x8x4xf32>, %dy: tensor<1x6x6x4xf32>) {
  // expected-error @+1 {{'smelt.conv2d_backward_filter' op input has 4 channels ('tensor<1x8x8x4xf32>') but filter expects 16 ('tensor<3x3x4x4xf32>', 4 per group of 4)}}
  %0 = smelt.conv2d_backward_filter %x, %dy strides = [1, 1] padding = [0, 0, 0, 0] dilation = [1, 1] feature_group_count = 4 : tensor<1x8x8x4xf32>, tensor<1x6x6x4xf32> -> tensor<3x3x4x4xf32>
  return
}

// -----

func.func @conv_channels(%x: tensor<1x8x8x3xf32>, %w: tensor<3x3x2x4xf32>) {
  // expected-error @+1 {{'smelt.conv2d' op input has 3 channels ('tensor<1x8x8x3xf32>') but filter expects 2 ('tensor<3x3x2x4xf32>')}}
  %0 = smelt.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] dilation = [1, 1] : tensor<1x8x8x3xf32>, tensor<3x3x2x4xf32>
  return
}

// -----

func.func @conv_dtype(%x: tensor<1x8x8x3xf32>, %w: tensor<3x3x3x4xf16>) {
  // expected-error @+1 {{'smelt.conv2d' op input 'tensor<1x8x8x3xf32>' and filter 'tensor<3x3x3x4xf16>' have different element types}}
  %0 = smelt.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] dilation = [1, 1] : tensor<1x8x8x3xf32>, tensor<3x3x3x4xf16>
  return
}

// -----

func.func @conv_window(%x: tensor<1x4x4x3xf32>, %w: tensor<3x3x3x4xf32>) {
  // expected-error @+1 {{'smelt.conv2d' op filter window 5 (dilated) is larger than the height 4 (padded) of input 'tensor<1x4x4x3xf32>'}}
  %0 = smelt.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] dilation = [2, 1] : tensor<1x4x4x3xf32>, tensor<3x3x3x4xf32>
  return
}

// -----

func.func @conv_bwd_input(%dy: tensor<1x7x7x4xf32>, %w: tensor<3x3x3x4xf32>) {
  // expected-error @+1 {{'smelt.conv2d_backward_input' op grad_output has type 'tensor<1x7x7x4xf32>' but the window attributes need shape [1, 6, 6, 4]}}
  %0 = smelt.conv2d_backward_input %dy, %w strides = [1, 1] padding = [0, 0, 0, 0] dilation = [1, 1] : tensor<1x7x7x4xf32>, tensor<3x3x3x4xf32> -> tensor<1x8x8x3xf32>
  return
}

// -----

func.func @conv_bwd_filter(%x: tensor<1x8x8x3xf32>, %dy: tensor<1x8x8x4xf32>) {
  // expected-error @+1 {{'smelt.conv2d_backward_filter' op grad_output has type 'tensor<1x8x8x4xf32>' but the window attributes need shape [1, 6, 6, 4]}}
  %0 = smelt.conv2d_backward_filter %x, %dy strides = [1, 1] padding = [0, 0, 0, 0] dilation = [1, 1] : tensor<1x8x8x3xf32>, tensor<1x8x8x4xf32> -> tensor<3x3x3x4xf32>
  return
}

// -----

func.func @pool_window(%x: tensor<1x4x4x3xf32>) {
  // expected-error @+1 {{'smelt.max_pool2d' op window [5, 5] is larger than input 'tensor<1x4x4x3xf32>'}}
  %0 = smelt.max_pool2d %x window = [5, 5] strides = [1, 1] padding = [0, 0, 0, 0] : tensor<1x4x4x3xf32>
  return
}

// -----

func.func @pool_padding(%x: tensor<1x4x4x3xf32>) {
  // expected-error @+1 {{'smelt.avg_pool2d' op padding [2, 0, 0, 0] must be smaller than the window [2, 2] so no window sees only padding}}
  %0 = smelt.avg_pool2d %x window = [2, 2] strides = [1, 1] padding = [2, 0, 0, 0] : tensor<1x4x4x3xf32>
  return
}

// -----

func.func @pool_attr_count(%x: tensor<1x4x4x3xf32>) {
  // expected-error @+1 {{'smelt.max_pool2d' op attribute 'window' needs 2 values, got [2]}}
  %0 = smelt.max_pool2d %x window = [2] strides = [1, 1] padding = [0, 0, 0, 0] : tensor<1x4x4x3xf32>
  return
}

// -----

func.func @pool_rank(%x: tensor<4x4x3xf32>) {
  // expected-error @+1 {{'smelt.max_pool2d' op operand 'input' must be rank 4 (NHWC), got 'tensor<4x4x3xf32>'}}
  %0 = smelt.max_pool2d %x window = [2, 2] strides = [1, 1] padding = [0, 0, 0, 0] : tensor<4x4x3xf32>
  return
}

// -----

func.func @max_pool_bwd(%x: tensor<1x4x4x3xf32>, %dy: tensor<1x3x3x3xf32>) {
  // expected-error @+1 {{'smelt.max_pool2d_backward' op grad_output has type 'tensor<1x3x3x3xf32>' but the window attributes need shape [1, 2, 2, 3]}}
  %0 = smelt.max_pool2d_backward %x, %dy window = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] : tensor<1x4x4x3xf32>, tensor<1x3x3x3xf32>
  return
}

// -----

func.func @max_pool_bwd_dtype(%x: tensor<1x4x4x3xf32>, %dy: tensor<1x2x2x3xf16>) {
  // expected-error @+1 {{'smelt.max_pool2d_backward' op grad_output 'tensor<1x2x2x3xf16>' and input 'tensor<1x4x4x3xf32>' have different element types}}
  %0 = smelt.max_pool2d_backward %x, %dy window = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] : tensor<1x4x4x3xf32>, tensor<1x2x2x3xf16>
  return
}

// -----

func.func @avg_pool_bwd(%dy: tensor<1x3x3x3xf32>) {
  // expected-error @+1 {{'smelt.avg_pool2d_backward' op grad_output has type 'tensor<1x3x3x3xf32>' but the window attributes need shape [1, 2, 2, 3]}}
  %0 = smelt.avg_pool2d_backward %dy window = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] : tensor<1x3x3x3xf32> -> tensor<1x4x4x3xf32>
  return
}

// -----

func.func @avg_pool_bwd_dtype(%dy: tensor<1x2x2x3xf16>) {
  // expected-error @+1 {{'smelt.avg_pool2d_backward' op grad_output 'tensor<1x2x2x3xf16>' and result 'tensor<1x4x4x3xf32>' have different element types}}
  %0 = smelt.avg_pool2d_backward %dy window = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] : tensor<1x2x2x3xf16> -> tensor<1x4x4x3xf32>
  return
}

// -----

func.func @constant_type() {
  // expected-error @+1 {{'smelt.constant' op result #0 must be statically shaped tensor of}}
  %0 = smelt.constant dense<[1, 2]> : tensor<2xi8>
  return
}

// -----

func.func @fusion_library_op(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = smelt.fusion loop (%x) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%a: tensor<4x4xf32>):
    // expected-error @+1 {{'smelt.matmul' op cannot be inside a fusion}}
    %1 = smelt.matmul %a, %a : tensor<4x4xf32>, tensor<4x4xf32>
    smelt.yield %1 : tensor<4x4xf32>
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @fusion_argument_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'smelt.fusion' op input #0 is 'tensor<4xf32>' but body argument #0 is 'tensor<4xf16>'}}
  %0 = smelt.fusion loop (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf16>):
    %1 = smelt.convert %a : tensor<4xf16> -> tensor<4xf32>
    smelt.yield %1 : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @fusion_argument_count(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'smelt.fusion' op body takes 2 arguments but the fusion has 1 inputs}}
  %0 = smelt.fusion loop (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    smelt.yield %a : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @fusion_yield_types(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'smelt.fusion' op yields ('tensor<4xi1>') but its results are ('tensor<4xf32>')}}
  %0 = smelt.fusion loop (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %1 = smelt.compare gt, %a, %a : tensor<4xf32>
    smelt.yield %1 : tensor<4xi1>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @fusion_empty(%x: tensor<4xf32>) {
  // expected-error @+1 {{'smelt.fusion' op yields nothing}}
  smelt.fusion loop (%x) : (tensor<4xf32>) -> () {
  ^bb0(%a: tensor<4xf32>):
    smelt.yield
  }
  return
}

// -----

func.func @fusion_loop_shapes(%x: tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<8xf32>) {
  // expected-error @+1 {{'smelt.fusion' op result #1 is 'tensor<8xf32>' but result #0 is 'tensor<4x2xf32>'; a loop fusion's results share one shape}}
  %0:2 = smelt.fusion loop (%x) : (tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<8xf32>) {
  ^bb0(%a: tensor<4x2xf32>):
    %1 = smelt.reshape %a : tensor<4x2xf32> -> tensor<8xf32>
    smelt.yield %a, %1 : tensor<4x2xf32>, tensor<8xf32>
  }
  return %0#0, %0#1 : tensor<4x2xf32>, tensor<8xf32>
}

// -----

func.func @fusion_reduce_in_loop(%x: tensor<4x2xf32>) -> tensor<4xf32> {
  %0 = smelt.fusion loop (%x) : (tensor<4x2xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4x2xf32>):
    // expected-error @+1 {{'smelt.reduce' op is inside a loop fusion; reduces are the roots of reduction fusions}}
    %1 = smelt.reduce sum %a axes = [1] : tensor<4x2xf32>
    smelt.yield %1 : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @fusion_reduce_consumed(%x: tensor<4x2xf32>) -> tensor<4xf32> {
  %0 = smelt.fusion reduction (%x) : (tensor<4x2xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4x2xf32>):
    // expected-error @+1 {{'smelt.reduce' op feeds 'smelt.exp' inside the fusion; a reduce is only yielded}}
    %1 = smelt.reduce sum %a axes = [1] : tensor<4x2xf32>
    %2 = smelt.exp %1 : tensor<4xf32>
    smelt.yield %2 : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @fusion_reduction_root(%x: tensor<4x2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'smelt.fusion' op result #0 is not a reduce; a reduction fusion yields reduces}}
  %0 = smelt.fusion reduction (%x) : (tensor<4x2xf32>) -> tensor<4x2xf32> {
  ^bb0(%a: tensor<4x2xf32>):
    %1 = smelt.exp %a : tensor<4x2xf32>
    smelt.yield %1 : tensor<4x2xf32>
  }
  return %0 : tensor<4x2xf32>
}

// -----

func.func @fusion_reduction_axes(%x: tensor<4x2xf32>) -> (tensor<4xf32>, tensor<2xf32>) {
  // expected-error @+1 {{'smelt.fusion' op result #1 reduces 'tensor<4x2xf32>' over different axes or shape than result #0}}
  %0:2 = smelt.fusion reduction (%x) : (tensor<4x2xf32>) -> (tensor<4xf32>, tensor<2xf32>) {
  ^bb0(%a: tensor<4x2xf32>):
    %1 = smelt.reduce sum %a axes = [1] : tensor<4x2xf32>
    %2 = smelt.reduce sum %a axes = [0] : tensor<4x2xf32>
    smelt.yield %1, %2 : tensor<4xf32>, tensor<2xf32>
  }
  return %0#0, %0#1 : tensor<4xf32>, tensor<2xf32>
}

// -----

func.func @fusion_captures(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  // expected-note @+1 {{required by region isolation constraints}}
  %0 = smelt.fusion loop (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    // expected-error @+1 {{using value defined outside the region}}
    %1 = smelt.add %a, %y : tensor<4xf32>
    smelt.yield %1 : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @yield_outside(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'smelt.yield' op expects parent op 'smelt.fusion'}}
  smelt.yield %x : tensor<4xf32>
}

// -----

func.func @all_reduce_no_replicas(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'smelt.all_reduce' op replicas = 0 must be at least 1}}
  %0 = smelt.all_reduce sum %x replicas = 0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @all_reduce_mixed_bucket(%x: tensor<4xf32>, %y: tensor<4xf16>) -> tensor<4xf32> {
  // expected-error @+1 {{'smelt.all_reduce' op operand #1 is 'tensor<4xf16>' but operand #0 has 'f32' elements; a bucket has one element type}}
  %0:2 = smelt.all_reduce sum %x, %y replicas = 2 : tensor<4xf32>, tensor<4xf16>
  return %0#0 : tensor<4xf32>
}

// -----

func.func @all_reduce_integer_mean(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'smelt.all_reduce' op mean needs float operands, got 'i32'}}
  %0 = smelt.all_reduce mean %x replicas = 2 : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// Tensor sizes (ir/TensorSize.h): at most 2^48 bytes, with products checked for overflow, so
// an absurd shape is refused here instead of hanging or wrapping later (issue 21).
func.func @iota_2_62_elements() {
  // expected-error @+1 {{'smelt.iota' op result #0 has type 'tensor<4611686018427387904xi32>', larger than the limit of 2^48 bytes (256 TiB) on a tensor}}
  %0 = smelt.iota dim = 0 : tensor<4611686018427387904xi32>
  return
}

// -----

func.func @constant_shape_overflows_int64() {
  // expected-error @+1 {{'smelt.constant' op result #0 has type 'tensor<4294967296x4294967296xf32>', larger than the limit}}
  %0 = smelt.constant dense<1.0> : tensor<4294967296x4294967296xf32>
  return
}

// -----

func.func @bytes_overflow_int64() {
  // 2^61 elements fit int64, their 2^64 bytes do not.
  // expected-error @+1 {{'smelt.iota' op result #0 has type 'tensor<2305843009213693952xf64>', larger than the limit}}
  %0 = smelt.iota dim = 0 : tensor<2305843009213693952xf64>
  return
}

// -----

func.func @operand_too_large(%x: tensor<65536x65536x65536xf32>) {
  // expected-error @+1 {{'smelt.neg' op operand #0 has type 'tensor<65536x65536x65536xf32>', larger than the limit}}
  %0 = smelt.neg %x : tensor<65536x65536x65536xf32>
  return
}

// -----

func.func @gather_float_indices(%t: tensor<10x4xf32>, %i: tensor<3xf32>) {
  // expected-error @+1 {{'smelt.gather' op operand 'indices' must hold i32 or i64, got 'tensor<3xf32>'}}
  %0 = smelt.gather %t[%i] : tensor<10x4xf32>, tensor<3xf32>
  return
}

// -----

func.func @gather_empty_table(%t: tensor<0x4xf32>, %i: tensor<3xi32>) {
  // expected-error @+1 {{'smelt.gather' op operand 'table' must have at least one row to gather from, got 'tensor<0x4xf32>'}}
  %0 = smelt.gather %t[%i] : tensor<0x4xf32>, tensor<3xi32>
  return
}

// -----

func.func @gather_scalar_table(%t: tensor<f32>, %i: tensor<3xi32>) {
  // expected-error @+1 {{'smelt.gather' op operand 'table' must have at least one row to gather from, got 'tensor<f32>'}}
  %0 = smelt.gather %t[%i] : tensor<f32>, tensor<3xi32>
  return
}

// -----

func.func @scatter_add_shapes(%u: tensor<3x5x4xf32>, %i: tensor<3x2xi32>) {
  // expected-error @+1 {{'smelt.scatter_add' op operand 'updates' 'tensor<3x5x4xf32>' must start with the shape of operand 'indices' 'tensor<3x2xi32>'}}
  %0 = smelt.scatter_add %u[%i] size = 10 : tensor<3x5x4xf32>, tensor<3x2xi32>
  return
}

// -----

func.func @scatter_add_rank(%u: tensor<3xf32>, %i: tensor<3x2xi32>) {
  // expected-error @+1 {{'smelt.scatter_add' op operand 'updates' 'tensor<3xf32>' must start with the shape of operand 'indices' 'tensor<3x2xi32>'}}
  %0 = smelt.scatter_add %u[%i] size = 10 : tensor<3xf32>, tensor<3x2xi32>
  return
}

// -----

func.func @scatter_add_size(%u: tensor<3x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{'smelt.scatter_add' op size = 0 must be at least 1 (the result's rows)}}
  %0 = smelt.scatter_add %u[%i] size = 0 : tensor<3x4xf32>, tensor<3xi64>
  return
}

// -----

func.func @scatter_add_integers(%u: tensor<3x4xi32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{'smelt.scatter_add' op operand 'updates' must hold floats (it sums gradients), got 'tensor<3x4xi32>'}}
  %0 = smelt.scatter_add %u[%i] size = 4 : tensor<3x4xi32>, tensor<3xi64>
  return
}

// -----

func.func @scatter_add_in_fusion(%u: tensor<3x4xf32>, %i: tensor<3xi64>) -> tensor<5x4xf32> {
  %0 = smelt.fusion loop (%u, %i) : (tensor<3x4xf32>, tensor<3xi64>) -> tensor<5x4xf32> {
  ^bb0(%a: tensor<3x4xf32>, %b: tensor<3xi64>):
    // expected-error @+1 {{'smelt.scatter_add' op cannot be inside a fusion}}
    %1 = smelt.scatter_add %a[%b] size = 5 : tensor<3x4xf32>, tensor<3xi64>
    smelt.yield %1 : tensor<5x4xf32>
  }
  return %0 : tensor<5x4xf32>
}
