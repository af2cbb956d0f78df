// Runs an Executable on the CPU: validates it once, prepares one kernel per step, then runs
// the steps in order over buffers it keeps between runs. Fused kernels (steps "fusion") call
// the JIT-compiled code in Executable::cpu, large ones split over the process's thread pool.
// With a Trace set, each run's steps become spans and its memory counter samples.
#pragma once

#include "runtime/CollectiveSteps.h"
#include "runtime/Executable.h"
#include "runtime/HostTensor.h"
#include "runtime/Status.h"
#include "runtime/StepCost.h"
#include "runtime/Trace.h"

#include <functional>
#include <memory>
#include <vector>

namespace smelt::rt {

class CpuExecutor {
public:
  /// Checks the Executable (buffer ids, one producer per buffer before use, constants' sizes,
  /// each step's op, operands and attributes; for fusion steps the kernel, its CPU code and its
  /// buffer counts) and prepares its kernels. Errors name the step and buffer. With `trace`,
  /// the allocation of every buffer is a span and a memory counter sample, as setTrace.
  static Expected<CpuExecutor> create(const Executable &executable, Trace *trace = nullptr);

  /// Records into `trace` (null: stop): every step of each run as a span on cpu:0's stream
  /// with its StepCost args, the run and its output copies as spans, and the bytes the
  /// executor holds ("in use", "peak") as a counter. The trace must outlive the runs; without
  /// one a run only reads the clock around each step.
  void setTrace(Trace *trace);

  /// The replica group this executor's all_reduce steps reduce over, and whose rank its
  /// replica_id steps return (null: the function runs alone). It must outlive the runs.
  void setCommunicator(Communicator *communicator) { communicator_ = communicator; }

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
  /// One per step; null for collective steps, which collectives_ runs.
  std::vector<Kernel> kernels_;
  CollectiveSteps collectives_;
  Communicator *communicator_ = nullptr;
  /// Storage of every buffer that is not an input; inputs point at the caller's tensors.
  std::vector<HostTensor> storage_;
  std::vector<double> stepMicros_;
  Trace *trace_ = nullptr;
  /// Each step's name, kind and args, computed once when a trace is set.
  std::vector<StepCost> costs_;
  std::vector<std::map<std::string, std::string>> spanArgs_;
  double storageBytes_ = 0, peakBytes_ = 0;
  void recordMemory(double inUse);
  /// Waits for the all_reduces step `step` reads (steps.size(): all still running), as a
  /// span when tracing.
  Status waitForCollectives(size_t step);
};

} // namespace smelt::rt
