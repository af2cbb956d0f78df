// matmul and conv2d against naive float64 loops: every transpose-flag combination with batch
// dims, conv2d with non-square stride, padding and dilation, grouped and depthwise, and both
// convolution gradients, checked directly and through the adjoint identity
// <conv(x,w), g> = <x, dx(g,w)> = <w, dw(x,g)>; constant filters, which the step lays out once.
#include "RuntimeTestUtil.h"

#include "runtime/CpuThreads.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace smelt::rt::test {
namespace {

using Ints = std::vector<int64_t>;
const DType kFloats[] = {DType::f32, DType::f16, DType::bf16, DType::f64};

/// Batched matmul on row-major [batch, ., .] data; `tl`/`tr` read the stored matrices transposed.
/// It sums over the contraction index outermost, in long double: not the order or precision of
/// the f64 kernel's own i-j-k loop, so the reference cannot share its mistakes.
std::vector<double> naiveMatmul(const std::vector<double> &a, const std::vector<double> &b,
                                int64_t batch, int64_t m, int64_t k, int64_t n, bool tl, bool tr) {
  std::vector<long double> c(size_t(batch * m * n), 0.0L);
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t q = 0; q < k; ++q)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          c[size_t((p * m + i) * n + j)] +=
              (long double)a[size_t(p * m * k + (tl ? q * m + i : i * k + q))] *
              b[size_t(p * k * n + (tr ? j * k + q : q * n + j))];
  return std::vector<double>(c.begin(), c.end());
}

TEST(Contraction, MatmulEveryTransposeFlagWithBatchDims) {
  int64_t m = 5, k = 37, n = 6;
  for (Ints batchDims : {Ints{}, Ints{3}, Ints{2, 3}})
    for (DType dtype : kFloats)
      for (int flags = 0; flags < 4; ++flags) {
        bool tl = flags & 1, tr = flags & 2;
        int64_t batch = 1;
        for (int64_t d : batchDims)
          batch *= d;
        auto shape = [&](int64_t rows, int64_t cols) {
          Ints s = batchDims;
          s.push_back(rows);
          s.push_back(cols);
          return s;
        };
        HostTensor a = randomTensor(dtype, tl ? shape(k, m) : shape(m, k));
        HostTensor b = randomTensor(dtype, tr ? shape(n, k) : shape(k, n));
        std::vector<double> ref = naiveMatmul(a.toDoubles(), b.toDoubles(), batch, m, k, n, tl, tr);
        expectClose(runOp("matmul", {a, b}, {dtype, shape(m, n)},
                          {{"transpose_lhs", int64_t(tl)}, {"transpose_rhs", int64_t(tr)}}),
                    ref, fmt::format("matmul {} x {}", a.type().str(), b.type().str()));
      }
}

// A known answer for f64: small integers over 16 multiply and add exactly in double, so every
// summation order gives the same bits and the result must equal the exact integer sum.
TEST(Contraction, MatmulF64IsExactOnDyadicInputs) {
  const int64_t m = 7, k = 29, n = 5;
  std::uniform_int_distribution<int> pick(-64, 64);
  std::vector<int64_t> ai(size_t(m * k)), bi(size_t(k * n));
  std::vector<double> a, b;
  for (int64_t &v : ai)
    a.push_back(double(v = pick(rng())) / 16);
  for (int64_t &v : bi)
    b.push_back(double(v = pick(rng())) / 16);
  HostTensor got = runOp("matmul", {HostTensor::fromVector<double>({m, k}, a),
                                    HostTensor::fromVector<double>({k, n}, b)},
                         {DType::f64, {m, n}}, {{"transpose_lhs", int64_t(0)},
                                                {"transpose_rhs", int64_t(0)}});
  std::vector<double> c = got.toDoubles();
  ASSERT_EQ(c.size(), size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int64_t exact = 0;
      for (int64_t q = 0; q < k; ++q)
        exact += ai[size_t(i * k + q)] * bi[size_t(q * n + j)];
      EXPECT_EQ(c[size_t(i * n + j)], double(exact) / 256) << "element " << i << "," << j;
    }
}

