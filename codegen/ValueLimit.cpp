// No value larger than every device's memory: the walk over a function's values (ValueLimit.h).
#include "codegen/ValueLimit.h"

#include "ir/TensorSize.h"
#include "runtime/Allocator.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

namespace smelt::codegen {

DeviceLimit largestDeviceLimit(const std::vector<rt::LogicalDevice> &devices,
                               llvm::StringRef names) {
  llvm::SmallVector<llvm::StringRef> named;
  names.split(named, ',');
  DeviceLimit largest;
  for (const rt::LogicalDevice &device : devices) {
    if (!llvm::is_contained(named, device.info.name))
      continue;
    uint64_t bytes = device.policy.heldBytes(device.info.memoryBytes);
    if (bytes > largest.bytes)
      largest = {bytes, device.info.name};
  }
  return largest;
}

mlir::LogicalResult checkValuesFit(mlir::func::FuncOp function, const rt::Executable &exe,
                                   const DeviceLimit &limit) {
  auto pastLimit = [&](const rt::BufferInfo &buffer) {
    return buffer.type.byteSize() > limit.bytes;
  };
  if (limit.bytes == 0 || llvm::any_of(exe.buffers, pastLimit))
    return mlir::success();
  mlir::WalkResult walk = function.walk([&](mlir::Operation *op) {
    for (mlir::Type type : op->getResultTypes())
      if (std::optional<int64_t> bytes = tensorBytes(type);
          bytes && uint64_t(*bytes) > limit.bytes) {
        op->emitOpError() << "computes " << type << " (" << rt::formatBytes(uint64_t(*bytes))
                          << "), more than the memory limit of any device (" << limit.device << ": "
                          << rt::formatBytes(limit.bytes)
                          << "); a value that large is refused even where a fusion would not "
                             "store it";
        return mlir::WalkResult::interrupt();
      }
    return mlir::WalkResult::advance();
  });
  return mlir::failure(walk.wasInterrupted());
}

} // namespace smelt::codegen
