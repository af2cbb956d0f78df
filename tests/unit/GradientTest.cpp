// Gradients from reverse-mode autodiff against central finite differences in float64, for every
// differentiable op and for composites (softmax cross-entropy, an MLP, a small CNN).
#include "TestUtil.h"

#include "frontend/Layers.h"
#include "frontend/Models.h"

#include <cmath>

namespace smelt::test {
namespace {

using Build = std::function<Tensor(Graph &, std::vector<Tensor> &)>;

struct InputSpec {
  std::vector<int64_t> shape;
  double lo = -2, hi = 2; // drawn away from zero
};

/// Builds loss = sum(build(inputs) * r) for a random weight r, differentiates it with respect
/// to every input, and compares each gradient with central differences of the loss.
void checkGradients(const std::string &name, const std::vector<InputSpec> &specs, Build build,
                    double tolerance = 1e-6) {
  SCOPED_TRACE(name + " SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < specs.size(); ++i)
    inputs.push_back(g.input("x" + std::to_string(i), specs[i].shape, DType::f64));
  Tensor y = build(g, inputs);
  Tensor r = g.input("r", y.shape(), DType::f64);
  std::vector<int64_t> all(size_t(y.rank()));
  std::iota(all.begin(), all.end(), 0);
  std::optional<rt::CpuExecutor> cpu = compileLossAndGradients(g, reduceSum(y * r, all), inputs);
  ASSERT_TRUE(cpu);

  std::vector<rt::HostTensor> args;
  for (const InputSpec &s : specs)
    args.push_back(randomTensor(s.shape, DType::f64, [&] { return draw(s.lo, s.hi, 0.1); }));
  args.push_back(randomTensor(y.shape(), DType::f64));
  std::vector<size_t> wrt;
  std::vector<std::string> names;
  for (size_t i = 0; i < specs.size(); ++i) {
    wrt.push_back(i);
    names.push_back("input " + std::to_string(i));
  }
  expectGradientsMatchDifferences(*cpu, args, wrt, tolerance, names);
}

TEST(Gradients, UnaryOps) {
  struct Case {
    const char *name;
    Tensor (*op)(Tensor, Loc);
    double lo, hi;
  };
  const Case cases[] = {{"neg", smelt::neg, -2, 2},      {"abs", smelt::abs, -2, 2},
                        {"relu", smelt::relu, -2, 2},    {"exp", smelt::exp, -2, 2},
                        {"log", smelt::log, 0.2, 3},     {"tanh", smelt::tanh, -2, 2},
                        {"logistic", smelt::logistic, -3, 3},
                        {"sqrt", smelt::sqrt, 0.2, 3},   {"rsqrt", smelt::rsqrt, 0.2, 3},
                        {"erf", smelt::erf, -2, 2},      {"sin", smelt::sin, -4, 4},
                        {"cos", smelt::cos, -4, 4}};
  for (const Case &c : cases)
    checkGradients(c.name, {{{3, 4}, c.lo, c.hi}}, [&](Graph &, std::vector<Tensor> &x) {
      return c.op(x[0], Loc::current());
    });
}

TEST(Gradients, BinaryOps) {
  struct Case {
    const char *name;
    Tensor (*op)(Tensor, Tensor, Loc);
    double lo, hi;
  };
  const Case cases[] = {{"add", smelt::add, -2, 2},     {"sub", smelt::sub, -2, 2},
                        {"mul", smelt::mul, -2, 2},     {"div", smelt::div, -2, 2},
                        {"max", smelt::maximum, -2, 2}, {"min", smelt::minimum, -2, 2},
                        {"pow", smelt::pow, 0.3, 2}};
  for (const Case &c : cases)
    checkGradients(c.name, {{{2, 5}, c.lo, c.hi}, {{2, 5}, c.lo, c.hi}},
                   [&](Graph &, std::vector<Tensor> &x) {
                     return c.op(x[0], x[1], Loc::current());
                   });
  // Broadcasting operands: gradients are reduced back to each operand's shape.
  checkGradients("broadcast mul", {{{3, 1}}, {{4}}},
                 [](Graph &, std::vector<Tensor> &x) { return x[0] * x[1]; });
}

TEST(Gradients, SelectAndConvert) {
  checkGradients("select", {{{6}}, {{6}}, {{6}}}, [](Graph &, std::vector<Tensor> &x) {
    return select(compare(x[2], scalarLike(x[2], 0.0), CompareDirection::gt), x[0], x[1]);
  });
  // Through f32 the values round, so finite differences are noisy; the gradient of a convert
  // is exactly the convert of the gradient, so compare it with the weights instead.
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {5}, DType::f64), r = g.input("r", {5}, DType::f64);
  Tensor loss = reduceSum(convert(convert(x, DType::f32), DType::f64) * r, {0});
  g.setOutputs({g.gradients(loss, {x})[0]});
  rt::HostTensor rv = randomTensor({5}, DType::f64);
  std::vector<rt::HostTensor> out = run(g, {randomTensor({5}, DType::f64), rv});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> expected;
  for (double v : rv.toDoubles())
    expected.push_back(double(float(v)));
  EXPECT_EQ(out[0].toDoubles(), expected);
}

// matmul broadcasts batch dimensions as NumPy does, and a rank-2 right side folds the left's
// batch into rows: both differentiate through the broadcasts and reshapes it adds.
TEST(Gradients, BroadcastingMatmul) {
  checkGradients("[2,3,4] x [4,5]", {{{2, 3, 4}}, {{4, 5}}},
                 [](Graph &, std::vector<Tensor> &x) { return matmul(x[0], x[1]); });
  checkGradients("[2,1,3,4] x [5,4,2]", {{{2, 1, 3, 4}}, {{5, 4, 2}}},
                 [](Graph &, std::vector<Tensor> &x) { return matmul(x[0], x[1]); });
  checkGradients("[3,4] x [2,4,5] (rhs transposed: [2,5,4])", {{{3, 4}}, {{2, 5, 4}}},
                 [](Graph &, std::vector<Tensor> &x) { return matmul(x[0], x[1], false, true); });
}

TEST(Gradients, PowByAScalarClampAndVariance) {
  checkGradients("pow(x, 3)", {{{3, 4}}},
                 [](Graph &, std::vector<Tensor> &x) { return pow(x[0], 3.0); });
  checkGradients("pow(x, 0.5)", {{{3, 4}, 0.2, 3}},
                 [](Graph &, std::vector<Tensor> &x) { return pow(x[0], 0.5); });
  // Inputs fall on both sides of each bound and away from the kinks by far more than the
  // finite-difference step (draws are continuous).
  checkGradients("clamp", {{{4, 5}}},
                 [](Graph &, std::vector<Tensor> &x) { return clamp(x[0], -0.5, 0.7); });
  checkGradients("variance keepdims", {{{3, 6}}}, [](Graph &, std::vector<Tensor> &x) {
    return variance(x[0], {1}, KeepDims::yes);
  });
  checkGradients("variance over both", {{{3, 6}}},
                 [](Graph &, std::vector<Tensor> &x) { return variance(x[0], {0, -1}); });
}

// keepdims leaves the reduced axes as size 1 and the values unchanged; variance against a
// float64 two-pass reference; a clamp with lo > hi is an error at the caller's line.
TEST(Reductions, KeepDimsVarianceAndClampMatchFloat64) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {4, 5, 3}, DType::f64);
  Tensor sum = reduceSum(x, {1}, KeepDims::yes), top = reduceMax(x, {0, 2}, KeepDims::yes);
  Tensor low = reduceMin(x, {-1}, KeepDims::yes), avg = mean(x, {1}, KeepDims::yes);
  Tensor var = variance(x, {1});
  EXPECT_EQ(sum.shape(), (std::vector<int64_t>{4, 1, 3}));
  EXPECT_EQ(top.shape(), (std::vector<int64_t>{1, 5, 1}));
  EXPECT_EQ(low.shape(), (std::vector<int64_t>{4, 5, 1}));
  EXPECT_EQ(var.shape(), (std::vector<int64_t>{4, 3}));
  EXPECT_THROW(clamp(x, 1.0, -1.0), BuildError);
  g.setOutputs({sum, top, low, avg, var, clamp(x, -0.5, 0.7)});
  rt::HostTensor xv = randomTensor({4, 5, 3}, DType::f64);
  std::vector<rt::HostTensor> out = run(g, {xv});
  ASSERT_EQ(out.size(), 6u);
  std::vector<double> v = xv.toDoubles();
  auto at = [&](int64_t i, int64_t j, int64_t k) { return v[size_t((i * 5 + j) * 3 + k)]; };
  std::vector<double> sums, tops(5, -INFINITY), lows, means, vars, clamped;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t k = 0; k < 3; ++k) {
      double s = 0;
      for (int64_t j = 0; j < 5; ++j)
        s += at(i, j, k);
      sums.push_back(s);
      means.push_back(s / 5);
      double q = 0;
      for (int64_t j = 0; j < 5; ++j)
        q += (at(i, j, k) - s / 5) * (at(i, j, k) - s / 5);
      vars.push_back(q / 5);
    }
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      double m = INFINITY;
      for (int64_t k = 0; k < 3; ++k) {
        tops[size_t(j)] = std::max(tops[size_t(j)], at(i, j, k));
        m = std::min(m, at(i, j, k));
      }
      lows.push_back(m);
    }
  for (double e : v)
    clamped.push_back(std::min(std::max(e, -0.5), 0.7));
  EXPECT_LE(relError(out[0].toDoubles(), sums), 1e-13);
  EXPECT_EQ(out[1].toDoubles(), tops);
  EXPECT_EQ(out[2].toDoubles(), lows);
  EXPECT_LE(relError(out[3].toDoubles(), means), 1e-13);
  EXPECT_LE(relError(out[4].toDoubles(), vars), 1e-12);
  EXPECT_EQ(out[5].toDoubles(), clamped);
}

