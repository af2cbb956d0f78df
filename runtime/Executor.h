// Runs an Executable on the devices smelt-place-devices gave its steps: what the tools, the
// trainer and AOT runs use. It runs the schedule the compiler fixed (Executable::segments,
// codegen/PlanSchedule.h): each segment, a run of consecutive steps on one device, is an
// Executable of its own run by that device's executor (CpuExecutor for cpu:0, the GPU executor
// for gpu:N, made by ExecutorOptions::gpuRunner). The copy steps placement put at device
// boundaries become the segments' inputs and outputs. An Executable on one device with no
// copies (every CPU-only compile) is its single segment, unchanged, so the CPU path is exactly
// CpuExecutor.
//
// Values are host tensors or arrays on a device (runtime/DeviceArray.h). What a GPU segment
// computes stays on its GPU when a later segment there reads it or the caller keeps it
// (RunValues), and comes to the host only for a CPU segment or the caller; a training loop that
// keeps its state on the GPU and donates it back moves only its batch and its loss.
// lastRunTransfers() counts the bytes and the host's waits.
#pragma once

#include "runtime/Collectives.h"
#include "runtime/DeviceArray.h"
#include "runtime/Executable.h"
#include "runtime/HostTensor.h"
#include "runtime/Status.h"
#include "runtime/Trace.h"
#include "runtime/Transfers.h"

#include <functional>
#include <initializer_list>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace smelt::rt {

/// One segment's executor, whatever the device: CpuExecutor, or rt::cuda::GpuExecutor (and
/// Executor, which runs them all, has the same interface).
class SegmentRunner {
public:
  virtual ~SegmentRunner() = default;
  /// Inputs in the segment's argument order; replaces `outputs` with its results.
  virtual Status run(const std::vector<const HostTensor *> &inputs,
                     std::vector<HostTensor> &outputs) = 0;
  Status run(const std::vector<HostTensor> &inputs, std::vector<HostTensor> &outputs) {
    return run(pointersTo(inputs), outputs);
  }
  /// `run({&a, &b}, outputs)`: a braced list of pointers, which with two of them would also
  /// read as a vector<HostTensor> made from an iterator pair.
  Status run(std::initializer_list<const HostTensor *> inputs, std::vector<HostTensor> &outputs) {
    return run(std::vector<const HostTensor *>(inputs), outputs);
  }
  /// The same with values that may stay on the segment's device (Executor::run below).
  virtual Status run(const std::vector<Value *> &inputs, std::vector<Value> &outputs,
                     const RunValues &residency) = 0;
  /// The most bytes its buffers held at once in the last run.
  virtual uint64_t lastRunPeakBytes() const = 0;
  /// What the last run copied between host and device and how often it waited for one.
  virtual TransferStats lastRunTransfers() const = 0;
};

struct ExecutorOptions;
/// Makes the runner of a segment placed on `device` ("gpu:N").
using SegmentRunnerFactory = std::function<Expected<std::unique_ptr<SegmentRunner>>(
    const Executable &segment, const std::string &device, const ExecutorOptions &options)>;

struct ExecutorOptions {
  /// The CPU segments' steps become spans (CpuExecutor::setTrace), each GPU segment one span.
  Trace *trace = nullptr;
  /// The replica group all_reduce steps reduce over and replica_id reads (null: alone).
  Communicator *communicator = nullptr;
  /// f32 matmuls and convolutions on a GPU may use TF32 tensor cores.
  bool allowTf32 = false;
  /// A GPU segment's runs after its first queue their steps as one CUDA graph, replayed while
  /// the buffers' addresses repeat (runtime/cuda/GpuGraphs.cpp).
  bool cudaGraphs = true;
  /// Runs GPU segments: rt::cuda::gpuSegmentRunner where the build has the GPU executor.
  /// Without one, an Executable with steps on a GPU is an error at create.
  SegmentRunnerFactory gpuRunner;
};

class Executor final : public SegmentRunner {
public:
  /// Checks the dataflow of the whole Executable, cuts it into segments and makes each one's
  /// runner (which checks its steps); errors name the step, and the device for a GPU segment.
  static Expected<std::unique_ptr<Executor>> create(const Executable &executable,
                                                    ExecutorOptions options = {});

