// Layers and composites: the parameters they create, the padding they compute, and the ops
// they are made of (numerically stable forms, one-hot by iota + compare).
#include "FrontendTesting.h"

#include "frontend/Models.h"

namespace smelt::frontend_test {
namespace {

std::vector<std::string> parameterNames(const Graph &g) {
  std::vector<std::string> names;
  for (const ParameterSpec &p : g.parameters())
    names.push_back(p.name);
  return names;
}

TEST(Layers, DenseCreatesKernelAndBias) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {8, 20});
  Tensor h = dense(g, x, 16, "hidden", Activation::Relu);
  Tensor y = dense(h, 4, "out", Activation::Softmax, Initializer::zeros());
  EXPECT_EQ(h.shape(), (Shape{8, 16}));
  EXPECT_EQ(y.shape(), (Shape{8, 4}));
  g.setOutputs({y});
  ASSERT_TRUE(verifies(g)) << print(g.module());
  EXPECT_EQ(parameterNames(g), (std::vector<std::string>{"hidden/kernel", "hidden/bias",
                                                          "out/kernel", "out/bias"}));
  EXPECT_EQ(g.parameters()[0].shape, (Shape{20, 16}));
  EXPECT_EQ(g.parameters()[1].shape, (Shape{16}));
  EXPECT_EQ(g.parameters()[0].init.kind, Initializer::Kind::GlorotUniform);
  EXPECT_EQ(g.parameters()[1].init.kind, Initializer::Kind::Zeros);
  EXPECT_EQ(g.parameters()[2].init.kind, Initializer::Kind::Zeros);
  EXPECT_EQ(countOps(g.function(), "smelt.matmul"), 2);
  EXPECT_EQ(countOps(g.function(), "smelt.relu"), 1);
  EXPECT_EQ(countOps(g.function(), "smelt.exp"), 1) << "softmax activation";
}

TEST(Layers, ActivationsMapToOps) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {2, 3});
  EXPECT_EQ(activate(x, Activation::None).value(), x.value());
  EXPECT_EQ(activate(x, Activation::Relu).value().getDefiningOp()->getName().getStringRef(),
            "smelt.relu");
  EXPECT_EQ(activate(x, Activation::Tanh).value().getDefiningOp()->getName().getStringRef(),
            "smelt.tanh");
  EXPECT_EQ(
      activate(x, Activation::Logistic).value().getDefiningOp()->getName().getStringRef(),
      "smelt.logistic");
}

TEST(Layers, SamePaddingFollowsTensorFlow) {
  EXPECT_EQ(windowPadding(Padding::Same, {1, 28, 28, 1}, {3, 3}, {1, 1}), (Quad{1, 1, 1, 1}));
  EXPECT_EQ(windowPadding(Padding::Same, {1, 28, 28, 1}, {2, 2}, {2, 2}), (Quad{0, 0, 0, 0}));
  // An odd total puts the extra row/column at the bottom/right.
  EXPECT_EQ(windowPadding(Padding::Same, {1, 6, 6, 1}, {4, 4}, {1, 1}), (Quad{1, 2, 1, 2}));
  EXPECT_EQ(windowPadding(Padding::Valid, {1, 6, 6, 1}, {4, 4}, {1, 1}), (Quad{0, 0, 0, 0}));
  EXPECT_EQ(windowPadding("SAME", {1, 6, 6, 1}, {4, 4}, {1, 1}), (Quad{1, 2, 1, 2}));
  EXPECT_EQ(windowPadding("valid", {1, 6, 6, 1}, {4, 4}, {1, 1}), (Quad{0, 0, 0, 0}));
  EXPECT_EQ(windowPadding(PaddingSpec{0, 1, 2, 3}, {1, 6, 6, 1}, {4, 4}, {1, 1}),
            (Quad{0, 1, 2, 3}));
}