// Graph::gradients runs smelt-autodiff on a copy of the function: a value differentiated for
// that is not an argument becomes one there, entries may repeat and come in any order, and
// the forward ops are not built twice.
TEST(Gradients, WithRespectToIntermediatesRepeatedAndInAnyOrder) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {6}, DType::f64), w = g.input("w", {6}, DType::f64);
  Tensor h = x * w;
  Tensor loss = reduceSum(h * h, {0});
  auto countReduces = [&] {
    int n = 0;
    g.function().walk([&](ReduceOp) { ++n; });
    return n;
  };
  ASSERT_EQ(countReduces(), 1);
  std::vector<Tensor> grads = g.gradients(loss, {h, w, h});
  ASSERT_EQ(grads.size(), 3u);
  EXPECT_EQ(countReduces(), 1) << "the forward reduce was built again";
  g.setOutputs({grads[0], grads[1], grads[2]});
  rt::HostTensor xv = randomTensor({6}, DType::f64), wv = randomTensor({6}, DType::f64);
  std::vector<rt::HostTensor> out = run(g, {xv, wv});
  ASSERT_EQ(out.size(), 3u);
  // loss = sum (x w)^2: d/dh = 2 x w, d/dw = 2 x^2 w.
  std::vector<double> xs = xv.toDoubles(), ws = wv.toDoubles(), dh, dw;
  for (size_t i = 0; i < xs.size(); ++i) {
    dh.push_back(2 * xs[i] * ws[i]);
    dw.push_back(2 * xs[i] * xs[i] * ws[i]);
  }
  EXPECT_LE(relError(out[0].toDoubles(), dh), 1e-12);
  EXPECT_LE(relError(out[1].toDoubles(), dw), 1e-12);
  EXPECT_EQ(out[2].toDoubles(), out[0].toDoubles());
}

