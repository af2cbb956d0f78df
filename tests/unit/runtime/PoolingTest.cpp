// max/avg pooling forward and backward against naive float64 windows: non-square window,
// strides and padding, padding that never wins a max and is not averaged, ties in a max window
// (the first maximum takes the gradient), and rejected geometry.
#include "RuntimeTestUtil.h"

#include <fmt/format.h>

#include <cmath>

namespace smelt::rt::test {
namespace {

using Ints = std::vector<int64_t>;

struct PoolCase {
  int64_t n, h, w, c;
  Ints window, strides, padding;
  int64_t oh() const { return (h + padding[0] + padding[1] - window[0]) / strides[0] + 1; }
  int64_t ow() const { return (w + padding[2] + padding[3] - window[1]) / strides[1] + 1; }
  Ints input() const { return {n, h, w, c}; }
  Ints output() const { return {n, oh(), ow(), c}; }
  Attrs attrs() const { return {{"window", window}, {"strides", strides}, {"padding", padding}}; }
};

const PoolCase kCases[] = {
    {2, 7, 6, 3, {3, 2}, {2, 1}, {1, 1, 0, 1}},
    {1, 5, 8, 2, {2, 3}, {1, 3}, {0, 1, 2, 0}},
    {2, 4, 4, 1, {2, 2}, {2, 2}, {0, 0, 0, 0}},
};

/// Calls fn(outIndex, inIndices) with the in-bounds input elements of each output's window,
/// in row-major window order.
template <typename Fn> void forEachPoolWindow(const PoolCase &g, Fn fn) {
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t oy = 0; oy < g.oh(); ++oy)
      for (int64_t ox = 0; ox < g.ow(); ++ox)
        for (int64_t c = 0; c < g.c; ++c) {
          std::vector<size_t> in;
          for (int64_t ky = 0; ky < g.window[0]; ++ky)
            for (int64_t kx = 0; kx < g.window[1]; ++kx) {
              int64_t iy = oy * g.strides[0] - g.padding[0] + ky;
              int64_t ix = ox * g.strides[1] - g.padding[2] + kx;
              if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
                in.push_back(size_t(((b * g.h + iy) * g.w + ix) * g.c + c));
            }
          fn(size_t(((b * g.oh() + oy) * g.ow() + ox) * g.c + c), in);
        }
}

/// The index of the first maximum among `in`.
size_t firstMax(const std::vector<double> &x, const std::vector<size_t> &in) {
  size_t best = in[0];
  for (size_t i : in)
    if (x[i] > x[best])
      best = i;
  return best;
}

TEST(Pooling, ForwardAndBackwardAgainstNaiveWindows) {
  for (const PoolCase &g : kCases)
    for (DType dtype : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
      // Negative inputs: a zero from the padding would win the max if padding were counted.
      HostTensor x = randomTensor(dtype, g.input(), [] { return draw(-3, -0.1); });
      HostTensor dy = randomTensor(dtype, g.output());
      std::vector<double> xv = x.toDoubles(), gv = dy.toDoubles();
      std::vector<double> maxY(gv.size()), avgY(gv.size()), maxDx(xv.size(), 0.0),
          avgDx(xv.size(), 0.0);
      forEachPoolWindow(g, [&](size_t out, const std::vector<size_t> &in) {
        double sum = 0;
        for (size_t i : in) {
          sum += xv[i];
          avgDx[i] += gv[out] / double(in.size());
        }
        avgY[out] = sum / double(in.size());
        maxY[out] = xv[firstMax(xv, in)];
        maxDx[firstMax(xv, in)] += gv[out];
      });
      std::string what = fmt::format("{} pool {}", dtypeName(dtype), x.type().str());
      expectClose(runOp("max_pool2d", {x}, {dtype, g.output()}, g.attrs()), maxY, "max " + what, 0);
      expectClose(runOp("avg_pool2d", {x}, {dtype, g.output()}, g.attrs()), avgY, "avg " + what);
      expectClose(runOp("max_pool2d_backward", {x, dy}, {dtype, g.input()}, g.attrs()), maxDx,
                  "max backward " + what);
      expectClose(runOp("avg_pool2d_backward", {dy}, {dtype, g.input()}, g.attrs()), avgDx,
                  "avg backward " + what);
    }
}

TEST(Pooling, MaxGradientGoesToTheFirstOfTiedMaxima) {
  // One 2x2 window over [[5, 5], [5, 1]]: the top-left 5 is first in row-major order.
  HostTensor x = HostTensor::fromVector<float>({1, 2, 2, 1}, {5, 5, 5, 1});
  HostTensor dy = HostTensor::fromVector<float>({1, 1, 1, 1}, {2.5f});
  Attrs attrs = {{"window", Ints{2, 2}}, {"strides", Ints{1, 1}}, {"padding", Ints{0, 0, 0, 0}}};
  EXPECT_EQ(runOp("max_pool2d_backward", {x, dy}, x.type(), attrs).toDoubles(),
            (std::vector<double>{2.5, 0, 0, 0}));
}

TEST(Pooling, RejectsGeometryThatDoesNotFit) {
  TensorType x{DType::f32, {1, 4, 4, 2}};
  std::string padding =
      createError("max_pool2d", {x}, {DType::f32, {1, 3, 3, 2}},
                  {{"window", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"padding", Ints{2, 0, 0, 0}}});
  EXPECT_NE(padding.find("padding must be smaller than the window"), std::string::npos) << padding;
  std::string size =
      createError("avg_pool2d", {x}, {DType::f32, {1, 3, 3, 2}},
                  {{"window", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"padding", Ints{0, 0, 0, 0}}});
  EXPECT_NE(size.find("the output size does not follow from the window"), std::string::npos)
      << size;
  std::string rank =
      createError("max_pool2d", {{DType::f32, {4, 4}}}, {DType::f32, {2, 2}},
                  {{"window", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"padding", Ints{0, 0, 0, 0}}});
  EXPECT_NE(rank.find("rank-4 NHWC"), std::string::npos) << rank;
}

// Checked once for every device by the pooling family (StepOps.cpp), before any kernel is made.
TEST(Pooling, RejectsOperandCountsAndGradientTypesThatDoNotFit) {
  TensorType x{DType::f32, {1, 4, 4, 2}}, dy{DType::f32, {1, 2, 2, 2}};
  Attrs attrs{{"window", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"padding", Ints{0, 0, 0, 0}}};
  std::string count = createError("max_pool2d_backward", {dy}, x, attrs);
  EXPECT_NE(count.find("takes 2 operands, got 1"), std::string::npos) << count;
  std::string type = createError("max_pool2d_backward", {x, dy}, {DType::f64, {1, 4, 4, 2}}, attrs);
  EXPECT_NE(type.find("result tensor<1x4x4x2xf64> must have the input's type tensor<1x4x4x2xf32>"),
            std::string::npos)
      << type;
  std::string forward = createError("avg_pool2d", {x, x}, dy, attrs);
  EXPECT_NE(forward.find("takes 1 operand, got 2"), std::string::npos) << forward;
}

} // namespace
} // namespace smelt::rt::test
