// Reductions against float64 references: sum/max/min over several axis sets (none, one, some,
// all) in every dtype, each compiled as a kernel of its own, NaN propagation, and the library
// call argmax with ties (first index wins) and NaN.
#include "FusionTestUtil.h"

#include <cmath>
#include <limits>

namespace smelt::rt::test {
namespace {

using Ints = std::vector<int64_t>;

std::vector<double> referenceReduce(const HostTensor &x, const Ints &axes, const std::string &kind,
                                    Ints &outShape) {
  const Ints &shape = x.type().shape;
  std::vector<bool> reduced(shape.size(), false);
  for (int64_t a : axes)
    reduced[size_t(a)] = true;
  outShape.clear();
  for (size_t i = 0; i < shape.size(); ++i)
    if (!reduced[i])
      outShape.push_back(shape[i]);
  double init = kind == "sum" ? 0 : kind == "max" ? -INFINITY : INFINITY;
  std::vector<double> out(size_t(TensorType{DType::f32, outShape}.numElements()), init);
  std::vector<double> in = x.toDoubles();
  Ints outStrides = stridesOf(outShape);
  forEachIndex(shape, [&](const Ints &index, int64_t flat) {
    int64_t at = 0;
    for (size_t i = 0, k = 0; i < shape.size(); ++i)
      if (!reduced[i])
        at += index[i] * outStrides[k++];
    double &acc = out[size_t(at)], v = in[size_t(flat)];
    acc = kind == "sum" ? acc + v : kind == "max" ? std::max(acc, v) : std::min(acc, v);
  });
  return out;
}

TEST(Reduce, SumMaxMinOverAxisSetsInEveryDtype) {
  Ints shape = {3, 4, 5, 2};
  const Ints axisSets[] = {{}, {0}, {2}, {1, 3}, {0, 2, 3}, {0, 1, 2, 3}};
  for (DType dtype : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i32, DType::i64})
    for (const char *kind : {"sum", "max", "min"})
      for (const Ints &axes : axisSets) {
        HostTensor x = randomTensor(dtype, shape);
        Ints outShape;
        std::vector<double> ref = referenceReduce(x, axes, kind, outShape);
        expectClose(runKernelOp("reduce", {x}, {dtype, outShape}, {{"kind", kind}, {"axes", axes}}), ref,
                    std::string("reduce ") + kind + " over " + std::to_string(axes.size()) +
                        " axes");
      }
}

TEST(Reduce, LongF32SumKeepsPrecision) {
  // 2^20 values of 0.1 plus noise: a plain f32 running sum would drift by ~1e-3 relative.
  int64_t n = 1 << 20;
  HostTensor x = randomTensor(DType::f32, {n}, [] { return draw(0.09, 0.11); });
  Ints outShape;
  std::vector<double> ref = referenceReduce(x, {0}, "sum", outShape);
  expectClose(runKernelOp("reduce", {x}, {DType::f32, {}}, {{"kind", "sum"}, {"axes", Ints{0}}}), ref,
              "sum of 2^20", 1e-7);
}

TEST(Reduce, MaxAndMinPropagateNaN) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  HostTensor x = HostTensor::fromVector<float>({2, 3}, {1, nan, 3, 4, 5, 6});
  for (const char *kind : {"max", "min"}) {
    std::vector<double> got =
        runKernelOp("reduce", {x}, {DType::f32, {2}}, {{"kind", kind}, {"axes", Ints{1}}}).toDoubles();
    EXPECT_TRUE(std::isnan(got[0])) << kind;
    EXPECT_EQ(got[1], std::string(kind) == "max" ? 6 : 4) << kind;
  }
}