TEST(Gradients, ShapeOps) {
  checkGradients("broadcast_in_dim", {{{3, 1}}}, [](Graph &, std::vector<Tensor> &x) {
    return broadcastInDim(x[0], {2, 3, 4}, {1, 2});
  });
  checkGradients("reshape", {{{3, 4}}},
                 [](Graph &, std::vector<Tensor> &x) { return reshape(x[0], {2, 6}); });
  checkGradients("transpose", {{{2, 3, 4}}},
                 [](Graph &, std::vector<Tensor> &x) { return transpose(x[0], {2, 0, 1}); });
  checkGradients("slice", {{{5, 7}}}, [](Graph &, std::vector<Tensor> &x) {
    return slice(x[0], {1, 0}, {4, 7}, {1, 3});
  });
  checkGradients("concat", {{{2, 3}}, {{2, 2}}}, [](Graph &, std::vector<Tensor> &x) {
    return concat({x[0], x[1], x[0]}, 1);
  });
  checkGradients("pad", {{{2, 3}}},
                 [](Graph &, std::vector<Tensor> &x) { return pad(x[0], {1, 0}, {2, 1}, 0.5); });
}

TEST(Gradients, Reductions) {
  checkGradients("sum", {{{3, 4, 2}}},
                 [](Graph &, std::vector<Tensor> &x) { return reduceSum(x[0], {0, 2}); });
  checkGradients("max", {{{3, 4}}},
                 [](Graph &, std::vector<Tensor> &x) { return reduceMax(x[0], {1}); });
  checkGradients("min", {{{3, 4}}},
                 [](Graph &, std::vector<Tensor> &x) { return reduceMin(x[0], {0, 1}); });
  checkGradients("mean", {{{3, 4}}},
                 [](Graph &, std::vector<Tensor> &x) { return mean(x[0], {0}); });
}

