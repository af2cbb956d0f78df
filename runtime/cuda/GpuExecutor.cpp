// GPU executor: its steps planned and checked without a device (GpuSteps.h), then bound to the
// device's kernels and libraries once, and the run loop that queues them on the stream.
#include "runtime/cuda/GpuExecutor.h"

#include "runtime/DeviceMemory.h"
#include "runtime/RunBuffers.h"
#include "runtime/cuda/CudaArray.h"
#include "runtime/cuda/GpuSteps.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace smelt::rt::cuda {

namespace {

/// The fused kernels' module: CUBIN when NVRTC built it for this device's arch and the driver
/// takes it, else the PTX through the driver's JIT (a newer GPU, or a driver that refuses it).
Expected<CUmodule> loadModule(const CudaDevice &device, const CudaCode &code) {
  const CudaDriver &cu = device.driver();
  CUmodule module = nullptr;
  std::string why = fmt::format("the CUBIN is for {}, the device is {}", code.arch,
                                device.arch());
  if (!code.cubin.empty() && code.arch == device.arch()) {
    Status s = device.check(cu.moduleLoadData(&module, code.cubin.data()),
                            "cuModuleLoadData(CUBIN)");
    if (s.ok())
      return module;
    why = s.message();
  }
  if (code.ptx.empty())
    return Status::error("cannot load the fused kernels: " + why + ", and there is no PTX");
  if (Status s = device.check(cu.moduleLoadData(&module, code.ptx.c_str()),
                              "cuModuleLoadData(PTX)");
      !s.ok())
    return Status::error("cannot load the fused kernels: " + why + "; " + s.message());
  return module;
}

} // namespace

void GpuExecutor::Unload::operator()(CUmod_st *module) const {
  // A failed run may have left launches of its kernels queued.
  if (device->makeCurrent().ok() && device->synchronize("unloading the fused kernels").ok())
    device->driver().moduleUnload(module);
}

void GpuExecutor::FreeHost::operator()(void *pinned) const {
  // A failed run (out of memory half way) may have left copies through it queued; freeing
  // pinned memory a queued copy still reads is undefined (the emulated driver faults).
  if (device->makeCurrent().ok() && device->synchronize("freeing the staging buffer").ok())
    device->driver().memFreeHost(pinned);
}

Status GpuExecutor::validate(const Executable &executable, bool allowTf32) {
  return planGpuSteps(executable, allowTf32).status();
}

