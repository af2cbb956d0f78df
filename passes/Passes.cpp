// The default pipeline, as a numbered script: each step and why it is there.
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/Passes.h"

namespace smelt {

void buildDefaultPipeline(mlir::OpPassManager &pm, const PipelineOptions &options) {
  // 1. Fold identity converts/reshapes/broadcasts and constants the builder left behind.
  pm.addPass(mlir::createCanonicalizerPass());
  // 2. Merge identical subgraphs (the same broadcast of a bias built twice, say).
  pm.addPass(mlir::createCSEPass());
  // 3. Give every op a device (soft fallback to the CPU) and copy values between devices,
  //    before fusion, which keeps each kernel on one device.
  pm.addPass(createPlaceDevices(PlaceDevicesOptions{options.devices, options.defaultDevice,
                                                    options.noGpuReason, options.strictPlacement,
                                                    options.logDevicePlacement}));
  // 3b. Convolutions on a GPU read their filter as cuDNN's KRSC and pad symmetrically: the
  //     transposes and pads become ops of their own, which fusion then merges or folds.
  pm.addPass(createGpuConvLayouts());
  // 4. Fold bias adds and activations into the matmul or conv2d library calls before them,
  //    then group elementwise chains, broadcasts and reductions into kernels (smelt.fusion);
  //    without fusion, each such op becomes a kernel of its own (codegen compiles only kernels
  //    and library calls). After autodiff, which the builder ran: a folded op has no gradient.
  pm.addPass(createFuse(FuseOptions{options.fusionReport, /*oneOpPerKernel=*/!options.fuse,
                                    options.epilogues, options.convEpilogues}));
  // 5. Fusion bodies copy constants and broadcasts: merge the copies inside each kernel.
  if (options.fuse)
    pm.addPass(mlir::createCSEPass());
  // 6. Combine a data-parallel step's all_reduces into buckets, each started as soon as its
  //    gradients exist. Last, because it places collectives by where their producers ended up.
  pm.addPass(createBucketAllReduce(BucketAllReduceOptions{options.allReduceBucketBytes}));
  // 7. On a GPU and the CPU: host steps hoisted above the device's work or sunk to their first
  //    user, so that they cut the device's work into as few segments as they can.
  pm.addNestedPass<mlir::func::FuncOp>(createGroupHostSteps());
  // 8. On one GPU: a donated argument's new value written into its buffer (in place), decided
  //    now that the steps' order, and so each argument's last reader, is final.
  pm.addNestedPass<mlir::func::FuncOp>(createDonateInPlace());
  // 9. Peak bytes per device, from the final order of the steps: known before anything runs.
  pm.addNestedPass<mlir::func::FuncOp>(createAssignBuffers());
}

} // namespace smelt
