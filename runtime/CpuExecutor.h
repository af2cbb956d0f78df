// Runs an Executable on the CPU: validates it once, prepares one kernel per step, then runs
// the steps in order over buffers it keeps between runs. Fused kernels (steps "fusion") call
// the JIT-compiled code in Executable::cpu, large ones split over the process's thread pool.
#pragma once

#include "runtime/Executable.h"
#include "runtime/HostTensor.h"
#include "runtime/Status.h"

#include <functional>
#include <memory>
#include <vector>

namespace smelt::rt {

class CpuExecutor {
public:
  /// Checks the Executable (buffer ids, one producer per buffer before use, constants' sizes,
  /// each step's op, operands and attributes; for fusion steps the kernel, its CPU code and its
  /// buffer counts) and prepares its kernels. Errors name the step and buffer.
  static Expected<CpuExecutor> create(const Executable &executable);

  /// Runs with `inputs` in argument order (each checked against the expected type) and
  /// replaces `outputs` with the results.
  Status run(const std::vector<const HostTensor *> &inputs, std::vector<HostTensor> &outputs);
  Status run(const std::vector<HostTensor> &inputs, std::vector<HostTensor> &outputs);

  const Executable &executable() const { return *executable_; }
  /// Wall time of each step in the last run, in microseconds.
  const std::vector<double> &lastStepMicros() const { return stepMicros_; }

private:
  /// Runs one step on its buffers' addresses: operands, then results.
  using Kernel = std::function<void(void *const *buffers)>;
  std::shared_ptr<const Executable> executable_;
  std::vector<Kernel> kernels_;
  /// Storage of every buffer that is not an input; inputs point at the caller's tensors.
  std::vector<HostTensor> storage_;
  std::vector<double> stepMicros_;
};

} // namespace smelt::rt