TEST(Gradients, MatmulEachTransposeAndBatched) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      std::vector<int64_t> as = ta ? std::vector<int64_t>{2, 4, 3} : std::vector<int64_t>{2, 3, 4};
      std::vector<int64_t> bs = tb ? std::vector<int64_t>{2, 5, 4} : std::vector<int64_t>{2, 4, 5};
      checkGradients("matmul", {{as}, {bs}}, [&](Graph &, std::vector<Tensor> &x) {
        return matmul(x[0], x[1], ta, tb);
      });
    }
}

TEST(Gradients, ConvolutionAndPooling) {
  checkGradients("conv2d", {{{2, 6, 5, 2}}, {{3, 2, 2, 3}}},
                 [](Graph &, std::vector<Tensor> &x) {
                   return conv2d(x[0], x[1], {2, 1}, {1, 1, 0, 1}, {1, 2});
                 });
  // Two groups of 2 channels into 3 filters each, and depthwise with a channel multiplier of 2.
  checkGradients("grouped conv2d", {{{2, 6, 5, 4}}, {{3, 2, 2, 6}}},
                 [](Graph &, std::vector<Tensor> &x) {
                   return conv2d(x[0], x[1], {2, 1}, {1, 1, 0, 1}, {1, 2}, 2);
                 });
  checkGradients("depthwise conv2d", {{{2, 5, 5, 3}}, {{3, 3, 1, 6}}},
                 [](Graph &, std::vector<Tensor> &x) {
                   return conv2d(x[0], x[1], {1, 1}, {1, 1, 1, 1}, {1, 1}, 3);
                 });
  // The transposed convolution (ONNX's ConvTranspose): strided, padded, dilated, grouped.
  checkGradients(
      "conv2d_backward_input", {{{2, 3, 3, 4}}, {{2, 3, 3, 4}}},
      [](Graph &, std::vector<Tensor> &x) {
        return conv2dBackwardInput(x[0], x[1], {2, 6, 9, 6}, {2, 2}, {0, 1, 1, 0}, {1, 2}, 2);
      });
  checkGradients("max_pool2d", {{{2, 6, 6, 2}}}, [](Graph &, std::vector<Tensor> &x) {
    return maxPool2d(x[0], {2, 3}, {2, 2}, {0, 1, 1, 1});
  });
  checkGradients("avg_pool2d", {{{2, 5, 6, 2}}}, [](Graph &, std::vector<Tensor> &x) {
    return avgPool2d(x[0], {3, 2}, {2, 2}, {1, 1, 0, 0});
  });
}

