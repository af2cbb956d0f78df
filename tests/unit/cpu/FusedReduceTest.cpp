// Reduction fusions: sum, max and min over every set of axes of a rank-3 operand in every dtype
// a reduce takes, reductions fed by elementwise and broadcast ops, and several reduces (of
// different dtypes) in one kernel, against the same ops run unfused.
#include "FusionTestUtil.h"

#include <algorithm>

namespace smelt::rt::test {
namespace {

const char *kReduce = R"(
func.func @f(%x: ${X}) -> ${R} {
  %r = smelt.fusion reduction (%x) : (${X}) -> ${R} {
  ^bb0(%a: ${X}):
    %0 = smelt.reduce ${KIND} %a axes = [${AXES}] : ${X}
    smelt.yield %0 : ${R}
  }
  return %r : ${R}
}
)";

TEST(FusedReduce, SumMaxMinOverEveryAxisSetInEveryDType) {
  const std::vector<int64_t> shape = {4, 5, 6};
  const std::vector<std::vector<int64_t>> axisSets = {{},     {0},    {1},    {2},
                                                      {0, 1}, {0, 2}, {1, 2}, {0, 1, 2}};
  for (DType dtype : kAllDTypes) {
    if (dtype == DType::i1)
      continue;
    for (const char *kind : {"sum", "max", "min"})
      for (const std::vector<int64_t> &axes : axisSets) {
        std::vector<int64_t> kept;
        std::string axisList;
        for (int64_t d = 0; d < 3; ++d)
          if (std::find(axes.begin(), axes.end(), d) == axes.end())
            kept.push_back(shape[d]);
          else
            axisList += (axisList.empty() ? "" : ", ") + std::to_string(d);
        std::string text = substitute(kReduce, {{"X", tensorType(shape, dtype)},
                                                {"R", tensorType(kept, dtype)},
                                                {"KIND", kind},
                                                {"AXES", axisList}});
        expectFusedMatchesUnfused(text, {randomTensor(dtype, shape)},
                                  std::string(kind) + " [" + axisList + "] " +
                                      tensorType(shape, dtype));
      }
  }
}

// Softmax's two reductions over rows in one kernel: the row max and the sum of
// exp(x - bias), read through a broadcast.
const char *kSoftmaxRows = R"(
func.func @f(%x: tensor<9x33x${E}>, %m: tensor<9x${E}>) -> (tensor<9x${E}>, tensor<9x${E}>, tensor<9x${E}>) {
  %r:3 = smelt.fusion reduction (%x, %m) : (tensor<9x33x${E}>, tensor<9x${E}>) -> (tensor<9x${E}>, tensor<9x${E}>, tensor<9x${E}>) {
  ^bb0(%a: tensor<9x33x${E}>, %b: tensor<9x${E}>):
    %0 = smelt.broadcast_in_dim %b, dims = [0] : tensor<9x${E}> -> tensor<9x33x${E}>
    %1 = smelt.sub %a, %0 : tensor<9x33x${E}>
    %2 = smelt.exp %1 : tensor<9x33x${E}>
    %3 = smelt.reduce sum %2 axes = [1] : tensor<9x33x${E}>
    %4 = smelt.reduce max %a axes = [1] : tensor<9x33x${E}>
    %5 = smelt.reduce min %1 axes = [1] : tensor<9x33x${E}>
    smelt.yield %3, %4, %5 : tensor<9x${E}>, tensor<9x${E}>, tensor<9x${E}>
  }
  return %r#0, %r#1, %r#2 : tensor<9x${E}>, tensor<9x${E}>, tensor<9x${E}>
}
)";

TEST(FusedReduce, MultiOutputReductionWithElementwisePrologue) {
  for (DType dtype : kFloatDTypes)
    expectFusedMatchesUnfused(substitute(kSoftmaxRows, {{"E", std::string(dtypeName(dtype))}}),
                              {randomTensor(dtype, {9, 33}), randomTensor(dtype, {9})},
                              "softmax rows " + std::string(dtypeName(dtype)));
}

// Column reductions (a strided inner loop) of values and of their integer conversions, and a
// count of positives through compare and convert: reduces of different dtypes in one kernel.
const char *kColumns = R"(
func.func @f(%x: tensor<37x6xf32>) -> (tensor<6xf32>, tensor<6xi32>, tensor<6xi64>) {
  %r:3 = smelt.fusion reduction (%x) : (tensor<37x6xf32>) -> (tensor<6xf32>, tensor<6xi32>, tensor<6xi64>) {
  ^bb0(%a: tensor<37x6xf32>):
    %zero = smelt.constant dense<0.0> : tensor<37x6xf32>
    %big = smelt.constant dense<100.0> : tensor<37x6xf32>
    %0 = smelt.mul %a, %big : tensor<37x6xf32>
    %1 = smelt.convert %0 : tensor<37x6xf32> -> tensor<37x6xi32>
    %2 = smelt.compare gt, %a, %zero : tensor<37x6xf32>
    %3 = smelt.convert %2 : tensor<37x6xi1> -> tensor<37x6xi64>
    %4 = smelt.reduce sum %a axes = [0] : tensor<37x6xf32>
    %5 = smelt.reduce max %1 axes = [0] : tensor<37x6xi32>
    %6 = smelt.reduce sum %3 axes = [0] : tensor<37x6xi64>
    smelt.yield %4, %5, %6 : tensor<6xf32>, tensor<6xi32>, tensor<6xi64>
  }
  return %r#0, %r#1, %r#2 : tensor<6xf32>, tensor<6xi32>, tensor<6xi64>
}
)";

TEST(FusedReduce, ReducesOfDifferentDTypesShareOneKernel) {
  expectFusedMatchesUnfused(kColumns, {randomTensor(DType::f32, {37, 6})}, "columns");
}

// Reduces that keep the last dimension accumulate tiles of consecutive units (ReductionKernel
// .cpp): rows longer than a tile, ranges of threads that start and stop inside a row.
const char *kKeepLast = R"(
func.func @f(%x: ${X}) -> (${R}, ${R}) {
  %r:2 = smelt.fusion reduction (%x) : (${X}) -> (${R}, ${R}) {
  ^bb0(%a: ${X}):
    %0 = smelt.reduce sum %a axes = [${AXES}] : ${X}
    %1 = smelt.reduce max %a axes = [${AXES}] : ${X}
    smelt.yield %0, %1 : ${R}, ${R}
  }
  return %r#0, %r#1 : ${R}, ${R}
}
)";

TEST(FusedReduce, KeptLastDimensionInTilesAcrossThreads) {
  const struct {
    std::vector<int64_t> shape, kept;
    const char *axes;
    DType dtype;
  } cases[] = {{{3, 1000, 700}, {3, 700}, "1", DType::f32},
               {{2, 300, 517}, {517}, "0, 1", DType::f16},
               {{40, 3, 1031}, {3, 1031}, "0", DType::i32}};
  for (const auto &c : cases) {
    std::string text = substitute(kKeepLast, {{"X", tensorType(c.shape, c.dtype)},
                                              {"R", tensorType(c.kept, c.dtype)},
                                              {"AXES", c.axes}});
    expectFusedMatchesUnfused(text, {randomTensor(c.dtype, c.shape)},
                              tensorType(c.shape, c.dtype) + " over [" + c.axes + "]");
  }
}

} // namespace
} // namespace smelt::rt::test