struct ConvCase {
  int64_t n, h, w, c, kh, kw, f;
  Ints strides, padding, dilation;
  int64_t groups = 1;
  int64_t oh() const {
    return (h + padding[0] + padding[1] - dilation[0] * (kh - 1) - 1) / strides[0] + 1;
  }
  int64_t ow() const {
    return (w + padding[2] + padding[3] - dilation[1] * (kw - 1) - 1) / strides[1] + 1;
  }
  Ints input() const { return {n, h, w, c}; }
  /// HWIO, or OHWI ([f, kh, kw, c / groups]: the layout the GPU's convolutions get).
  Ints filter(bool ohwi = false) const {
    return ohwi ? Ints{f, kh, kw, c / groups} : Ints{kh, kw, c / groups, f};
  }
  Ints output() const { return {n, oh(), ow(), f}; }
  Attrs attrs(bool ohwi = false) const {
    return {{"strides", strides},
            {"padding", padding},
            {"dilation", dilation},
            {"groups", groups},
            {"filter_layout", int64_t(ohwi)}};
  }
};

const ConvCase kConvCases[] = {
    {2, 9, 7, 3, 3, 2, 4, {2, 1}, {1, 2, 0, 1}, {2, 1}},
    {1, 6, 8, 2, 2, 3, 5, {1, 2}, {0, 0, 2, 1}, {1, 2}},
    {2, 5, 5, 4, 1, 1, 3, {1, 1}, {0, 0, 0, 0}, {1, 1}},
    // Grouped: 3 groups of 2 channels into 2 filters each, strided and dilated.
    {2, 8, 7, 6, 3, 2, 6, {2, 1}, {1, 1, 0, 1}, {1, 2}, 3},
    // Depthwise (MobileNet's 3x3, stride 2, padding 1) and with a channel multiplier of 2.
    {2, 9, 9, 16, 3, 3, 16, {2, 2}, {1, 1, 1, 1}, {1, 1}, 16},
    {1, 7, 6, 4, 3, 3, 8, {1, 1}, {1, 1, 1, 1}, {1, 1}, 4},
};

/// Calls fn(xIndex, wIndex, yIndex) for every product term of the direct convolution: the one
/// loop nest from which the forward result and both gradients are read off. `ohwi`: the
/// filter's index in that layout.
template <typename Fn> void forEachConvTerm(const ConvCase &g, Fn fn, bool ohwi = false) {
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t oy = 0; oy < g.oh(); ++oy)
      for (int64_t ox = 0; ox < g.ow(); ++ox)
        for (int64_t ky = 0; ky < g.kh; ++ky)
          for (int64_t kx = 0; kx < g.kw; ++kx) {
            int64_t iy = oy * g.strides[0] - g.padding[0] + ky * g.dilation[0];
            int64_t ix = ox * g.strides[1] - g.padding[2] + kx * g.dilation[1];
            if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w)
              continue;
            // Group k: channels [k*cg, (k+1)*cg) into filters [k*fg, (k+1)*fg).
            int64_t cg = g.c / g.groups, fg = g.f / g.groups;
            for (int64_t k = 0; k < g.groups; ++k)
              for (int64_t c = 0; c < cg; ++c)
                for (int64_t f = k * fg; f < (k + 1) * fg; ++f)
                  fn(size_t(((b * g.h + iy) * g.w + ix) * g.c + k * cg + c),
                     ohwi ? size_t(((f * g.kh + ky) * g.kw + kx) * cg + c)
                          : size_t(((ky * g.kw + kx) * cg + c) * g.f + f),
                     size_t(((b * g.oh() + oy) * g.ow() + ox) * g.f + f));
          }
}

double dot(const std::vector<double> &a, const std::vector<double> &b) {
  double s = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    s += a[i] * b[i];
  return s;
}

double norm(const std::vector<double> &a) { return std::sqrt(dot(a, a)); }