TEST(Gradients, Composites) {
  checkGradients("softmax cross-entropy", {{{6, 5}}}, [](Graph &g, std::vector<Tensor> &x) {
    Tensor labels = constant(g, {0, 4, 2, 2, 1, 3}, {6}, DType::i64);
    return reshape(sparseSoftmaxCrossEntropy(x[0], labels), {1});
  });
  checkGradients("mlp", {{{4, 6}}, {{6, 5}}, {{5}}, {{5, 3}}}, [](Graph &, std::vector<Tensor> &x) {
    Tensor h = tanh(matmul(x[0], x[1]) + x[2]);
    return logSoftmax(matmul(h, x[3]));
  });
  // Small weights keep the softmax away from saturation, where finite differences lose the
  // tiny gradients to rounding.
  checkGradients("cnn", {{{2, 6, 6, 1}}, {{3, 3, 1, 3}, -0.5, 0.5}, {{3}}, {{27, 4}, -0.3, 0.3}},
                 [](Graph &, std::vector<Tensor> &x) {
                   Tensor c = relu(conv2d(x[0], x[1], {1, 1}, {1, 1, 1, 1}) + x[2]);
                   Tensor p = maxPool2d(c, {2, 2}, {2, 2});
                   return softmax(matmul(flatten(p), x[3]));
                 });
}

} // namespace
} // namespace smelt::test

namespace smelt::test {
namespace {

// Losses over any leading shape: logits [2, 3, 5], labels [2, 3]. The loss, its gradient
// (softmax - one_hot) / 6 and the accuracy against float64; oneHot's rows; and an
// out-of-range label turns the loss NaN instead of adding 0.
TEST(Losses, SparseCrossEntropyOverAnyLeadingShapeAndBadLabels) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor logits = g.input("logits", {2, 3, 5}, DType::f64);
  Tensor labels = g.input("labels", {2, 3}, DType::i64);
  Tensor loss = sparseSoftmaxCrossEntropy(logits, labels);
  Tensor grad = g.gradients(loss, {logits})[0];
  g.setOutputs({loss, grad, accuracy(logits, labels), oneHot(labels, 5, DType::f64)});
  rt::HostTensor lv = randomTensor({2, 3, 5}, DType::f64);
  std::mt19937_64 gen(rngSeed());
  std::vector<int64_t> ys(6);
  for (int64_t &y : ys)
    y = int64_t(gen() % 5);
  std::vector<rt::HostTensor> out =
      run(g, {lv, rt::HostTensor::fromVector<int64_t>({2, 3}, ys)});
  ASSERT_EQ(out.size(), 4u);
  std::vector<double> l = lv.toDoubles(), dl, hot;
  double total = 0, hits = 0;
  for (size_t row = 0; row < 6; ++row) {
    double mx = -INFINITY, sum = 0;
    size_t best = 0;
    for (size_t c = 0; c < 5; ++c) {
      if (l[row * 5 + c] > mx)
        mx = l[row * 5 + c], best = c;
    }
    for (size_t c = 0; c < 5; ++c)
      sum += std::exp(l[row * 5 + c] - mx);
    total += -(l[row * 5 + size_t(ys[row])] - mx - std::log(sum));
    hits += best == size_t(ys[row]);
    for (size_t c = 0; c < 5; ++c) {
      double onehot = c == size_t(ys[row]);
      dl.push_back((std::exp(l[row * 5 + c] - mx) / sum - onehot) / 6);
      hot.push_back(onehot);
    }
  }
  EXPECT_NEAR(out[0].at(0), total / 6, 1e-12);
  EXPECT_LE(relError(out[1].toDoubles(), dl), 1e-12);
  EXPECT_NEAR(out[2].at(0), hits / 6, 1e-7);
  EXPECT_EQ(out[3].toDoubles(), hot);

