// Shape ops, broadcasting and reductions on the CPU against references computed here by
// index arithmetic in float64.
#include "TestUtil.h"

#include "frontend/Layers.h"
#include "frontend/Ops.h"

#include <cmath>
#include <limits>

namespace smelt::test {
namespace {

/// Row-major index of `idx` in `shape`.
int64_t flat(const std::vector<int64_t> &idx, const std::vector<int64_t> &shape) {
  int64_t i = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    i = i * shape[d] + idx[d];
  return i;
}

/// Calls fn(index) for every index of `shape`, row-major.
void forEachIndex(const std::vector<int64_t> &shape,
                  const std::function<void(const std::vector<int64_t> &)> &fn) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    fn(idx);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
}

/// NumPy-broadcast reference of a + b.
std::vector<double> broadcastAdd(const std::vector<double> &a, std::vector<int64_t> as,
                                 const std::vector<double> &b, std::vector<int64_t> bs,
                                 const std::vector<int64_t> &out) {
  as.insert(as.begin(), out.size() - as.size(), 1);
  bs.insert(bs.begin(), out.size() - bs.size(), 1);
  std::vector<double> ref;
  forEachIndex(out, [&](const std::vector<int64_t> &idx) {
    std::vector<int64_t> ia(idx), ib(idx);
    for (size_t d = 0; d < out.size(); ++d) {
      ia[d] = as[d] == 1 ? 0 : idx[d];
      ib[d] = bs[d] == 1 ? 0 : idx[d];
    }
    ref.push_back(a[flat(ia, as)] + b[flat(ib, bs)]);
  });
  return ref;
}

TEST(Broadcast, NumPyCasesMatchReference) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  struct Case {
    std::vector<int64_t> a, b, out;
  };
  const Case cases[] = {{{3, 1}, {4}, {3, 4}},       {{}, {2, 3}, {2, 3}},
                        {{5, 1, 3}, {4, 1}, {5, 4, 3}}, {{2, 3}, {2, 3}, {2, 3}},
                        {{1}, {1, 6}, {1, 6}},        {{4, 1, 1}, {1, 5, 2}, {4, 5, 2}}};
  for (const Case &c : cases) {
    mlir::MLIRContext ctx;
    Graph g(ctx, "f");
    Tensor a0 = g.input("a", c.a);
    Tensor b0 = g.input("b", c.b);
    Tensor sum = a0 + b0;
    EXPECT_EQ(sum.shape(), c.out);
    g.setOutputs({sum});
    rt::HostTensor a = randomTensor(c.a, DType::f32), b = randomTensor(c.b, DType::f32);
    std::vector<rt::HostTensor> out = run(g, {a, b});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_LE(relError(out[0].toDoubles(),
                       broadcastAdd(a.toDoubles(), c.a, b.toDoubles(), c.b, c.out)),
              1e-7);
  }
}

TEST(Broadcast, ScalarOperatorsOnBothSides) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {4, 5}, DType::f64);
  g.setOutputs({(2.0 - x) * 3.0 / (x + 0.5) - (-x)});
  rt::HostTensor in = randomTensor({4, 5}, DType::f64, [] { return draw(0.1, 3); });
  std::vector<rt::HostTensor> out = run(g, {in});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> ref;
  for (double v : in.toDoubles())
    ref.push_back((2.0 - v) * 3.0 / (v + 0.5) + v);
  EXPECT_LE(relError(out[0].toDoubles(), ref), 1e-14);
}

