// The two roofs `smelt bench` measures each step against, once per invocation: the copy
// bandwidth of this machine (a large memcpy) and its f32 GEMM rate (a large matmul compiled and
// run through the same compiler and executor as the model). A step's roofline time is the
// larger of bytes / bandwidth and FLOPs / GEMM rate; its percentage is that over its time.
#pragma once

#include "runtime/Status.h"
#include "runtime/StepCost.h"

#include "mlir/IR/MLIRContext.h"

#include <string>

namespace smelt::tools {

struct Roofline {
  double copyBytesPerSecond = 0; // read + written, as StepCost::bytes counts them
  double gemmFlopsPerSecond = 0;
  std::string copyWhat, gemmWhat; // "memcpy of 128 MiB", "1024x1024x1024 f32 matmul"

  /// 100 * roofline time / `micros`; 0 when there is nothing to compare.
  double percent(const rt::StepCost &cost, double micros) const;
};

/// Measures both roofs; the GEMM is compiled in `context`. Errors name what failed.
rt::Expected<Roofline> measureRoofline(mlir::MLIRContext &context);

} // namespace smelt::tools