Expected<GpuExecutor> GpuExecutor::create(const Executable &executable,
                                          std::shared_ptr<CudaDevice> device, Allocator *allocator,
                                          bool allowTf32, bool cudaGraphs) {
  SMELT_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<GpuStep>> planned,
                         planGpuSteps(executable, allowTf32));
  if (!device)
    return Status::error("GpuExecutor for @" + executable.name + ": no device given");
  if (!allocator) {
    SMELT_ASSIGN_OR_RETURN(allocator, deviceAllocator(fmt::format("gpu:{}", device->ordinal())));
  }
  // Host blocks handed to kernels would fault on the device: say so here instead.
  if (allocator->device().rfind("gpu:", 0) != 0)
    return Status::error(fmt::format("GpuExecutor for @{}: the allocator is {}'s, not a GPU's",
                                     executable.name, allocator->device()));
  SMELT_RETURN_IF_ERROR(checkBufferSizes(executable, allocator, /*inputsOnDevice=*/true));
  SMELT_RETURN_IF_ERROR(device->makeCurrent());
  GpuExecutor exec;
  exec.device_ = device;
  exec.allocator_ = allocator;
  exec.executable_ = std::make_shared<const Executable>(executable);
  const Executable &exe = *exec.executable_;
  // The steps point into `executable`'s kernels; their launches, bound below, copy what they
  // need.
  const std::vector<std::unique_ptr<GpuStep>> &steps = planned;
  std::vector<BufferId> constants;
  for (const Constant &c : exe.constants)
    constants.push_back(c.buffer);
  SMELT_ASSIGN_OR_RETURN(exec.buffers_, RunBuffers::create(exe, allocator, constants));
  for (const Constant &c : exe.constants) {
    SMELT_ASSIGN_OR_RETURN(
        Allocator::Block block,
        allocator->allocateBlock(c.bytes.size(),
                                 fmt::format("constant {}", bufferLabel(exe, c.buffer))));
    // On the executor's stream (a recycled block may still be read by work queued there),
    // from the Executable's own bytes, which live as long as the executor.
    if (!c.bytes.empty())
      if (Status s = device->copyToDevice(block.get(), c.bytes.data(), c.bytes.size()); !s.ok())
        return Status::error(fmt::format("uploading constant {}: {}",
                                         bufferLabel(exe, c.buffer), s.message()));
    exec.buffers_.place(c.buffer, block.get());
    exec.heldBytes_ += c.bytes.size();
    exec.constants_.push_back(std::move(block));
  }
  SMELT_RETURN_IF_ERROR(device->synchronize("the constants of @" + exe.name));

  // One workspace for every library call: they run one after another on the stream.
  for (const std::unique_ptr<GpuStep> &step : steps)
    exec.workspaceBytes_ = std::max(exec.workspaceBytes_, step->workspace());
  if (exec.workspaceBytes_) {
    SMELT_ASSIGN_OR_RETURN(
        exec.workspace_,
        allocator->allocateBlock(exec.workspaceBytes_,
                                 fmt::format("the workspace of @{} (cuBLASLt, cuDNN)", exe.name)));
    exec.heldBytes_ += exec.workspaceBytes_;
  }
  if (std::any_of(steps.begin(), steps.end(), [](auto &step) { return step->launchesKernel(); })) {
    Expected<CUmodule> module = loadModule(*device, *exe.cuda);
    if (!module)
      return Status::error(fmt::format("@{}: {}", exe.name, module.message()));
    exec.module_ = std::unique_ptr<CUmod_st, Unload>(*module, Unload{device});
  }

  StepBinding binding{device,
                      exec.module_.get(),
                      exec.workspace_.get(),
                      exec.workspaceBytes_,
                      exec.communicator_,
                      exec.collectives_};
  for (const std::unique_ptr<GpuStep> &step : steps) {
    SMELT_ASSIGN_OR_RETURN(Launch launch, step->bind(binding));
    exec.launches_.push_back(std::move(launch));
  }
  // The first all_reduce over several replicas: a graph holds it only when the communicator
  // reduces on the stream (GpuGraphs.cpp).
  auto grouped = std::find_if(steps.begin(), steps.end(),
                              [](auto &step) { return step->reducesAcrossReplicas(); });
  exec.graphs_ = makeGraphs(device, exe, cudaGraphs,
                            grouped == steps.end() ? std::string() : (*grouped)->what());
  return exec;
}

Status GpuExecutor::waitForCollectives() {
  Status first;
  for (int64_t ticket : collectives_->started)
    if (Status s = (*communicator_)->wait(ticket); first.ok())
      first = s;
  collectives_->started.clear();
  return first;
}

