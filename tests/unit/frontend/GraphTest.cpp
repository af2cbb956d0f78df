// Graph and Tensor: arguments and their attributes, outputs, dtypes, op locations, graphs
// sharing a module.
#include "FrontendTesting.h"

namespace smelt::frontend_test {
namespace {

TEST(Graph, InputsParametersAndOutputsCarryTheirNames) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "model");
  Tensor x = g.input("x", {2, 3});
  Tensor w = g.parameter("w", {3, 4}, Initializer::glorotUniform());
  Tensor labels = g.input("labels", {2}, DType::i32);
  Tensor y = matmul(x, w);
  g.setOutputs({y, labels}, {"y", "labels_out"});
  ASSERT_TRUE(verifies(g)) << print(g.module());

  mlir::func::FuncOp f = g.function();
  EXPECT_EQ(f.getSymName(), "model");
  ASSERT_EQ(f.getNumArguments(), 3u);
  EXPECT_EQ(f.getArgAttrOfType<mlir::StringAttr>(0, "smelt.name").getValue(), "x");
  EXPECT_EQ(f.getArgAttrOfType<mlir::StringAttr>(1, "smelt.name").getValue(), "w");
  EXPECT_EQ(f.getArgAttrOfType<mlir::StringAttr>(2, "smelt.name").getValue(), "labels");
  EXPECT_FALSE(f.getArgAttr(0, "smelt.param"));
  EXPECT_TRUE(mlir::isa_and_nonnull<mlir::UnitAttr>(f.getArgAttr(1, "smelt.param")));
  EXPECT_FALSE(f.getArgAttr(2, "smelt.param"));
  ASSERT_EQ(f.getNumResults(), 2u);
  EXPECT_EQ(f.getResultAttrOfType<mlir::StringAttr>(0, "smelt.name").getValue(), "y");
  EXPECT_EQ(f.getResultAttrOfType<mlir::StringAttr>(1, "smelt.name").getValue(), "labels_out");
  EXPECT_EQ(print(f.getFunctionType()), "(tensor<2x3xf32>, tensor<3x4xf32>, tensor<2xi32>) -> "
                                        "(tensor<2x4xf32>, tensor<2xi32>)");
  ASSERT_EQ(g.parameters().size(), 1u);
  EXPECT_EQ(g.parameters()[0].name, "w");
  EXPECT_EQ(g.parameters()[0].shape, (Shape{3, 4}));
  EXPECT_EQ(g.parameterTensors().size(), 1u);
  EXPECT_EQ(g.parameterTensors()[0].value(), w.value());
  EXPECT_TRUE(g.finished());
}

TEST(Graph, TensorsKnowShapeRankAndDType) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  struct Case {
    DType dtype;
    const char *mlir;
  };
  for (Case c : {Case{DType::f32, "f32"}, Case{DType::f16, "f16"}, Case{DType::bf16, "bf16"},
                 Case{DType::f64, "f64"}, Case{DType::i32, "i32"}, Case{DType::i64, "i64"},
                 Case{DType::i1, "i1"}}) {
    Tensor t = g.input(std::string("t_") + c.mlir, {5, 1, 3}, c.dtype);
    EXPECT_EQ(t.dtype(), c.dtype) << c.mlir;
    EXPECT_EQ(print(t.type()), std::string("tensor<5x1x3x") + c.mlir + ">");
    EXPECT_EQ(dtypeName(c.dtype), std::string(c.mlir));
    EXPECT_EQ(t.shape(), (Shape{5, 1, 3}));
    EXPECT_EQ(t.rank(), 3);
    EXPECT_EQ(t.dim(0), 5);
    EXPECT_EQ(t.dim(-1), 3);
    EXPECT_EQ(t.numElements(), 15);
  }
  Tensor s = g.input("scalar", {});
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.numElements(), 1);
  EXPECT_EQ(shapeString({}), "[]");
  EXPECT_EQ(shapeString({3, 4}), "[3, 4]");
}

