// Helpers of the CUDA back-end tests: modules parsed from .mlir text with their fusions and
// kernel entries, ptxas run on NVRTC's PTX, and the fusion cases every test shares (rendering
// checks, NVRTC + ptxas, GPU numerics) through CudaCorpus.h.
#pragma once

#include "CudaCorpus.h"

#include "codegen/cuda/CudaCodegen.h"
#include "ir/SmeltDialect.h"
#include "runtime/HostTensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <gtest/gtest.h>

#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace smelt::cuda_test {

/// A module parsed from text, its @main and the kernel entries of main's kernel ops (its
/// fusions, named "main_fusion<N>" as buildExecutable names them, then the argmax and
/// scatter_add ops placed on a GPU, "main_argmax<N>").
struct ParsedModule {
  std::unique_ptr<mlir::MLIRContext> context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp main;
  std::vector<FusionOp> fusions;
  std::vector<mlir::Operation *> kernelOps; // the fusions first: kernels[i] is kernelOps[i]'s
  std::vector<rt::FusedKernel> kernels;
};

/// Parses and verifies `text`; a failure is a test failure carrying MLIR's diagnostics, and
/// leaves `main` null.
ParsedModule parseModule(const std::string &text);

/// The CUDA source of the module's fusions (filling the kernels' launches); printed to stderr
/// when SMELT_DUMP_CUDA is set.
std::string render(ParsedModule &parsed);

/// ptxas run on `ptx` for `arch` with `flags` ("-v"): whether it assembled, and what it printed.
/// ptxas is $SMELT_PTXAS, else the toolkit's; a missing ptxas is a test failure, never a
/// silent pass.
struct PtxasRun {
  bool ok = false;
  std::string output;
};
PtxasRun runPtxas(const std::string &ptx, const std::string &arch, const std::string &flags = "");

/// What ptxas says about `ptx` for `arch`: "" when it assembles.
std::string ptxasErrors(const std::string &ptx, const std::string &arch = "sm_90");

/// A random input of `c` (its range, and its fraction of special floats), fresh each call.
rt::HostTensor caseInput(const FusionCase &c, rt::DType dtype, llvm::ArrayRef<int64_t> shape);

/// A device's fused result (a GPU's, the SIMT emulator's) against the CPU's: NaN, infinities,
/// integers and i1 exactly; the finite floats by relative norm within docs/ops.md's "GPU
/// numerics" tolerance, with room for fused f16/bf16 rounding only at the end.
void expectDeviceResultMatches(const rt::HostTensor &got, const rt::HostTensor &ref,
                               const std::string &what);

} // namespace smelt::cuda_test
