// matmul, convolutions and pooling (forward and backward) built with the builder and compiled,
// against naive float64 loops written here, on fresh random inputs, in every float dtype. The
// runtime's kernels alone are tested in runtime/ContractionTest.cpp.
#include "TestUtil.h"

#include "frontend/Layers.h"
#include "frontend/Ops.h"

#include <cmath>

namespace smelt::test {
namespace {

const DType kFloats[] = {DType::f32, DType::f64, DType::bf16, DType::f16};

TEST(GraphMatmul, TransposesBatchesAndDtypes) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  const int64_t b = 3, m = 5, k = 17, n = 6;
  for (DType dtype : kFloats)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (bool batched : {false, true}) {
          SCOPED_TRACE(testing::Message() << "dtype " << int(dtype) << " ta " << ta << " tb "
                                          << tb << " batched " << batched);
          std::vector<int64_t> as = ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k};
          std::vector<int64_t> bs = tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n};
          if (batched) {
            as.insert(as.begin(), b);
            bs.insert(bs.begin(), b);
          }
          mlir::MLIRContext ctx;
          Graph g(ctx, "f");
          Tensor lhs = g.input("a", as, dtype);
          Tensor rhs = g.input("b", bs, dtype);
          g.setOutputs({matmul(lhs, rhs, ta, tb)});
          rt::HostTensor x = randomTensor(as, dtype), y = randomTensor(bs, dtype);
          std::vector<rt::HostTensor> out = run(g, {x, y});
          ASSERT_EQ(out.size(), 1u);
          // The reference sums over the contraction index outermost, in long double: not the
          // order or precision of the f64 kernel's own loop, so the two cannot share a mistake.
          std::vector<double> xv = x.toDoubles(), yv = y.toDoubles(), ref;
          int64_t batches = batched ? b : 1;
          std::vector<long double> sums(size_t(batches * m * n), 0.0L);
          for (int64_t p = 0; p < batches; ++p)
            for (int64_t q = 0; q < k; ++q)
              for (int64_t i = 0; i < m; ++i)
                for (int64_t j = 0; j < n; ++j)
                  sums[size_t((p * m + i) * n + j)] +=
                      (long double)xv[p * m * k + (ta ? q * m + i : i * k + q)] *
                      yv[p * k * n + (tb ? j * k + q : q * n + j)];
          ref.assign(sums.begin(), sums.end());
          EXPECT_LE(relError(out[0].toDoubles(), ref), tolerance(dtype));
        }
}

struct ConvCase {
  std::vector<int64_t> input, filter;
  Pair strides;
  Quad padding;
  Pair dilation;
};

/// Output shape of a convolution, computed from the definition.
std::vector<int64_t> convOutput(const ConvCase &c) {
  int64_t oh = (c.input[1] + c.padding[0] + c.padding[1] - c.dilation[0] * (c.filter[0] - 1) - 1) /
                   c.strides[0] + 1;
  int64_t ow = (c.input[2] + c.padding[2] + c.padding[3] - c.dilation[1] * (c.filter[1] - 1) - 1) /
                   c.strides[1] + 1;
  return {c.input[0], oh, ow, c.filter[3]};
}

/// y[n,oy,ox,f] = sum x[n, oy*s - pad + ky*d, ...] * w[ky,kx,c,f]; calls
/// visit(xIndex, wIndex, yIndex) for each product term.
void visitConv(const ConvCase &c, const std::function<void(int64_t, int64_t, int64_t)> &visit) {
  std::vector<int64_t> o = convOutput(c);
  int64_t H = c.input[1], W = c.input[2], C = c.input[3], KH = c.filter[0], KW = c.filter[1],
          F = c.filter[3];
  for (int64_t n = 0; n < c.input[0]; ++n)
    for (int64_t oy = 0; oy < o[1]; ++oy)
      for (int64_t ox = 0; ox < o[2]; ++ox)
        for (int64_t ky = 0; ky < KH; ++ky)
          for (int64_t kx = 0; kx < KW; ++kx) {
            int64_t iy = oy * c.strides[0] - c.padding[0] + ky * c.dilation[0];
            int64_t ix = ox * c.strides[1] - c.padding[2] + kx * c.dilation[1];
            if (iy < 0 || iy >= H || ix < 0 || ix >= W)
              continue;
            for (int64_t ch = 0; ch < C; ++ch)
              for (int64_t f = 0; f < F; ++f)
                visit(((n * H + iy) * W + ix) * C + ch, ((ky * KW + kx) * C + ch) * F + f,
                      ((n * o[1] + oy) * o[2] + ox) * F + f);
          }
}

