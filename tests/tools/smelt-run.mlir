// `smelt run` end to end: .npy inputs in, .npy outputs out, checked by NumPy in float64.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %S/npy_tool.py random %t/x.npy 16,32 float32 1
// RUN: %python %S/npy_tool.py random %t/w.npy 32,8 float32 2
// RUN: %python %S/npy_tool.py random %t/b.npy 8 float32 3
// RUN: smelt run %s --input x=%t/x.npy --input 1=%t/w.npy --input arg2=%t/b.npy --output-dir %t/out | FileCheck %s
// RUN: %python %S/npy_tool.py check-dense %t | FileCheck %s --check-prefix=NUMPY
// RUN: smelt run %s --input x=%t/x.npy --input w=%t/w.npy --input b=%t/b.npy | FileCheck %s --check-prefix=SUMMARY

// CHECK: wrote {{.*}}y.npy (tensor<16x8xf32>)
// CHECK: wrote {{.*}}rowsum.npy (tensor<16xf32>)
// CHECK: wrote {{.*}}result2.npy (tensor<16xi64>)
// NUMPY: dense OK
// SUMMARY: y: tensor<16x8xf32>
// SUMMARY: rowsum: tensor<16xf32>

func.func @main(%x: tensor<16x32xf32> {smelt.name = "x"}, %w: tensor<32x8xf32> {smelt.name = "w"},
                %b: tensor<8xf32> {smelt.name = "b"})
    -> (tensor<16x8xf32> {smelt.name = "y"}, tensor<16xf32> {smelt.name = "rowsum"}, tensor<16xi64>) {
  %0 = smelt.matmul %x, %w : tensor<16x32xf32>, tensor<32x8xf32>
  %1 = smelt.broadcast_in_dim %b, dims = [1] : tensor<8xf32> -> tensor<16x8xf32>
  %2 = smelt.add %0, %1 : tensor<16x8xf32>
  %3 = smelt.relu %2 : tensor<16x8xf32>
  %4 = smelt.reduce sum %3 axes = [1] : tensor<16x8xf32>
  %5 = smelt.argmax %3 axis = 1 : tensor<16x8xf32>
  return %3, %4, %5 : tensor<16x8xf32>, tensor<16xf32>, tensor<16xi64>
}
