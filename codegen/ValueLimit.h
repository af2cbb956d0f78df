// The check that no value a function computes is larger than the memory limit of every device
// it may run on, fused values included: the tools' (`smelt run`, `smelt bench`) and the
// Trainer's (the C++ builder, `smelt train`) compiles make it.
#pragma once

#include "runtime/DeviceMemory.h"
#include "runtime/Executable.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>
#include <vector>

namespace smelt::codegen {

/// The largest memory limit among `devices` (as their allocators would hold it) of those
/// named in `names` ("cpu:0,gpu:0", smelt-place-devices' list), and the device that has it;
/// 0 bytes when none is named or none has a known size.
struct DeviceLimit {
  uint64_t bytes = 0;
  std::string device;
};
DeviceLimit largestDeviceLimit(const std::vector<rt::LogicalDevice> &devices,
                               llvm::StringRef names);

/// Success when every value `function` computes (op results, fusion bodies included) fits
/// `limit`; else an error at the first op computing a larger one, naming its type, its size
/// and the limit. A fused value is never stored, so no buffer check sees it, but a value that
/// large could not run unfused and runs for minutes fused (an rng of 1e11 elements summed to a
/// scalar): it is refused as a buffer that large is. `exe` is what `function` compiled to: a
/// buffer of it past the limit is left to the executor, which names it (also success); so is
/// an unknown limit.
mlir::LogicalResult checkValuesFit(mlir::func::FuncOp function, const rt::Executable &exe,
                                   const DeviceLimit &limit);

} // namespace smelt::codegen