// Both filter layouts: HWIO, Smelt's, and OHWI, which smelt-gpu-conv-layouts gives the GPU's
// convolutions and which a module may state for the CPU too.
TEST(Contraction, Conv2DAndBothGradientsAgainstDirectLoops) {
  for (bool ohwi : {false, true})
    for (const ConvCase &g : kConvCases)
      for (DType dtype : kFloats) {
        HostTensor x = randomTensor(dtype, g.input()), w = randomTensor(dtype, g.filter(ohwi)),
                   dy = randomTensor(dtype, g.output());
        std::vector<double> xv = x.toDoubles(), wv = w.toDoubles(), gv = dy.toDoubles();
        std::vector<double> y(gv.size(), 0.0), dx(xv.size(), 0.0), dw(wv.size(), 0.0);
        forEachConvTerm(
            g,
            [&](size_t xi, size_t wi, size_t yi) {
              y[yi] += xv[xi] * wv[wi];
              dx[xi] += gv[yi] * wv[wi];
              dw[wi] += xv[xi] * gv[yi];
            },
            ohwi);
        std::string what = fmt::format("{} input {} filter {} ({})", dtypeName(dtype),
                                       x.type().str(), w.type().str(), ohwi ? "ohwi" : "hwio");
        // Gradient sums run over many more terms than the forward: allow f32 a little more.
        double tol = dtype == DType::f32 ? 1e-5 : -1;
        Attrs attrs = g.attrs(ohwi);
        expectClose(runOp("conv2d", {x, w}, {dtype, g.output()}, attrs), y, "conv2d " + what);
        expectClose(runOp("conv2d_backward_input", {dy, w}, {dtype, g.input()}, attrs), dx,
                    "conv2d_backward_input " + what, tol);
        expectClose(runOp("conv2d_backward_filter", {x, dy}, {dtype, g.filter(ohwi)}, attrs), dw,
                    "conv2d_backward_filter " + what, tol);
      }
}

// The executor's thread count follows other processes' load from run to run, so one prepared
// step runs under several counts: oneDNN divides a primitive's work by the count it was made
// under, and the step makes one for each count it meets (PrimitivePerThreads). Each count's
// results must still be the convolution's.
TEST(Contraction, OneConvolutionStepRunsUnderEveryThreadCount) {
  const ConvCase &g = kConvCases[0];
  HostTensor x = randomTensor(DType::f32, g.input()), dy = randomTensor(DType::f32, g.output());
  std::vector<double> xv = x.toDoubles(), gv = dy.toDoubles(),
                      dw(size_t(TensorType{DType::f32, g.filter()}.numElements()), 0.0);
  forEachConvTerm(g, [&](size_t xi, size_t wi, size_t yi) { dw[wi] += xv[xi] * gv[yi]; });
  Expected<int> before = cpuThreads();
  ASSERT_TRUE(before) << before.message();
  Expected<CpuExecutor> exec = CpuExecutor::create(
      oneStep("conv2d_backward_filter", {x.type(), dy.type()}, {DType::f32, g.filter()},
              g.attrs()));
  ASSERT_TRUE(exec) << exec.message();
  for (int threads : {2, 1, 3, 1, 2}) {
    setCpuThreads(threads);
    std::vector<HostTensor> outputs;
    ASSERT_TRUE(exec->run({x, dy}, outputs).ok());
    expectClose(outputs.at(0), dw, fmt::format("conv2d_backward_filter on {} threads", threads));
  }
  setCpuThreads(*before);
}

TEST(Contraction, ConvGradientsSatisfyTheAdjointIdentity) {
  for (const ConvCase &g : kConvCases)
    for (DType dtype : {DType::f32, DType::f64}) {
      HostTensor x = randomTensor(dtype, g.input()), w = randomTensor(dtype, g.filter()),
                 dy = randomTensor(dtype, g.output());
      std::vector<double>
          y = runOp("conv2d", {x, w}, {dtype, g.output()}, g.attrs()).toDoubles(),
          dx = runOp("conv2d_backward_input", {dy, w}, {dtype, g.input()}, g.attrs()).toDoubles(),
          dw = runOp("conv2d_backward_filter", {x, dy}, {dtype, g.filter()}, g.attrs()).toDoubles();
      double forward = dot(y, dy.toDoubles()), viaInput = dot(x.toDoubles(), dx),
             viaFilter = dot(w.toDoubles(), dw);
      // Relative to the products of the norms, which bound each dot (Cauchy-Schwarz): random
      // signs cancel most of a dot, so its rounding is a share of those, not of the small result
      // (a relative 1e-5 of an f32 dot of 0.04 failed one seed in 20).
      double scale = std::max({norm(y) * norm(dy.toDoubles()), norm(x.toDoubles()) * norm(dx),
                               norm(w.toDoubles()) * norm(dw)});
      double tol = (dtype == DType::f64 ? 1e-14 : 1e-6) * scale;
      EXPECT_NEAR(viaInput, forward, tol) << dtypeName(dtype) << " <x, dx(g, w)>";
      EXPECT_NEAR(viaFilter, forward, tol) << dtypeName(dtype) << " <w, dw(x, g)>";
    }
}

