// Building ONNX graphs in tests with ONNX's protobuf classes, as an exporter writes them: float
// initializers, typed graph inputs and outputs, nodes; and compiling such a file for the CPU.
// OnnxTrainingTest, OnnxWindow3dTest and OnnxRecurrentTest write their models with these.
#pragma once

#include "TestUtil.h"

#include "frontend/onnx/OnnxImport.h"

#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include <cstdint>
#include <string>
#include <vector>

#include <unistd.h>

namespace smelt::test {

/// A model file of this process's own in the temporary folder ("<stem>-<pid>.onnx"), removed
/// with the object: a test's model type derives from it and calls write() once it is built.
struct TempModelFile {
  std::string path;
  explicit TempModelFile(const std::string &stem)
      : path((std::filesystem::temp_directory_path() /
              (stem + "-" + std::to_string(::getpid()) + ".onnx"))
                 .string()) {}
  TempModelFile(const TempModelFile &) = delete;
  TempModelFile &operator=(const TempModelFile &) = delete;
  ~TempModelFile() { std::filesystem::remove(path); }
  void write(const ::onnx::ModelProto &model) const {
    std::ofstream out(path, std::ios::binary);
    model.SerializeToOstream(&out);
  }
};

/// `model`'s graph, named `name`, the model stating IR version 9 and `opset` of the default
/// domain.
inline ::onnx::GraphProto &startModel(::onnx::ModelProto &model, int64_t opset,
                                      const std::string &name) {
  model.set_ir_version(9);
  model.add_opset_import()->set_version(opset);
  ::onnx::GraphProto &graph = *model.mutable_graph();
  graph.set_name(name);
  return graph;
}

/// How many elements a tensor of `shape` holds.
inline int64_t elementCount(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// A float initializer of `elemType` (FLOAT or DOUBLE).
inline void addInitializer(::onnx::GraphProto &graph, const std::string &name,
                           const std::vector<int64_t> &dims, const std::vector<double> &values,
                           int elemType) {
  ::onnx::TensorProto *t = graph.add_initializer();
  t->set_name(name);
  t->set_data_type(elemType);
  for (int64_t d : dims)
    t->add_dims(d);
  for (double v : values)
    if (elemType == ::onnx::TensorProto::DOUBLE)
      t->add_double_data(v);
    else
      t->add_float_data(float(v));
}

/// An int64 initializer: a vector of `values`, or a scalar when `vector` is false.
inline void addInt64Initializer(::onnx::GraphProto &graph, const std::string &name,
                                const std::vector<int64_t> &values, bool vector = true) {
  ::onnx::TensorProto *t = graph.add_initializer();
  t->set_name(name);
  t->set_data_type(::onnx::TensorProto::INT64);
  if (vector)
    t->add_dims(int64_t(values.size()));
  for (int64_t v : values)
    t->add_int64_data(v);
}

/// A graph input or output; a dimension of -1 is the symbolic "batch".
inline void addValueInfo(google::protobuf::RepeatedPtrField<::onnx::ValueInfoProto> &into,
                         const std::string &name, const std::vector<int64_t> &dims, int elemType) {
  ::onnx::ValueInfoProto *info = into.Add();
  info->set_name(name);
  ::onnx::TypeProto_Tensor *type = info->mutable_type()->mutable_tensor_type();
  type->set_elem_type(elemType);
  for (int64_t d : dims) {
    ::onnx::TensorShapeProto_Dimension *dim = type->mutable_shape()->add_dim();
    if (d < 0)
      dim->set_dim_param("batch");
    else
      dim->set_dim_value(d);
  }
}

inline ::onnx::NodeProto *addNode(::onnx::GraphProto &graph, const std::string &op,
                                  const std::vector<std::string> &inputs,
                                  const std::vector<std::string> &outputs) {
  ::onnx::NodeProto *node = graph.add_node();
  node->set_op_type(op);
  for (const std::string &in : inputs)
    node->add_input(in);
  for (const std::string &out : outputs)
    node->add_output(out);
  return node;
}

/// Node attributes: an INT or INTS, a STRING or STRINGS, FLOATS (or one FLOAT with `single`).
inline ::onnx::AttributeProto &addAttribute(::onnx::NodeProto &node, const std::string &name,
                                            ::onnx::AttributeProto::AttributeType type) {
  ::onnx::AttributeProto *a = node.add_attribute();
  a->set_name(name);
  a->set_type(type);
  return *a;
}
inline void addInt(::onnx::NodeProto &node, const std::string &name, int64_t value) {
  addAttribute(node, name, ::onnx::AttributeProto::INT).set_i(value);
}
inline void addInts(::onnx::NodeProto &node, const std::string &name,
                    const std::vector<int64_t> &values) {
  ::onnx::AttributeProto &a = addAttribute(node, name, ::onnx::AttributeProto::INTS);
  for (int64_t v : values)
    a.add_ints(v);
}
inline void addString(::onnx::NodeProto &node, const std::string &name, const std::string &value) {
  addAttribute(node, name, ::onnx::AttributeProto::STRING).set_s(value);
}
inline void addStrings(::onnx::NodeProto &node, const std::string &name,
                       const std::vector<std::string> &values) {
  ::onnx::AttributeProto &a = addAttribute(node, name, ::onnx::AttributeProto::STRINGS);
  for (const std::string &v : values)
    a.add_strings(v);
}
inline void addFloats(::onnx::NodeProto &node, const std::string &name,
                      const std::vector<double> &values, bool single = false) {
  ::onnx::AttributeProto &a = addAttribute(
      node, name, single ? ::onnx::AttributeProto::FLOAT : ::onnx::AttributeProto::FLOATS);
  for (double v : values)
    if (single)
      a.set_f(float(v));
    else
      a.add_floats(float(v));
}

/// The model file at `path` imported with its initializers as constants (as `smelt run` takes
/// them) and compiled for the CPU; a failure is a test failure and gives none.
inline std::optional<rt::CpuExecutor> compileOnnxFile(const std::string &path) {
  mlir::MLIRContext context;
  codegen::loadDialects(context);
  onnx::ImportOptions options;
  options.initializersAsConstants = true;
  llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> module =
      onnx::importModel(path, options, context);
  EXPECT_TRUE(bool(module)) << (module ? "" : llvm::toString(module.takeError()));
  if (!module)
    return std::nullopt;
  return compileForCpu(**module, "main");
}

/// The import error of the model file at `path` ("" when it imports).
inline std::string importErrorOf(const std::string &path) {
  mlir::MLIRContext context;
  codegen::loadDialects(context);
  llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> module = onnx::importModel(path, {}, context);
  return module ? std::string() : llvm::toString(module.takeError());
}

} // namespace smelt::test
