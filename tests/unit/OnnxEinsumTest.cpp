// ONNX's Einsum (frontend/onnx/EinsumOp.cpp) as NumPy reads its equation: one-node models
// written with ONNX's protobuf classes, imported, compiled and run on the CPU, against loops
// written out for each equation on fresh random inputs: ellipses that broadcast (a size of 1
// against any, operands of different ranks), the implicit output with an ellipsis, diagonals
// and traces, and the equations an ellipsis makes invalid.
#include "OnnxTestGraph.h"
#include "TestUtil.h"

#include "runtime/CpuExecutor.h"

#include <functional>

namespace smelt::test {
namespace {

using Ints = std::vector<int64_t>;
using Values = std::vector<double>;

struct EinsumModel : TempModelFile {
  EinsumModel(const std::string &equation, const std::vector<Ints> &shapes)
      : TempModelFile("smelt-einsum") {
    ::onnx::ModelProto model;
    ::onnx::GraphProto &graph = startModel(model, 12, "einsum");
    std::vector<std::string> names;
    for (size_t i = 0; i < shapes.size(); ++i) {
      names.push_back("x" + std::to_string(i));
      addValueInfo(*graph.mutable_input(), names.back(), shapes[i], ::onnx::TensorProto::FLOAT);
    }
    graph.add_output()->set_name("y");
    addString(*addNode(graph, "Einsum", names, {"y"}), "equation", equation);
    write(model);
  }
};

/// The row-major offset of `index` in `shape`, a size-1 dimension read at 0 (broadcast).
int64_t at(const Ints &shape, const Ints &index) {
  int64_t offset = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    offset = offset * shape[d] + (shape[d] == 1 ? 0 : index[d]);
  return offset;
}

struct Case {
  std::string equation;
  std::vector<Ints> shapes;
  Ints output;
  /// The expected output from the inputs, as loops.
  std::function<Values(const std::vector<Values> &)> reference;
};

TEST(OnnxEinsum, EllipsesAndDiagonalsAsNumPyReadsThem) {
  std::vector<Case> cases = {
      // Batched matmul: [2, 1, 3, 4] x [5, 4, 6] -> [2, 5, 3, 6], the 1 broadcast.
      {"...ij,...jk->...ik",
       {{2, 1, 3, 4}, {5, 4, 6}},
       {2, 5, 3, 6},
       [](const std::vector<Values> &x) {
         Values y;
         for (int64_t a = 0; a < 2; ++a)
           for (int64_t b = 0; b < 5; ++b)
             for (int64_t i = 0; i < 3; ++i)
               for (int64_t k = 0; k < 6; ++k) {
                 double s = 0;
                 for (int64_t j = 0; j < 4; ++j)
                   s += x[0][size_t(at({2, 1, 3, 4}, {a, b, i, j}))] *
                        x[1][size_t(at({5, 4, 6}, {b, j, k}))];
                 y.push_back(s);
               }
         return y;
       }},
      // The implicit output: the ellipsis, then the letters used once (none): [5, 4].
      {"i...,i...",
       {{3, 1, 4}, {3, 5, 1}},
       {5, 4},
       [](const std::vector<Values> &x) {
         Values y;
         for (int64_t b = 0; b < 5; ++b)
           for (int64_t c = 0; c < 4; ++c) {
             double s = 0;
             for (int64_t i = 0; i < 3; ++i)
               s += x[0][size_t(at({3, 1, 4}, {i, 0, c}))] * x[1][size_t(at({3, 5, 1}, {i, b, 0}))];
             y.push_back(s);
           }
         return y;
       }},
      // Diagonals: of a batch of matrices, and a trace in implicit form.
      {"...ii->...i",
       {{2, 3, 4, 4}},
       {2, 3, 4},
       [](const std::vector<Values> &x) {
         Values y;
         for (int64_t b = 0; b < 6; ++b)
           for (int64_t i = 0; i < 4; ++i)
             y.push_back(x[0][size_t(b * 16 + i * 5)]);
         return y;
       }},
      {"ii",
       {{5, 5}},
       {},
       [](const std::vector<Values> &x) {
         double s = 0;
         for (int64_t i = 0; i < 5; ++i)
           s += x[0][size_t(i * 6)];
         return Values{s};
       }},
      // A repeated index moved: y[j, i] = x[i, i, j].
      {"iij->ji",
       {{3, 3, 4}},
       {4, 3},
       [](const std::vector<Values> &x) {
         Values y;
         for (int64_t j = 0; j < 4; ++j)
           for (int64_t i = 0; i < 3; ++i)
             y.push_back(x[0][size_t((i * 3 + i) * 4 + j)]);
         return y;
       }},
      // Attention's scores, no ellipsis: as before.
      {"bhid,bhjd->bhij",
       {{2, 2, 3, 4}, {2, 2, 5, 4}},
       {2, 2, 3, 5},
       [](const std::vector<Values> &x) {
         Values y;
         for (int64_t bh = 0; bh < 4; ++bh)
           for (int64_t i = 0; i < 3; ++i)
             for (int64_t j = 0; j < 5; ++j) {
               double s = 0;
               for (int64_t d = 0; d < 4; ++d)
                 s += x[0][size_t((bh * 3 + i) * 4 + d)] * x[1][size_t((bh * 5 + j) * 4 + d)];
               y.push_back(s);
             }
         return y;
       }},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.equation + " (SMELT_TEST_SEED=" + std::to_string(rngSeed()) + ")");
    EinsumModel model(c.equation, c.shapes);
    std::optional<rt::CpuExecutor> cpu = compileOnnxFile(model.path);
    ASSERT_TRUE(cpu);
    std::vector<rt::HostTensor> inputs, outputs;
    std::vector<Values> values;
    for (const Ints &shape : c.shapes) {
      inputs.push_back(randomTensor(shape, DType::f32));
      values.push_back(inputs.back().toDoubles());
    }
    rt::Status s = cpu->run(inputs, outputs);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(outputs[0].type().shape, c.output);
    EXPECT_LE(relError(outputs[0].toDoubles(), c.reference(values)), 1e-6);
  }
}

TEST(OnnxEinsum, RefusesWhatAnEllipsisMakesInvalid) {
  auto importError = [](const std::string &equation, const std::vector<Ints> &shapes) {
    EinsumModel model(equation, shapes);
    return importErrorOf(model.path);
  };
  EXPECT_NE(importError("...i->i", {{2, 3}})
                .find("the output has no '...' for the inputs' ellipsis dimensions"),
            std::string::npos);
  EXPECT_NE(importError("...ij->...i", {{2}}).find("operand 0 has rank 1, fewer than its letters"),
            std::string::npos);
  EXPECT_NE(importError("...i,...i->...", {{2, 3}, {4, 3}}).find("has sizes 2 and 4"),
            std::string::npos);
  EXPECT_NE(importError("ij->i", {{2, 3}, {2, 3}}).find("names 1 operands, the node has 2"),
            std::string::npos);
}

} // namespace
} // namespace smelt::test
