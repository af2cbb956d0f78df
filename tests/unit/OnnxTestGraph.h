// Building ONNX graphs in tests with ONNX's protobuf classes, as an exporter writes them: float
// initializers, typed graph inputs and outputs, nodes. OnnxTrainingTest and OnnxWindow3dTest
// write their models with these.
#pragma once

#include "onnx/onnx_pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace smelt::test {

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

} // namespace smelt::test