TEST(Graph, OpsCarryTheCallersLocation) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {2});
  int line = __LINE__ + 1;
  Tensor y = exp(x) * 2.0;
  for (mlir::Operation &op : g.function().getBody().front()) {
    auto loc = mlir::dyn_cast<mlir::FileLineColLoc>(op.getLoc());
    ASSERT_TRUE(loc) << print(&op);
    EXPECT_TRUE(loc.getFilename().getValue().ends_with("GraphTest.cpp")) << print(&op);
    EXPECT_EQ(int(loc.getLine()), line) << print(&op);
  }
  EXPECT_EQ(countOps(g.function(), "smelt.mul"), 1);
  // The argument points at the input() call.
  auto argLoc = mlir::dyn_cast<mlir::FileLineColLoc>(x.value().getLoc());
  ASSERT_TRUE(argLoc);
  EXPECT_EQ(int(argLoc.getLine()), line - 2);
  (void)y;
}

TEST(Graph, GraphsCanShareAModule) {
  mlir::MLIRContext ctx;
  Graph forward(ctx, "forward");
  Graph train(forward.module(), "train_step", /*seed=*/3);
  Tensor a = forward.input("a", {4});
  Tensor b = train.input("b", {4});
  forward.setOutputs({relu(a)});
  train.setOutputs({tanh(b)});
  ASSERT_TRUE(verifies(forward));
  EXPECT_EQ(train.module(), forward.module());
  EXPECT_TRUE(forward.module().lookupSymbol("forward"));
  EXPECT_TRUE(forward.module().lookupSymbol("train_step"));
  EXPECT_EQ(countOps(forward.module(), "func.func"), 2);
}

TEST(Graph, OutputsWithoutNamesAndNoOutputs) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {2});
  g.setOutputs({x, neg(x)});
  EXPECT_TRUE(verifies(g));
  EXPECT_FALSE(g.function().getResultAttr(0, "smelt.name"));
  Graph empty(ctx, "nothing");
  empty.setOutputs({});
  EXPECT_TRUE(verifies(empty));
  EXPECT_EQ(empty.function().getNumResults(), 0u);
}

TEST(Graph, GradientsAreBuiltIntoTheGraph) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "step");
  Tensor x = g.input("x", {4, 3});
  Tensor w = g.parameter("w", {3, 2}, Initializer::glorotUniform());
  Tensor unused = g.parameter("unused", {5}, Initializer::zeros());
  Tensor loss = mean(reduceSum(tanh(matmul(x, w)), {1}), {0});
  std::vector<Tensor> grads = g.gradients(loss, {w, unused});
  ASSERT_EQ(grads.size(), 2u);
  EXPECT_EQ(grads[0].type(), w.type());
  EXPECT_EQ(grads[1].type(), unused.type());
  g.setOutputs({loss, grads[0], grads[1]});
  EXPECT_TRUE(verifies(g)) << print(g.module());

  // A non-scalar loss: the autodiff message at this line, and nothing left half-built.
  Graph h(ctx, "bad");
  Tensor v = h.input("v", {3});
  size_t ops = h.function().getBody().front().getOperations().size();
  int line = __LINE__ + 1;
  std::string message = errorOf([&] { h.gradients(exp(v), {v}); });
  expectMessage(message, site(line), {"autodiff needs a rank-0 float loss", "tensor<3xf32>"});
  EXPECT_EQ(h.function().getBody().front().getOperations().size(), ops + 1) << "only the exp";
}

} // namespace
} // namespace smelt::frontend_test

namespace smelt::frontend_test {
namespace {

TEST(Graph, DeviceScopesMarkTheOpsTheyCreate) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "scoped");
  Tensor x = g.input("x", {4});
  Tensor outside = exp(x);
  Tensor inner, between;
  Tensor onGpu = g.onDevice("gpu:0", [&] {
    Tensor y = neg(x);
    inner = g.onDevice("cpu:0", [&] { return abs(y); });
    between = tanh(y);
    return y;
  });
  auto device = [](Tensor t) {
    auto attr = t.value().getDefiningOp()->getAttrOfType<mlir::StringAttr>("smelt.device");
    return attr ? attr.str() : std::string("(none)");
  };
  EXPECT_EQ(device(outside), "(none)");
  EXPECT_EQ(device(onGpu), "gpu:0");
  EXPECT_EQ(device(inner), "cpu:0");
  EXPECT_EQ(device(between), "gpu:0") << "the inner scope ends where it was opened";
  EXPECT_EQ(device(log(x)), "(none)") << "and so does the outer one";
  // A scope is left when its body throws, too.
  EXPECT_THROW(g.onDevice("gpu:0", [&] { return matmul(x, x); }), BuildError);
  EXPECT_EQ(device(sqrt(x)), "(none)");
}

} // namespace
} // namespace smelt::frontend_test
