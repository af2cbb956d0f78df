// Helpers of the ONNX quantization tests (OnnxQuantizeTest.cpp, OnnxQuantizeMicrosoftTest.cpp):
// one-node models with narrow integer initializers written as an exporter writes them, and the
// references' rounding and ranges.
#pragma once

#include "OnnxTestGraph.h"
#include "TestUtil.h"

#include "runtime/CpuExecutor.h"

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstring>
#include <optional>

namespace smelt::test {

using Ints = std::vector<int64_t>;
using Values = std::vector<double>;
using ::onnx::TensorProto;

inline std::pair<int64_t, int64_t> rangeOf(int type) {
  switch (type) {
  case TensorProto::INT8:
    return {-128, 127};
  case TensorProto::UINT8:
    return {0, 255};
  case TensorProto::INT16:
    return {-32768, 32767};
  default:
    return {0, 65535};
  }
}

/// Random integers of `type`'s range (or [lo, hi]).
inline Values integers(int64_t count, int type,
                       std::optional<std::pair<int64_t, int64_t>> within = {}) {
  auto [lo, hi] = within ? *within : rangeOf(type);
  Values v;
  for (int64_t i = 0; i < count; ++i)
    v.push_back(std::floor(draw(double(lo), double(hi) + 1, 0)));
  return v;
}

/// An initializer of `type`: FLOAT from float_data, narrow integers as their file bytes
/// (`raw`) or in int32_data, INT32 in int32_data.
inline void addTyped(::onnx::GraphProto &graph, const std::string &name, const Ints &dims,
                     const Values &values, int type, bool raw = true) {
  if (type == TensorProto::FLOAT)
    return addInitializer(graph, name, dims, values, type);
  TensorProto *t = graph.add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims)
    t->add_dims(d);
  size_t width = type == TensorProto::INT8 || type == TensorProto::UINT8 ? 1 : 2;
  if (!raw || type == TensorProto::INT32) {
    for (double v : values)
      t->add_int32_data(int32_t(v));
    return;
  }
  std::string bytes(values.size() * width, '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    int32_t v = int32_t(values[i]);
    std::memcpy(&bytes[i * width], &v, width); // little-endian: the low bytes
  }
  t->set_raw_data(bytes);
}

/// A one-node model: graph inputs (name, shape, ONNX type) fed at run time, initializers added
/// by the caller through `init`, the node's outputs the graph's.
struct NodeModel : TempModelFile {
  ::onnx::ModelProto model;
  ::onnx::GraphProto &graph;
  ::onnx::NodeProto *node;
  NodeModel(const std::string &op, int64_t opset, const std::vector<std::string> &inputs,
            const std::vector<std::string> &outputs)
      : TempModelFile("smelt-quantize"), graph(startModel(model, opset, "quantize")),
        node(addNode(graph, op, inputs, outputs)) {
    for (const std::string &out : outputs)
      graph.add_output()->set_name(out);
  }
  void input(const std::string &name, const Ints &shape, int type) {
    addValueInfo(*graph.mutable_input(), name, shape, type);
  }
  /// Writes the model, compiles it and runs it on `args`; the outputs.
  std::vector<rt::HostTensor> run(const std::vector<rt::HostTensor> &args) {
    write(model);
    std::vector<rt::HostTensor> outputs;
    std::optional<rt::CpuExecutor> cpu = compileOnnxFile(path);
    EXPECT_TRUE(cpu);
    if (!cpu)
      return outputs;
    rt::Status s = cpu->run(args, outputs);
    EXPECT_TRUE(s.ok()) << s.message();
    return outputs;
  }
  std::string importError() {
    write(model);
    return importErrorOf(path);
  }
};

inline rt::HostTensor tensorOf(DType dtype, const Ints &shape, const Values &v) {
  return rt::HostTensor::fromDoubles({dtype, shape}, v);
}

/// Rounds half to even (the default rounding mode's nearbyint).
inline double roundEven(double x) {
  EXPECT_EQ(std::fegetround(), FE_TONEAREST);
  return std::nearbyint(x);
}

/// The index of element `i` of a row-major `shape` along `axis`.
inline int64_t indexAlong(int64_t i, const Ints &shape, int64_t axis) {
  int64_t inner = elementCount(Ints(shape.begin() + axis + 1, shape.end()));
  return (i / inner) % shape[size_t(axis)];
}

/// f32 `v` quantized as ONNX Runtime's QuantizeLinear does (v / scale rounded half to even,
/// plus the zero point, saturated to `type`).
inline double quantizeRef(float v, float scale, double zeroPoint, int type) {
  auto [lo, hi] = rangeOf(type);
  return std::clamp(roundEven(v / scale) + zeroPoint, double(lo), double(hi));
}

} // namespace smelt::test