TEST(GraphConv2D, ForwardAndBothGradientsMatchNaiveLoops) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  const ConvCase cases[] = {
      {{2, 9, 7, 3}, {3, 2, 3, 4}, {2, 1}, {1, 1, 0, 1}, {1, 2}},
      {{1, 6, 6, 2}, {3, 3, 2, 5}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      {{3, 8, 5, 1}, {2, 3, 1, 2}, {3, 2}, {0, 2, 1, 0}, {2, 1}},
  };
  for (DType dtype : kFloats)
    for (const ConvCase &c : cases) {
      SCOPED_TRACE(testing::Message() << "dtype " << int(dtype) << " input " << c.input[1] << "x"
                                      << c.input[2]);
      std::vector<int64_t> os = convOutput(c);
      mlir::MLIRContext ctx;
      Graph g(ctx, "f");
      Tensor x = g.input("x", c.input, dtype), w = g.input("w", c.filter, dtype),
             dy = g.input("dy", os, dtype);
      g.setOutputs({conv2d(x, w, c.strides, c.padding, c.dilation),
                    conv2dBackwardInput(dy, w, c.input, c.strides, c.padding, c.dilation),
                    conv2dBackwardFilter(x, dy, c.filter, c.strides, c.padding, c.dilation)});
      rt::HostTensor xt = randomTensor(c.input, dtype), wt = randomTensor(c.filter, dtype),
                     dyt = randomTensor(os, dtype);
      std::vector<rt::HostTensor> out = run(g, {xt, wt, dyt});
      ASSERT_EQ(out.size(), 3u);
      std::vector<double> xv = xt.toDoubles(), wv = wt.toDoubles(), gv = dyt.toDoubles();
      std::vector<double> y(out[0].type().numElements(), 0), dx(xv.size(), 0), dw(wv.size(), 0);
      visitConv(c, [&](int64_t xi, int64_t wi, int64_t yi) {
        y[yi] += xv[xi] * wv[wi];
        dx[xi] += gv[yi] * wv[wi];
        dw[wi] += xv[xi] * gv[yi];
      });
      EXPECT_EQ(out[0].type().shape, os);
      EXPECT_LE(relError(out[0].toDoubles(), y), tolerance(dtype));
      EXPECT_LE(relError(out[1].toDoubles(), dx), tolerance(dtype));
      EXPECT_LE(relError(out[2].toDoubles(), dw), tolerance(dtype));
      if (dtype == DType::f64) {
        // Adjoint identity: <conv(x, w), dy> = <x, dx> = <w, dw>.
        double a = 0, b = 0, d = 0;
        for (size_t i = 0; i < gv.size(); ++i)
          a += out[0].at(int64_t(i)) * gv[i];
        for (size_t i = 0; i < xv.size(); ++i)
          b += xv[i] * out[1].at(int64_t(i));
        for (size_t i = 0; i < wv.size(); ++i)
          d += wv[i] * out[2].at(int64_t(i));
        EXPECT_NEAR(a, b, 1e-10 * std::abs(a));
        EXPECT_NEAR(a, d, 1e-10 * std::abs(a));
      }
    }
}

struct PoolCase {
  std::vector<int64_t> input;
  Pair window, strides;
  Quad padding;
};

TEST(GraphPool2D, MaxAndAvgForwardAndBackwardMatchNaiveLoops) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  const PoolCase cases[] = {{{2, 8, 8, 3}, {2, 2}, {2, 2}, {0, 0, 0, 0}},
                            {{1, 7, 9, 2}, {3, 2}, {2, 3}, {1, 1, 0, 1}},
                            {{2, 5, 5, 4}, {3, 3}, {1, 1}, {1, 1, 1, 1}}};
  for (DType dtype : kFloats)
    for (const PoolCase &c : cases) {
      SCOPED_TRACE(testing::Message() << "dtype " << int(dtype) << " input " << c.input[1]);
      int64_t N = c.input[0], H = c.input[1], W = c.input[2], C = c.input[3];
      int64_t OH = (H + c.padding[0] + c.padding[1] - c.window[0]) / c.strides[0] + 1;
      int64_t OW = (W + c.padding[2] + c.padding[3] - c.window[1]) / c.strides[1] + 1;
      std::vector<int64_t> os = {N, OH, OW, C};
      mlir::MLIRContext ctx;
      Graph g(ctx, "f");
      Tensor x = g.input("x", c.input, dtype), dy = g.input("dy", os, dtype);
      g.setOutputs({maxPool2d(x, c.window, c.strides, c.padding),
                    avgPool2d(x, c.window, c.strides, c.padding),
                    maxPool2dBackward(x, dy, c.window, c.strides, c.padding),
                    avgPool2dBackward(dy, c.input, c.window, c.strides, c.padding)});
      rt::HostTensor xt = randomTensor(c.input, dtype), dyt = randomTensor(os, dtype);
      std::vector<rt::HostTensor> out = run(g, {xt, dyt});
      ASSERT_EQ(out.size(), 4u);
      std::vector<double> xv = xt.toDoubles(), gv = dyt.toDoubles();
      std::vector<double> mx, avg, dmax(xv.size(), 0), davg(xv.size(), 0);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t oy = 0; oy < OH; ++oy)
          for (int64_t ox = 0; ox < OW; ++ox)
            for (int64_t ch = 0; ch < C; ++ch) {
              double best = -INFINITY, sum = 0;
              int64_t bestAt = -1, count = 0;
              std::vector<int64_t> members;
              for (int64_t ky = 0; ky < c.window[0]; ++ky)
                for (int64_t kx = 0; kx < c.window[1]; ++kx) {
                  int64_t iy = oy * c.strides[0] - c.padding[0] + ky;
                  int64_t ix = ox * c.strides[1] - c.padding[2] + kx;
                  if (iy < 0 || iy >= H || ix < 0 || ix >= W)
                    continue;
                  int64_t at = ((n * H + iy) * W + ix) * C + ch;
                  if (xv[at] > best) {
                    best = xv[at];
                    bestAt = at;
                  }
                  sum += xv[at];
                  ++count;
                  members.push_back(at);
                }
              int64_t o = ((n * OH + oy) * OW + ox) * C + ch;
              mx.push_back(best);
              avg.push_back(sum / double(count));
              dmax[bestAt] += gv[o];
              for (int64_t at : members)
                davg[at] += gv[o] / double(count);
            }
      EXPECT_EQ(out[0].toDoubles(), mx);
      EXPECT_LE(relError(out[1].toDoubles(), avg), tolerance(dtype));
      EXPECT_LE(relError(out[2].toDoubles(), dmax), tolerance(dtype));
      EXPECT_LE(relError(out[3].toDoubles(), davg), tolerance(dtype));
    }
}

} // namespace
} // namespace smelt::test