TEST(Layers, Conv2dCreatesHwioKernelAndBias) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {2, 7, 8, 3});
  Tensor same = conv2d(g, x, 5, {3, 4}, "c1", {2, 3});
  EXPECT_EQ(same.shape(), (Shape{2, 4, 3, 5}));
  Tensor valid = conv2d(g, same, 6, {3, 3}, "c2", {1, 1}, "valid", Activation::Relu);
  EXPECT_EQ(valid.shape(), (Shape{2, 2, 1, 6}));
  Tensor padded = conv2dLayer(x, 2, {3, 3}, "c3", {1, 1}, {2, 2, 2, 2});
  EXPECT_EQ(padded.shape(), (Shape{2, 9, 10, 2}));
  g.setOutputs({valid, padded});
  ASSERT_TRUE(verifies(g)) << print(g.module());
  EXPECT_EQ(parameterNames(g),
            (std::vector<std::string>{"c1/kernel", "c1/bias", "c2/kernel", "c2/bias",
                                      "c3/kernel", "c3/bias"}));
  EXPECT_EQ(g.parameters()[0].shape, (Shape{3, 4, 3, 5}));
  EXPECT_EQ(g.parameters()[0].init.kind, Initializer::Kind::HeNormal);
  EXPECT_EQ(g.parameters()[2].shape, (Shape{3, 3, 5, 6}));
  EXPECT_EQ(g.parameters()[3].shape, (Shape{6}));
}

TEST(Layers, PoolingAndFlatten) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {2, 7, 7, 3});
  EXPECT_EQ(maxPool(g, x, {2, 2}, {2, 2}).shape(), (Shape{2, 3, 3, 3}));
  EXPECT_EQ(maxPool(x, {2, 2}, {2, 2}, Padding::Same).shape(), (Shape{2, 4, 4, 3}));
  EXPECT_EQ(avgPool(g, x, {3, 3}, {1, 1}, "same").shape(), (Shape{2, 7, 7, 3}));
  EXPECT_EQ(avgPool(x, {3, 3}, {2, 2}).shape(), (Shape{2, 3, 3, 3}));
  Tensor f = flatten(g, x);
  EXPECT_EQ(f.shape(), (Shape{2, 147}));
  EXPECT_EQ(flatten(f).value(), f.value()) << "already flat";
  g.setOutputs({f});
  EXPECT_TRUE(verifies(g));
}

TEST(Layers, DropoutMasksOnlyWhenTraining) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {4, 5});
  EXPECT_EQ(dropout(g, x, 0.5, 1, /*training=*/false).value(), x.value());
  EXPECT_EQ(dropout(x, 0.0, 1, /*training=*/true).value(), x.value());
  Tensor step = g.input("step", {}, DType::i64);
  Tensor y = dropout(x, 0.25, 9, /*training=*/true, step);
  EXPECT_EQ(y.shape(), x.shape());
  g.setOutputs({y});
  ASSERT_TRUE(verifies(g));
  // keep = u >= rate, y = keep ? x / (1 - rate) : 0, u drawn per step.
  mlir::Operation *rng = firstOp(g.function(), "smelt.rng_uniform");
  ASSERT_TRUE(rng);
  EXPECT_EQ(rng->getNumOperands(), 1u) << "the step is the rng's offset";
  std::string ir = print(g.module());
  EXPECT_NE(ir.find("seed = 9, low = 0.000000e+00, high = 1.000000e+00 offset"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("dense<2.500000e-01>"), std::string::npos) << ir;
  EXPECT_NE(ir.find("dense<1.3333333"), std::string::npos) << ir;
  EXPECT_NE(ir.find("smelt.compare ge,"), std::string::npos) << ir;
  EXPECT_EQ(countOps(g.function(), "smelt.select"), 1);
}

