// Parameters and the init function: Keras' fans and bounds, seeds per parameter, and
// @<name>_init returning every initial value in parameter order.
#include "FrontendTesting.h"

#include <cmath>
#include <set>

namespace smelt::frontend_test {
namespace {

TEST(Initializers, KerasFans) {
  EXPECT_EQ(kerasFans({784, 512}).in, 784);
  EXPECT_EQ(kerasFans({784, 512}).out, 512);
  // HWIO conv kernel: the receptive field multiplies both fans.
  EXPECT_EQ(kerasFans({3, 3, 32, 64}).in, 9 * 32);
  EXPECT_EQ(kerasFans({3, 3, 32, 64}).out, 9 * 64);
  EXPECT_EQ(kerasFans({10}).in, 10);
  EXPECT_EQ(kerasFans({}).in, 1);
  EXPECT_DOUBLE_EQ(glorotLimit({784, 512}), std::sqrt(6.0 / (784 + 512)));
  EXPECT_DOUBLE_EQ(glorotLimit({3, 3, 1, 32}), std::sqrt(6.0 / (9 + 9 * 32)));
  EXPECT_DOUBLE_EQ(heStddev({3, 3, 1, 32}), std::sqrt(2.0 / 9));
  EXPECT_DOUBLE_EQ(heStddev({784, 512}), std::sqrt(2.0 / 784));
}

TEST(Initializers, SeedsDifferPerParameterAndFollowTheGraphSeed) {
  std::set<uint64_t> seeds;
  for (uint64_t graphSeed : {0, 1, 2})
    for (uint64_t index = 0; index < 100; ++index) {
      uint64_t s = parameterSeed(graphSeed, index);
      EXPECT_LT(s, uint64_t(1) << 63) << "the dialect's seed is a signed i64";
      seeds.insert(s);
    }
  EXPECT_EQ(seeds.size(), 300u);
  EXPECT_EQ(parameterSeed(42, 3), parameterSeed(42, 3)) << "deterministic";

  mlir::MLIRContext ctx;
  Graph g(ctx, "f", /*seed=*/5);
  g.parameter("a", {2}, Initializer::glorotUniform());
  g.parameter("b", {2}, Initializer::glorotUniform());
  EXPECT_EQ(g.parameters()[0].seed, parameterSeed(5, 0));
  EXPECT_EQ(g.parameters()[1].seed, parameterSeed(5, 1));
  g.setSeed(6);
  EXPECT_EQ(g.seed(), 6u);
  EXPECT_EQ(g.parameters()[0].seed, parameterSeed(6, 0)) << "re-seeds existing parameters";
  EXPECT_EQ(g.parameters()[1].seed, parameterSeed(6, 1));
}

TEST(Initializers, InitFunctionReturnsParametersInOrder) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "model", /*seed=*/42);
  Tensor x = g.input("x", {16, 784});
  Tensor h = dense(x, 512, "dense1", Activation::Relu);
  Tensor img = g.input("img", {16, 28, 28, 1});
  Tensor c = conv2d(g, img, 32, {3, 3}, "conv");
  Tensor scale = g.parameter("scale", {10}, Initializer::constant(0.5), DType::f64);
  Tensor count = g.parameter("count", {}, Initializer::constant(3), DType::i32);
  g.setOutputs({h, c, scale, count});
  g.buildInitializer();
  ASSERT_TRUE(verifies(g)) << print(g.module());

