// One builder function per smelt op: each makes the op the dialect expects, with the result
// type the dialect infers; axes may be negative; reshape takes one -1.
#include "FrontendTesting.h"

namespace smelt::frontend_test {
namespace {

class Ops : public ::testing::Test {
protected:
  /// `t` came from op `name` and has type `type`.
  void expectOp(Tensor t, llvm::StringRef name, const std::string &type) {
    mlir::Operation *op = t.value().getDefiningOp();
    ASSERT_TRUE(op);
    EXPECT_EQ(op->getName().getStringRef(), name);
    EXPECT_EQ(print(t.type()), type) << name.str();
    outputs.push_back(t);
  }
  void TearDown() override {
    g.setOutputs(outputs);
    EXPECT_TRUE(verifies(g)) << print(g.module());
  }

  mlir::MLIRContext ctx;
  Graph g{ctx, "ops"};
  Tensor x = g.input("x", {2, 3});
  std::vector<Tensor> outputs;
};

TEST_F(Ops, Sources) {
  expectOp(constant(g, 1.5), "smelt.constant", "tensor<f32>");
  expectOp(constant(g, {1, 2, 3, 4, 5, 6}, {2, 3}, DType::i32), "smelt.constant",
           "tensor<2x3xi32>");
  expectOp(constant(g, 0.0, {4}, DType::f16), "smelt.constant", "tensor<4xf16>");
  expectOp(constant(g, 1.0, {2}, DType::i1), "smelt.constant", "tensor<2xi1>");
  expectOp(iota(g, {2, 3}, -1), "smelt.iota", "tensor<2x3xi64>");
  EXPECT_EQ(outputs.back().value().getDefiningOp()->getAttrOfType<mlir::IntegerAttr>(
                "dimension").getInt(), 1);
  expectOp(rngUniform(g, {4, 5}, 7, -1.0, 1.0), "smelt.rng_uniform", "tensor<4x5xf32>");
  expectOp(rngNormal(g, {3}, 7, 0.0, 2.0, DType::f64), "smelt.rng_normal", "tensor<3xf64>");
  Tensor step = g.input("step", {}, DType::i64);
  expectOp(rngUniform(g, {2}, 1, 0.0, 1.0, DType::f32, step), "smelt.rng_uniform",
           "tensor<2xf32>");
  EXPECT_EQ(outputs.back().value().getDefiningOp()->getNumOperands(), 1u);
  std::string ir = print(g.module());
  EXPECT_NE(ir.find("dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>"), std::string::npos) << ir;
  EXPECT_NE(ir.find("dense<true> : tensor<2xi1>"), std::string::npos) << ir;
  EXPECT_NE(ir.find("seed = 7, low = -1.000000e+00, high = 1.000000e+00"), std::string::npos)
      << ir;
}

TEST_F(Ops, Unary) {
  using Fn = Tensor (*)(Tensor, Loc);
  std::pair<Fn, const char *> ops[] = {
      {neg, "smelt.neg"},       {abs, "smelt.abs"},   {relu, "smelt.relu"},
      {exp, "smelt.exp"},       {log, "smelt.log"},   {tanh, "smelt.tanh"},
      {logistic, "smelt.logistic"}, {sqrt, "smelt.sqrt"}, {rsqrt, "smelt.rsqrt"},
      {erf, "smelt.erf"},       {sin, "smelt.sin"},   {cos, "smelt.cos"}};
  for (auto [fn, name] : ops)
    expectOp(fn(x, Loc::current()), name, "tensor<2x3xf32>");
  Tensor i = g.input("i", {4}, DType::i32);
  expectOp(neg(i), "smelt.neg", "tensor<4xi32>");
  expectOp(abs(i), "smelt.abs", "tensor<4xi32>");
  expectOp(relu(i), "smelt.relu", "tensor<4xi32>");
}

TEST_F(Ops, BinaryCompareSelectConvert) {
  Tensor y = g.input("y", {2, 3});
  expectOp(add(x, y), "smelt.add", "tensor<2x3xf32>");
  expectOp(sub(x, y), "smelt.sub", "tensor<2x3xf32>");
  expectOp(mul(x, y), "smelt.mul", "tensor<2x3xf32>");
  expectOp(div(x, y), "smelt.div", "tensor<2x3xf32>");
  expectOp(maximum(x, y), "smelt.max", "tensor<2x3xf32>");
  expectOp(minimum(x, y), "smelt.min", "tensor<2x3xf32>");
  expectOp(pow(x, y), "smelt.pow", "tensor<2x3xf32>");
  for (CompareDirection d : {CompareDirection::eq, CompareDirection::ne, CompareDirection::lt,
                             CompareDirection::le, CompareDirection::gt, CompareDirection::ge})
    expectOp(compare(x, y, d), "smelt.compare", "tensor<2x3xi1>");
  expectOp(select(outputs.back(), x, y), "smelt.select", "tensor<2x3xf32>");
  expectOp(convert(x, DType::bf16), "smelt.convert", "tensor<2x3xbf16>");
  expectOp(convert(x, DType::i64), "smelt.convert", "tensor<2x3xi64>");
  EXPECT_EQ(convert(x, DType::f32).value(), x.value()) << "same dtype: no op";
  expectOp(scalarLike(outputs.back(), 2), "smelt.constant", "tensor<i64>");
}

TEST_F(Ops, Shape) {
  expectOp(broadcastInDim(x, {4, 2, 3}, {1, 2}), "smelt.broadcast_in_dim", "tensor<4x2x3xf32>");
  expectOp(reshape(x, {3, 2}), "smelt.reshape", "tensor<3x2xf32>");
  expectOp(reshape(x, {-1}), "smelt.reshape", "tensor<6xf32>");
  expectOp(reshape(x, {1, -1, 2}), "smelt.reshape", "tensor<1x3x2xf32>");
  EXPECT_EQ(reshape(x, {2, -1}).value(), x.value()) << "same shape: no op";
  expectOp(transpose(x, {1, 0}), "smelt.transpose", "tensor<3x2xf32>");
  expectOp(slice(x, {0, 1}, {2, 3}), "smelt.slice", "tensor<2x2xf32>");
  expectOp(slice(x, {0, 0}, {2, 3}, {1, 2}), "smelt.slice", "tensor<2x2xf32>");
  expectOp(concat({x, x, x}, -1), "smelt.concat", "tensor<2x9xf32>");
  expectOp(concat({x, x}, 0), "smelt.concat", "tensor<4x3xf32>");
  expectOp(pad(x, {1, 0}, {1, 2}, -1.0), "smelt.pad", "tensor<4x5xf32>");
}

TEST_F(Ops, Reductions) {
  Tensor t = g.input("t", {2, 3, 4});
  expectOp(reduceSum(t, {-1, 0}), "smelt.reduce", "tensor<3xf32>");
  auto axes = outputs.back().value().getDefiningOp()->getAttrOfType<mlir::DenseI64ArrayAttr>(
      "axes");
  EXPECT_EQ(axes.asArrayRef().vec(), (Shape{0, 2})) << "normalized and sorted";
  expectOp(reduceMax(t, {1}), "smelt.reduce", "tensor<2x4xf32>");
  expectOp(reduceMin(t, {0, 1, 2}), "smelt.reduce", "tensor<f32>");
  expectOp(argmax(t, -2), "smelt.argmax", "tensor<2x4xi64>");
  // mean = sum / count, the count a scalar of the dtype.
  Tensor m = mean(t, {1, 2});
  expectOp(m, "smelt.div", "tensor<2xf32>");
  std::string ir = print(g.module());
  EXPECT_NE(ir.find("dense<1.200000e+01> : tensor<f32>"), std::string::npos) << ir;
  EXPECT_NE(ir.find("smelt.reduce max"), std::string::npos) << ir;
}

TEST_F(Ops, GatherAndScatterAdd) {
  Tensor table = g.input("table", {10, 3, 4}, DType::bf16);
  Tensor ids = g.input("ids", {2, 5}, DType::i64);
  expectOp(gather(table, ids), "smelt.gather", "tensor<2x5x3x4xbf16>");
  Tensor updates = g.input("updates", {2, 5, 3, 4});
  expectOp(scatterAdd(updates, ids, 7), "smelt.scatter_add", "tensor<7x3x4xf32>");
  EXPECT_EQ(outputs.back().value().getDefiningOp()->getAttrOfType<mlir::IntegerAttr>("size").getInt(),
            7);
}

TEST_F(Ops, Contractions) {
  Tensor a = g.input("a", {5, 2, 3}), b = g.input("b", {5, 3, 4});
  expectOp(matmul(x, g.input("w", {3, 4})), "smelt.matmul", "tensor<2x4xf32>");
  expectOp(matmul(a, b), "smelt.matmul", "tensor<5x2x4xf32>");
  expectOp(matmul(x, x, true, false), "smelt.matmul", "tensor<3x3xf32>");
  expectOp(matmul(x, x, false, true), "smelt.matmul", "tensor<2x2xf32>");
  mlir::Operation *mm = outputs.back().value().getDefiningOp();
  EXPECT_TRUE(mm->hasAttr("transpose_rhs"));
  EXPECT_FALSE(mm->hasAttr("transpose_lhs"));

  Tensor img = g.input("img", {2, 8, 8, 3}), k = g.input("k", {3, 3, 3, 4});
  expectOp(conv2d(img, k), "smelt.conv2d", "tensor<2x6x6x4xf32>");
  expectOp(conv2d(img, k, {2, 2}, {1, 1, 1, 1}), "smelt.conv2d", "tensor<2x4x4x4xf32>");
  expectOp(conv2d(img, k, {1, 1}, {0, 0, 0, 0}, {2, 2}), "smelt.conv2d", "tensor<2x4x4x4xf32>");
  Tensor dy = g.input("dy", {2, 6, 6, 4});
  expectOp(conv2dBackwardInput(dy, k, {2, 8, 8, 3}, {1, 1}, {0, 0, 0, 0}),
           "smelt.conv2d_backward_input", "tensor<2x8x8x3xf32>");
  expectOp(conv2dBackwardFilter(img, dy, {3, 3, 3, 4}, {1, 1}, {0, 0, 0, 0}),
           "smelt.conv2d_backward_filter", "tensor<3x3x3x4xf32>");

  expectOp(maxPool2d(img, {2, 2}, {2, 2}), "smelt.max_pool2d", "tensor<2x4x4x3xf32>");
  expectOp(avgPool2d(img, {3, 3}, {1, 1}, {1, 1, 1, 1}), "smelt.avg_pool2d",
           "tensor<2x8x8x3xf32>");
  Tensor py = g.input("py", {2, 4, 4, 3});
  expectOp(maxPool2dBackward(img, py, {2, 2}, {2, 2}), "smelt.max_pool2d_backward",
           "tensor<2x8x8x3xf32>");
  expectOp(avgPool2dBackward(py, {2, 8, 8, 3}, {2, 2}, {2, 2}), "smelt.avg_pool2d_backward",
           "tensor<2x8x8x3xf32>");
}

} // namespace
} // namespace smelt::frontend_test
