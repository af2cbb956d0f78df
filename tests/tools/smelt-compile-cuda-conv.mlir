// A convolution compiled for a GPU carries cuDNN's layout and padding as ops of its own
// (smelt-gpu-conv-layouts: an OHWI transpose of the filter, an explicit pad where the padding
// is asymmetric). The artifact runs them wherever it runs: on the GPU, or, on a machine
// without one, every step on cpu:0, whose convolution reads the OHWI filter too. Either way
// the result is the convolution's, against a float64 NumPy reference.
// REQUIRES: cuda-codegen
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %S/npy_tool.py random %t/x.npy 2,9,8,3 float32 7
// RUN: %python %S/npy_tool.py random %t/w.npy 3,3,3,5 float32 8
// RUN: smelt compile %s --target=cuda:sm_90 -o %t/conv.smelt
// RUN: smelt dump %s --target=cuda:sm_90 --dump-dir %t/dump
// RUN: FileCheck %s --check-prefix=IR < %t/dump/main-0/executable.txt
// The input padded by one column after (b4: 9 wide), the rest cuDNN's own symmetric padding.
// The GPU segment's values sit in its arena (@offset); the conv's result, handed on to the
// copy back to the host, is a block of its own.
// IR: b6:tensor<2x5x4x5xf32> = conv2d(b4:tensor<2x9x9x3xf32>@0, b5:tensor<5x3x3x3xf32>@{{[0-9]+}}) {strides=[2, 2], padding=[1, 1, 0, 0], {{.*}}filter_layout=ohwi} on gpu:0
// IR: kernel 0 {{.*}}: pad
// IR: kernel 1 {{.*}}: transpose
// RUN: smelt run %t/conv.smelt --input x=%t/x.npy --input w=%t/w.npy --output-dir %t/out
// RUN: %python %S/npy_tool.py check-conv %t/x.npy %t/w.npy %t/out/y.npy 2,2 1,1,0,1 | FileCheck %s --check-prefix=NUMPY
// NUMPY: conv OK

// TensorFlow's SAME at stride 2 in W (one more column after): asymmetric.
func.func @main(%x: tensor<2x9x8x3xf32> {smelt.name = "x"}, %w: tensor<3x3x3x5xf32> {smelt.name = "w"})
    -> (tensor<2x5x4x5xf32> {smelt.name = "y"}) {
  %y = smelt.conv2d %x, %w strides = [2, 2] padding = [1, 1, 0, 1] dilation = [1, 1] : tensor<2x9x8x3xf32>, tensor<3x3x3x5xf32>
  return %y : tensor<2x5x4x5xf32>
}
