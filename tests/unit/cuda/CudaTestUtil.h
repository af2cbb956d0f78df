// Helpers of the CUDA back-end tests: modules parsed from .mlir text with their fusions and
// kernel entries, ptxas run on NVRTC's PTX, and the fusion cases every test shares (rendering
// checks, NVRTC + ptxas, GPU numerics).
#pragma once

#include "codegen/cuda/CudaCodegen.h"
#include "ir/SmeltDialect.h"

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

/// A module parsed from text, its @main and the kernel entries of main's fusions (named
/// "main_fusion<N>", as buildExecutable names them).
struct ParsedModule {
  std::unique_ptr<mlir::MLIRContext> context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp main;
  std::vector<FusionOp> fusions;
  std::vector<rt::FusedKernel> kernels;
};

/// Parses and verifies `text`; a failure is a test failure carrying MLIR's diagnostics, and
/// leaves `main` null.
ParsedModule parseModule(const std::string &text);

/// The CUDA source of the module's fusions (filling the kernels' launches); printed to stderr
/// when SMELT_DUMP_CUDA is set.
std::string render(ParsedModule &parsed);

/// What ptxas says about `ptx` for `arch`: "" when it assembles. ptxas is $SMELT_PTXAS, else
/// the toolkit's; a missing ptxas is a test failure, never a silent pass.
std::string ptxasErrors(const std::string &ptx, const std::string &arch = "sm_90");

/// A fusion the tests render, compile and run: a module whose @main holds smelt.fusion ops.
/// Inputs for the GPU check are drawn in [lo, hi] at least `minMagnitude` from zero (integers
/// rounded), except that a fraction `specials` of float elements is NaN, +-inf, +-3e9 or zero.
struct FusionCase {
  const char *name;
  const char *mlir;
  double lo = -2, hi = 2, minMagnitude = 0.05;
  double specials = 0;
};
const std::vector<FusionCase> &fusionCases();
/// Names a case in test listings (ctest shows a parameter's printout).
inline void PrintTo(const FusionCase &c, std::ostream *os) { *os << c.name; }

} // namespace smelt::cuda_test
