// How messages, the fusion report, placement logs and an Executable's steps name where an op
// came from: the builder's ops carry the user's source line, an imported ONNX model's ops the
// name of their node.
#pragma once

#include "mlir/IR/Location.h"
#include "mlir/IR/Operation.h"

#include <string>

namespace smelt {

/// The first file or name location inside `loc`, walked from the outside in (a fused
/// location's first part): "file:line:col" (or "file:line" without `column`) or the name
/// ("/layer1/layer1.0/conv1/Conv"); "" when it holds neither.
std::string locationText(mlir::Location loc, bool column = true);

/// How messages name an op: "'add' at model.mlir:4", "'conv2d' at /4/conv1/Conv", or "'add'"
/// alone when its location holds neither.
std::string opAndLocation(mlir::Operation *op);

} // namespace smelt