  // Labels 5 and -1 are out of range: their one-hot rows are zeros and the loss is NaN.
  ys[1] = 5;
  ys[4] = -1;
  out = run(g, {lv, rt::HostTensor::fromVector<int64_t>({2, 3}, ys)});
  EXPECT_TRUE(std::isnan(out[0].at(0))) << out[0].at(0);
  std::vector<double> rows = out[3].toDoubles();
  for (size_t c = 0; c < 5; ++c) {
    EXPECT_EQ(rows[1 * 5 + c], 0.0);
    EXPECT_EQ(rows[4 * 5 + c], 0.0);
  }
}

} // namespace
} // namespace smelt::test

namespace smelt::test {
namespace {

TEST(Gradients, GeluAndLayerNorm) {
  checkGradients("gelu (erf)", {{{3, 5}}},
                 [](Graph &, std::vector<Tensor> &x) { return gelu(x[0]); });
  checkGradients("gelu (tanh)", {{{3, 5}}},
                 [](Graph &, std::vector<Tensor> &x) { return gelu(x[0], true); });
  checkGradients("layerNorm", {{{2, 3, 6}}, {{6}}, {{6}}}, [](Graph &, std::vector<Tensor> &x) {
    return layerNorm(x[0], x[1], x[2], 1e-5);
  });
}

// GELU's two forms, layer norm and the sinusoidal encoding against float64 formulas written
// here; layerNorm(x, name) makes its gain and bias parameters.
TEST(Layers, GeluLayerNormAndPositionalEncodingMatchFloat64) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {4, 6}, DType::f64);
  Tensor normed = layerNorm(x, "ln");
  EXPECT_EQ(g.parameterTensors().size(), 2u) << "ln/gain and ln/bias";
  EXPECT_THROW(positionalEncoding(g, 4, 5), BuildError);
  g.setOutputs({gelu(x), gelu(x, true), normed, positionalEncoding(g, 7, 6, DType::f64)});
  rt::HostTensor xv = randomTensor({4, 6}, DType::f64);
  std::vector<double> ones(6, 1.0), zeros(6, 0.0);
  std::vector<rt::HostTensor> out =
      run(g, {xv, rt::HostTensor::fromVector<double>({6}, ones),
              rt::HostTensor::fromVector<double>({6}, zeros)});
  ASSERT_EQ(out.size(), 4u);
  std::vector<double> v = xv.toDoubles(), exact, approx, ln, pe;
  for (double e : v) {
    exact.push_back(0.5 * e * (1 + std::erf(e / std::sqrt(2.0))));
    approx.push_back(0.5 * e * (1 + std::tanh(std::sqrt(2 / M_PI) * (e + 0.044715 * e * e * e))));
  }
  for (size_t row = 0; row < 4; ++row) {
    double m = 0, var = 0;
    for (size_t c = 0; c < 6; ++c)
      m += v[row * 6 + c] / 6;
    for (size_t c = 0; c < 6; ++c)
      var += (v[row * 6 + c] - m) * (v[row * 6 + c] - m) / 6;
    for (size_t c = 0; c < 6; ++c)
      ln.push_back((v[row * 6 + c] - m) / std::sqrt(var + 1e-5));
  }
  for (int p = 0; p < 7; ++p)
    for (int i = 0; i < 6; ++i) {
      double angle = p / std::pow(10000.0, double(i - i % 2) / 6);
      pe.push_back(i % 2 ? std::cos(angle) : std::sin(angle));
    }
  EXPECT_LE(relError(out[0].toDoubles(), exact), 1e-14);
  EXPECT_LE(relError(out[1].toDoubles(), approx), 1e-14);
  EXPECT_LE(relError(out[2].toDoubles(), ln), 1e-13);
  EXPECT_LE(relError(out[3].toDoubles(), pe), 1e-13);
}

} // namespace
} // namespace smelt::test
