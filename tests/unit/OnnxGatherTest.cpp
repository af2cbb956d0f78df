// ONNX's GatherND with batch_dims and ReverseSequence (frontend/onnx/GatherOps.cpp): one-node
// models written with ONNX's protobuf classes, imported, compiled and run on the CPU, against
// loops on fresh random data and indices (negative ones too) and sequence lengths from 0 to the
// whole sequence, in both layouts.
#include "OnnxTestGraph.h"
#include "TestUtil.h"

#include "runtime/CpuExecutor.h"

#include <fmt/format.h>

namespace smelt::test {
namespace {

using Ints = std::vector<int64_t>;
using Values = std::vector<double>;

/// `op` over graph inputs "x" (f32) and "i" (int64), output "y".
struct TwoInputModel : TempModelFile {
  TwoInputModel(const std::string &op, const Ints &xShape, const Ints &iShape,
                const std::function<void(::onnx::NodeProto &)> &attributes)
      : TempModelFile("smelt-gather") {
    ::onnx::ModelProto model;
    ::onnx::GraphProto &graph = startModel(model, 13, "gather");
    addValueInfo(*graph.mutable_input(), "x", xShape, ::onnx::TensorProto::FLOAT);
    addValueInfo(*graph.mutable_input(), "i", iShape, ::onnx::TensorProto::INT64);
    graph.add_output()->set_name("y");
    attributes(*addNode(graph, op, {"x", "i"}, {"y"}));
    write(model);
  }
};

Values runModel(const TwoInputModel &model, const rt::HostTensor &x, const rt::HostTensor &i) {
  std::optional<rt::CpuExecutor> cpu = compileOnnxFile(model.path);
  if (!cpu)
    return {};
  std::vector<rt::HostTensor> inputs = {x, i}, outputs;
  rt::Status s = cpu->run(inputs, outputs);
  EXPECT_TRUE(s.ok()) << s.message();
  return outputs.empty() ? Values{} : outputs[0].toDoubles();
}

int64_t drawIndex(int64_t size) { // in [-size, size)
  return std::min(int64_t(std::floor(draw(-double(size), double(size), 0))), size - 1);
}

// data [2, 3, 4, 5] with batch_dims 1 and 2: each batch item's tuples index its own data.
TEST(OnnxGather, GatherNdWithBatchDims) {
  Ints shape = {2, 3, 4, 5};
  for (int64_t b : {1, 2})
    for (int64_t k : {1, 2}) {
      if (b + k > 4)
        continue;
      SCOPED_TRACE(
          fmt::format("batch_dims {}, tuples of {} (SMELT_TEST_SEED={})", b, k, rngSeed()));
      Ints iShape(shape.begin(), shape.begin() + b);
      iShape.push_back(3); // tuples per item
      iShape.push_back(k);
      Values idx;
      for (int64_t u = 0; u < elementCount(iShape) / k; ++u)
        for (int64_t j = 0; j < k; ++j)
          idx.push_back(double(drawIndex(shape[size_t(b + j)])));
      rt::HostTensor x = randomTensor(shape, DType::f32);
      Values data = x.toDoubles(), want;
      int64_t items = elementCount(Ints(shape.begin(), shape.begin() + b)), slice = 1, perItem = 1;
      for (int64_t d = b + k; d < 4; ++d)
        slice *= shape[size_t(d)];
      for (int64_t d = b; d < 4; ++d)
        perItem *= shape[size_t(d)];
      for (int64_t item = 0; item < items; ++item)
        for (int64_t u = 0; u < 3; ++u) {
          int64_t offset = 0;
          for (int64_t j = 0; j < k; ++j) {
            int64_t size = shape[size_t(b + j)], v = int64_t(idx[size_t((item * 3 + u) * k + j)]);
            offset = offset * size + (v < 0 ? v + size : v);
          }
          for (int64_t e = 0; e < slice; ++e)
            want.push_back(data[size_t(item * perItem + offset * slice + e)]);
        }
      TwoInputModel model("GatherND", shape, iShape,
                          [&](::onnx::NodeProto &node) { addInt(node, "batch_dims", b); });
      Values got = runModel(model, x, rt::HostTensor::fromDoubles({DType::i64, iShape}, idx));
      EXPECT_EQ(got, want);
    }
}

TEST(OnnxGather, ReverseSequenceInBothLayouts) {
  const int64_t batch = 4, time = 6, width = 3;
  for (int64_t timeAxis : {0, 1}) {
    SCOPED_TRACE(fmt::format("time_axis {} (SMELT_TEST_SEED={})", timeAxis, rngSeed()));
    Ints shape = timeAxis == 0 ? Ints{time, batch, width} : Ints{batch, time, width};
    Values lens = {0, double(time), 1, std::floor(draw(2, double(time), 0))};
    rt::HostTensor x = randomTensor(shape, DType::f32);
    Values data = x.toDoubles(), want(data.size());
    auto offset = [&](int64_t b, int64_t t, int64_t c) {
      return size_t(((timeAxis == 0 ? t * batch + b : b * time + t) * width) + c);
    };
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < time; ++t)
        for (int64_t c = 0; c < width; ++c) {
          int64_t len = int64_t(lens[size_t(b)]), source = t < len ? len - 1 - t : t;
          want[offset(b, t, c)] = data[offset(b, source, c)];
        }
    TwoInputModel model("ReverseSequence", shape, {batch}, [&](::onnx::NodeProto &node) {
      addInt(node, "time_axis", timeAxis);
      addInt(node, "batch_axis", 1 - timeAxis);
    });
    EXPECT_EQ(runModel(model, x, rt::HostTensor::fromDoubles({DType::i64, {batch}}, lens)), want);
  }
}

} // namespace
} // namespace smelt::test
