// The smelt dialect: declarations generated from SmeltDialect.td and SmeltOps.td.
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ir/OpFacts.h"
#include "ir/TensorSize.h"
#include "ir/SmeltEnums.h.inc"

#include "ir/SmeltDialect.h.inc"
#include "ir/SmeltInterfaces.h.inc"

namespace smelt {

/// Checks that `values` (named `names` in messages) share one type and returns it as the result
/// type; the shared rule of every binary elementwise op.
llvm::LogicalResult inferSameTypes(std::optional<mlir::Location> location,
                                   llvm::StringRef opName,
                                   llvm::ArrayRef<llvm::StringRef> names, mlir::ValueRange values,
                                   llvm::SmallVectorImpl<mlir::Type> &types);

} // namespace smelt

#define GET_OP_CLASSES
#include "ir/SmeltOps.h.inc"
