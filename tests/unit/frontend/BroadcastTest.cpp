// NumPy broadcasting in the builder: explicit smelt.broadcast_in_dim ops, inserted only where
// a shape differs, with the dims NumPy's right alignment gives; scalars take the tensor's dtype.
#include "FrontendTesting.h"

namespace smelt::frontend_test {
namespace {

/// The broadcast_in_dim ops of `g` as "<operand type> dims [..] -> <result type>".
std::vector<std::string> broadcasts(Graph &g) {
  std::vector<std::string> out;
  g.function().walk([&](mlir::Operation *op) {
    if (op->getName().getStringRef() != "smelt.broadcast_in_dim")
      return;
    auto dims = op->getAttrOfType<mlir::DenseI64ArrayAttr>("broadcast_dimensions");
    std::string d;
    for (int64_t v : dims.asArrayRef())
      d += (d.empty() ? "" : ", ") + std::to_string(v);
    out.push_back(print(op->getOperand(0).getType()) + " dims [" + d + "] -> " +
                  print(op->getResult(0).getType()));
  });
  return out;
}

TEST(Broadcast, ColumnPlusRow) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor sum = g.input("a", {3, 1}) + g.input("b", {4});
  EXPECT_EQ(sum.shape(), (Shape{3, 4}));
  g.setOutputs({sum});
  ASSERT_TRUE(verifies(g)) << print(g.module());
  EXPECT_EQ(broadcasts(g), (std::vector<std::string>{
                               "tensor<3x1xf32> dims [0, 1] -> tensor<3x4xf32>",
                               "tensor<4xf32> dims [1] -> tensor<3x4xf32>"}));
}

TEST(Broadcast, ScalarTensorToMatrix) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor s = g.input("s", {}), m = g.input("m", {2, 3});
  Tensor y = s + m;
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  g.setOutputs({y});
  ASSERT_TRUE(verifies(g));
  EXPECT_EQ(broadcasts(g),
            (std::vector<std::string>{"tensor<f32> dims [] -> tensor<2x3xf32>"}));
}

TEST(Broadcast, BothSidesStretch) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor y = g.input("a", {5, 1, 3}) * g.input("b", {4, 1});
  EXPECT_EQ(y.shape(), (Shape{5, 4, 3}));
  g.setOutputs({y});
  ASSERT_TRUE(verifies(g));
  EXPECT_EQ(broadcasts(g), (std::vector<std::string>{
                               "tensor<5x1x3xf32> dims [0, 1, 2] -> tensor<5x4x3xf32>",
                               "tensor<4x1xf32> dims [1, 2] -> tensor<5x4x3xf32>"}));
}

TEST(Broadcast, EqualShapesNeedNoBroadcast) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor a = g.input("a", {2, 3}), b = g.input("b", {2, 3});
  Tensor p = g.input("p", {2, 3}, DType::i1);
  g.setOutputs({a + b, a - b, a * b, a / b, maximum(a, b), minimum(a, b), pow(a, b),
                compare(a, b, CompareDirection::ge), select(p, a, b)});
  ASSERT_TRUE(verifies(g));
  EXPECT_EQ(countOps(g.module(), "smelt.broadcast_in_dim"), 0) << print(g.module());
}

TEST(Broadcast, EveryBroadcastingOpBroadcasts) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor a = g.input("a", {3, 1}), b = g.input("b", {4});
  Tensor p = g.input("p", {3, 4}, DType::i1);
  std::vector<Tensor> outs = {a - b, a / b, maximum(a, b), minimum(a, b), pow(a, b),
                              compare(a, b, CompareDirection::eq), select(p, a, b)};
  for (const Tensor &t : outs)
    EXPECT_EQ(t.shape(), (Shape{3, 4}));
  EXPECT_EQ(outs[5].dtype(), DType::i1);
  // select broadcasts its predicate too.
  EXPECT_EQ(select(g.input("q", {4}, DType::i1), a, b).shape(), (Shape{3, 4}));
  g.setOutputs(outs);
  ASSERT_TRUE(verifies(g)) << print(g.module());
}

TEST(Broadcast, ScalarsTakeTheTensorsDType) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor h = g.input("h", {2, 2}, DType::bf16), i = g.input("i", {3}, DType::i64);
  std::vector<Tensor> outs = {h + 1.0, 2.0 * h, h / 4.0, 1.0 - h, i * 3.0, -i, 10.0 / i};
  for (const Tensor &t : outs)
    EXPECT_EQ(t.dtype(), t.rank() == 2 ? DType::bf16 : DType::i64);
  g.setOutputs(outs);
  ASSERT_TRUE(verifies(g)) << print(g.module());
  std::string ir = print(g.module());
  EXPECT_NE(ir.find("smelt.constant dense<1.000000e+00> : tensor<bf16>"), std::string::npos)
      << ir;
  EXPECT_NE(ir.find("smelt.constant dense<3> : tensor<i64>"), std::string::npos) << ir;
  // Each scalar is a rank-0 constant broadcast to the tensor's shape: no full-size literal.
  EXPECT_EQ(countOps(g.module(), "smelt.constant"), 6);
  EXPECT_EQ(countOps(g.module(), "smelt.broadcast_in_dim"), 6);
}

TEST(Broadcast, ExplicitBroadcastHelpers) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor v = g.input("v", {3});
  EXPECT_EQ(broadcastTo(v, {2, 3}).shape(), (Shape{2, 3}));
  EXPECT_EQ(broadcastTo(v, {3}).value(), v.value()) << "no op for the same shape";
  EXPECT_EQ(broadcastInDim(v, {3, 5}, {0}).shape(), (Shape{3, 5}));
  g.setOutputs({});
  EXPECT_TRUE(verifies(g));
}

} // namespace
} // namespace smelt::frontend_test
