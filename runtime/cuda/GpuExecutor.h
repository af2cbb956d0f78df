// Runs an Executable on one GPU, as CpuExecutor runs one on the CPU: validates it once (no GPU
// needed for that: validate()), loads its fused kernels' CUDA module and takes a workspace, then
// queues the steps in order on the device's one stream. Fusion steps launch the NVRTC kernels,
// matmul goes to cuBLASLt, convolutions and pooling to cuDNN, copy and reshape are device
// copies. Buffers come from the GPU's caching allocator as a run reaches the step that writes
// them and go back after the last step that reads them; since everything runs on one stream,
// a freed block handed to a later writer is safe without waiting (Allocator.h).
//
// all_reduce steps reduce on the executor's communicator: NCCL on this GPU's memory (on the
// executor's stream, and inside its CUDA graphs), or a host one (threads, MPI) through a host
// copy. Every step must run on the GPU: rt::Executor
// (runtime/Executor.h) cuts a placed Executable into the segments each device runs, and gives
// and gets host tensors, staged here through one pinned buffer.
#pragma once

#include "runtime/Allocator.h"
#include "runtime/Collectives.h"
#include "runtime/DeviceArray.h"
#include "runtime/Executable.h"
#include "runtime/Executor.h"
#include "runtime/HostTensor.h"
#include "runtime/RunBuffers.h"
#include "runtime/Status.h"
#include "runtime/Transfers.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/GpuSteps.h"

#include <functional>
#include <memory>
#include <vector>

namespace smelt::rt::cuda {

class GpuExecutor final : public SegmentRunner {
public:
  /// Everything create() checks without a GPU: the dataflow (as CpuExecutor), that each step
  /// has a GPU kernel, its operands and attributes (CublasLt::validate, Cudnn::validate), and
  /// for fusion steps the kernel, its launch and its buffer counts. Errors name the step:
  /// "'matmul' (model.mlir:4:5): ...".
  static Status validate(const Executable &executable, bool allowTf32 = false);

  /// validate(), then loads the CUDA module (CUBIN when built for the device's arch and the
  /// driver takes it, else PTX through the driver's JIT), uploads the constants and takes one
  /// workspace as large as any step needs. Buffers come from `allocator` (null: "gpu:<ordinal>"'s,
  /// which is this device unless gpu:0 is split into logical GPUs), which must outlive the
  /// executor. `allowTf32`: f32 matmuls and convolutions may use TF32 tensor cores.
  /// `cudaGraphs`: runs after the first queue their steps as a CUDA graph (GpuGraphs.cpp).
  static Expected<GpuExecutor> create(const Executable &executable,
                                      std::shared_ptr<CudaDevice> device,
                                      Allocator *allocator = nullptr, bool allowTf32 = false,
                                      bool cudaGraphs = true);

  /// Runs with `inputs` in argument order (each checked against the expected type) and replaces
  /// `outputs` with the results; returns once they are on the host. Tensors already in
  /// `outputs` that fit are filled rather than fresh ones made, as CpuExecutor::run. A failure
  /// (out of memory: the allocator's message, naming the buffer) frees what the run took; the
  /// executor stays usable. Work is asynchronous on the GPU, so there are no per-step times
  /// (use a profiler).
  Status run(const std::vector<const HostTensor *> &inputs,
             std::vector<HostTensor> &outputs) override;
  using SegmentRunner::run;

  /// The same with values that may stay on the GPU (runtime/DeviceArray.h): an input that is
  /// an array on this GPU is read where it is (no copy), and taken over when `residency`
  /// donates it; one on another device comes through the host. Outputs `residency` keeps
  /// come back as arrays on this GPU, the rest as host tensors (into the caller's where they
  /// fit). A run whose outputs all stay never waits for the GPU at its end.
  Status run(const std::vector<Value *> &inputs, std::vector<Value> &outputs,
             const RunValues &residency) override;

  /// The replica group all_reduce steps reduce over (null: the function runs alone). It must
  /// outlive the runs.
  void setCommunicator(Communicator *communicator) { *communicator_ = communicator; }

  /// The most bytes this executor's buffers held at once in the last run (constants and the
  /// workspace included, sizes as the Executable states them).
  uint64_t lastRunPeakBytes() const override { return buffers_.peakBytes(); }
  /// What the last run copied between host and device (its inputs up, its outputs down, an
  /// all_reduce's host round trip) and how often it waited for the GPU: a run that ends well
  /// waits at least twice, before it reuses the staging buffer and for its outputs. And how it
  /// queued its steps: one by one, or as one CUDA graph.
  TransferStats lastRunTransfers() const override { return lastRunTransfers_; }

