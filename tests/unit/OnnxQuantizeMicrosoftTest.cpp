// com.microsoft's quantized ops of ONNX Runtime's QOperator format (frontend/onnx/QuantizeOps.cpp):
// one-node models of that domain against each op's float op on the dequantized inputs,
// quantized, on fresh random inputs.
#include "OnnxQuantizeTestUtil.h"

#include <fmt/format.h>

#include <functional>

namespace smelt::test {
namespace {

TEST(OnnxQuantize, MicrosoftQuantizedOpsQuantizeTheirFloatOps) {
  // com.microsoft's ops of ONNX Runtime's QOperator format, per tensor: each against its float
  // op on the dequantized inputs, quantized. Add, Mul, Concat and QGemm compute exactly as the
  // reference (exact equality); Sigmoid, Softmax and the average pool go through exp, a
  // division or a mean, which may round a last bit apart and so move a value sitting on a
  // rounding boundary by one level (at most 1 in 50 here).
  SCOPED_TRACE(fmt::format("SMELT_TEST_SEED={}", rngSeed()));
  int u8 = TensorProto::UINT8;
  Ints shape = {2, 3, 4};
  Values a = integers(24, u8), b = integers(4, u8);
  float sa = float(draw(0.01, 0.05, 0)), sb = float(draw(0.01, 0.05, 0)),
        sy = float(draw(0.02, 0.1, 0));
  double za = std::floor(draw(0, 256, 0)), zb = std::floor(draw(0, 256, 0)),
         zy = std::floor(draw(64, 192, 0));
  auto dq = [](double q, double z, float s) { return float(q - z) * s; };
  struct Case {
    const char *op;
    std::vector<std::string> inputs;
    bool exact;
    std::function<Values()> reference;
    std::function<void(NodeModel &)> extra = {};
  };
  auto elementwise = [&](auto f) {
    Values want;
    for (size_t i = 0; i < a.size(); ++i)
      want.push_back(quantizeRef(f(dq(a[i], za, sa), dq(b[i % 4], zb, sb)), sy, zy, u8));
    return want;
  };
  std::vector<Case> cases = {
      {"QLinearAdd",
       {"a", "sa", "za", "b", "sb", "zb", "sy", "zy"},
       true,
       [&] { return elementwise([](float x, float y) { return x + y; }); }},
      {"QLinearMul",
       {"a", "sa", "za", "b", "sb", "zb", "sy", "zy"},
       true,
       [&] { return elementwise([](float x, float y) { return x * y; }); }},
      {"QLinearLeakyRelu",
       {"a", "sa", "za", "sy", "zy"},
       true,
       [&] { return elementwise([](float x, float) { return x < 0 ? x * 0.25f : x; }); },
       [](NodeModel &m) { addFloats(*m.node, "alpha", {0.25}, true); }},
      {"QLinearSigmoid",
       {"a", "sa", "za", "sy", "zy"},
       false,
       [&] { return elementwise([&](float x, float) { return 1.0f / (1.0f + std::exp(-x)); }); }},
      {"QLinearConcat",
       {"sy", "zy", "a", "sa", "za", "a", "sb", "zb"},
       true,
       [&] {
         Values want;
         for (int64_t o = 0; o < 2; ++o)
           for (int part = 0; part < 2; ++part)
             for (int64_t k = 0; k < 12; ++k) {
               double q = a[size_t(o * 12 + k)];
               want.push_back(quantizeRef(part ? dq(q, zb, sb) : dq(q, za, sa), sy, zy, u8));
             }
         return want;
       },
       [](NodeModel &m) { addInt(*m.node, "axis", 1); }},
      {"QLinearSoftmax",
       {"a", "sa", "za", "sy", "zy"},
       false,
       [&] {
         Values want;
         for (size_t row = 0; row < 6; ++row) {
           float top = -INFINITY, sum = 0;
           for (size_t k = 0; k < 4; ++k)
             top = std::max(top, dq(a[row * 4 + k], za, sa));
           for (size_t k = 0; k < 4; ++k)
             sum += std::exp(dq(a[row * 4 + k], za, sa) - top);
           for (size_t k = 0; k < 4; ++k)
             want.push_back(
                 quantizeRef(std::exp(dq(a[row * 4 + k], za, sa) - top) / sum, 1.0f / 256, 0, u8));
         }
         return want;
       },
       [](NodeModel &m) { addInt(*m.node, "opset", 13); }},
      {"QLinearGlobalAveragePool",
       {"a", "sa", "za", "sy", "zy"},
       false,
       [&] {
         Values want; // [2, 3, 4] is N, C and one spatial axis
         for (size_t p = 0; p < 6; ++p) {
           float sum = 0;
           for (size_t k = 0; k < 4; ++k)
             sum += dq(a[p * 4 + k], za, sa);
           want.push_back(quantizeRef(sum / 4, sy, zy, u8));
         }
         return want;
       }},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.op);
    NodeModel m(c.op, 13, c.inputs, {"y"});
    m.node->set_domain("com.microsoft");
    auto *opset = m.model.add_opset_import();
    opset->set_domain("com.microsoft");
    opset->set_version(1);
    m.input("a", shape, u8);
    bool hasB = std::find(c.inputs.begin(), c.inputs.end(), "b") != c.inputs.end();
    if (hasB)
      addTyped(m.graph, "b", {4}, b, u8);
    bool softmax = std::string(c.op) == "QLinearSoftmax";
    addInitializer(m.graph, "sa", {}, {sa}, TensorProto::FLOAT);
    addInitializer(m.graph, "sb", {}, {sb}, TensorProto::FLOAT);
    addInitializer(m.graph, "sy", {}, {softmax ? 1.0 / 256 : sy}, TensorProto::FLOAT);
    addTyped(m.graph, "za", {}, {za}, u8);
    addTyped(m.graph, "zb", {}, {zb}, u8);
    addTyped(m.graph, "zy", {}, {softmax ? 0.0 : zy}, u8);
    if (c.extra)
      c.extra(m);
    std::vector<rt::HostTensor> out = m.run({tensorOf(DType::i32, shape, a)});
    ASSERT_EQ(out.size(), 1u);
    Values got = out[0].toDoubles(), want = c.reference();
    ASSERT_EQ(got.size(), want.size());
    if (c.exact) {
      EXPECT_EQ(got, want);
      continue;
    }
    int off = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_LE(std::abs(got[i] - want[i]), 1) << "element " << i;
      off += got[i] != want[i];
    }
    EXPECT_LE(off * 50, int(got.size()) + 49) << off << " of " << got.size() << " one level off";
  }

