// Integer division never traps (issue 21): x / 0 = 0 and INT_MIN / -1 = INT_MIN (docs/ops.md),
// in i32 and i64, in a kernel of its own (as without fusion) and fused with other ops (separate arguments, so
// that the two kernels are not merged as siblings). The CUDA
// source computes it through smelt_div, which the prelude defines the same way.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %S/npy_tool.py values %t/a32.npy int32 7,-7,-2147483648,-2147483648,5,0,-9
// RUN: %python %S/npy_tool.py values %t/b32.npy int32 0,0,-1,0,-1,0,2
// RUN: %python %S/npy_tool.py values %t/a64.npy int64 7,-7,-9223372036854775808,-9223372036854775808,5,0,-9
// RUN: %python %S/npy_tool.py values %t/b64.npy int64 0,0,-1,0,-1,0,2
// RUN: smelt run %s --input a32=%t/a32.npy --input b32=%t/b32.npy --input c32=%t/a32.npy --input d32=%t/b32.npy --input a64=%t/a64.npy --input b64=%t/b64.npy --input c64=%t/a64.npy --input d64=%t/b64.npy --output-dir %t/out
// RUN: %python %S/npy_tool.py print %t/out/alone32.npy | FileCheck %s --check-prefix=I32
// RUN: %python %S/npy_tool.py print %t/out/fused32.npy | FileCheck %s --check-prefix=I32
// RUN: %python %S/npy_tool.py print %t/out/alone64.npy | FileCheck %s --check-prefix=I64
// RUN: %python %S/npy_tool.py print %t/out/fused64.npy | FileCheck %s --check-prefix=I64
// RUN: %if cuda-codegen %{ smelt dump %s --dump-dir %t/dump && FileCheck %s --check-prefix=CUDA < %t/dump/main-0/cuda-kernels.cu %}
// I32: int32 0 0 -2147483648 0 -5 0 -4
// I64: int64 0 0 -9223372036854775808 0 -5 0 -4
// CUDA: smelt_div(T a, T b) {
// CUDA-NEXT: return b == 0 ? (T)0 : b == (T)-1 ? smelt_neg(a) : a / b;
// CUDA: smelt_div(

func.func @main(%a32: tensor<7xi32> {smelt.name = "a32"}, %b32: tensor<7xi32> {smelt.name = "b32"},
                %c32: tensor<7xi32> {smelt.name = "c32"}, %d32: tensor<7xi32> {smelt.name = "d32"},
                %a64: tensor<7xi64> {smelt.name = "a64"}, %b64: tensor<7xi64> {smelt.name = "b64"},
                %c64: tensor<7xi64> {smelt.name = "c64"}, %d64: tensor<7xi64> {smelt.name = "d64"})
    -> (tensor<7xi32> {smelt.name = "alone32"}, tensor<7xi32> {smelt.name = "fused32"},
        tensor<7xi64> {smelt.name = "alone64"}, tensor<7xi64> {smelt.name = "fused64"}) {
  %q32 = smelt.div %a32, %b32 : tensor<7xi32>
  %n32 = smelt.neg %c32 : tensor<7xi32>
  %nn32 = smelt.neg %n32 : tensor<7xi32>
  %r32 = smelt.div %nn32, %d32 : tensor<7xi32>
  %f32 = smelt.max %r32, %r32 : tensor<7xi32>
  %q64 = smelt.div %a64, %b64 : tensor<7xi64>
  %n64 = smelt.neg %c64 : tensor<7xi64>
  %nn64 = smelt.neg %n64 : tensor<7xi64>
  %r64 = smelt.div %nn64, %d64 : tensor<7xi64>
  %f64 = smelt.max %r64, %r64 : tensor<7xi64>
  return %q32, %f32, %q64, %f64 : tensor<7xi32>, tensor<7xi32>, tensor<7xi64>, tensor<7xi64>
}
