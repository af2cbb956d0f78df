// A Graphviz picture of a compiled function: one node per op (name, result type, device
// colour), one cluster per smelt.fusion holding the ops of its kernel, edges along the data.
// `smelt dump` and --dump-dir write it as graph.dot (and graph.svg when `dot` is installed).
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>

namespace smelt::codegen {

std::string graphvizDot(mlir::func::FuncOp function);

} // namespace smelt::codegen