  // QGemm: A [3, 5] times B^T (B [4, 5] int8, per-row scales: B's columns after transB), plus
  // an INT32 bias at a_scale * b_scale, quantized.
  Values qa = integers(15, u8), qb = integers(20, TensorProto::INT8),
         bias = integers(4, TensorProto::INT8);
  Values sbs;
  for (int i = 0; i < 4; ++i)
    sbs.push_back(double(float(draw(0.01, 0.05, 0))));
  NodeModel m("QGemm", 13, {"a", "sa", "za", "b", "sb", "zb", "c", "sy", "zy"}, {"y"});
  m.node->set_domain("com.microsoft");
  addInt(*m.node, "transB", 1);
  auto *opset = m.model.add_opset_import();
  opset->set_domain("com.microsoft");
  opset->set_version(1);
  m.input("a", {3, 5}, u8);
  addInitializer(m.graph, "sa", {}, {sa}, TensorProto::FLOAT);
  addTyped(m.graph, "za", {}, {za}, u8);
  addTyped(m.graph, "b", {4, 5}, qb, TensorProto::INT8);
  addInitializer(m.graph, "sb", {4}, sbs, TensorProto::FLOAT);
  addTyped(m.graph, "zb", {4}, {0, 0, 0, 0}, TensorProto::INT8);
  addTyped(m.graph, "c", {4}, bias, TensorProto::INT32);
  addInitializer(m.graph, "sy", {}, {sy}, TensorProto::FLOAT);
  addTyped(m.graph, "zy", {}, {zy}, u8);
  std::vector<rt::HostTensor> out = m.run({tensorOf(DType::i32, {3, 5}, qa)});
  ASSERT_EQ(out.size(), 1u);
  Values want;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      double sum = 0; // exact: products of dequantized 8-bit values, summed in double
      for (int k = 0; k < 5; ++k)
        sum += double(dq(qa[size_t(i * 5 + k)], za, sa)) *
               double(float(qb[size_t(j * 5 + k)]) * float(sbs[size_t(j)]));
      float y = float(sum) + float(bias[size_t(j)]) * (sa * float(sbs[size_t(j)]));
      want.push_back(quantizeRef(y, sy, zy, u8));
    }
  Values got = out[0].toDoubles();
  int off = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LE(std::abs(got[i] - want[i]), 1) << "element " << i;
    off += got[i] != want[i];
  }
  EXPECT_LE(off, 1) << "QGemm: " << off << " of 12 one level off";
}

} // namespace
} // namespace smelt::test