TEST(Composites, SoftmaxAndLogSoftmaxSubtractTheMax) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {4, 10});
  Tensor s = softmax(x);
  Tensor ls = logSoftmax(x, 0);
  EXPECT_EQ(s.shape(), x.shape());
  EXPECT_EQ(ls.shape(), x.shape());
  g.setOutputs({s, ls});
  ASSERT_TRUE(verifies(g)) << print(g.module());
  // Each: one max reduction, shift, exp, one sum reduction; log-softmax takes the log of the
  // sum (never of a softmax, which would underflow).
  EXPECT_EQ(countOps(g.function(), "smelt.reduce"), 4);
  EXPECT_EQ(countOps(g.function(), "smelt.exp"), 2);
  EXPECT_EQ(countOps(g.function(), "smelt.log"), 1);
  EXPECT_EQ(countOps(g.function(), "smelt.div"), 1);
  std::string ir = print(g.function());
  EXPECT_NE(ir.find("smelt.reduce max %arg0 axes = [1]"), std::string::npos) << ir;
  EXPECT_NE(ir.find("smelt.reduce max %arg0 axes = [0]"), std::string::npos) << ir;
}

TEST(Composites, CrossEntropyAndAccuracyAreScalars) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor logits = g.input("logits", {8, 10});
  for (DType labelType : {DType::i32, DType::i64}) {
    Tensor labels = g.input(std::string("labels_") + dtypeName(labelType), {8}, labelType);
    Tensor loss = sparseSoftmaxCrossEntropy(logits, labels);
    Tensor acc = accuracy(logits, labels);
    EXPECT_EQ(loss.shape(), Shape{});
    EXPECT_EQ(loss.dtype(), DType::f32);
    EXPECT_EQ(acc.shape(), Shape{});
    EXPECT_EQ(acc.dtype(), DType::f32);
  }
  g.setOutputs({});
  ASSERT_TRUE(verifies(g)) << print(g.module());
  // One-hot: iota over the classes compared with the labels broadcast along them.
  std::string ir = print(g.function());
  EXPECT_NE(ir.find("smelt.iota dim = 1 : tensor<8x10xi32>"), std::string::npos) << ir;
  EXPECT_NE(ir.find("smelt.iota dim = 1 : tensor<8x10xi64>"), std::string::npos) << ir;
  EXPECT_NE(ir.find("dims = [0] : tensor<8xi32> -> tensor<8x10xi32>"), std::string::npos) << ir;
  EXPECT_EQ(countOps(g.function(), "smelt.argmax"), 2);
}

TEST(Models, MlpClassifier) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "mlp");
  Tensor logits = mlpClassifier(g, g.input("x", {16, 784}), {784, 512, 256, 10});
  EXPECT_EQ(logits.shape(), (Shape{16, 10}));
  g.setOutputs({logits});
  ASSERT_TRUE(verifies(g));
  EXPECT_EQ(parameterNames(g),
            (std::vector<std::string>{"dense1/kernel", "dense1/bias", "dense2/kernel",
                                      "dense2/bias", "logits/kernel", "logits/bias"}));
}

TEST(Layers, EmbeddingGathersRowsOfItsTable) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor ids = g.input("ids", {4, 7}, DType::i32);
  Tensor tokens = embedding(ids, 1000, 16, "tokens");
  Tensor positions = embedding(g, ids, 7, 16, "positions", Initializer::uniform(-0.02, 0.02));
  EXPECT_EQ(tokens.shape(), (Shape{4, 7, 16}));
  g.setOutputs({tokens + positions});
  ASSERT_TRUE(verifies(g)) << print(g.module());
  EXPECT_EQ(parameterNames(g),
            (std::vector<std::string>{"tokens/embeddings", "positions/embeddings"}));
  EXPECT_EQ(g.parameters()[0].shape, (Shape{1000, 16}));
  EXPECT_EQ(g.parameters()[0].dtype, DType::f32);
  // Keras' default: uniform in [-0.05, 0.05).
  EXPECT_EQ(g.parameters()[0].init.kind, Initializer::Kind::Uniform);
  EXPECT_EQ(g.parameters()[0].init.value, -0.05);
  EXPECT_EQ(g.parameters()[0].init.high, 0.05);
  EXPECT_EQ(g.parameters()[1].init.high, 0.02);
  EXPECT_EQ(countOps(g.function(), "smelt.gather"), 2);
  EXPECT_EQ(countOps(g.function(), "smelt.matmul"), 0) << "no one-hot product";
}

} // namespace
} // namespace smelt::frontend_test
