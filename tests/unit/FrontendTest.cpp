// The builder: the IR it writes (explicit broadcasts, parameters, the init function) and its
// errors, which must name this file and line and the shapes involved.
#include "TestUtil.h"

#include "frontend/Layers.h"
#include "frontend/Models.h"

#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

namespace smelt::test {
namespace {

std::string print(mlir::Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  op->print(os);
  return text;
}

int countOps(mlir::Operation *root, llvm::StringRef name) {
  int n = 0;
  root->walk([&](mlir::Operation *op) { n += op->getName().getStringRef() == name; });
  return n;
}

/// Runs `build` and returns the BuildError message, failing the test when none is thrown.
template <typename Fn> std::string buildError(Fn build) {
  try {
    build();
  } catch (const BuildError &e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a BuildError";
  return "";
}

/// Expects `build(at)` to throw a BuildError reading `at` (set by build to its own line) and
/// then `tail`.
template <typename Fn> void expectBuildError(Fn build, const std::string &tail) {
  std::string at;
  std::string message = buildError([&] { build(at); });
  EXPECT_EQ(message, at + tail);
}

/// "FrontendTest.cpp:<line>: " for the line of the call.
std::string here(Loc loc = Loc::current()) {
  return "FrontendTest.cpp:" + std::to_string(loc.line()) + ": ";
}

TEST(Builder, BroadcastsOnlyWhereShapesDiffer) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor a = g.input("a", {3, 1}), b = g.input("b", {4}), c = g.input("c", {3, 4});
  Tensor sum = a + b;
  EXPECT_EQ(sum.shape(), (std::vector<int64_t>{3, 4}));
  g.setOutputs({sum * c});
  ASSERT_TRUE(mlir::succeeded(mlir::verify(g.module())));
  std::string ir = print(g.module());
  EXPECT_NE(ir.find("smelt.broadcast_in_dim %arg0, dims = [0, 1] : tensor<3x1xf32> -> "
                    "tensor<3x4xf32>"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("smelt.broadcast_in_dim %arg1, dims = [1] : tensor<4xf32> -> "
                    "tensor<3x4xf32>"),
            std::string::npos)
      << ir;
  EXPECT_EQ(countOps(g.module(), "smelt.broadcast_in_dim"), 2) << "c needs no broadcast";
}

TEST(Builder, OpsCarryTheCallersLocation) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {2});
  int line = __LINE__ + 1;
  Tensor y = exp(x);
  auto loc = mlir::dyn_cast<mlir::FileLineColLoc>(y.value().getLoc());
  ASSERT_TRUE(loc);
  EXPECT_TRUE(loc.getFilename().getValue().ends_with("FrontendTest.cpp"));
  EXPECT_EQ(int(loc.getLine()), line);
}

TEST(Builder, ErrorsNameTheCallSiteAndTheProblem) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {8, 784}), w = g.input("w", {512, 10}), i = g.input("i", {4}, DType::i32);
  Tensor img = g.input("img", {2, 5, 5, 3}), k = g.input("k", {3, 3, 4, 8});
  std::string at;

  expectBuildError([&](std::string &at) { at = here(); matmul(x, w); },
                   "'smelt.matmul' op contracting dimensions differ: lhs 'tensor<8x784xf32>' has "
                 "K = 784 but rhs 'tensor<512x10xf32>' has K = 512");
  expectBuildError([&](std::string &at) { at = here(); (void)(x + w); },
                   "shapes [8, 784] and [512, 10] do not broadcast: dimension 784 vs 10");
  expectBuildError([&](std::string &at) { at = here(); reduceSum(x, {2}); },
                   "axis 2 is out of range for rank 2");
  expectBuildError([&](std::string &at) { at = here(); reshape(x, {9, -1}); },
                   "cannot reshape [8, 784] to [9, -1]");
  expectBuildError([&](std::string &at) { at = here(); reshape(x, {7, 5}); },
                   "'smelt.reshape' op operand 'tensor<8x784xf32>' has 6272 elements but result "
                 "'tensor<7x5xf32>' has 35");
  expectBuildError([&](std::string &at) { at = here(); conv2d(img, k); },
                   "'smelt.conv2d' op input has 3 channels ('tensor<2x5x5x3xf32>') but filter "
                 "expects 4 ('tensor<3x3x4x8xf32>')");
  expectBuildError([&](std::string &at) { at = here(); maxPool2d(img, {6, 6}, {1, 1}); },
                   "'smelt.max_pool2d' op window [6, 6] is larger than input "
                 "'tensor<2x5x5x3xf32>'");
  std::string dtype = buildError([&] { at = here(); exp(i); });  // `at` is set before the throw
  EXPECT_EQ(dtype.rfind(at + "'smelt.exp' op operand #0 must be", 0), 0u) << dtype;
  EXPECT_NE(dtype.find("'tensor<4xi32>'"), std::string::npos) << dtype;
  expectBuildError([&](std::string &at) { at = here(); dense(i, 4, "d"); },
                   "dense layer 'd' needs an input of rank 2 or more ([..., features]), got "
                   "rank 1");
  expectBuildError([&](std::string &at) { at = here(); g.input("x", {1}); },
                   "graph @f already has an input or parameter named 'x'");
  // The graph is still usable after errors: nothing half-built was left in it.
  g.setOutputs({exp(x)});
  EXPECT_TRUE(mlir::succeeded(mlir::verify(g.module())));
  EXPECT_EQ(countOps(g.module(), "smelt.matmul"), 0);
}