  /// Runs with `inputs` in argument order (each checked against the expected type) and
  /// replaces `outputs` with the results. A failing segment fails the run with its message;
  /// the executor stays usable. On one segment, tensors already in `outputs` are reused as
  /// CpuExecutor::run and GpuExecutor::run reuse them.
  Status run(const std::vector<const HostTensor *> &inputs,
             std::vector<HostTensor> &outputs) override;
  using SegmentRunner::run;

  /// The same with values that may stay on devices (runtime/DeviceArray.h), as a training
  /// loop keeps its parameters and optimizer state on a GPU between steps: inputs are host
  /// tensors or arrays, donated where `residency` says; outputs `residency` keeps stay on the
  /// device that computed them (a value returned twice: at its last place; host copies before
  /// it). A CPU segment gets host copies of the arrays it reads. Donated inputs go to the one
  /// segment that reads them, unless the caller also gets them back.
  Status run(const std::vector<Value *> &inputs, std::vector<Value> &outputs,
             const RunValues &residency) override;

  const Executable &executable() const { return *executable_; }
  /// The devices of the segments in run order: {"cpu:0"}, {"gpu:0", "cpu:0", "gpu:0"}.
  std::vector<std::string> segmentDevices() const;
  /// The most bytes one segment's buffers held at once in the last run.
  uint64_t lastRunPeakBytes() const override;
  /// What the last run copied between host and device and how often it waited for a GPU, all
  /// segments together; zero when every step ran on the CPU.
  TransferStats lastRunTransfers() const override;

  /// A segment of the schedule as it runs: its device, how many steps, and its runner.
  struct SegmentRun {
    std::string device;
    size_t steps = 0;
    /// The whole Executable's buffers its inputs and outputs are, in their order.
    std::vector<BufferId> reads, writes;
    std::unique_ptr<SegmentRunner> runner;
  };

private:
  std::shared_ptr<const Executable> executable_;
  ExecutorOptions options_;
  std::vector<SegmentRun> segments_;
  /// The one segment is the whole Executable: runs go straight to its runner.
  bool whole_ = false;
  /// Per buffer of the whole Executable: the buffer whose value it is (a copy's operand's,
  /// followed through chains of copies), and, for the constants that are outputs, their value.
  std::vector<BufferId> valueOf_;
  std::vector<Value> constants_;
  std::vector<BufferId> constantOutputs_;
  /// Per buffer: which input it is (-1: none), how many segments read it, and whether the
  /// caller gets it back; per segment,
  /// the values of it that a later segment on the same device reads (they stay there).
  std::vector<int64_t> inputIndex_;
  std::vector<int> readers_;
  std::vector<char> returned_;
  std::vector<std::set<BufferId>> readOnDevice_;
  /// During a run: each buffer's value, the segment outputs that hold them, and host copies
  /// of the device arrays CPU segments read.
  std::vector<Value *> values_;
  std::vector<Value> produced_, onHost_;
  TransferStats lastRunTransfers_;
};

/// The runner of a segment on the CPU: a CpuExecutor with the options' trace and communicator
/// (`device` is not read). Also what tests run GPU segments with where there is no GPU.
Expected<std::unique_ptr<SegmentRunner>> cpuSegmentRunner(const Executable &segment,
                                                         const std::string &device,
                                                         const ExecutorOptions &options);

/// `executable` with its steps on device `from` moved to `to`: a data-parallel replica's copy
/// of a step compiled for gpu:0, run on its own GPU.
Executable movedToDevice(Executable executable, const std::string &from, const std::string &to);
/// `executable` with every step and segment on cpu:0: an artifact compiled for a GPU run where
/// there is none (its CPU code covers every step). Its segments stay as compiled, each now a
/// CPU segment, so their buffers still go back where the schedule says.
Executable movedToCpu(Executable executable);

/// Segment `k` of `exe`'s schedule as an Executable of its own, which its device's executor
/// runs: its reads become its inputs and its writes its outputs, in their order, the constants
/// it reads its own, its buffers numbered afresh. Errors where the schedule does not fit the
/// steps (a step reads what the segment neither reads nor computes).
Expected<Executable> segmentExecutable(const Executable &exe, size_t k);

} // namespace smelt::rt
