// Raw bytes of constants and constants from raw bytes (ConstantData.h).
#include "ir/ConstantData.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"

namespace smelt {

using namespace mlir;

std::optional<size_t> rawElementWidth(Type type) {
  unsigned bits = type.getIntOrFloatBitWidth();
  if (bits < 8 || bits % 8)
    return std::nullopt;
  return bits / 8;
}

std::optional<llvm::ArrayRef<char>> rawElementBytes(ElementsAttr value) {
  if (!rawElementWidth(value.getElementType()))
    return std::nullopt;
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return std::nullopt;
    return blob->getData();
  }
  if (auto dense = dyn_cast<DenseElementsAttr>(value); dense && !dense.isSplat())
    return dense.getRawData();
  return std::nullopt;
}

ElementsAttr elementsFromBytes(ShapedType type, std::vector<char> bytes) {
  if (bytes.size() <= kResourceBytes)
    return DenseElementsAttr::getFromRawBuffer(type, bytes);
  // The blob owns the vector's buffer: no copy. 8 bytes is the widest element's alignment,
  // which operator new gives.
  auto *owned = new std::vector<char>(std::move(bytes));
  AsmResourceBlob blob = UnmanagedAsmResourceBlob::allocateWithAlign(
      *owned, alignof(uint64_t), [owned](void *, size_t, size_t) { delete owned; });
  return DenseResourceElementsAttr::get(type, "smelt_folded", std::move(blob));
}

} // namespace smelt