TEST(Shape, ReshapeTransposeSliceConcatPad) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  for (DType dtype : {DType::f32, DType::i64, DType::bf16}) {
    mlir::MLIRContext ctx;
    Graph g(ctx, "f");
    Tensor x = g.input("x", {2, 3, 4}, dtype);
    Tensor y = g.input("y", {2, 5, 4}, dtype);
    g.setOutputs({reshape(x, {4, -1}), transpose(x, {2, 0, 1}),
                  slice(x, {0, 1, 0}, {2, 3, 4}, {1, 1, 3}), concat({x, y, x}, 1),
                  pad(x, {1, 0, 2}, {0, 2, 1}, 7.0)});
    rt::HostTensor a = randomTensor({2, 3, 4}, dtype), b = randomTensor({2, 5, 4}, dtype);
    std::vector<rt::HostTensor> out = run(g, {a, b});
    ASSERT_EQ(out.size(), 5u);
    std::vector<double> av = a.toDoubles(), bv = b.toDoubles();
    std::vector<int64_t> xs = {2, 3, 4};
    EXPECT_EQ(out[0].toDoubles(), av);
    EXPECT_EQ(out[0].type().shape, (std::vector<int64_t>{4, 6}));

    std::vector<double> ref;
    forEachIndex({4, 2, 3}, [&](const std::vector<int64_t> &i) {
      ref.push_back(av[flat({i[1], i[2], i[0]}, xs)]);
    });
    EXPECT_EQ(out[1].toDoubles(), ref);

    ref.clear();
    forEachIndex({2, 2, 2}, [&](const std::vector<int64_t> &i) {
      ref.push_back(av[flat({i[0], 1 + i[1], 3 * i[2]}, xs)]);
    });
    EXPECT_EQ(out[2].toDoubles(), ref);

    ref.clear();
    forEachIndex({2, 11, 4}, [&](const std::vector<int64_t> &i) {
      int64_t j = i[1];
      ref.push_back(j < 3   ? av[flat({i[0], j, i[2]}, xs)]
                    : j < 8 ? bv[flat({i[0], j - 3, i[2]}, {2, 5, 4})]
                            : av[flat({i[0], j - 8, i[2]}, xs)]);
    });
    EXPECT_EQ(out[3].toDoubles(), ref);

    ref.clear();
    forEachIndex({3, 5, 7}, [&](const std::vector<int64_t> &i) {
      int64_t p = i[0] - 1, q = i[1], r = i[2] - 2;
      bool inside = p >= 0 && p < 2 && q < 3 && r >= 0 && r < 4;
      ref.push_back(inside ? av[flat({p, q, r}, xs)] : 7.0);
    });
    EXPECT_EQ(out[4].toDoubles(), ref);
  }
}

TEST(Shape, IotaCountsAlongItsDimension) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  g.setOutputs({iota(g, {2, 3}, 1, DType::i64), iota(g, {2, 3}, 0, DType::f32)});
  std::vector<rt::HostTensor> out = run(g, {});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].toDoubles(), (std::vector<double>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(out[1].toDoubles(), (std::vector<double>{0, 0, 0, 1, 1, 1}));
}

TEST(Reduce, SumMaxMinOverAxisSets) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  const std::vector<int64_t> shape = {3, 4, 5};
  const std::vector<std::vector<int64_t>> axisSets = {{0}, {1}, {2}, {0, 2}, {0, 1, 2}, {-1}};
  for (DType dtype : {DType::f32, DType::f64, DType::i32, DType::bf16})
    for (const std::vector<int64_t> &axes : axisSets) {
      mlir::MLIRContext ctx;
      Graph g(ctx, "f");
      Tensor x = g.input("x", shape, dtype);
      g.setOutputs({reduceSum(x, axes), reduceMax(x, axes), reduceMin(x, axes)});
      rt::HostTensor in = randomTensor(shape, dtype);
      std::vector<rt::HostTensor> out = run(g, {in});
      ASSERT_EQ(out.size(), 3u);
      std::vector<bool> reduced(3, false);
      for (int64_t a : axes)
        reduced[(a + 3) % 3] = true;
      std::vector<int64_t> outShape;
      for (int d = 0; d < 3; ++d)
        if (!reduced[d])
          outShape.push_back(shape[d]);
      int64_t count = 1;
      for (int64_t d : outShape)
        count *= d;
      std::vector<double> sum(count, 0), mx(count, -INFINITY), mn(count, INFINITY);
      std::vector<double> xv = in.toDoubles();
      forEachIndex(shape, [&](const std::vector<int64_t> &i) {
        std::vector<int64_t> o;
        for (int d = 0; d < 3; ++d)
          if (!reduced[d])
            o.push_back(i[d]);
        int64_t k = flat(o, outShape);
        double v = xv[flat(i, shape)];
        sum[k] += v;
        mx[k] = std::max(mx[k], v);
        mn[k] = std::min(mn[k], v);
      });
      // A bf16 sum is rounded once at the end; allow that rounding.
      EXPECT_LE(relError(out[0].toDoubles(), sum), std::max(tolerance(dtype), 1e-7));
      EXPECT_EQ(out[1].toDoubles(), mx);
      EXPECT_EQ(out[2].toDoubles(), mn);
      EXPECT_EQ(out[0].type().shape, outShape);
    }
}