  /// The CUDA graphs of this executor's runs so far: how many it captured and how many runs
  /// replayed one, and why it queues steps one by one when it does ("" while graphs are on).
  struct GraphStats {
    int64_t captured = 0, replayed = 0;
    std::string off;
  };
  GraphStats graphStats() const;

private:
  struct Unload {
    std::shared_ptr<CudaDevice> device;
    void operator()(CUmod_st *module) const;
  };
  struct FreeHost {
    std::shared_ptr<CudaDevice> device;
    void operator()(void *pinned) const;
  };
  std::shared_ptr<CudaDevice> device_;
  std::shared_ptr<const Executable> executable_;
  std::unique_ptr<CUmod_st, Unload> module_;
  std::vector<Launch> launches_;
  /// A run's buffer addresses, step after step (each step's operands, then its results), and
  /// where each step's begin: what the launches take, and what a CUDA graph was captured with.
  std::vector<void *> bindings_;
  std::vector<size_t> stepBindings_;
  /// Queues step `s` with its bindings, or every step one by one.
  Status launchStep(size_t s);
  Status launchEach();
  /// CUDA graphs (GpuGraphs.cpp): the ones captured, keyed by their bindings; shared, since
  /// the executor moves.
  struct Graphs;
  std::shared_ptr<Graphs> graphs_;
  /// Graphs for `exe`: on when `wanted` and it has steps, else off saying why.
  /// `groupedStep` names its first all_reduce over several replicas ("" when none), which a
  /// graph holds only on a communicator that reduces on the stream (NCCL).
  static std::shared_ptr<Graphs> makeGraphs(std::shared_ptr<CudaDevice> device,
                                            const Executable &exe, bool wanted,
                                            std::string groupedStep);
  /// Queues the run's steps as a CUDA graph: one captured with the same bindings replayed,
  /// else captured now; where capture fails, one by one from now on.
  Status launchAsGraph();
  /// Whether this run queues its steps as a graph: graphs are on, a first run, which warms
  /// the libraries up and grows the allocator, has been, and the communicator (when an
  /// all_reduce needs one) reduces on the stream; one that does not turns graphs off.
  bool graphRun();
  int64_t runs_ = 0;
  /// Where the all_reduce launches find the communicator: shared, since the executor moves.
  std::shared_ptr<Communicator *> communicator_ = std::make_shared<Communicator *>(nullptr);
  /// The collectives this run enqueued on the stream, and whether it is capturing a graph.
  std::shared_ptr<RunCollectives> collectives_ = std::make_shared<RunCollectives>();
  /// Waits for every ticket in collectives_ (all of them, whatever fails): the first error.
  Status waitForCollectives();
  /// The constants' blocks and the workspace, for the executor's life.
  std::vector<Allocator::Block> constants_;
  Allocator::Block workspace_;
  size_t workspaceBytes_ = 0;
  /// Pinned host memory every host-device copy goes through, grown as a run needs.
  std::unique_ptr<void, FreeHost> staging_;
  uint64_t stagingBytes_ = 0;
  /// No copy through the staging buffer is queued or running: the host last waited for the
  /// stream after queuing the last one.
  bool stagingIdle_ = true;
  /// Each buffer's device address: constants' for the executor's life, the rest (inputs are
  /// copied in) taken during a run and given back once the step the schedule says frees them
  /// (Step::frees) is queued.
  RunBuffers buffers_;
  /// Constants and the workspace.
  uint64_t heldBytes_ = 0;
  TransferStats lastRunTransfers_;
  /// Pinned staging of at least `bytes`, after what used it before has finished.
  Status reserveStaging(uint64_t bytes);
  /// A run's input as the executor takes it: a host tensor to copy in, or a device array,
  /// lent or donated.
  struct Input {
    const HostTensor *host = nullptr;
    DeviceArray *array = nullptr;
    bool donated = false;
  };
  Allocator *allocator_ = nullptr;
  /// Given the inputs' check (checkRunInputs), places them, queues every step, then `finish`
  /// (which brings the outputs out of buffers_); whatever happens, the run's blocks go back at
  /// the end.
  Status runSteps(const Status &inputsChecked, const std::vector<Input> &inputs,
                  const std::function<Status()> &finish);
  Status upload(const std::vector<Input> &inputs);
  /// Copies the outputs `residency` does not keep to the host: into the caller's tensors where
  /// `reusable` has them (reusableOutputs), else into fresh ones; kept ones are left empty.
  Status download(const std::vector<HostTensor *> &reusable, std::vector<HostTensor> &outputs,
                  const RunValues &residency);
  /// The outputs `residency` keeps, as arrays: the output's own block when no other output is
  /// the same buffer and the run may give it up, else a device copy.
  Expected<std::vector<DeviceArray>> keptOutputs(const RunValues &residency);
};

} // namespace smelt::rt::cuda
