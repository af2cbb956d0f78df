// CPU kernels: each op family prepares a closure once per step (checking the step's attributes
// and types, building oneDNN primitives), which the executor then calls every run.
#pragma once

#include "runtime/Executable.h"
#include "runtime/Status.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace smelt::rt::cpu {

/// Runs one step: operand pointers in step order, then the result pointer.
using Kernel = std::function<void(const void *const *operands, void *result)>;

/// The types a step reads and writes, looked up from the Executable's buffers.
struct StepTypes {
  std::vector<TensorType> operands;
  TensorType result;
};

/// Reads a step's attributes, remembering the first missing or mistyped one so a kernel's
/// prepare function checks everything and reports once.
class AttrReader {
public:
  explicit AttrReader(const Step &step) : step_(step) {}
  int64_t integer(const std::string &name);
  double real(const std::string &name);
  std::string keyword(const std::string &name);
  /// An integer list; with `count`, one of exactly that many values (a rank-0 operand's list
  /// must be empty). On error it returns `count` ones so callers can index it safely.
  std::vector<int64_t> ints(const std::string &name, std::optional<size_t> count = std::nullopt);
  Status status() const { return error_.empty() ? Status() : Status::error(error_); }

private:
  template <typename T> const T *get(const std::string &name, const char *kind);
  const Step &step_;
  std::string error_;
};

/// "'matmul' (model.mlir:4:10)": how messages name a step.
std::string describe(const Step &step);

Expected<Kernel> prepareElementwise(const Step &step, const StepTypes &types);
Expected<Kernel> prepareShape(const Step &step, const StepTypes &types);
Expected<Kernel> prepareReduce(const Step &step, const StepTypes &types);
Expected<Kernel> prepareRandom(const Step &step, const StepTypes &types);
Expected<Kernel> prepareContraction(const Step &step, const StepTypes &types);
Expected<Kernel> preparePooling(const Step &step, const StepTypes &types);

/// Picks the family of `step.op` and prepares it; an unknown op is an error naming it.
Expected<Kernel> prepareKernel(const Step &step, const StepTypes &types);

} // namespace smelt::rt::cpu
