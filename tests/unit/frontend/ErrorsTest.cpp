// Every way a graph can be built wrong: the BuildError must name this file and line (the
// user's call site, not the frontend's) and the problem with its shapes or types, and the
// graph must stay usable, with nothing half-built left in it.
#include "FrontendTesting.h"

#include "frontend/Models.h"

namespace smelt::frontend_test {
namespace {

struct Failure {
  std::string message, where;
};
// Keep each FAILS_AT(...) on one line: `where` is that line, and so must be the error's.
#define FAILS_AT(...) Failure{errorOf([&] { (void)(__VA_ARGS__); }), site(__LINE__)}

/// Expects the failure to start at its own call site and mention every one of `parts`.
void expectFailure(const Failure &f, std::initializer_list<std::string> parts) {
  expectMessage(f.message, f.where, parts);
}

class BuildErrors : public ::testing::Test {
protected:
  /// After a test's errors, the graph still takes ops and verifies: failed ops were erased.
  void TearDown() override {
    if (g.finished())
      return;
    g.setOutputs({exp(x)});
    EXPECT_TRUE(verifies(g)) << print(g.module());
  }

  mlir::MLIRContext ctx;
  Graph g{ctx, "f"};
  Tensor x = g.input("x", {8, 784});
  Tensor w = g.input("w", {512, 10});
  Tensor i = g.input("i", {4}, DType::i32);
  Tensor img = g.input("img", {2, 5, 5, 3});
  Tensor k = g.input("k", {3, 3, 4, 8});
};

TEST_F(BuildErrors, NameTheCallersFileAndLine) {
  // Spelled out once without the macro: the line after this one raises the error.
  int line = __LINE__ + 1;
  std::string message = errorOf([&] { matmul(x, w); });
  EXPECT_EQ(message.rfind("ErrorsTest.cpp:" + std::to_string(line) + ": ", 0), 0u) << message;
  // Operators capture the call site through their first operand's conversion.
  line = __LINE__ + 1;
  message = errorOf([&] { (void)(x + w); });
  EXPECT_EQ(message.rfind("ErrorsTest.cpp:" + std::to_string(line) + ": ", 0), 0u) << message;
  // Tensor op double and double op Tensor too.
  expectFailure(FAILS_AT(img * 2.0 + k), {"do not broadcast"});
  expectFailure(FAILS_AT(-i + 1.0 - img), {"do not broadcast"});
  expectFailure(FAILS_AT(2.0 / x - w), {"do not broadcast"});
}

TEST_F(BuildErrors, ShapeMismatchInArithmetic) {
  expectFailure(FAILS_AT(x + w), {"shapes [8, 784] and [512, 10] do not broadcast",
                                  "dimension 784 vs 10"});
  Tensor a = g.input("a", {2, 3}), b = g.input("b", {3, 2});
  expectFailure(FAILS_AT(a - b), {"shapes [2, 3] and [3, 2] do not broadcast"});
  expectFailure(FAILS_AT(a * b), {"[2, 3]", "[3, 2]"});
  expectFailure(FAILS_AT(a / b), {"[2, 3]", "[3, 2]"});
  expectFailure(FAILS_AT(maximum(a, b)), {"[2, 3]", "[3, 2]"});
  expectFailure(FAILS_AT(pow(a, b)), {"[2, 3]", "[3, 2]"});
  expectFailure(FAILS_AT(compare(a, b, CompareDirection::lt)), {"[2, 3]", "[3, 2]"});
}

TEST_F(BuildErrors, IncompatibleBroadcast) {
  Tensor a = g.input("a", {5, 1, 3}), b = g.input("b", {4, 2});
  expectFailure(FAILS_AT(a * b), {"shapes [5, 1, 3] and [4, 2] do not broadcast",
                                  "dimension 3 vs 2"});
  Tensor pred = g.input("p", {4, 1}, DType::i1);
  expectFailure(FAILS_AT(select(pred, b, a)), {"[4, 1]", "[4, 2]", "[5, 1, 3]"});
  expectFailure(FAILS_AT(broadcastTo(b, {4, 3})), {"cannot broadcast shape [4, 2] to [4, 3]"});
  expectFailure(FAILS_AT(broadcastTo(a, {1, 3})), {"[5, 1, 3]", "smaller rank", "[1, 3]"});
  // broadcastInDim is the dialect's own rule.
  expectFailure(FAILS_AT(broadcastInDim(b, {4, 3}, {0, 1})),
                {"'smelt.broadcast_in_dim' op", "cannot broadcast", "tensor<4x2xf32>"});
}

TEST_F(BuildErrors, MatmulContractingMismatch) {
  expectFailure(FAILS_AT(matmul(x, w)),
                {"'smelt.matmul' op contracting dimensions differ", "tensor<8x784xf32>",
                 "K = 784", "tensor<512x10xf32>", "K = 512"});
  Tensor a = g.input("a", {4, 3}), b = g.input("b", {4, 5});
  EXPECT_EQ(matmul(a, b, /*transposeA=*/true).shape(), (Shape{3, 5}));
  expectFailure(FAILS_AT(matmul(a, b, false, true)), {"contracting dimensions differ"});
  expectFailure(FAILS_AT(matmul(i, i)), {"'smelt.matmul' op", "tensor<4xi32>"});
}

TEST_F(BuildErrors, BadAxis) {
  expectFailure(FAILS_AT(reduceSum(x, {2})), {"axis 2 is out of range for rank 2"});
  expectFailure(FAILS_AT(reduceMax(x, {-3})), {"axis -3 is out of range for rank 2"});
  expectFailure(FAILS_AT(reduceMin(x, {0, -2})), {"axes [0, 0] repeat an axis"});
  expectFailure(FAILS_AT(mean(x, {5})), {"axis 5 is out of range for rank 2"});
  expectFailure(FAILS_AT(argmax(x, 2)), {"axis 2 is out of range for rank 2"});
  expectFailure(FAILS_AT(concat({x, x}, -3)), {"axis -3 is out of range for rank 2"});
  expectFailure(FAILS_AT(softmax(x, 2)), {"axis 2 is out of range for rank 2"});
  expectFailure(FAILS_AT(logSoftmax(x, -3)), {"axis -3 is out of range for rank 2"});
  expectFailure(FAILS_AT(iota(g, {2, 3}, 2)), {"axis 2 is out of range for rank 2"});
  expectFailure(FAILS_AT(x.dim(2)), {"axis 2 is out of range for shape [8, 784]"});
}

TEST_F(BuildErrors, BadReshape) {
  expectFailure(FAILS_AT(reshape(x, {7, 5})),
                {"'smelt.reshape' op operand 'tensor<8x784xf32>' has 6272 elements",
                 "'tensor<7x5xf32>' has 35"});
  expectFailure(FAILS_AT(reshape(x, {9, -1})), {"cannot reshape [8, 784] to [9, -1]"});
  expectFailure(FAILS_AT(reshape(x, {-1, -1})), {"only one dimension may be -1"});
  expectFailure(FAILS_AT(reshape(x, {-2, 8})), {"only one dimension may be -1"});
}

TEST_F(BuildErrors, ConvolutionShapes) {
  expectFailure(FAILS_AT(conv2d(img, k)),
                {"'smelt.conv2d' op input has 3 channels", "tensor<2x5x5x3xf32>",
                 "filter expects 4", "tensor<3x3x4x8xf32>"});
  Tensor big = g.input("big", {7, 7, 3, 8});
  expectFailure(FAILS_AT(conv2d(img, big)), {"'smelt.conv2d' op", "larger than"});
  expectFailure(FAILS_AT(conv2d(x, k)), {"'smelt.conv2d' op", "rank 4"});
  expectFailure(FAILS_AT(conv2d(img, k, {0, 1})), {"'smelt.conv2d' op", "strides"});
  Tensor dy = g.input("dy", {2, 3, 3, 8}), k3 = g.input("k3", {3, 3, 3, 8});
  expectFailure(FAILS_AT(conv2dBackwardInput(dy, k3, {2, 5, 5, 4}, {1, 1}, {0, 0, 0, 0})),
                {"'smelt.conv2d_backward_input' op"});
  expectFailure(FAILS_AT(conv2dBackwardFilter(img, dy, {3, 3, 3, 9}, {1, 1}, {0, 0, 0, 0})),
                {"'smelt.conv2d_backward_filter' op"});
}

TEST_F(BuildErrors, PoolingShapes) {
  expectFailure(FAILS_AT(maxPool2d(img, {6, 6}, {1, 1})),
                {"'smelt.max_pool2d' op window [6, 6] is larger than input",
                 "tensor<2x5x5x3xf32>"});
  expectFailure(FAILS_AT(avgPool2d(img, {2, 7}, {1, 1})),
                {"'smelt.avg_pool2d' op window [2, 7] is larger than input"});
  expectFailure(FAILS_AT(maxPool(img, {2, 2}, {2, 2}, Quad{3, 3, 0, 0})),
                {"'smelt.max_pool2d' op padding [3, 3, 0, 0]"});
  Tensor dy = g.input("dy", {2, 3, 3, 3});
  expectFailure(FAILS_AT(maxPool2dBackward(img, dy, {2, 2}, {2, 2})),
                {"'smelt.max_pool2d_backward' op", "tensor<2x3x3x3xf32>"});
  expectFailure(FAILS_AT(avgPool2dBackward(dy, {2, 5, 5, 4}, {2, 2}, {2, 2})),
                {"'smelt.avg_pool2d_backward' op"});
}

TEST_F(BuildErrors, WrongDType) {
  expectFailure(FAILS_AT(exp(i)), {"'smelt.exp' op operand #0 must be", "'tensor<4xi32>'"});
  expectFailure(FAILS_AT(log(i)), {"'smelt.log' op", "'tensor<4xi32>'"});
  Tensor d = g.input("d", {8, 784}, DType::f64);
  expectFailure(FAILS_AT(x + d), {"'smelt.add' op", "tensor<8x784xf32>", "tensor<8x784xf64>"});
  expectFailure(FAILS_AT(select(x, x, x)), {"'smelt.select' op operand #0 must be", "1-bit",
                                            "'tensor<8x784xf32>'"});
  expectFailure(FAILS_AT(rngUniform(g, {3}, 1, 0.0, 1.0, DType::i32)),
                {"'smelt.rng_uniform' op", "tensor<3xi32>"});
  expectFailure(FAILS_AT(pow(i, i)), {"'smelt.pow' op", "tensor<4xi32>"});
  expectFailure(FAILS_AT(iota(g, {3}, 0, DType::i1)), {"'smelt.iota' op", "tensor<3xi1>"});
}

TEST_F(BuildErrors, BadShapeOpAttributes) {
  expectFailure(FAILS_AT(transpose(x, {0, 0})), {"'smelt.transpose' op permutation = [0, 0]"});
  expectFailure(FAILS_AT(transpose(x, {1})), {"'smelt.transpose' op permutation = [1]"});
  expectFailure(FAILS_AT(slice(x, {0, 0}, {9, 784})), {"'smelt.slice' op range 0:9:1"});
  expectFailure(FAILS_AT(slice(x, {0}, {8})), {"'smelt.slice' op needs one start:limit:stride"});
  expectFailure(FAILS_AT(pad(x, {-1, 0}, {0, 0})), {"'smelt.pad' op low = [-1, 0]"});
  expectFailure(FAILS_AT(concat({x, w}, 0)), {"'smelt.concat' op operand #1",
                                              "tensor<512x10xf32>"});
  expectFailure(FAILS_AT(concat({}, 0)), {"concat needs at least one tensor"});
  expectFailure(FAILS_AT(rngUniform(g, {3}, 1, 1.0, 1.0)), {"low = 1", "must be below high"});
  expectFailure(FAILS_AT(rngNormal(g, {3}, 1, 0.0, -1.0)), {"stddev = -1", "must be >= 0"});
  expectFailure(FAILS_AT(constant(g, {1.0, 2.0}, {3})),
                {"constant of shape [3] needs 3 values, got 2"});
  expectFailure(FAILS_AT(constant(g, 3e9, {}, DType::i32)), {"does not fit i32"});
  expectFailure(FAILS_AT(constant(g, 0.0, {2, -1})), {"shape [2, -1] has a negative dimension"});
}

TEST_F(BuildErrors, GraphMisuse) {
  expectFailure(FAILS_AT(g.input("x", {1})),
                {"graph @f already has an input or parameter named 'x'"});
  expectFailure(FAILS_AT(g.parameter("w", {1}, Initializer::zeros())), {"named 'w'"});
  expectFailure(FAILS_AT(g.input("n", {2, -3})), {"'n' has shape [2, -3]", ">= 0"});
  expectFailure(FAILS_AT(g.parameter("p", {2}, Initializer::heNormal(), DType::i32)),
                {"parameter 'p' is i32", "needs a float dtype"});
  Graph other(ctx, "other");
  Tensor y = other.input("y", {8, 784});
  expectFailure(FAILS_AT(x + y), {"operand #1 belongs to graph @other, not @f"});
  expectFailure(FAILS_AT(matmul(x, y)), {"belongs to another graph than @f"});
  expectFailure(FAILS_AT(dense(g, y, 3, "d")), {"belongs to graph @other, not @f"});
  expectFailure(FAILS_AT(g.setOutputs({y})), {"an output belongs to another graph"});
  expectFailure(FAILS_AT(Graph(g.module(), "f")), {"the module already has a symbol @f"});
  Tensor empty;
  EXPECT_FALSE(empty);
  EXPECT_NE(errorOf([&] { exp(empty); }).find("empty smelt::Tensor"), std::string::npos);
  expectFailure(FAILS_AT(g.setOutputs({x, w}, {"only one"})), {"2 outputs but 1 names"});

  g.setOutputs({x});
  expectFailure(FAILS_AT(exp(x)), {"graph @f is finished"});
  expectFailure(FAILS_AT(g.input("late", {1})), {"graph @f is finished"});
  expectFailure(FAILS_AT(g.setOutputs({x})), {"graph @f already has its outputs"});
  g.buildInitializer();
  expectFailure(FAILS_AT(g.buildInitializer()), {"already has a symbol @f_init"});
  EXPECT_TRUE(verifies(g)) << print(g.module());
}

TEST_F(BuildErrors, Layers) {
  expectFailure(FAILS_AT(dense(i, 4, "d")),
                {"dense layer 'd' needs an input of rank 2 or more ([..., features]), got rank 1"});
  expectFailure(FAILS_AT(dense(x, 0, "d")), {"dense layer 'd' needs units >= 1"});
  expectFailure(FAILS_AT(conv2d(g, x, 4, {3, 3}, "c")),
                {"conv2d layer 'c' needs an NHWC input, got shape [8, 784]"});
  expectFailure(FAILS_AT(conv2d(g, img, 4, {3, 3}, "c", {1, 1}, "sane")),
                {"padding \"sane\" is neither \"same\" nor \"valid\""});
  expectFailure(FAILS_AT(maxPool(g, img, {6, 6}, {1, 1}, "valid")),
                {"'smelt.max_pool2d' op window [6, 6] is larger"});
  expectFailure(FAILS_AT(dropout(x, 1.0, 1, true)), {"dropout rate 1", "must be in [0, 1)"});
  expectFailure(FAILS_AT(flatten(constant(g, 1.0))), {"flatten needs a batch dimension"});
  Tensor logits = g.input("logits", {4, 10});
  Tensor fl = g.input("fl", {4}), l3 = g.input("l3", {3}, DType::i64);
  expectFailure(FAILS_AT(sparseSoftmaxCrossEntropy(logits, fl)),
                {"labels must be i32 or i64 class indices, got f32"});
  expectFailure(FAILS_AT(sparseSoftmaxCrossEntropy(logits, l3)),
                {"logits must be [..., C] and labels the same [...] without C: got logits [4, 10] and labels [3]"});
  expectFailure(FAILS_AT(accuracy(logits, l3)), {"labels [3]"});
  expectFailure(FAILS_AT(softmax(i)), {"'smelt.exp' op", "tensor<4xi32>"});
  expectFailure(FAILS_AT(mlpClassifier(g, x, {784, 0, 10})), {"dense layer 'dense1'"});
  // A failed layer leaves no parameters behind.
  EXPECT_TRUE(g.parameters().empty());
}

TEST_F(BuildErrors, AFailedLayerIsUndoneWhole) {
  unsigned arguments = g.function().getNumArguments();
  size_t ops = g.function().getBody().front().getOperations().size();
  // The kernel is 7x7 but the unpadded input 5x5: conv2d fails after both parameters exist.
  expectFailure(FAILS_AT(conv2d(g, img, 4, {7, 7}, "c", {1, 1}, "valid")),
                {"'smelt.conv2d' op", "larger than"});
  // "d/kernel" is made, then "d/bias" clashes with an existing input.
  g.input("d/bias", {3});
  ++arguments;
  expectFailure(FAILS_AT(dense(x, 3, "d")), {"already has an input or parameter named 'd/bias'"});
  // Composites undo their partial ops: the max and the shift before exp fails.
  expectFailure(FAILS_AT(logSoftmax(i)), {"'smelt.exp' op"});
  expectFailure(FAILS_AT(sparseSoftmaxCrossEntropy(x, g.input("labels", {8}, DType::f32))),
                {"labels must be i32 or i64"});
  ++arguments;
  EXPECT_TRUE(g.parameters().empty());
  EXPECT_EQ(g.function().getNumArguments(), arguments);
  EXPECT_EQ(g.function().getBody().front().getOperations().size(), ops) << print(g.function());
  // The names are free again.
  conv2d(g, img, 4, {3, 3}, "c");
  EXPECT_EQ(g.parameters().size(), 2u);
}

TEST_F(BuildErrors, GatherScatterAndEmbedding) {
  Tensor table = g.input("table", {10, 4});
  Tensor ids = g.input("ids", {2, 3}, DType::i32);
  expectFailure(FAILS_AT(gather(table, x)),
                {"'smelt.gather' op operand 'indices' must hold i32 or i64", "tensor<8x784xf32>"});
  Tensor empty = g.input("empty", {0, 4});
  expectFailure(FAILS_AT(gather(empty, ids)),
                {"operand 'table' must have at least one row", "tensor<0x4xf32>"});
  Tensor updates = g.input("updates", {2, 4, 4});
  expectFailure(FAILS_AT(scatterAdd(updates, ids, 10)),
                {"'smelt.scatter_add' op operand 'updates' 'tensor<2x4x4xf32>' must start with "
                 "the shape of operand 'indices' 'tensor<2x3xi32>'"});
  expectFailure(FAILS_AT(scatterAdd(g.input("u", {2, 3, 4}), ids, 0)),
                {"'smelt.scatter_add' op size = 0 must be at least 1"});
  expectFailure(FAILS_AT(scatterAdd(g.input("ui", {2, 3}, DType::i32), ids, 4)),
                {"'smelt.scatter_add' op operand 'updates' must hold floats", "tensor<2x3xi32>"});
  expectFailure(FAILS_AT(embedding(x, 100, 8, "tokens")),
                {"embedding layer 'tokens' needs i32 or i64 ids, got f32"});
  expectFailure(FAILS_AT(embedding(ids, 0, 8, "tokens")),
                {"embedding layer 'tokens' needs vocab >= 1 and width >= 1, got vocab 0"});
  expectFailure(FAILS_AT(embedding(ids, 100, 8, "tokens", Initializer::uniform(1, -1))),
                {"parameter 'tokens/embeddings': a uniform initializer needs low < high"});
  EXPECT_TRUE(g.parameters().empty()) << "a failed layer leaves no parameter behind";
}

} // namespace
} // namespace smelt::frontend_test
