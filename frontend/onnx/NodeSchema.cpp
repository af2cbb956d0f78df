// A node checked against ONNX's own schema of its op (libonnx's OpSchemaRegistry, the one
// onnx.checker reads): input and output counts and attribute names. The converters read what
// they know and would otherwise ignore an extra input or an unknown attribute, importing a model
// that ONNX Runtime and onnx.checker refuse as if it were another.
#include "frontend/onnx/NodeImporter.h"

#include "onnx/defs/schema.h"

#include <limits>

namespace smelt::onnx {

/// The newest opset of the default domain libonnx has schemas for. A model of a newer opset is
/// not checked: the schema of an older version would refuse inputs and attributes added since.
static int64_t newestKnownOpset() {
  static const int64_t newest = ::onnx::OpSchemaRegistry::DomainToVersionRange::Instance()
                                    .Map()
                                    .at(::onnx::ONNX_DOMAIN)
                                    .second;
  return newest;
}

void checkAgainstSchema(const ::onnx::NodeProto &node, int64_t opset) {
  if (opset > newestKnownOpset())
    return;
  const ::onnx::OpSchema *schema =
      ::onnx::OpSchemaRegistry::Schema(node.op_type(), int(opset), ::onnx::ONNX_DOMAIN);
  if (!schema)
    return; // no such op in this opset: the converter table says so
  auto count = [schema](int n, int min, int max, const char *what) {
    if (n >= min && n <= max)
      return;
    std::string takes = min == max                   ? std::to_string(min)
                        : max == std::numeric_limits<int>::max() ? "at least " + std::to_string(min)
                                                     : std::to_string(min) + " to " +
                                                           std::to_string(max);
    fail(ImportErrorKind::BadFile, "has " + std::to_string(n) + " " + what +
                                       "; the op (its opset " +
                                       std::to_string(schema->since_version()) +
                                       " version) takes " + takes);
  };
  count(node.input_size(), schema->min_input(), schema->max_input(), "inputs");
  count(node.output_size(), schema->min_output(), schema->max_output(), "outputs");
  for (const ::onnx::AttributeProto &a : node.attribute())
    if (!schema->attributes().count(a.name()))
      fail(ImportErrorKind::BadFile,
           "attribute '" + a.name() + "' is not one of the op's (opset " +
               std::to_string(schema->since_version()) + " version)");
}

} // namespace smelt::onnx