TEST(Reduce, VectorizedMaxAndMinMatchFloat64AndPropagateNaNAnywhere) {
  // Rows and columns long enough for the vector loops and their remainders (1003 = a multiple of
  // every vector width plus 3), random values, exact against float64; then a NaN in every row
  // (column), at position 0, 1, ..., 19 of the reduced axis or its last, makes every result NaN.
  for (DType dtype : {DType::f32, DType::bf16, DType::f64})
    for (const char *kind : {"max", "min"})
      for (int64_t axis : {1, 0}) {
        Ints shape = axis == 1 ? Ints{21, 1003} : Ints{1003, 21};
        HostTensor x = randomTensor(dtype, shape);
        Ints outShape;
        std::vector<double> ref = referenceReduce(x, {axis}, kind, outShape);
        std::string what =
            std::string(kind) + " of " + dtypeName(dtype) + " along axis " + std::to_string(axis);
        Attrs attrs = {{"kind", kind}, {"axes", Ints{axis}}};
        expectClose(runKernelOp("reduce", {x}, {dtype, outShape}, attrs), ref, what, 0);
        std::vector<double> values = x.toDoubles();
        for (int64_t r = 0; r < 21; ++r) {
          int64_t at = r < 20 ? r : 1002; // the NaN's position along the reduced axis
          int64_t flat = axis == 1 ? r * 1003 + at : at * 21 + r;
          values[size_t(flat)] = std::numeric_limits<double>::quiet_NaN();
        }
        std::vector<double> got = runKernelOp("reduce", {HostTensor::fromDoubles(x.type(), values)},
                                              {dtype, outShape}, attrs)
                                      .toDoubles();
        for (size_t r = 0; r < got.size(); ++r)
          EXPECT_TRUE(std::isnan(got[r])) << what << ", result " << r;
      }
}

TEST(Reduce, ArgmaxTiesGoToTheFirstIndex) {
  Ints shape = {4, 6, 3};
  for (DType dtype : {DType::f32, DType::bf16, DType::f64, DType::i32, DType::i64})
    for (int64_t axis = 0; axis < 3; ++axis) {
      // Values from a handful of integers, so most rows have tied maxima.
      HostTensor x = randomTensor(dtype, shape, [] { return std::round(draw(-2.4, 2.4, 0.6)); });
      std::vector<double> in = x.toDoubles();
      Ints outShape = shape;
      outShape.erase(outShape.begin() + axis);
      std::vector<double> best(size_t(TensorType{DType::i64, outShape}.numElements()), -INFINITY),
          ref(best.size(), -1);
      Ints outStrides = stridesOf(outShape);
      forEachIndex(shape, [&](const Ints &index, int64_t flat) {
        int64_t at = 0;
        for (size_t i = 0, k = 0; i < 3; ++i)
          if (int64_t(i) != axis)
            at += index[i] * outStrides[k++];
        if (in[size_t(flat)] > best[size_t(at)]) { // strictly greater: the first max stays
          best[size_t(at)] = in[size_t(flat)];
          ref[size_t(at)] = double(index[size_t(axis)]);
        }
      });
      expectClose(runOp("argmax", {x}, {DType::i64, outShape}, {{"axis", axis}}), ref,
                  "argmax along " + std::to_string(axis), 0);
    }
}

TEST(Reduce, ArgmaxCountsNaNAsLargest) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  HostTensor x = HostTensor::fromVector<float>({3, 4}, {1, 9, nan, 9, nan, 2, nan, 3, 5, 5, 1, 0});
  EXPECT_EQ(runOp("argmax", {x}, {DType::i64, {3}}, {{"axis", int64_t(1)}}).toDoubles(),
            (std::vector<double>{2, 0, 0}));
}

TEST(Reduce, ArgmaxRejectsAnAxisOutOfRange) {
  TensorType x{DType::f32, {2, 3}};
  std::string axis = createError("argmax", {x}, {DType::i64, {2}}, {{"axis", int64_t(2)}});
  EXPECT_NE(axis.find("along axis 2"), std::string::npos) << axis;
}

} // namespace
} // namespace smelt::rt::test
