// The kernels the CUDA checks run, shared by NVRTC + ptxas (CorpusTest, CompileTest,
// ModelCorpusTest), the GPU numerics (GpuTest) and the SIMT emulator's corpus
// (tests/unit/simt): hand-written fusion cases, every op in every dtype, and the seed models'
// steps as the default pipeline fuses them. Adding a model step here adds it to all of them.
#pragma once

#include "passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <ostream>
#include <string>
#include <vector>

namespace smelt::cuda_test {

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

/// Every op that can sit in a fusion, in every dtype it accepts (and every layout a reduce can
/// get), each as its own fusion of @main; 5x7 shapes leave a vector tail everywhere.
struct OpCorpus {
  std::string mlir;
  int fusions = 0;
};
OpCorpus everyOpInEveryDtype();

/// A seed model's training and evaluation steps under a precision policy.
struct ModelCase {
  const char *model;
  PrecisionPolicy precision;
};
const std::vector<ModelCase> &modelCases();
/// "mlp_mixed_bf16": a name for test listings and symbols.
std::string modelCaseName(const ModelCase &c);
/// How GoogleTest prints a case (its listings' "GetParam() = ..."): by name, not its bytes.
inline void PrintTo(const ModelCase &c, std::ostream *os) { *os << modelCaseName(c); }
/// The case's steps after the default pipeline: the training step's module (@train_step and
/// @train_step_init), then the evaluation step's (@eval_step, at the training batch size).
/// Empty when the pipeline fails (the diagnostics went to the context's handler). `devices`
/// is the pipeline's device list ("cpu:0,gpu:0" places the steps on the GPU).
std::vector<mlir::OwningOpRef<mlir::ModuleOp>> fusedModelSteps(mlir::MLIRContext &context,
                                                               const ModelCase &c,
                                                               const std::string &devices = "");

} // namespace smelt::cuda_test
