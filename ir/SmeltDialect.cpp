// Registration of the smelt dialect and its constant materializer.
#include "ir/SmeltDialect.h"

#include "ir/SmeltDialect.cpp.inc"
#include "ir/SmeltEnums.cpp.inc"
#include "ir/SmeltInterfaces.cpp.inc"

namespace smelt {

void SmeltDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/SmeltOps.cpp.inc"
      >();
}

mlir::Operation *SmeltDialect::materializeConstant(mlir::OpBuilder &builder,
                                                   mlir::Attribute value, mlir::Type type,
                                                   mlir::Location loc) {
  auto elements = llvm::dyn_cast<mlir::ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}

} // namespace smelt
