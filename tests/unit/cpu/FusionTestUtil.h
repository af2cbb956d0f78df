// Helpers of the kernel tests: hand-written fused IR compiled twice, as written (its smelt.fusion
// ops JIT-compiled by the CPU back end) and unfused (each fusion's body inlined into the
// function, then each op made a kernel of its own, as the pipeline does without fusion), run on
// the same random inputs and compared; and single ops compiled as kernels of their own, which
// ElementwiseTest, ShapeTest and ReduceTest check against float64 references.
#pragma once

#include "RuntimeTestUtil.h"
#include "tests/unit/Tolerance.h"

#include <map>
#include <optional>

namespace smelt::rt::test {

/// "tensor<2x3xf32>" for shape {2, 3} and f32; "tensor<f32>" for rank 0.
std::string tensorType(const std::vector<int64_t> &shape, DType dtype);

/// `text` with every "${name}" replaced by vars.at(name).
std::string substitute(std::string text, const std::map<std::string, std::string> &vars);

struct Compiled {
  Executable fused;   // kernels compiled, in `cpu`
  Executable unfused; // one kernel per op
};

/// Parses `mlir` (a module with one function) and compiles it both ways, skipping the
/// pipeline. Failures are test failures that carry the diagnostics; they return nullopt.
std::optional<Compiled> compileBoth(const std::string &mlir);

/// Compiles `op` ("add", "reduce" ...) with `attrs` (keywords: compare directions and reduce
/// kinds) on operands of `inputs`' types as a kernel of its own (the default pipeline without
/// fusion) and runs it. Failures are test failures and give a zero tensor of `result`.
HostTensor runKernelOp(const std::string &op, const std::vector<HostTensor> &inputs,
                       const TensorType &result, const Attrs &attrs = {});

/// Runs `exe` on `inputs`; a failure is a test failure and returns no outputs.
std::vector<HostTensor> runExecutable(const Executable &exe, const std::vector<HostTensor> &inputs);

/// Expects `got` to match `ref`: the same type, NaNs and infinities in the same places, and the
/// finite rest within `tol` by relative norm.
void expectMatch(const HostTensor &got, const HostTensor &ref, double tol, const std::string &what);

/// Compiles `mlir` both ways, runs both on `inputs` and expects each result to match within
/// its dtype's tolerance. Returns the fused results (empty when something failed).
std::vector<HostTensor> expectFusedMatchesUnfused(const std::string &mlir,
                                                  const std::vector<HostTensor> &inputs,
                                                  const std::string &what = "");

/// Inputs of a model's training step `exe`: images in [0, 1), labels (and tokens) 0..9, step 1,
/// positive parameters and optimizer state (Adam's second moment must be).
std::vector<HostTensor> trainInputs(const Executable &exe);

/// Every dtype, and the float ones.
extern const DType kAllDTypes[7];
extern const DType kFloatDTypes[4];

} // namespace smelt::rt::test
