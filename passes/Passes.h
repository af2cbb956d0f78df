// Smelt's passes (declared in Passes.td, one file each) and the default pipeline, the numbered
// script in Passes.cpp.
#pragma once

#include "ir/SmeltDialect.h"

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include <optional>

namespace smelt {

/// Keras' precision policies (smelt-mixed-precision).
enum class PrecisionPolicy { f32, mixed_bf16, mixed_f16 };
/// "f32", "mixed_bf16", "mixed_f16".
std::optional<PrecisionPolicy> parsePrecisionPolicy(llvm::StringRef name);
llvm::StringRef precisionPolicyName(PrecisionPolicy policy);

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Choices of the default pipeline.
struct PipelineOptions {
  /// Devices that exist ("cpu:0,gpu:0"), and why there is no GPU when there is none; the
  /// tools fill both from the runtime's device discovery.
  std::string devices = "cpu:0";
  std::string noGpuReason;
  /// Where ops without a device scope go ("" for gpu:0 when it exists, else cpu:0).
  std::string defaultDevice;
  /// Placement: fail instead of falling back to the CPU; print every op's device.
  bool strictPlacement = false;
  bool logDevicePlacement = false;
  /// Form smelt.fusion kernels (smelt-fuse); off, every op runs as its own step.
  bool fuse = true;
  /// With fusion, fold bias adds and activations into the matmuls and conv2ds before them
  /// (oneDNN post-ops, cuBLASLt epilogues: passes/Epilogues.h).
  bool epilogues = true;
  /// And into conv2ds on the CPU (oneDNN post-ops, as for matmul).
  bool convEpilogues = true;
  /// Where smelt-fuse writes its decisions ("" for nowhere, "-" for stdout).
  std::string fusionReport;
  /// The most bytes smelt-bucket-all-reduce puts in one collective.
  int64_t allReduceBucketBytes = 4 << 20;
};

/// Appends the default compile pipeline, run on a module before codegen.
void buildDefaultPipeline(mlir::OpPassManager &pm, const PipelineOptions &options = {});

} // namespace smelt