TEST(Reduce, MeanDividesByTheReducedCount) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  g.setOutputs({mean(g.input("x", {6, 7}, DType::f64), {0, 1})});
  rt::HostTensor in = randomTensor({6, 7}, DType::f64);
  std::vector<rt::HostTensor> out = run(g, {in});
  ASSERT_EQ(out.size(), 1u);
  double s = 0;
  for (double v : in.toDoubles())
    s += v;
  EXPECT_NEAR(out[0].at(0), s / 42, 1e-14);
}

TEST(Reduce, ArgmaxTakesTheFirstOfTies) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {4, 6});
  g.setOutputs({argmax(x, 1), argmax(x, 0)});
  rt::HostTensor in = randomTensor({4, 6}, DType::f32);
  float *p = in.data<float>();
  p[2] = p[5] = 9.0f; // row 0: tie between columns 2 and 5
  std::vector<rt::HostTensor> out = run(g, {in});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].type().dtype, rt::DType::i64);
  EXPECT_EQ(out[0].at(0), 2);
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(out[0].at(r), std::max_element(p + 6 * r, p + 6 * r + 6) - (p + 6 * r));
  for (int c = 0; c < 6; ++c) {
    int best = 0;
    for (int r = 1; r < 4; ++r)
      if (p[6 * r + c] > p[6 * best + c])
        best = r;
    EXPECT_EQ(out[1].at(c), best);
  }
}

TEST(Composites, SoftmaxCrossEntropyAndAccuracyMatchFloat64) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  const int64_t n = 32, c = 10;
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor logits = g.input("logits", {n, c});
  Tensor labels = g.input("labels", {n}, DType::i32);
  g.setOutputs({softmax(logits), logSoftmax(logits), sparseSoftmaxCrossEntropy(logits, labels),
                accuracy(logits, labels)});
  rt::HostTensor x = randomTensor({n, c}, DType::f32, [] { return draw(-8, 8); });
  rt::HostTensor y = randomTensor({n}, DType::i32, [] { return draw(0, 0.94, 0); });
  std::vector<rt::HostTensor> out = run(g, {x, y});
  ASSERT_EQ(out.size(), 4u);
  std::vector<double> xv = x.toDoubles(), yv = y.toDoubles(), sm, lsm;
  double loss = 0, correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    double mx = *std::max_element(xv.begin() + i * c, xv.begin() + i * c + c), s = 0;
    for (int64_t j = 0; j < c; ++j)
      s += std::exp(xv[i * c + j] - mx);
    for (int64_t j = 0; j < c; ++j) {
      sm.push_back(std::exp(xv[i * c + j] - mx) / s);
      lsm.push_back(xv[i * c + j] - mx - std::log(s));
    }
    loss -= lsm[i * c + int64_t(yv[i])];
    correct += std::max_element(xv.begin() + i * c, xv.begin() + i * c + c) -
                   (xv.begin() + i * c) ==
               int64_t(yv[i]);
  }
  EXPECT_LE(relError(out[0].toDoubles(), sm), 2e-6);
  EXPECT_LE(relError(out[1].toDoubles(), lsm), 2e-6);
  EXPECT_NEAR(out[2].at(0), loss / n, 2e-6 * loss / n);
  EXPECT_NEAR(out[3].at(0), correct / n, 1e-7);
}

} // namespace
} // namespace smelt::test
