// Runs an Executable on the CPU: validates it once, prepares one kernel per step, then runs
// the steps in order. Fused kernels (steps "fusion") call the JIT-compiled code in
// Executable::cpu, large ones split over the process's threads. Buffers come from cpu:0's
// allocator (runtime/DeviceMemory.h) as a run reaches the step that writes them and go back
// after the last step that reads them, so a run holds only what is live (constants stay for
// the executor's life); running out of memory fails the run with a message naming the buffer,
// and the executor stays usable. With a Trace set, each run's steps become spans and its
// memory a counter.
#pragma once

#include "runtime/Allocator.h"
#include "runtime/CollectiveSteps.h"
#include "runtime/Executable.h"
#include "runtime/Executor.h"
#include "runtime/HostTensor.h"
#include "runtime/RunBuffers.h"
#include "runtime/Status.h"
#include "runtime/StepCost.h"
#include "runtime/Trace.h"

#include <functional>
#include <memory>
#include <vector>

namespace smelt::rt {

class CpuExecutor final : public SegmentRunner {
public:
  /// Checks the Executable (buffer ids, one producer per buffer before use, constants' sizes,
  /// each step's op, operands and attributes; for fusion steps the kernel, its CPU code and its
  /// buffer counts) and prepares its kernels. Errors name the step and buffer. With `trace`,
  /// the constants' upload is a span and memory is a counter, as setTrace. Buffers come from
  /// `allocator` (null: cpu:0's, made under the process's memory policy), which must outlive
  /// the executor.
  static Expected<CpuExecutor> create(const Executable &executable, Trace *trace = nullptr,
                                      Allocator *allocator = nullptr);

  /// Records into `trace` (null: stop): every step of each run as a span on cpu:0's stream
  /// with its StepCost args, the run and its output copies as spans, and the bytes the
  /// executor holds ("in use", "peak") as a counter. The trace must outlive the runs; without
  /// one a run only reads the clock around each step.
  void setTrace(Trace *trace);

  /// The replica group this executor's all_reduce steps reduce over, and whose rank its
  /// replica_id steps return (null: the function runs alone). It must outlive the runs.
  void setCommunicator(Communicator *communicator) { communicator_ = communicator; }

  /// Runs with `inputs` in argument order (each checked against the expected type) and
  /// replaces `outputs` with the results. A tensor already in `outputs[i]` with that output's
  /// type and no memory shared with an input is reused: the step that computes the output
  /// writes straight into it (reusableOutputs), so a loop that swaps its state with the
  /// outputs neither allocates nor copies them. After a failed run the tensors in `outputs`
  /// may be partly written or empty.
  Status run(const std::vector<const HostTensor *> &inputs,
             std::vector<HostTensor> &outputs) override;
  using SegmentRunner::run;
  /// The same with values, as Executor::run passes them: arrays among `inputs` are copied to
  /// the host, and outputs are host tensors (the ones already in `outputs` are reused).
  Status run(const std::vector<Value *> &inputs, std::vector<Value> &outputs,
             const RunValues &residency) override;

  const Executable &executable() const { return *executable_; }
  /// The most bytes this executor's buffers held at once in the last run (constants included,
  /// sizes as the allocator rounds them).
  uint64_t lastRunPeakBytes() const override { return buffers_.peakBytes(); }
  /// Nothing: the CPU's buffers are the host's.
  TransferStats lastRunTransfers() const override { return {}; }
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
  /// Each buffer's address: inputs at the caller's tensors during a run, constants in
  /// executable_'s bytes, the rest taken when their step comes and given back after the
  /// step the schedule says (Step::frees).
  RunBuffers buffers_;
  /// During a run: per buffer, the caller's output tensor its step writes into (else null).
  std::vector<HostTensor *> intoCaller_;
  std::vector<double> stepMicros_;
  Trace *trace_ = nullptr;
  /// Each step's name, kind and args, computed once when a trace is set.
  std::vector<StepCost> costs_;
  std::vector<std::map<std::string, std::string>> spanArgs_;
  uint64_t constantBytes_ = 0;
  double tracePeak_ = 0;
  void recordMemory(double inUse);
  Status allocateResults(const Step &step);
  /// Moves the results into `outputs`: the caller's tensors written in place, the others
  /// copied into reused tensors or fresh ones.
  Status collectOutputs(const std::vector<HostTensor *> &reusable,
                        std::vector<HostTensor> &outputs);
  /// Waits for the all_reduces step `step` reads (steps.size(): all still running), as a
  /// span when tracing.
  Status waitForCollectives(size_t step);
};

} // namespace smelt::rt
