// The representative fusions the CUDA tests share, written by hand as smelt.fusion ops (and the
// argmax and scatter_add ops placed on a GPU, kernels of their own): each rendering check reads
// one kernel of them, every kernel is compiled by NVRTC and checked by ptxas and emulated by
// the SIMT emulator against the CPU, and on a GPU each fusion runs against the unfused ops on
// the CPU.
#include "CudaCorpus.h"

namespace smelt::cuda_test {

const std::vector<FusionCase> &fusionCases() {
  static const std::vector<FusionCase> cases = {
      // 33x65 = 2145 elements: 536 float4 steps and a tail of one.
      {"ElementwiseChain", R"mlir(
func.func @main(%x: tensor<33x65xf32>, %y: tensor<33x65xf32>) -> tensor<33x65xf32> {
  %r = smelt.fusion loop (%x, %y) : (tensor<33x65xf32>, tensor<33x65xf32>) -> tensor<33x65xf32> {
  ^bb0(%a: tensor<33x65xf32>, %b: tensor<33x65xf32>):
    %c = smelt.constant dense<0.5> : tensor<33x65xf32>
    %0 = smelt.mul %a, %b : tensor<33x65xf32>
    %1 = smelt.add %0, %c : tensor<33x65xf32>
    %2 = smelt.tanh %1 : tensor<33x65xf32>
    %3 = smelt.neg %2 : tensor<33x65xf32>
    %4 = smelt.max %3, %a : tensor<33x65xf32>
    %5 = smelt.logistic %4 : tensor<33x65xf32>
    %6 = smelt.sub %5, %b : tensor<33x65xf32>
    smelt.yield %6 : tensor<33x65xf32>
  }
  return %r : tensor<33x65xf32>
}
)mlir"},
      // Dropout as a training step fuses it: the mask drawn in the kernel from the step's
      // offset (Philox, bit for bit the CPU's), compared, applied; 2145 elements, a tail.
      {"DropoutWithOffset", R"mlir(
func.func @main(%x: tensor<33x65xf32>, %step: tensor<i64>) -> (tensor<33x65xf32>, tensor<33x65xi1>) {
  %r:2 = smelt.fusion loop (%x, %step) : (tensor<33x65xf32>, tensor<i64>) -> (tensor<33x65xf32>, tensor<33x65xi1>) {
  ^bb0(%a: tensor<33x65xf32>, %s: tensor<i64>):
    %u = smelt.rng_uniform seed = 1234567890123, low = 0.0, high = 1.0 offset %s : tensor<33x65xf32>
    %rate = smelt.constant dense<0.25> : tensor<33x65xf32>
    %keep = smelt.compare ge, %u, %rate : tensor<33x65xf32>
    %scale = smelt.constant dense<1.3333334> : tensor<33x65xf32>
    %zero = smelt.constant dense<0.0> : tensor<33x65xf32>
    %0 = smelt.mul %a, %scale : tensor<33x65xf32>
    %1 = smelt.select %keep, %0, %zero : tensor<33x65xi1>, tensor<33x65xf32>
    smelt.yield %1, %keep : tensor<33x65xf32>, tensor<33x65xi1>
  }
  return %r#0, %r#1 : tensor<33x65xf32>, tensor<33x65xi1>
}
)mlir"},
      // Draws in f64 (53 bits of two words) and bf16 (rounded from f32) over [-3, 5).
      {"UniformF64AndBf16", R"mlir(
func.func @main() -> (tensor<7x9xf64>, tensor<7x9xbf16>) {
  %r:2 = smelt.fusion loop () : () -> (tensor<7x9xf64>, tensor<7x9xbf16>) {
    %0 = smelt.rng_uniform seed = 7, low = -3.0, high = 5.0 : tensor<7x9xf64>
    %1 = smelt.rng_uniform seed = 8, low = -3.0, high = 5.0 : tensor<7x9xbf16>
    smelt.yield %0, %1 : tensor<7x9xf64>, tensor<7x9xbf16>
  }
  return %r#0, %r#1 : tensor<7x9xf64>, tensor<7x9xbf16>
}
)mlir"},
      // Initial weights drawn on the GPU: rng_normal in f32 with the step offset, f64 and bf16
      // (the emulator's log and cos are the host's, the CPU kernels' LLVM's).
      {"NormalF32F64AndBf16", R"mlir(
func.func @main(%step: tensor<i64>) -> (tensor<33x65xf32>, tensor<33x65xf64>, tensor<33x65xbf16>) {
  %r:3 = smelt.fusion loop (%step) : (tensor<i64>) -> (tensor<33x65xf32>, tensor<33x65xf64>, tensor<33x65xbf16>) {
  ^bb0(%s: tensor<i64>):
    %0 = smelt.rng_normal seed = 1234567890123, mean = 0.5, stddev = 2.0 offset %s : tensor<33x65xf32>
    %1 = smelt.rng_normal seed = 7, mean = -1.0, stddev = 0.25 : tensor<33x65xf64>
    %2 = smelt.rng_normal seed = 8, mean = 0.0, stddev = 1.0 : tensor<33x65xbf16>
    smelt.yield %0, %1, %2 : tensor<33x65xf32>, tensor<33x65xf64>, tensor<33x65xbf16>
  }
  return %r#0, %r#1, %r#2 : tensor<33x65xf32>, tensor<33x65xf64>, tensor<33x65xbf16>
}
)mlir"},
      {"BiasRelu", R"mlir(
func.func @main(%x: tensor<256x512xf32>, %bias: tensor<512xf32>) -> tensor<256x512xf32> {
  %r = smelt.fusion loop (%x, %bias) : (tensor<256x512xf32>, tensor<512xf32>) -> tensor<256x512xf32> {
  ^bb0(%a: tensor<256x512xf32>, %b: tensor<512xf32>):
    %0 = smelt.broadcast_in_dim %b, dims = [1] : tensor<512xf32> -> tensor<256x512xf32>
    %1 = smelt.add %a, %0 : tensor<256x512xf32>
    %2 = smelt.relu %1 : tensor<256x512xf32>
    smelt.yield %2 : tensor<256x512xf32>
  }
  return %r : tensor<256x512xf32>
}
)mlir"},
      {"Transpose", R"mlir(
func.func @main(%x: tensor<48x80xf32>) -> tensor<80x48xf32> {
  %r = smelt.fusion loop (%x) : (tensor<48x80xf32>) -> tensor<80x48xf32> {
  ^bb0(%a: tensor<48x80xf32>):
    %c = smelt.constant dense<2.0> : tensor<80x48xf32>
    %0 = smelt.transpose %a, permutation = [1, 0] : tensor<48x80xf32>
    %1 = smelt.mul %0, %c : tensor<80x48xf32>
    smelt.yield %1 : tensor<80x48xf32>
  }
  return %r : tensor<80x48xf32>
}
)mlir"},
      // Moves in f16: a strided slice, a pad of leading rows read through a slice, and a
      // concat of three along the first dimension (selects among clamped reads on the GPU),
      // 53x12 = 636 elements.
      {"SlicePadConcat", R"mlir(
func.func @main(%x: tensor<40x24xf16>, %y: tensor<9x24xf16>) -> tensor<53x12xf16> {
  %r = smelt.fusion loop (%x, %y) : (tensor<40x24xf16>, tensor<9x24xf16>) -> tensor<53x12xf16> {
  ^bb0(%a: tensor<40x24xf16>, %b: tensor<9x24xf16>):
    %0 = smelt.slice %a [0:40:1, 0:24:2] : tensor<40x24xf16>
    %1 = smelt.neg %0 : tensor<40x12xf16>
    %2 = smelt.pad %b low = [2, 0] high = [0, 0] value = -1.0 : tensor<9x24xf16>
    %3 = smelt.slice %2 [0:11:1, 12:24:1] : tensor<11x24xf16>
    %4 = smelt.exp %3 : tensor<11x12xf16>
    %5 = smelt.slice %a [38:40:1, 0:12:1] : tensor<40x24xf16>
    %6 = smelt.concat %1, %4, %5 dim = 0 : tensor<40x12xf16>, tensor<11x12xf16>, tensor<2x12xf16>
    smelt.yield %6 : tensor<53x12xf16>
  }
  return %r : tensor<53x12xf16>
}
)mlir"},
      // Rows of 1000: a warp per result.
      {"ReduceSumLastAxis", R"mlir(
func.func @main(%x: tensor<256x1000xf32>) -> tensor<256xf32> {
  %r = smelt.fusion reduction (%x) : (tensor<256x1000xf32>) -> tensor<256xf32> {
  ^bb0(%a: tensor<256x1000xf32>):
    %0 = smelt.mul %a, %a : tensor<256x1000xf32>
    %1 = smelt.reduce sum %0 axes = [1] : tensor<256x1000xf32>
    smelt.yield %1 : tensor<256xf32>
  }
  return %r : tensor<256xf32>
}
)mlir"},
      // Rows of 5000: a block per result; a row holding a NaN must give NaN (about a quarter do).
      {"ReduceMaxLongRows", R"mlir(
func.func @main(%x: tensor<40x5000xf32>) -> tensor<40xf32> {
  %r = smelt.fusion reduction (%x) : (tensor<40x5000xf32>) -> tensor<40xf32> {
  ^bb0(%a: tensor<40x5000xf32>):
    %1 = smelt.reduce max %a axes = [1] : tensor<40x5000xf32>
    smelt.yield %1 : tensor<40xf32>
  }
  return %r : tensor<40xf32>
}
)mlir",
       -2, 2, 0.05, 1.0 / 20000},
      // The bias gradient: the innermost axis is kept, so warps take consecutive columns.
      {"ReduceSumAxis0", R"mlir(
func.func @main(%x: tensor<1000x300xf32>) -> tensor<300xf32> {
  %r = smelt.fusion reduction (%x) : (tensor<1000x300xf32>) -> tensor<300xf32> {
  ^bb0(%a: tensor<1000x300xf32>):
    %1 = smelt.reduce sum %a axes = [0] : tensor<1000x300xf32>
    smelt.yield %1 : tensor<300xf32>
  }
  return %r : tensor<300xf32>
}
)mlir"},
      // Few results over a long range: each range is split over blocks that leave partials,
      // combined in order by the last of them. 16 columns of 100000 rows (one group of 32
      // columns, 195 parts); the inputs' mean is 1, so that no column sums to nearly 0.
      {"ReduceSumColumnsSplit", R"mlir(
func.func @main(%x: tensor<100000x16xf32>) -> tensor<16xf32> {
  %r = smelt.fusion reduction (%x) : (tensor<100000x16xf32>) -> tensor<16xf32> {
  ^bb0(%a: tensor<100000x16xf32>):
    %1 = smelt.reduce sum %a axes = [0] : tensor<100000x16xf32>
    smelt.yield %1 : tensor<16xf32>
  }
  return %r : tensor<16xf32>
}
)mlir",
       -1, 3, 0},
      // A loss-like sum of 3M elements to one scalar: one result, 183 parts.
      {"ReduceSumAllSplit", R"mlir(
func.func @main(%x: tensor<3000x1000xf32>) -> tensor<f32> {
  %r = smelt.fusion reduction (%x) : (tensor<3000x1000xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<3000x1000xf32>):
    %0 = smelt.mul %a, %a : tensor<3000x1000xf32>
    %1 = smelt.reduce sum %0 axes = [0, 1] : tensor<3000x1000xf32>
    smelt.yield %1 : tensor<f32>
  }
  return %r : tensor<f32>
}
)mlir"},
      // A mixed-precision CNN's bias gradient: 12 channels of a bf16 NHWC batch, accumulated in
      // f32 and rounded once.
      {"ReduceBf16ChannelsSplit", R"mlir(
func.func @main(%x: tensor<64x64x64x12xbf16>) -> tensor<12xbf16> {
  %r = smelt.fusion reduction (%x) : (tensor<64x64x64x12xbf16>) -> tensor<12xbf16> {
  ^bb0(%a: tensor<64x64x64x12xbf16>):
    %1 = smelt.reduce sum %a axes = [0, 1, 2] : tensor<64x64x64x12xbf16>
    smelt.yield %1 : tensor<12xbf16>
  }
  return %r : tensor<12xbf16>
}
)mlir",
       -1, 3, 0},
      // Two reduces of long f16 rows split together: a partial of each per block.
      {"ReduceF16RowsSplit", R"mlir(
func.func @main(%x: tensor<4x200000xf16>) -> (tensor<4xf16>, tensor<4xf16>) {
  %r:2 = smelt.fusion reduction (%x) : (tensor<4x200000xf16>) -> (tensor<4xf16>, tensor<4xf16>) {
  ^bb0(%a: tensor<4x200000xf16>):
    %1 = smelt.reduce sum %a axes = [1] : tensor<4x200000xf16>
    %2 = smelt.reduce max %a axes = [1] : tensor<4x200000xf16>
    smelt.yield %1, %2 : tensor<4xf16>, tensor<4xf16>
  }
  return %r#0, %r#1 : tensor<4xf16>, tensor<4xf16>
}
)mlir"},
      // i32 sums of large values wrap, split or not, exactly as on the CPU.
      {"ReduceIntegerSumSplit", R"mlir(
func.func @main(%x: tensor<3x300000xi32>) -> tensor<3xi32> {
  %r = smelt.fusion reduction (%x) : (tensor<3x300000xi32>) -> tensor<3xi32> {
  ^bb0(%a: tensor<3x300000xi32>):
    %1 = smelt.reduce sum %a axes = [1] : tensor<3x300000xi32>
    smelt.yield %1 : tensor<3xi32>
  }
  return %r : tensor<3xi32>
}
)mlir",
       -1e9, 1e9, 1},
      // Softmax's denominator: a row maximum broadcast back into the body of a reduction.
      {"SoftmaxDenominator", R"mlir(
func.func @main(%x: tensor<64x10xf32>, %m: tensor<64xf32>) -> tensor<64xf32> {
  %r = smelt.fusion reduction (%x, %m) : (tensor<64x10xf32>, tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a: tensor<64x10xf32>, %b: tensor<64xf32>):
    %0 = smelt.broadcast_in_dim %b, dims = [0] : tensor<64xf32> -> tensor<64x10xf32>
    %1 = smelt.sub %a, %0 : tensor<64x10xf32>
    %2 = smelt.exp %1 : tensor<64x10xf32>
    %3 = smelt.reduce sum %2 axes = [1] : tensor<64x10xf32>
    smelt.yield %3 : tensor<64xf32>
  }
  return %r : tensor<64xf32>
}
)mlir"},
      // Results of three dtypes from one body; the vectors follow the widest (f32).
      {"MultiOutputLoop", R"mlir(
func.func @main(%x: tensor<100x37xf32>) -> (tensor<100x37xf32>, tensor<100x37xf16>, tensor<100x37xi1>) {
  %r:3 = smelt.fusion loop (%x) : (tensor<100x37xf32>) -> (tensor<100x37xf32>, tensor<100x37xf16>, tensor<100x37xi1>) {
  ^bb0(%a: tensor<100x37xf32>):
    %z = smelt.constant dense<0.0> : tensor<100x37xf32>
    %0 = smelt.exp %a : tensor<100x37xf32>
    %1 = smelt.convert %0 : tensor<100x37xf32> -> tensor<100x37xf16>
    %2 = smelt.compare gt, %a, %z : tensor<100x37xf32>
    smelt.yield %0, %1, %2 : tensor<100x37xf32>, tensor<100x37xf16>, tensor<100x37xi1>
  }
  return %r#0, %r#1, %r#2 : tensor<100x37xf32>, tensor<100x37xf16>, tensor<100x37xi1>
}
)mlir"},
      // Three Adam updates merged as sibling kernels are: 12 inputs and 9 results streamed,
      // 84 registers of f32 lanes at width 4, so it moves 2 lanes a vector (and a tail of 1).
      {"AdamUpdatesManyBuffers", R"mlir(
func.func @main(%lr: tensor<f32>, %p0: tensor<4099xf32>, %g0: tensor<4099xf32>, %m0: tensor<4099xf32>, %v0: tensor<4099xf32>, %p1: tensor<4099xf32>, %g1: tensor<4099xf32>, %m1: tensor<4099xf32>, %v1: tensor<4099xf32>, %p2: tensor<4099xf32>, %g2: tensor<4099xf32>, %m2: tensor<4099xf32>, %v2: tensor<4099xf32>) -> (tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>) {
  %r:9 = smelt.fusion loop (%lr, %p0, %g0, %m0, %v0, %p1, %g1, %m1, %v1, %p2, %g2, %m2, %v2) : (tensor<f32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>) -> (tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>) {
  ^bb0(%blr: tensor<f32>, %bp0: tensor<4099xf32>, %bg0: tensor<4099xf32>, %bm0: tensor<4099xf32>, %bv0: tensor<4099xf32>, %bp1: tensor<4099xf32>, %bg1: tensor<4099xf32>, %bm1: tensor<4099xf32>, %bv1: tensor<4099xf32>, %bp2: tensor<4099xf32>, %bg2: tensor<4099xf32>, %bm2: tensor<4099xf32>, %bv2: tensor<4099xf32>):
    %b1 = smelt.constant dense<0.9> : tensor<4099xf32>
    %b2 = smelt.constant dense<0.999> : tensor<4099xf32>
    %c1 = smelt.constant dense<0.1> : tensor<4099xf32>
    %c2 = smelt.constant dense<0.001> : tensor<4099xf32>
    %eps = smelt.constant dense<1.0e-07> : tensor<4099xf32>
    %rate = smelt.broadcast_in_dim %blr, dims = [] : tensor<f32> -> tensor<4099xf32>
    %nm0a = smelt.mul %bm0, %b1 : tensor<4099xf32>
    %nm0b = smelt.mul %bg0, %c1 : tensor<4099xf32>
    %nm0 = smelt.add %nm0a, %nm0b : tensor<4099xf32>
    %ng02 = smelt.mul %bg0, %bg0 : tensor<4099xf32>
    %nv0a = smelt.mul %bv0, %b2 : tensor<4099xf32>
    %nv0b = smelt.mul %ng02, %c2 : tensor<4099xf32>
    %nv0 = smelt.add %nv0a, %nv0b : tensor<4099xf32>
    %ns0 = smelt.sqrt %nv0 : tensor<4099xf32>
    %nd0 = smelt.add %ns0, %eps : tensor<4099xf32>
    %nu0 = smelt.div %nm0, %nd0 : tensor<4099xf32>
    %nw0 = smelt.mul %rate, %nu0 : tensor<4099xf32>
    %np0 = smelt.sub %bp0, %nw0 : tensor<4099xf32>
    %nm1a = smelt.mul %bm1, %b1 : tensor<4099xf32>
    %nm1b = smelt.mul %bg1, %c1 : tensor<4099xf32>
    %nm1 = smelt.add %nm1a, %nm1b : tensor<4099xf32>
    %ng12 = smelt.mul %bg1, %bg1 : tensor<4099xf32>
    %nv1a = smelt.mul %bv1, %b2 : tensor<4099xf32>
    %nv1b = smelt.mul %ng12, %c2 : tensor<4099xf32>
    %nv1 = smelt.add %nv1a, %nv1b : tensor<4099xf32>
    %ns1 = smelt.sqrt %nv1 : tensor<4099xf32>
    %nd1 = smelt.add %ns1, %eps : tensor<4099xf32>
    %nu1 = smelt.div %nm1, %nd1 : tensor<4099xf32>
    %nw1 = smelt.mul %rate, %nu1 : tensor<4099xf32>
    %np1 = smelt.sub %bp1, %nw1 : tensor<4099xf32>
    %nm2a = smelt.mul %bm2, %b1 : tensor<4099xf32>
    %nm2b = smelt.mul %bg2, %c1 : tensor<4099xf32>
    %nm2 = smelt.add %nm2a, %nm2b : tensor<4099xf32>
    %ng22 = smelt.mul %bg2, %bg2 : tensor<4099xf32>
    %nv2a = smelt.mul %bv2, %b2 : tensor<4099xf32>
    %nv2b = smelt.mul %ng22, %c2 : tensor<4099xf32>
    %nv2 = smelt.add %nv2a, %nv2b : tensor<4099xf32>
    %ns2 = smelt.sqrt %nv2 : tensor<4099xf32>
    %nd2 = smelt.add %ns2, %eps : tensor<4099xf32>
    %nu2 = smelt.div %nm2, %nd2 : tensor<4099xf32>
    %nw2 = smelt.mul %rate, %nu2 : tensor<4099xf32>
    %np2 = smelt.sub %bp2, %nw2 : tensor<4099xf32>
    smelt.yield %np0, %nm0, %nv0, %np1, %nm1, %nv1, %np2, %nm2, %nv2 : tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>
  }
  return %r#0, %r#1, %r#2, %r#3, %r#4, %r#5, %r#6, %r#7, %r#8 : tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>, tensor<4099xf32>
}
)mlir",
       0.05, 2, 0},
      // Two reduces over one operand: one kernel, the shared exp computed once per element.
      {"MultiOutputReduction", R"mlir(
func.func @main(%x: tensor<128x300xf32>) -> (tensor<128xf32>, tensor<128xf32>) {
  %r:2 = smelt.fusion reduction (%x) : (tensor<128x300xf32>) -> (tensor<128xf32>, tensor<128xf32>) {
  ^bb0(%a: tensor<128x300xf32>):
    %0 = smelt.exp %a : tensor<128x300xf32>
    %1 = smelt.reduce sum %0 axes = [1] : tensor<128x300xf32>
    %2 = smelt.reduce min %0 axes = [1] : tensor<128x300xf32>
    smelt.yield %1, %2 : tensor<128xf32>, tensor<128xf32>
  }
  return %r#0, %r#1 : tensor<128xf32>, tensor<128xf32>
}
)mlir"},
      // f16 in and out (8-lane vectors), through f32 and bf16 roundings.
      {"HalfConverts", R"mlir(
func.func @main(%x: tensor<1003xf16>, %y: tensor<1003xbf16>) -> (tensor<1003xf16>, tensor<1003xbf16>) {
  %r:2 = smelt.fusion loop (%x, %y) : (tensor<1003xf16>, tensor<1003xbf16>) -> (tensor<1003xf16>, tensor<1003xbf16>) {
  ^bb0(%a: tensor<1003xf16>, %b: tensor<1003xbf16>):
    %0 = smelt.convert %a : tensor<1003xf16> -> tensor<1003xf32>
    %1 = smelt.convert %b : tensor<1003xbf16> -> tensor<1003xf32>
    %2 = smelt.mul %0, %1 : tensor<1003xf32>
    %3 = smelt.convert %2 : tensor<1003xf32> -> tensor<1003xbf16>
    %4 = smelt.convert %3 : tensor<1003xbf16> -> tensor<1003xf16>
    %5 = smelt.add %4, %a : tensor<1003xf16>
    %6 = smelt.exp %b : tensor<1003xbf16>
    smelt.yield %5, %6 : tensor<1003xf16>, tensor<1003xbf16>
  }
  return %r#0, %r#1 : tensor<1003xf16>, tensor<1003xbf16>
}
)mlir"},
      {"CompareSelect", R"mlir(
func.func @main(%x: tensor<500xf32>, %y: tensor<500xf32>) -> (tensor<500xf32>, tensor<500xi1>) {
  %r:2 = smelt.fusion loop (%x, %y) : (tensor<500xf32>, tensor<500xf32>) -> (tensor<500xf32>, tensor<500xi1>) {
  ^bb0(%a: tensor<500xf32>, %b: tensor<500xf32>):
    %0 = smelt.compare lt, %a, %b : tensor<500xf32>
    %1 = smelt.select %0, %a, %b : tensor<500xi1>, tensor<500xf32>
    %2 = smelt.compare ge, %a, %b : tensor<500xf32>
    smelt.yield %1, %2 : tensor<500xf32>, tensor<500xi1>
  }
  return %r#0, %r#1 : tensor<500xf32>, tensor<500xi1>
}
)mlir"},
      // Inputs in [-3, 3] with zeros: x / 0 is 0, division truncates.
      {"IntegerDiv", R"mlir(
func.func @main(%x: tensor<777xi32>, %y: tensor<777xi32>) -> (tensor<777xi32>, tensor<777xi64>) {
  %r:2 = smelt.fusion loop (%x, %y) : (tensor<777xi32>, tensor<777xi32>) -> (tensor<777xi32>, tensor<777xi64>) {
  ^bb0(%a: tensor<777xi32>, %b: tensor<777xi32>):
    %c = smelt.constant dense<-2147483648> : tensor<777xi32>
    %0 = smelt.div %a, %b : tensor<777xi32>
    %1 = smelt.mul %0, %c : tensor<777xi32>
    %2 = smelt.convert %b : tensor<777xi32> -> tensor<777xi64>
    %3 = smelt.div %2, %2 : tensor<777xi64>
    smelt.yield %1, %3 : tensor<777xi32>, tensor<777xi64>
  }
  return %r#0, %r#1 : tensor<777xi32>, tensor<777xi64>
}
)mlir",
       -3, 3, 0},
      // Float -> int saturates, NaN gives 0 (special inputs are NaN, inf and +-3e9).
      {"FloatToInt", R"mlir(
func.func @main(%x: tensor<640xf32>) -> (tensor<640xi32>, tensor<640xi64>) {
  %r:2 = smelt.fusion loop (%x) : (tensor<640xf32>) -> (tensor<640xi32>, tensor<640xi64>) {
  ^bb0(%a: tensor<640xf32>):
    %c = smelt.constant dense<100.0> : tensor<640xf32>
    %0 = smelt.mul %a, %c : tensor<640xf32>
    %1 = smelt.convert %0 : tensor<640xf32> -> tensor<640xi32>
    %2 = smelt.convert %0 : tensor<640xf32> -> tensor<640xi64>
    smelt.yield %1, %2 : tensor<640xi32>, tensor<640xi64>
  }
  return %r#0, %r#1 : tensor<640xi32>, tensor<640xi64>
}
)mlir",
       -2, 2, 0.05, 1.0 / 8},
      // i32 sums accumulate in i64 and wrap once stored.
      {"ReduceIntegerSum", R"mlir(
func.func @main(%x: tensor<96x2000xi32>) -> tensor<96xi32> {
  %r = smelt.fusion reduction (%x) : (tensor<96x2000xi32>) -> tensor<96xi32> {
  ^bb0(%a: tensor<96x2000xi32>):
    %1 = smelt.reduce sum %a axes = [1] : tensor<96x2000xi32>
    smelt.yield %1 : tensor<96xi32>
  }
  return %r : tensor<96xi32>
}
)mlir",
       -50, 50, 1},
      // iota and reshape: coordinates in one shape, the linear index in another.
      {"IotaReshape", R"mlir(
func.func @main(%x: tensor<96xf32>) -> tensor<12x8xf32> {
  %r = smelt.fusion loop (%x) : (tensor<96xf32>) -> tensor<12x8xf32> {
  ^bb0(%a: tensor<96xf32>):
    %0 = smelt.reshape %a : tensor<96xf32> -> tensor<12x8xf32>
    %1 = smelt.iota dim = 1 : tensor<12x8xf32>
    %2 = smelt.add %0, %1 : tensor<12x8xf32>
    smelt.yield %2 : tensor<12x8xf32>
  }
  return %r : tensor<12x8xf32>
}
)mlir"},
      {"DoubleChain", R"mlir(
func.func @main(%x: tensor<301xf64>, %y: tensor<301xf64>) -> tensor<301xf64> {
  %r = smelt.fusion loop (%x, %y) : (tensor<301xf64>, tensor<301xf64>) -> tensor<301xf64> {
  ^bb0(%a: tensor<301xf64>, %b: tensor<301xf64>):
    %0 = smelt.abs %a : tensor<301xf64>
    %1 = smelt.sqrt %0 : tensor<301xf64>
    %2 = smelt.pow %1, %b : tensor<301xf64>
    %3 = smelt.min %2, %a : tensor<301xf64>
    smelt.yield %3 : tensor<301xf64>
  }
  return %r : tensor<301xf64>
}
)mlir"},
      // An embedding plus positions: the row is read from the index element and clamped into
      // the table's 50 rows; ids drawn from [-5, 55] fall outside on both sides.
      {"EmbeddingPlusPositions", R"mlir(
func.func @main(%t: tensor<50x64xf32>, %i: tensor<8x12xi32>, %p: tensor<12x64xf32>) -> tensor<8x12x64xf32> {
  %r = smelt.fusion loop (%t, %i, %p) : (tensor<50x64xf32>, tensor<8x12xi32>, tensor<12x64xf32>) -> tensor<8x12x64xf32> {
  ^bb0(%a: tensor<50x64xf32>, %b: tensor<8x12xi32>, %c: tensor<12x64xf32>):
    %0 = smelt.gather %a[%b] : tensor<50x64xf32>, tensor<8x12xi32>
    %1 = smelt.broadcast_in_dim %c, dims = [1, 2] : tensor<12x64xf32> -> tensor<8x12x64xf32>
    %2 = smelt.add %0, %1 : tensor<8x12x64xf32>
    smelt.yield %2 : tensor<8x12x64xf32>
  }
  return %r : tensor<8x12x64xf32>
}
)mlir",
       -5, 55, 0},
      // A middle axis reduced: the innermost is kept, results of one row are consecutive.
      {"ReduceMiddleAxis", R"mlir(
func.func @main(%x: tensor<6x50x40xbf16>) -> tensor<6x40xbf16> {
  %r = smelt.fusion reduction (%x) : (tensor<6x50x40xbf16>) -> tensor<6x40xbf16> {
  ^bb0(%a: tensor<6x50x40xbf16>):
    %1 = smelt.reduce sum %a axes = [1] : tensor<6x50x40xbf16>
    smelt.yield %1 : tensor<6x40xbf16>
  }
  return %r : tensor<6x40xbf16>
}
)mlir"},
      // argmax placed on a GPU is a kernel of its own. Along the innermost axis (a warp per
      // result: 45 takes two strides of the lanes, 2000 many): a sixth of the elements NaN,
      // +-inf, +-3e9 or zero, so rows tie and hold NaNs; bf16 ties often on its own.
      {"ArgmaxRows", R"mlir(
func.func @main(%x: tensor<37x45xf32>, %y: tensor<37x45xbf16>, %z: tensor<3x2000xf64>) -> (tensor<37xi64>, tensor<37xi64>, tensor<3xi64>) {
  %0 = smelt.argmax %x axis = 1 {smelt.device = "gpu:0"} : tensor<37x45xf32>
  %1 = smelt.argmax %y axis = 1 {smelt.device = "gpu:0"} : tensor<37x45xbf16>
  %2 = smelt.argmax %z axis = 1 {smelt.device = "gpu:0"} : tensor<3x2000xf64>
  return %0, %1, %2 : tensor<37xi64>, tensor<37xi64>, tensor<3xi64>
}
)mlir",
       -2, 2, 0.05, 0.17},
      // Along outer and middle axes (a thread per result), integers drawn from [-2, 2] (ties
      // everywhere), an integer row, and an empty result (no rows to reduce).
      {"ArgmaxColumns", R"mlir(
func.func @main(%x: tensor<45x37xf16>, %y: tensor<5x13x7xf32>, %z: tensor<6x9x5xi32>, %w: tensor<9x6xi64>, %e: tensor<0x5xf32>) -> (tensor<37xi64>, tensor<5x7xi64>, tensor<6x9xi64>, tensor<6xi64>, tensor<0xi64>) {
  %0 = smelt.argmax %x axis = 0 {smelt.device = "gpu:0"} : tensor<45x37xf16>
  %1 = smelt.argmax %y axis = 1 {smelt.device = "gpu:0"} : tensor<5x13x7xf32>
  %2 = smelt.argmax %z axis = 2 {smelt.device = "gpu:0"} : tensor<6x9x5xi32>
  %3 = smelt.argmax %w axis = 0 {smelt.device = "gpu:0"} : tensor<9x6xi64>
  %4 = smelt.argmax %e axis = 1 {smelt.device = "gpu:0"} : tensor<0x5xf32>
  return %0, %1, %2, %3, %4 : tensor<37xi64>, tensor<5x7xi64>, tensor<6x9xi64>, tensor<6xi64>, tensor<0xi64>
}
)mlir",
       -2, 2, 0.05, 0.17},
      // scatter_add placed on a GPU is a kernel of its own. Indices drawn from [-4, 40] repeat
      // and fall outside [0, size) on both sides; in every float dtype, i32 and i64 indices,
      // sizes that are no multiple of a warp, no updates at all (zeros), and a result of
      // 40000x20 elements, more than the GPU runs threads at once, so each thread owns 3 rows.
      {"ScatterAdd", R"mlir(
func.func @main(%u: tensor<50x33xf32>, %i: tensor<50xi32>, %v: tensor<5x10x7xbf16>, %j: tensor<5x10xi64>, %w: tensor<64x3xf16>, %k: tensor<64xi32>, %x: tensor<20x2x3xf64>, %l: tensor<20xi64>, %y: tensor<0x8xf32>, %m: tensor<0xi32>, %z: tensor<10x20xf32>, %n: tensor<10xi64>) -> (tensor<37x33xf32>, tensor<9x7xbf16>, tensor<40x3xf16>, tensor<30x2x3xf64>, tensor<4x8xf32>, tensor<40000x20xf32>) {
  %0 = smelt.scatter_add %u[%i] size = 37 {smelt.device = "gpu:0"} : tensor<50x33xf32>, tensor<50xi32>
  %1 = smelt.scatter_add %v[%j] size = 9 {smelt.device = "gpu:0"} : tensor<5x10x7xbf16>, tensor<5x10xi64>
  %2 = smelt.scatter_add %w[%k] size = 40 {smelt.device = "gpu:0"} : tensor<64x3xf16>, tensor<64xi32>
  %3 = smelt.scatter_add %x[%l] size = 30 {smelt.device = "gpu:0"} : tensor<20x2x3xf64>, tensor<20xi64>
  %4 = smelt.scatter_add %y[%m] size = 4 {smelt.device = "gpu:0"} : tensor<0x8xf32>, tensor<0xi32>
  %5 = smelt.scatter_add %z[%n] size = 40000 {smelt.device = "gpu:0"} : tensor<10x20xf32>, tensor<10xi64>
  return %0, %1, %2, %3, %4, %5 : tensor<37x33xf32>, tensor<9x7xbf16>, tensor<40x3xf16>, tensor<30x2x3xf64>, tensor<4x8xf32>, tensor<40000x20xf32>
}
)mlir",
       -4, 40, 0.05},
  };
  return cases;
}

} // namespace smelt::cuda_test
