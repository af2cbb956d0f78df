// CPU library kernels: each op family prepares a closure once per step (checking the step's
// parameters and types, building oneDNN primitives), which the executor then calls every run.
// Elementwise, shape and reduce ops are not here: codegen compiles them, fused or one per kernel.
#pragma once

#include "runtime/Executable.h"
#include "runtime/Status.h"

#include <functional>
#include <string>
#include <vector>

namespace smelt::rt::cpu {

/// Runs one step: operand pointers in step order, then the result pointer.
using Kernel = std::function<void(const void *const *operands, void *result)>;

/// The types a step reads and writes, looked up from the Executable's buffers, and the bytes
/// of each operand that is one of the Executable's constants (nullptr for the others): they
/// never change, so a kernel may lay them out its own way once, when it is prepared.
struct StepTypes {
  std::vector<TensorType> operands;
  TensorType result;
  std::vector<const void *> constants;
  const void *constant(size_t operand) const {
    return operand < constants.size() ? constants[operand] : nullptr;
  }
};

/// "'matmul' (model.mlir:4:10)": how messages name a step.
std::string describe(const Step &step);

// Each family prepares the steps of its ops (StepFamily::prepareCpu, StepOps.h calls them);
// the step's parameters are of the op's kind (validateDataflow checked them).
Expected<Kernel> prepareDataMovement(const Step &step, const StepTypes &types); // slice ... copy
Expected<Kernel> prepareArgmax(const Step &step, const StepTypes &types);
Expected<Kernel> prepareScatterAdd(const Step &step, const StepTypes &types);
Expected<Kernel> prepareContraction(const Step &step, const StepTypes &types);
Expected<Kernel> preparePooling(const Step &step, const StepTypes &types);

/// An error unless `values` (parameter `name` of `step`) has `count` entries.
Status expectCount(const Step &step, const char *name, const std::vector<int64_t> &values,
                   size_t count);

} // namespace smelt::rt::cpu