Status GpuExecutor::runSteps(const Status &inputsChecked, const std::vector<Input> &inputs,
                             const std::function<Status()> &finish) {
  const Executable &exe = *executable_;
  lastRunTransfers_ = {};
  if (!inputsChecked.ok())
    return inputsChecked;
  SMELT_RETURN_IF_ERROR(device_->makeCurrent());
  // Every block this run takes goes back however it ends. Stream-ordered: blocks given back
  // go only to work queued after what still reads them. The run's traffic is what this thread
  // counted meanwhile (the allocator's waits included), a failed run's too.
  struct EndOfRun {
    GpuExecutor &exec;
    TransferStats before = threadTransfers();
    ~EndOfRun() {
      exec.buffers_.giveBackAll();
      exec.lastRunTransfers_ = threadTransfers() - before;
    }
  } endOfRun{*this};
  // A graph run takes every buffer before it queues any step, so the blocks it gives back
  // wait for the end of the run (RunBuffers::deferFrees).
  bool asGraph = graphRun();
  buffers_.deferFrees(asGraph);
  // The donated inputs' blocks, and whether any step has been queued: until one is, a failed
  // run gives every donated input back whole, wherever its block went meanwhile.
  std::vector<void *> donatedBlocks(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].donated && inputs[i].array)
      donatedBlocks[i] = inputs[i].array->address();
  bool queued = false;
  Status status = [&]() -> Status {
    SMELT_RETURN_IF_ERROR(buffers_.beginRun(heldBytes_));
    SMELT_RETURN_IF_ERROR(upload(inputs));
    bindings_.clear();
    stepBindings_.clear();
    for (size_t s = 0; s < exe.steps.size(); ++s) {
      const Step &step = exe.steps[s];
      // The operands' addresses first: a result written in place takes its operand's block.
      stepBindings_.push_back(bindings_.size());
      for (BufferId id : step.operands)
        bindings_.push_back(buffers_[id]);
      for (size_t r = 0; r < step.results.size(); ++r) {
        // Written in place of an operand that dies here (smelt-donate-in-place): its block.
        if (buffers_.takeInPlace(s, r))
          continue;
        SMELT_RETURN_IF_ERROR(buffers_.take(step.results[r]));
      }
      for (BufferId id : step.results)
        bindings_.push_back(buffers_[id]);
      if (!asGraph) {
        queued = true;
        SMELT_RETURN_IF_ERROR(launchStep(s));
      }
      buffers_.giveBackAfter(s);
    }
    queued = true;
    if (asGraph)
      SMELT_RETURN_IF_ERROR(launchAsGraph());
    SMELT_RETURN_IF_ERROR(waitForCollectives());
    return finish();
  }();
  ++runs_;
  // A collective still running writes its buffers: wait for it (or its timeout) before they
  // go back.
  if (Status s = waitForCollectives(); status.ok())
    status = s;
  // A failed run gives donated inputs back to the caller where it still holds their blocks
  // (no step overwrites an input); one whose last reader had run is gone. Before any step was
  // queued (a graph run binds every buffer first) each is whole, even where its block was
  // already handed to a later buffer (in place, or reused): it is taken back from there.
  if (!status.ok())
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].donated && !*inputs[i].array) {
        void *block = buffers_.release(exe.inputs[i]);
        if (!block && !queued && donatedBlocks[i])
          block = buffers_.reclaim(donatedBlocks[i]);
        if (block)
          *inputs[i].array =
              cudaArray(exe.buffers[exe.inputs[i]].type, device_, *allocator_, block);
      }
  return status;
}

Status GpuExecutor::run(const std::vector<const HostTensor *> &inputs,
                        std::vector<HostTensor> &outputs) {
  std::vector<Input> in(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    in[i].host = inputs[i];
  return runSteps(checkRunInputs(*executable_, inputs), in, [&] {
    return download(reusableOutputs(*executable_, inputs, outputs), outputs, RunValues());
  });
}

Status GpuExecutor::run(const std::vector<Value *> &inputs, std::vector<Value> &outputs,
                        const RunValues &residency) {
  const Executable &exe = *executable_;
  std::vector<Input> in(inputs.size());
  std::vector<const HostTensor *> hostInputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i])
      continue;
    if (DeviceArray *array = inputs[i]->array())
      in[i] = {nullptr, array, residency.donates(i)};
    else
      hostInputs.push_back(in[i].host = inputs[i]->host());
  }
  // The caller's host tensors take the outputs that come back where they fit.
  std::vector<HostTensor> hostOutputs(exe.outputs.size());
  for (size_t i = 0; i < exe.outputs.size() && i < outputs.size(); ++i)
    if (HostTensor *h = outputs[i].ownedHost(); h && !residency.keeps(i))
      hostOutputs[i] = std::move(*h);
  return runSteps(checkRunInputs(exe, inputs), in, [&]() -> Status {
    SMELT_ASSIGN_OR_RETURN(std::vector<DeviceArray> kept, keptOutputs(residency));
    SMELT_RETURN_IF_ERROR(
        download(reusableOutputs(exe, hostInputs, hostOutputs), hostOutputs, residency));
    outputs.clear();
    for (size_t i = 0; i < exe.outputs.size(); ++i)
      outputs.push_back(residency.keeps(i) ? Value(std::move((kept)[i]))
                                           : Value(std::move(hostOutputs[i])));
    return Status();
  });
}

} // namespace smelt::rt::cuda