TEST(Builder, ParametersAndInitializerFunction) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "model", /*seed=*/42);
  Tensor x = g.input("x", {16, 784});
  g.setOutputs({mlpClassifier(g, x, {784, 512, 10})}, {"logits"});
  g.buildInitializer();
  ASSERT_TRUE(mlir::succeeded(mlir::verify(g.module())));
  ASSERT_EQ(g.parameters().size(), 4u);
  EXPECT_EQ(g.parameters()[0].name, "dense1/kernel");
  EXPECT_EQ(g.parameters()[3].name, "logits/bias");
  EXPECT_NE(g.parameters()[0].seed, g.parameters()[2].seed);
  auto init = g.module().lookupSymbol<mlir::func::FuncOp>("model_init");
  ASSERT_TRUE(init);
  EXPECT_EQ(init.getNumArguments(), 0u);
  ASSERT_EQ(init.getNumResults(), 4u);
  EXPECT_EQ(init.getFunctionType().getResult(0), g.function().getArgument(1).getType());
  std::string ir = print(init);
  // Glorot limit sqrt(6 / (784 + 512)) = 0.0680413817439772.
  EXPECT_NE(ir.find("low = -0.068041381743977"), std::string::npos) << ir;
  EXPECT_NE(ir.find("high = 0.068041381743977"), std::string::npos) << ir;
  EXPECT_EQ(countOps(init, "smelt.rng_uniform"), 2);
  EXPECT_EQ(countOps(init, "smelt.constant"), 2) << "biases start at zero";

  std::vector<rt::HostTensor> params = run(g, {}, "model_init");
  ASSERT_EQ(params.size(), 4u);
  double limit = std::sqrt(6.0 / (784 + 512)), maxAbs = 0;
  for (double v : params[0].toDoubles())
    maxAbs = std::max(maxAbs, std::abs(v));
  EXPECT_LE(maxAbs, limit);
  EXPECT_GT(maxAbs, 0.99 * limit);
  for (double v : params[1].toDoubles())
    EXPECT_EQ(v, 0.0);
}

TEST(Builder, DropoutKeepsExpectationAndInferenceIsIdentity) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {256, 256});
  g.setOutputs({dropout(x, 0.25, 7, true), dropout(x, 0.25, 7, false)});
  rt::HostTensor in = randomTensor({256, 256}, DType::f32, [] { return draw(1, 2); });
  std::vector<rt::HostTensor> out = run(g, {in});
  ASSERT_EQ(out.size(), 2u);
  std::vector<double> xv = in.toDoubles(), y = out[0].toDoubles();
  int64_t dropped = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    if (y[i] == 0)
      ++dropped;
    else
      EXPECT_NEAR(y[i], xv[i] / 0.75, 1e-6 * y[i]);
  }
  EXPECT_NEAR(double(dropped) / double(xv.size()), 0.25, 0.01);
  EXPECT_EQ(out[1].toDoubles(), xv);
}

TEST(Builder, SamePaddingFollowsTensorFlow) {
  EXPECT_EQ(windowPadding(Padding::Same, {1, 28, 28, 1}, {3, 3}, {1, 1}), (Quad{1, 1, 1, 1}));
  EXPECT_EQ(windowPadding(Padding::Same, {1, 28, 28, 1}, {2, 2}, {2, 2}), (Quad{0, 0, 0, 0}));
  EXPECT_EQ(windowPadding(Padding::Same, {1, 7, 8, 1}, {3, 4}, {2, 3}), (Quad{1, 1, 1, 1}));
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor y = conv2dLayer(g.input("x", {2, 7, 8, 3}), 5, {3, 4}, "c", {2, 3});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 4, 3, 5}));
}

} // namespace
} // namespace smelt::test