namespace smelt::test {
namespace {

// NumPy's matmul shapes: [2,1,3,4] x [5,4,2] -> [2,5,3,2] against a float64 loop, and
// batch dimensions that do not broadcast are a BuildError naming both.
TEST(GraphMatmul, BatchDimensionsBroadcastAsNumPy) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor a = g.input("a", {2, 1, 3, 4}, DType::f64), b = g.input("b", {5, 4, 2}, DType::f64);
  Tensor c = matmul(a, b);
  EXPECT_EQ(c.shape(), (std::vector<int64_t>{2, 5, 3, 2}));
  Tensor bad = g.input("bad", {3, 4, 2}, DType::f64);
  EXPECT_THROW(matmul(g.input("x", {2, 3, 4}, DType::f64), bad), BuildError);
  g.setOutputs({c});
  rt::HostTensor av = randomTensor({2, 1, 3, 4}, DType::f64), bv = randomTensor({5, 4, 2}, DType::f64);
  std::vector<rt::HostTensor> out = run(g, {av, bv, randomTensor({3, 4, 2}, DType::f64),
                                            randomTensor({2, 3, 4}, DType::f64)});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> x = av.toDoubles(), y = bv.toDoubles(), ref;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 5; ++j)
      for (int64_t m = 0; m < 3; ++m)
        for (int64_t n = 0; n < 2; ++n) {
          long double s = 0;
          for (int64_t k = 0; k < 4; ++k)
            s += (long double)x[size_t((i * 3 + m) * 4 + k)] * y[size_t((j * 4 + k) * 2 + n)];
          ref.push_back(double(s));
        }
  EXPECT_LE(relError(out[0].toDoubles(), ref), 1e-14);
}

// dense on a rank-3 input works on the last axis, as Keras' Dense: [B, T, D] x [D, U] + [U]
// gives [B, T, U], against a float64 loop over fresh random inputs, kernel and bias.
TEST(GraphDense, AnyRankOnTheLastAxis) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {2, 3, 4}, DType::f64);
  Tensor y = dense(x, 5, "d", Activation::None, Initializer::glorotUniform());
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 3, 5}));
  g.setOutputs({y});
  ASSERT_EQ(g.function().getNumArguments(), 3u) << "x, d/kernel, d/bias";
  rt::HostTensor xv = randomTensor({2, 3, 4}, DType::f64), wv = randomTensor({4, 5}, DType::f64),
                 bv = randomTensor({5}, DType::f64);
  std::vector<rt::HostTensor> out = run(g, {xv, wv, bv});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> xs = xv.toDoubles(), ws = wv.toDoubles(), bs = bv.toDoubles(), ref;
  for (int64_t row = 0; row < 6; ++row)
    for (int64_t u = 0; u < 5; ++u) {
      long double s = bs[size_t(u)];
      for (int64_t d = 0; d < 4; ++d)
        s += (long double)xs[size_t(row * 4 + d)] * ws[size_t(d * 5 + u)];
      ref.push_back(double(s));
    }
  EXPECT_LE(relError(out[0].toDoubles(), ref), 1e-14);
}

} // namespace
} // namespace smelt::test