/// y + bias[column], then the activation (rt::Activation's number), in double.
std::vector<double> withEpilogue(std::vector<double> y, const std::vector<double> &bias,
                                 int64_t activation) {
  for (size_t i = 0; i < y.size(); ++i) {
    double v = y[i] + (bias.empty() ? 0.0 : bias[i % bias.size()]);
    y[i] = activation == 1   ? std::max(v, 0.0)
           : activation == 2 ? std::tanh(v)
           : activation == 3 ? 1 / (1 + std::exp(-v))
           : activation == 4 ? std::clamp(v, 0.0, 6.0)
           : activation == 5 ? v * std::clamp(v / 6 + 0.5, 0.0, 1.0)
           : activation == 6 ? v / (1 + std::exp(-v))
                             : v;
  }
  return y;
}

// The epilogue (oneDNN's bias and eltwise post-op; the f64 loops' own) in every float dtype,
// with and without a bias, each activation, on a batched matmul with its rhs transposed.
TEST(Contraction, MatmulEpilogueEachActivationAgainstLoops) {
  int64_t batch = 2, m = 5, k = 19, n = 7;
  for (DType dtype : kFloats)
    for (bool bias : {false, true})
      for (int64_t activation = 0; activation < kNumActivations; ++activation) {
        // Wide enough that relu6's upper bound and hardswish's both bends are crossed.
        HostTensor a = randomTensor(dtype, {batch, m, k}, [] { return draw(-3, 3, 0.05); }),
                   b = randomTensor(dtype, {batch, n, k});
        HostTensor c = randomTensor(dtype, {n});
        std::vector<HostTensor> operands{a, b};
        if (bias)
          operands.push_back(c);
        std::vector<double> ref =
            withEpilogue(naiveMatmul(a.toDoubles(), b.toDoubles(), batch, m, k, n, false, true),
                         bias ? c.toDoubles() : std::vector<double>{}, activation);
        expectClose(runOp("matmul", operands, {dtype, {batch, m, n}},
                          {{"transpose_rhs", int64_t(1)},
                           {"bias", int64_t(bias)},
                           {"activation", activation}}),
                    ref,
                    fmt::format("{} matmul, bias {}, activation {}", dtypeName(dtype), bias,
                                activationName(Activation(activation))));
      }
}

// Matmuls of at most 8 rows run as oneDNN's sgemm (a bias copied into the result first), 9
// rows and up, and any activation, as its matmul primitive: both sides of the boundary, every
// transpose flag, with and without a bias, in f32 and staged from bf16.
TEST(Contraction, MatmulOfFewRowsAcrossTheSgemmBoundary) {
  int64_t k = 300, n = 70;
  for (int64_t m : {1, 2, 8, 9})
    for (DType dtype : {DType::f32, DType::bf16})
      for (int flags = 0; flags < 8; ++flags) {
        bool tl = flags & 1, tr = flags & 2, bias = flags & 4;
        HostTensor a = randomTensor(dtype, tl ? Ints{k, m} : Ints{m, k});
        HostTensor b = randomTensor(dtype, tr ? Ints{n, k} : Ints{k, n});
        HostTensor c = randomTensor(dtype, {n});
        std::vector<HostTensor> operands{a, b};
        if (bias)
          operands.push_back(c);
        std::vector<double> ref =
            withEpilogue(naiveMatmul(a.toDoubles(), b.toDoubles(), 1, m, k, n, tl, tr),
                         bias ? c.toDoubles() : std::vector<double>{}, 0);
        expectClose(runOp("matmul", operands, {dtype, {m, n}},
                          {{"transpose_lhs", int64_t(tl)},
                           {"transpose_rhs", int64_t(tr)},
                           {"bias", int64_t(bias)}}),
                    ref,
                    fmt::format("{} matmul {} x {}, bias {}", dtypeName(dtype), a.type().str(),
                                b.type().str(), bias));
      }
}

