// floatSplatConstant: follows broadcast_in_dim and reshape to a constant.
#include "ir/SplatConstant.h"

#include "ir/SmeltDialect.h"

#include "mlir/IR/BuiltinAttributes.h"

namespace smelt {

std::optional<double> floatSplatConstant(mlir::Value value) {
  mlir::Operation *def = value.getDefiningOp();
  while (def && mlir::isa<BroadcastInDimOp, ReshapeOp>(def))
    def = def->getOperand(0).getDefiningOp();
  auto constant = mlir::dyn_cast_or_null<ConstantOp>(def);
  auto splat = constant ? mlir::dyn_cast<mlir::SplatElementsAttr>(constant.getValue()) : nullptr;
  if (!splat || !mlir::isa<mlir::FloatType>(splat.getElementType()))
    return std::nullopt;
  return splat.getSplatValue<llvm::APFloat>().convertToDouble();
}

} // namespace smelt