  auto init = g.module().lookupSymbol<mlir::func::FuncOp>("model_init");
  ASSERT_TRUE(init);
  EXPECT_EQ(init.getNumArguments(), 0u);
  std::vector<std::string> names = {"dense1/kernel", "dense1/bias", "conv/kernel",
                                    "conv/bias",     "scale",       "count"};
  ASSERT_EQ(init.getNumResults(), names.size());
  // Result i is parameter i: same name, same type as the parameter argument.
  std::vector<Tensor> params = g.parameterTensors();
  ASSERT_EQ(params.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(g.parameters()[i].name, names[i]);
    EXPECT_EQ(init.getResultAttrOfType<mlir::StringAttr>(i, "smelt.name").getValue(), names[i]);
    EXPECT_EQ(init.getFunctionType().getResult(i), params[i].type()) << names[i];
  }
  // Which op makes each result, in order.
  auto *ret = init.getBody().front().getTerminator();
  std::vector<std::string> makers;
  for (mlir::Value v : ret->getOperands())
    makers.push_back(v.getDefiningOp()->getName().getStringRef().str());
  EXPECT_EQ(makers, (std::vector<std::string>{"smelt.rng_uniform", "smelt.constant",
                                              "smelt.rng_normal", "smelt.constant",
                                              "smelt.constant", "smelt.constant"}));

  std::string ir = print(init);
  // Glorot limit sqrt(6 / (784 + 512)) = 0.068041381743977...
  EXPECT_NE(ir.find("low = -0.068041381743977"), std::string::npos) << ir;
  EXPECT_NE(ir.find("high = 0.068041381743977"), std::string::npos) << ir;
  // He normal on a 3x3x1 receptive field: stddev sqrt(2 / 9) = 0.47140452079103...
  EXPECT_NE(ir.find("mean = 0.000000e+00, stddev = 0.47140452079103"), std::string::npos) << ir;
  EXPECT_NE(ir.find("seed = " + std::to_string(g.parameters()[0].seed)), std::string::npos);
  EXPECT_NE(ir.find("seed = " + std::to_string(g.parameters()[2].seed)), std::string::npos);
  EXPECT_NE(ir.find("dense<0.000000e+00> : tensor<512xf32>"), std::string::npos) << ir;
  EXPECT_NE(ir.find("dense<5.000000e-01> : tensor<10xf64>"), std::string::npos) << ir;
  EXPECT_NE(ir.find("dense<3> : tensor<i32>"), std::string::npos) << ir;
  // The init ops point at the line that created each parameter (this file), not the frontend.
  mlir::Operation *rng = firstOp(init, "smelt.rng_uniform");
  auto loc = mlir::dyn_cast<mlir::FileLineColLoc>(rng->getLoc());
  ASSERT_TRUE(loc);
  EXPECT_TRUE(loc.getFilename().getValue().ends_with("InitializerTest.cpp"));
}

TEST(Initializers, UniformDrawsInItsRangeWhateverTheShape) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor table = g.parameter("table", {1000, 16}, Initializer::uniform(-0.05, 0.05));
  g.setOutputs({exp(table)});
  g.buildInitializer();
  auto init = g.module().lookupSymbol<mlir::func::FuncOp>("f_init");
  ASSERT_TRUE(init);
  std::string ir = print(init);
  EXPECT_NE(ir.find("low = -5.000000e-02, high = 5.000000e-02"), std::string::npos) << ir;
  EXPECT_NE(ir.find("seed = " + std::to_string(g.parameters()[0].seed)), std::string::npos);
}

TEST(Initializers, InitFunctionOfAGraphWithoutParameters) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  g.setOutputs({exp(g.input("x", {2}))});
  g.buildInitializer();
  auto init = g.module().lookupSymbol<mlir::func::FuncOp>("f_init");
  ASSERT_TRUE(init);
  EXPECT_EQ(init.getNumResults(), 0u);
  EXPECT_TRUE(verifies(g));
}

TEST(Initializers, InitializerMayComeBeforeOutputs) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor w = g.parameter("w", {3}, Initializer::glorotUniform());
  g.buildInitializer();
  g.setOutputs({w * 2.0});
  ASSERT_TRUE(verifies(g)) << print(g.module());
  EXPECT_EQ(countOps(g.function(), "smelt.rng_uniform"), 0) << "init ops stay in f_init";
}

} // namespace
} // namespace smelt::frontend_test