TEST(Contraction, Conv2DEpilogueEachActivationAgainstLoops) {
  for (const ConvCase &g : kConvCases)
    for (DType dtype : kFloats)
      for (int64_t activation = 0; activation < kNumActivations; ++activation) {
        HostTensor x = randomTensor(dtype, g.input(), [] { return draw(-3, 3, 0.05); }),
                   w = randomTensor(dtype, g.filter()), bias = randomTensor(dtype, {g.f});
        std::vector<double> xv = x.toDoubles(), wv = w.toDoubles();
        std::vector<double> y(size_t(g.n * g.oh() * g.ow() * g.f), 0.0);
        forEachConvTerm(g, [&](size_t xi, size_t wi, size_t yi) { y[yi] += xv[xi] * wv[wi]; });
        Attrs attrs = g.attrs();
        attrs["bias"] = int64_t(1);
        attrs["activation"] = activation;
        expectClose(runOp("conv2d", {x, w, bias}, {dtype, g.output()}, attrs),
                    withEpilogue(y, bias.toDoubles(), activation),
                    fmt::format("{} conv2d {} with bias, activation {}", dtypeName(dtype),
                                x.type().str(), activationName(Activation(activation))));
      }
}

// A constant filter is laid out in the primitive's own format once, when the step is prepared
// (and once more for each other thread count the step meets); every run after reads that copy.
// The forward (with an epilogue) and backward-input convolutions must still be the loops', run
// after run, grouped and not.
TEST(Contraction, ConstantFiltersLaidOutOnceGiveTheLoopsResultsEveryRun) {
  Expected<int> before = cpuThreads();
  ASSERT_TRUE(before) << before.message();
  for (const ConvCase &g : kConvCases)
    for (bool forward : {true, false}) {
      HostTensor w = randomTensor(DType::f32, g.filter());
      TensorType in{DType::f32, forward ? g.input() : g.output()};
      TensorType out{DType::f32, forward ? g.output() : g.input()};
      Attrs attrs = g.attrs();
      if (forward)
        attrs["activation"] = int64_t(2); // tanh: the post-op path too
      Executable exe = oneStep(forward ? "conv2d" : "conv2d_backward_input", {in, w.type()}, out,
                               attrs);
      // Buffer 1 becomes a constant holding the filter's bytes.
      exe.inputs = {0};
      exe.constants.push_back(
          {1, std::vector<uint8_t>(w.data<uint8_t>(), w.data<uint8_t>() + w.byteSize())});
      Expected<CpuExecutor> exec = CpuExecutor::create(exe);
      ASSERT_TRUE(exec) << exec.message();
      std::vector<double> wv = w.toDoubles();
      for (int threads : {2, 1, 2}) {
        setCpuThreads(threads);
        HostTensor x = randomTensor(DType::f32, in.shape);
        std::vector<double> xv = x.toDoubles(), ref(size_t(out.numElements()), 0.0);
        forEachConvTerm(g, [&](size_t xi, size_t wi, size_t yi) {
          if (forward)
            ref[yi] += xv[xi] * wv[wi];
          else
            ref[xi] += xv[yi] * wv[wi];
        });
        if (forward)
          ref = withEpilogue(ref, {}, 2);
        std::vector<HostTensor> outputs;
        ASSERT_TRUE(exec->run({x}, outputs).ok());
        expectClose(outputs.at(0), ref,
                    fmt::format("{} with constant filter {} on {} threads",
                                forward ? "conv2d" : "conv2d_backward_input", w.type().str(),
                                threads));
      }
    }
  setCpuThreads(*before);
}

// A matmul's constant weights are laid out once too: plain and transposed, batched, with a
// bias and relu, over runs and thread counts.
TEST(Contraction, ConstantMatmulWeightsLaidOutOnceGiveTheLoopsResultsEveryRun) {
  Expected<int> before = cpuThreads();
  ASSERT_TRUE(before) << before.message();
  struct Case {
    int64_t batch, m, k, n;
    bool transposed;
  };
  for (Case c : {Case{1, 7, 96, 40, false}, Case{3, 5, 33, 17, true}}) {
    Ints lhsShape = c.batch == 1 ? Ints{c.m, c.k} : Ints{c.batch, c.m, c.k};
    Ints rhsShape = c.transposed ? Ints{c.n, c.k} : Ints{c.k, c.n};
    if (c.batch != 1)
      rhsShape.insert(rhsShape.begin(), c.batch);
    Ints outShape = c.batch == 1 ? Ints{c.m, c.n} : Ints{c.batch, c.m, c.n};
    HostTensor w = randomTensor(DType::f32, rhsShape), bias = randomTensor(DType::f32, {c.n});
    Executable exe = oneStep("matmul", {{DType::f32, lhsShape}, w.type(), bias.type()},
                             {DType::f32, outShape},
                             {{"transpose_rhs", int64_t(c.transposed)},
                              {"bias", int64_t(1)},
                              {"activation", int64_t(1)}});
    exe.inputs = {0, 2}; // buffer 1, the weights, becomes a constant
    exe.constants.push_back(
        {1, std::vector<uint8_t>(w.data<uint8_t>(), w.data<uint8_t>() + w.byteSize())});
    Expected<CpuExecutor> exec = CpuExecutor::create(exe);
    ASSERT_TRUE(exec) << exec.message();
    for (int threads : {2, 1, 2}) {
      setCpuThreads(threads);
      HostTensor x = randomTensor(DType::f32, lhsShape);
      std::vector<double> ref = withEpilogue(naiveMatmul(x.toDoubles(), w.toDoubles(), c.batch,
                                                         c.m, c.k, c.n, false, c.transposed),
                                             bias.toDoubles(), 1);
      std::vector<HostTensor> outputs;
      ASSERT_TRUE(exec->run({x, bias}, outputs).ok());
      expectClose(outputs.at(0), ref,
                  fmt::format("matmul with constant weights {} on {} threads", w.type().str(),
                              threads));
    }
  }
  setCpuThreads(*before);
}

