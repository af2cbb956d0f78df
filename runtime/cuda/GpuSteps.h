// How each kind of step runs on a GPU, one small class per kind: a fused kernel, a device copy,
// a cuBLASLt matmul, a cuDNN convolution or pooling, an all_reduce, replica_id. Each is planned
// and checked from the Executable alone (GpuExecutor::validate needs no GPU), then bound once
// to the executor's device: it opens the library it calls, chooses what can be chosen before a
// run (cuDNN's algorithm), and gives the launch that queues it on the stream.
#pragma once

#include "runtime/Collectives.h"
#include "runtime/Executable.h"
#include "runtime/Status.h"
#include "runtime/cuda/CudaDevice.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

struct CUmod_st;

namespace smelt::rt::cuda {

/// Queues one step on the stream, given its buffers' device addresses: operands, results.
using Launch = std::function<Status(void *const *buffers)>;

/// The collectives a run enqueued on the stream (NCCL): their tickets, or the fence's after a
/// graph that holds them, which the run waits for, bounded by the group's timeout, before it
/// reads anything back or gives their buffers up; and whether the steps are being captured
/// into a graph (the all_reduces then record themselves into it, with no ticket).
struct RunCollectives {
  std::vector<int64_t> started;
  bool capturing = false;
};

/// What the executor binds its steps to.
struct StepBinding {
  std::shared_ptr<CudaDevice> device;
  CUmod_st *module = nullptr; // the executable's fused kernels
  void *workspace = nullptr;  // one for every library call: they run one after another
  size_t workspaceBytes = 0;
  /// Where the collective steps find the communicator and the run's collectives: shared with
  /// the executor, which may move.
  std::shared_ptr<Communicator *> communicator;
  std::shared_ptr<RunCollectives> collectives;
};

class GpuStep {
public:
  virtual ~GpuStep() = default;
  /// "'matmul' (model.mlir:4:5)": how errors name the step.
  const std::string &what() const { return what_; }
  /// The workspace the step needs (a library's, an all_reduce bucket's).
  size_t workspace() const { return workspace_; }
  /// Whether it launches one of the executable's kernels (the module must be loaded).
  virtual bool launchesKernel() const { return false; }
  /// Whether it reduces across several replicas (a CUDA graph holds it only on NCCL).
  virtual bool reducesAcrossReplicas() const { return false; }
  /// Opens what the step calls, fails now for a call the device cannot run, and gives the
  /// launch; errors name the step.
  virtual Expected<Launch> bind(const StepBinding &binding) const = 0;

protected:
  explicit GpuStep(std::string what) : what_(std::move(what)) {}
  std::string what_;
  size_t workspace_ = 0;
};

/// Every step of `exe` planned, after its dataflow, buffer sizes and collective steps are
/// checked: the first error, naming the step. `allowTf32`: f32 matmuls and convolutions may
/// use TF32 tensor cores.
Expected<std::vector<std::unique_ptr<GpuStep>>> planGpuSteps(const Executable &exe, bool allowTf32);

} // namespace smelt::rt::cuda
