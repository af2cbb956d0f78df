// Location text (LocationText.h).
#include "ir/LocationText.h"

#include "mlir/IR/BuiltinAttributes.h"

namespace smelt {

std::string locationText(mlir::Location loc, bool column) {
  std::string text;
  loc->walk([&](mlir::Location inner) {
    if (auto file = mlir::dyn_cast<mlir::FileLineColLoc>(inner)) {
      text = file.getFilename().str() + ":" + std::to_string(file.getLine());
      if (column)
        text += ":" + std::to_string(file.getColumn());
    } else if (auto name = mlir::dyn_cast<mlir::NameLoc>(inner)) {
      text = name.getName().str();
    } else {
      return mlir::WalkResult::advance();
    }
    return mlir::WalkResult::interrupt();
  });
  return text;
}

std::string opAndLocation(mlir::Operation *op) {
  std::string text = "'" + op->getName().stripDialect().str() + "'";
  if (std::string where = locationText(op->getLoc(), /*column=*/false); !where.empty())
    text += " at " + where;
  return text;
}

} // namespace smelt