TEST(Contraction, RejectsEpiloguesThatDoNotFit) {
  TensorType a{DType::f32, {4, 5}}, b{DType::f32, {5, 3}}, c{DType::f32, {4, 3}};
  std::string missing = createError("matmul", {a, b}, c, {{"bias", int64_t(1)}});
  EXPECT_NE(missing.find("takes 3 operands (the third is the bias), got 2"), std::string::npos)
      << missing;
  std::string wrong = createError("matmul", {a, b, {DType::f32, {4}}}, c, {{"bias", int64_t(1)}});
  EXPECT_NE(wrong.find("the bias is tensor<4xf32>, the result tensor<4x3xf32> needs [3] of f32"),
            std::string::npos)
      << wrong;
  const ConvCase &g = kConvCases[0];
  Attrs attrs = g.attrs();
  attrs["activation"] = int64_t(1);
  std::string backward =
      createError("conv2d_backward_input", {{DType::f32, g.output()}, {DType::f32, g.filter()}},
                  {DType::f32, g.input()}, attrs);
  EXPECT_NE(backward.find("only matmul and conv2d take an epilogue (bias false, activation relu)"),
            std::string::npos)
      << backward;
}

TEST(Contraction, RejectsShapesThatDoNotContract) {
  TensorType a{DType::f32, {4, 5}}, b{DType::f32, {6, 3}};
  std::string mm = createError("matmul", {a, b}, {DType::f32, {4, 3}},
                               {{"transpose_lhs", int64_t(0)}, {"transpose_rhs", int64_t(0)}});
  EXPECT_NE(mm.find("tensor<4x5xf32> x tensor<6x3xf32> does not give tensor<4x3xf32>"),
            std::string::npos)
      << mm;
  std::string ints =
      createError("matmul", {{DType::i32, {2, 2}}, {DType::i32, {2, 2}}}, {DType::i32, {2, 2}},
                  {{"transpose_lhs", int64_t(0)}, {"transpose_rhs", int64_t(0)}});
  EXPECT_FALSE(ints.empty()) << "matmul is float only";
  const ConvCase &g = kConvCases[0];
  std::string conv = createError("conv2d", {{DType::f32, g.input()}, {DType::f32, g.filter()}},
                                 {DType::f32, {g.n, g.oh() + 1, g.ow(), g.f}}, g.attrs());
  EXPECT_NE(conv.find("the output size does not follow from the window"), std::string::npos)
      << conv;
  std::string missing =
      createError("conv2d", {{DType::f32, g.input()}, {DType::f32, g.filter()}},
                  {DType::f32, g.output()}, {{"strides", g.strides}, {"padding", g.padding}});
  EXPECT_NE(missing.find("dilation = [] needs 2 values"), std::string::npos) << missing;
  // 3 channels cannot split into 2 feature groups (a file's steps are checked, not trusted).
  Attrs grouped = g.attrs();
  grouped["groups"] = int64_t(2);
  std::string groups = createError("conv2d", {{DType::f32, g.input()}, {DType::f32, g.filter()}},
                                   {DType::f32, g.output()}, grouped);
  EXPECT_NE(groups.find("2 feature groups do not divide 3 channels into 4 filters"),
            std::string::npos)
      << groups;
}

} // namespace
} // namespace smelt::rt::test
