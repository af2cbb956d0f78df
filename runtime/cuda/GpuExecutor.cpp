// GPU executor: each step planned and checked without a device, then bound to the device's
// kernels and libraries once, and the run loop that queues them on the stream.
#include "runtime/cuda/GpuExecutor.h"

#include "runtime/CollectiveSteps.h"
#include "runtime/DeviceMemory.h"
#include "runtime/RunBuffers.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/CudaArray.h"
#include "runtime/cuda/Cudnn.h"
#include "runtime/cuda/GpuAllReduce.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace smelt::rt::cuda {

namespace {

/// How one step runs on the GPU: which call, with what geometry. Planning needs no device, so
/// validate() reports every problem on a machine without one.
struct Plan {
  enum Kind {
    Kernel, // a fusion's kernel, or an argmax's or scatter_add's own
    Copy,
    Matmul,
    ConvForward,
    ConvBackwardInput,
    ConvBackwardFilter,
    PoolForward,
    PoolBackward,
    AllReduce,
    ReplicaId
  } kind = Copy;
  std::string what; // "'matmul' (model.mlir:4:5)"
  MatmulCall matmul;
  Conv2DCall conv;
  Pool2DCall pool;
  /// An all_reduce's, as CollectiveSteps checked it.
  AllReduceSpec allReduce;
  const FusedKernel *kernel = nullptr;
  uint64_t bytes = 0; // a copy's
  size_t workspace = 0;
};

const TensorType &typeOf(const Executable &exe, BufferId id) { return exe.buffers[id].type; }

Status expectOperands(const Step &step, size_t count) {
  if (step.operands.size() == count)
    return Status();
  return Status::error(fmt::format("{}: takes {} operand{}, got {}", cpu::describe(step), count,
                                   count == 1 ? "" : "s", step.operands.size()));
}

/// lhs [..., M, K] x rhs [..., K, N] (the last two dims swapped by the transpose flags), the
/// leading dims one batch of row-major matrices.
Expected<MatmulCall> matmulCall(const Executable &exe, const Step &step, bool allowTf32) {
  const MatmulParams &params = std::get<MatmulParams>(step.params);
  bool tl = params.transposeLhs, tr = params.transposeRhs;
  const TensorType &a = typeOf(exe, step.operands[0]), &b = typeOf(exe, step.operands[1]),
                   &c = typeOf(exe, step.results[0]);
  size_t rank = a.shape.size();
  bool ok = rank >= 2 && b.shape.size() == rank && c.shape.size() == rank;
  MatmulCall call;
  for (size_t i = 0; ok && i + 2 < rank; ++i) {
    ok = a.shape[i] == b.shape[i] && a.shape[i] == c.shape[i];
    call.batch *= a.shape[i];
  }
  if (ok) {
    call.m = a.shape[rank - (tl ? 1 : 2)];
    call.k = a.shape[rank - (tl ? 2 : 1)];
    call.n = b.shape[rank - (tr ? 2 : 1)];
    ok = b.shape[rank - (tr ? 1 : 2)] == call.k && c.shape[rank - 2] == call.m &&
         c.shape[rank - 1] == call.n;
  }
  if (!ok || a.dtype != b.dtype || a.dtype != c.dtype)
    return Status::error(fmt::format("{}: {} x {}{}{} does not give {}", cpu::describe(step),
                                     a.str(), b.str(), tl ? " (lhs transposed)" : "",
                                     tr ? " (rhs transposed)" : "", c.str()));
  call.dtype = a.dtype;
  call.transposeLhs = tl;
  call.transposeRhs = tr;
  call.allowTf32 = allowTf32;
  // The epilogue: cuBLASLt's bias (one value per row of its column-major result, one of our N
  // columns: CublasLt.cpp) and relu. It has no tanh or logistic epilogue; smelt-fuse folds
  // neither on the GPU.
  const Epilogue &epilogue = params.epilogue;
  if (epilogue.activation != Activation::none && epilogue.activation != Activation::relu)
    return Status::error(fmt::format("{}: cuBLASLt has no {} epilogue (smelt-fuse folds only "
                                     "bias and relu into a matmul on the GPU)",
                                     cpu::describe(step), activationName(epilogue.activation)));
  bool relu = epilogue.activation == Activation::relu;
  call.epilogue = epilogue.bias ? (relu ? MatmulEpilogue::BiasRelu : MatmulEpilogue::Bias)
                                : (relu ? MatmulEpilogue::Relu : MatmulEpilogue::None);
  if (epilogue.bias) {
    const TensorType &bias = typeOf(exe, step.operands[2]);
    if (bias.dtype != c.dtype || bias.shape != std::vector<int64_t>{call.n})
      return Status::error(fmt::format("{}: the bias is {}, the result {} needs [{}] of {}",
                                       cpu::describe(step), bias.str(), c.str(), call.n,
                                       dtypeName(c.dtype)));
  }
  // The bias buffer is bound at launch; a stand-in lets validate() check the rest now.
  MatmulCall checked = call;
  checked.bias = epilogue.bias ? &call : nullptr;
  if (Status s = CublasLt::validate(checked, cpu::describe(step)); !s.ok())
    return s;
  return call;
}

/// conv2d (input, filter) -> output; conv2d_backward_input (grad_output, filter) -> input;
/// conv2d_backward_filter (input, grad_output) -> filter. The call holds the forward shapes.
Expected<Plan> convPlan(const Executable &exe, const Step &step, Plan plan, bool allowTf32) {
  const ConvParams &params = std::get<ConvParams>(step.params); // lengths checked on load
  if (params.epilogue.any())
    return Status::error(fmt::format("{}: the cuDNN convolution here takes no epilogue (bias "
                                     "{}, activation {}); smelt-fuse folds conv2d epilogues only "
                                     "on the CPU",
                                     plan.what, params.epilogue.bias,
                                     activationName(params.epilogue.activation)));
  if (Status s = expectOperands(step, 2); !s.ok())
    return s;
  if (params.filterLayout != FilterLayout::ohwi)
    return Status::error(fmt::format("{}: cuDNN reads the filter as OHWI (KRSC), this step's is "
                                     "HWIO; smelt-gpu-conv-layouts gives the convolutions on a "
                                     "GPU that layout",
                                     plan.what));
  Conv2DCall &call = plan.conv;
  call.strides = params.strides;
  call.padding = params.padding;
  call.dilation = params.dilation;
  call.groups = params.groups;
  const TensorType &first = typeOf(exe, step.operands[0]),
                   &second = typeOf(exe, step.operands[1]),
                   &result = typeOf(exe, step.results[0]);
  bool forward = step.op == StepOp::Conv2D, backwardInput = step.op == StepOp::Conv2DBackwardInput;
  plan.kind = forward         ? Plan::ConvForward
              : backwardInput ? Plan::ConvBackwardInput
                              : Plan::ConvBackwardFilter;
  call.input = backwardInput ? result : first;
  call.filter = forward || backwardInput ? second : result;
  call.output = forward ? result : backwardInput ? first : second;
  call.allowTf32 = allowTf32;
  if (Status s = Cudnn::validate(call, plan.what); !s.ok())
    return s;
  plan.workspace = Cudnn::workspaceBytes(call);
  return plan;
}

/// max/avg_pool2d (input) -> output; max_pool2d_backward (input, grad_output) -> input's type;
/// avg_pool2d_backward (grad_output) -> input's type.
Expected<Plan> poolPlan(const Executable &exe, const Step &step, Plan plan) {
  bool backward = step.op == StepOp::MaxPool2DBackward || step.op == StepOp::AvgPool2DBackward;
  bool isMax = step.op == StepOp::MaxPool2D || step.op == StepOp::MaxPool2DBackward;
  if (Status s = expectOperands(step, backward && isMax ? 2 : 1); !s.ok())
    return s;
  const PoolParams &params = std::get<PoolParams>(step.params); // lengths checked on load
  Pool2DCall &call = plan.pool;
  call.window = params.window;
  call.strides = params.strides;
  call.padding = params.padding;
  const TensorType &result = typeOf(exe, step.results[0]);
  call.kind = isMax ? PoolKind::Max : PoolKind::Avg;
  call.input = backward ? result : typeOf(exe, step.operands[0]);
  call.output = backward ? typeOf(exe, step.operands.back()) : result;
  if (backward && isMax && typeOf(exe, step.operands[0]) != result)
    return Status::error(fmt::format("{}: result {} must have the input's type {}", plan.what,
                                     result.str(), typeOf(exe, step.operands[0]).str()));
  plan.kind = backward ? Plan::PoolBackward : Plan::PoolForward;
  if (Status s = Cudnn::validate(call, plan.what); !s.ok())
    return s;
  plan.workspace = Cudnn::workspaceBytes(call);
  return plan;
}

/// A fusion's kernel, or the kernel of an argmax or scatter_add of its own.
Expected<Plan> kernelPlan(const Executable &exe, const Step &step, Plan plan) {
  // planSteps ran validateDataflow first: the index is in range and the step's buffers have
  // the kernel's types.
  const FusedKernel &kernel = exe.kernels[size_t(step.kernel())];
  if (!exe.cuda || (exe.cuda->cubin.empty() && exe.cuda->ptx.empty()))
    return Status::error(fmt::format("{}: @{} has no CUDA code for kernel {} (compile it for "
                                     "a CUDA target)",
                                     plan.what, exe.name, kernel.name));
  // CUDA's limits: 1024 threads per block, 2^31 - 1 blocks in x.
  if (kernel.cudaBlock < 1 || kernel.cudaBlock > 1024 || kernel.cudaGrid < 1 ||
      kernel.cudaGrid > int64_t(0x7fffffff))
    return Status::error(fmt::format("{}: kernel {} has no valid CUDA launch (block {}, grid {})",
                                     plan.what, kernel.name, kernel.cudaBlock, kernel.cudaGrid));
  plan.kind = Plan::Kernel;
  plan.kernel = &kernel;
  return plan;
}

/// Plans step `index` of `exe`, whose collective steps `collectives` prepared.
Expected<Plan> planStep(const Executable &exe, size_t index,
                        const CollectiveSteps &collectives, bool allowTf32) {
  const Step &step = exe.steps[index];
  Plan plan;
  plan.what = cpu::describe(step);
  switch (step.op) {
  case StepOp::Fusion:
    return kernelPlan(exe, step, std::move(plan));
  case StepOp::Argmax:
  case StepOp::ScatterAdd:
    if (step.kernel() != kNoKernel)
      return kernelPlan(exe, step, std::move(plan));
    break;
  case StepOp::Copy: {
    if (Status s = expectOperands(step, 1); !s.ok())
      return s;
    plan.bytes = typeOf(exe, step.operands[0]).byteSize();
    if (const TensorType &result = typeOf(exe, step.results[0]); result.byteSize() != plan.bytes)
      return Status::error(fmt::format("{}: {} and {} differ in size", plan.what,
                                       typeOf(exe, step.operands[0]).str(), result.str()));
    return plan;
  }
  case StepOp::Matmul: {
    if (Status s = expectOperands(step, step.epilogue().bias ? 3 : 2); !s.ok())
      return s;
    Expected<MatmulCall> call = matmulCall(exe, step, allowTf32);
    if (!call)
      return call.status();
    plan.kind = Plan::Matmul;
    plan.matmul = *call;
    plan.workspace = CublasLt::kWorkspaceBytes;
    return plan;
  }
  case StepOp::AllReduce:
    plan.kind = Plan::AllReduce;
    plan.allReduce = collectives.allReduce(index);
    // A bucket is packed into the workspace, reduced there and unpacked.
    if (step.operands.size() > 1)
      plan.workspace = size_t(plan.allReduce.count) * byteWidth(plan.allReduce.dtype);
    return plan;
  case StepOp::ReplicaId:
    // CollectiveSteps checked its one i64 result.
    plan.kind = Plan::ReplicaId;
    return plan;
  case StepOp::Conv2D:
  case StepOp::Conv2DBackwardInput:
  case StepOp::Conv2DBackwardFilter:
    return convPlan(exe, step, std::move(plan), allowTf32);
  case StepOp::MaxPool2D:
  case StepOp::AvgPool2D:
  case StepOp::MaxPool2DBackward:
  case StepOp::AvgPool2DBackward:
    return poolPlan(exe, step, std::move(plan));
  default:
    break;
  }
  return Status::error(fmt::format("{} has no GPU kernel: smelt-place-devices should have put "
                                   "it on cpu:0",
                                   plan.what));
}

Expected<std::vector<Plan>> planSteps(const Executable &exe, bool allowTf32) {
  if (Status s = validateDataflow(exe); !s.ok())
    return s;
  if (Status s = checkBufferSizes(exe, nullptr, /*inputsOnDevice=*/true); !s.ok())
    return s;
  // The all_reduce steps' attributes and types, checked as the CPU executor checks them.
  Expected<CollectiveSteps> collectives = CollectiveSteps::prepare(exe);
  if (!collectives)
    return collectives.status();
  std::vector<Plan> plans;
  for (size_t s = 0; s < exe.steps.size(); ++s) {
    Expected<Plan> plan = planStep(exe, s, *collectives, allowTf32);
    if (!plan)
      return plan.status();
    plans.push_back(std::move(*plan));
  }
  return plans;
}

/// "<what>: <error>": library errors already begin with the step, driver errors do not.
Status inStep(const std::string &what, Status status) {
  return status.ok() ? status : Status::error(what + ": " + status.message());
}

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
  return planSteps(executable, allowTf32).status();
}

Expected<GpuExecutor> GpuExecutor::create(const Executable &executable,
                                          std::shared_ptr<CudaDevice> device, Allocator *allocator,
                                          bool allowTf32, bool cudaGraphs) {
  Expected<std::vector<Plan>> planned = planSteps(executable, allowTf32);
  if (!planned)
    return planned.status();
  if (!device)
    return Status::error("GpuExecutor for @" + executable.name + ": no device given");
  if (!allocator) {
    Expected<Allocator *> gpu = deviceAllocator(fmt::format("gpu:{}", device->ordinal()));
    if (!gpu)
      return gpu.status();
    allocator = *gpu;
  }
  // Host blocks handed to kernels would fault on the device: say so here instead.
  if (allocator->device().rfind("gpu:", 0) != 0)
    return Status::error(fmt::format("GpuExecutor for @{}: the allocator is {}'s, not a GPU's",
                                     executable.name, allocator->device()));
  if (Status s = checkBufferSizes(executable, allocator, /*inputsOnDevice=*/true); !s.ok())
    return s;
  if (Status s = device->makeCurrent(); !s.ok())
    return s;
  GpuExecutor exec;
  exec.device_ = device;
  exec.allocator_ = allocator;
  exec.executable_ = std::make_shared<const Executable>(executable);
  const Executable &exe = *exec.executable_;
  // The plans point into `executable`'s kernels; the launches below copy what they need.
  std::vector<Plan> &plans = *planned;
  std::vector<BufferId> constants;
  for (const Constant &c : exe.constants)
    constants.push_back(c.buffer);
  Expected<RunBuffers> buffers = RunBuffers::create(exe, allocator, constants);
  if (!buffers)
    return buffers.status();
  exec.buffers_ = std::move(*buffers);
  for (const Constant &c : exe.constants) {
    Expected<Allocator::Block> block = allocator->allocateBlock(
        c.bytes.size(), fmt::format("constant {}", bufferLabel(exe, c.buffer)));
    if (!block)
      return block.status();
    // On the executor's stream (a recycled block may still be read by work queued there),
    // from the Executable's own bytes, which live as long as the executor.
    if (!c.bytes.empty())
      if (Status s = device->copyToDevice(block->get(), c.bytes.data(), c.bytes.size()); !s.ok())
        return Status::error(fmt::format("uploading constant {}: {}",
                                         bufferLabel(exe, c.buffer), s.message()));
    exec.buffers_.place(c.buffer, block->get());
    exec.heldBytes_ += c.bytes.size();
    exec.constants_.push_back(std::move(*block));
  }
  if (Status s = device->synchronize("the constants of @" + exe.name); !s.ok())
    return s;

  // One workspace for every library call: they run one after another on the stream.
  for (const Plan &plan : plans)
    exec.workspaceBytes_ = std::max(exec.workspaceBytes_, plan.workspace);
  if (exec.workspaceBytes_) {
    Expected<Allocator::Block> block = allocator->allocateBlock(
        exec.workspaceBytes_, fmt::format("the workspace of @{} (cuBLASLt, cuDNN)", exe.name));
    if (!block)
      return block.status();
    exec.workspace_ = std::move(*block);
    exec.heldBytes_ += exec.workspaceBytes_;
  }
  bool launches =
      std::any_of(plans.begin(), plans.end(), [](const Plan &p) { return p.kind == Plan::Kernel; });
  if (launches) {
    Expected<CUmodule> module = loadModule(*device, *exe.cuda);
    if (!module)
      return Status::error(fmt::format("@{}: {}", exe.name, module.message()));
    exec.module_ = std::unique_ptr<CUmod_st, Unload>(*module, Unload{device});
  }

  const CudaDevice *gpu = device.get();
  CublasLt *cublas = nullptr;
  Cudnn *cudnn = nullptr;
  void *ws = exec.workspace_.get();
  size_t wsBytes = exec.workspaceBytes_;
  for (size_t s = 0; s < plans.size(); ++s) {
    Plan &plan = plans[s];
    size_t operands = exe.steps[s].operands.size(), results = exe.steps[s].results.size();
    if (plan.kind == Plan::Matmul && !cublas) {
      Expected<CublasLt *> lt = CublasLt::get(*device);
      if (!lt)
        return inStep(plan.what, lt.status());
      cublas = *lt;
    }
    // Only convolutions and pooling open cuDNN: an executable with an all_reduce (after them in
    // the enum) must run where libcudnn is absent.
    bool needsCudnn = plan.kind == Plan::ConvForward || plan.kind == Plan::ConvBackwardInput ||
                      plan.kind == Plan::ConvBackwardFilter || plan.kind == Plan::PoolForward ||
                      plan.kind == Plan::PoolBackward;
    if (needsCudnn && !cudnn) {
      Expected<Cudnn *> dnn = Cudnn::get(*device);
      if (!dnn)
        return inStep(plan.what, dnn.status());
      cudnn = *dnn;
    }
    // A convolution's algorithm (and layout) is chosen now: one cuDNN cannot run fails the
    // creation, naming the step, not a run half way through.
    if (plan.kind == Plan::ConvForward || plan.kind == Plan::ConvBackwardInput ||
        plan.kind == Plan::ConvBackwardFilter) {
      Cudnn::ConvPass pass = plan.kind == Plan::ConvForward ? Cudnn::ConvPass::Forward
                             : plan.kind == Plan::ConvBackwardInput
                                 ? Cudnn::ConvPass::BackwardInput
                                 : Cudnn::ConvPass::BackwardFilter;
      if (Status st = cudnn->prepare(pass, plan.conv, wsBytes, plan.what); !st.ok())
        return st;
    }
    Launch launch;
    switch (plan.kind) {
    case Plan::Kernel: {
      CUfunction function = nullptr;
      if (Status st = gpu->check(gpu->driver().moduleGetFunction(&function, exec.module_.get(),
                                                                 plan.kernel->name.c_str()),
                                 "cuModuleGetFunction");
          !st.ok())
        return inStep(plan.what, st);
      auto grid = unsigned(plan.kernel->cudaGrid), block = unsigned(plan.kernel->cudaBlock);
      size_t n = operands + results;
      launch = [gpu, function, grid, block, n, what = plan.what](void *const *b) {
        // Kernel parameters: one CUdeviceptr per buffer, inputs then results.
        std::vector<CUdeviceptr> pointers(n);
        std::vector<void *> params(n);
        for (size_t i = 0; i < n; ++i) {
          pointers[i] = devicePointer(b[i]);
          params[i] = &pointers[i];
        }
        return inStep(what, gpu->check(gpu->driver().launchKernel(function, grid, 1, 1, block, 1,
                                                                  1, 0, gpu->stream(),
                                                                  params.data(), nullptr),
                                       "cuLaunchKernel"));
      };
      break;
    }
    case Plan::Copy:
      launch = [gpu, bytes = plan.bytes, what = plan.what](void *const *b) {
        if (bytes == 0)
          return Status();
        return inStep(what, gpu->check(gpu->driver().memcpyDtoDAsync(devicePointer(b[1]),
                                                                     devicePointer(b[0]), bytes,
                                                                     gpu->stream()),
                                       "cuMemcpyDtoDAsync"));
      };
      break;
    case Plan::Matmul:
      // Buffers: lhs, rhs, [bias,] result.
      launch = [cublas, call = plan.matmul, ws, wsBytes, what = plan.what](void *const *b) {
        bool bias = hasBias(call.epilogue);
        MatmulCall bound = call;
        bound.bias = bias ? b[2] : nullptr;
        return cublas->matmul(bound, b[0], b[1], b[bias ? 3 : 2], ws, wsBytes, what);
      };
      break;
    case Plan::ConvForward:
      launch = [cudnn, call = plan.conv, ws, wsBytes, what = plan.what](void *const *b) {
        return cudnn->conv2dForward(call, b[0], b[1], b[2], ws, wsBytes, what);
      };
      break;
    case Plan::ConvBackwardInput: // (grad_output, filter) -> grad_input
      launch = [cudnn, call = plan.conv, ws, wsBytes, what = plan.what](void *const *b) {
        return cudnn->conv2dBackwardInput(call, b[0], b[1], b[2], ws, wsBytes, what);
      };
      break;
    case Plan::ConvBackwardFilter: // (input, grad_output) -> grad_filter
      launch = [cudnn, call = plan.conv, ws, wsBytes, what = plan.what](void *const *b) {
        return cudnn->conv2dBackwardFilter(call, b[0], b[1], b[2], ws, wsBytes, what);
      };
      break;
    case Plan::PoolForward:
      launch = [cudnn, call = plan.pool, ws, wsBytes, what = plan.what](void *const *b) {
        return cudnn->pool2dForward(call, b[0], b[1], ws, wsBytes, what);
      };
      break;
    case Plan::PoolBackward: // max: (input, grad_output); avg: (grad_output)
      launch = [cudnn, call = plan.pool, ws, wsBytes, what = plan.what](void *const *b) {
        bool isMax = call.kind == PoolKind::Max;
        return cudnn->pool2dBackward(call, isMax ? b[0] : nullptr, b[isMax ? 1 : 0],
                                     b[isMax ? 2 : 1], ws, wsBytes, what);
      };
      break;
    case Plan::AllReduce:
      launch = [gpu, spec = plan.allReduce, ws, communicator = exec.communicator_,
                collectives = exec.collectives_, operands](void *const *b) {
        return allReduceOnGpu(*gpu, spec, b, b + operands, ws, *communicator,
                              collectives->capturing ? nullptr : &collectives->started);
      };
      break;
    case Plan::ReplicaId:
      // The replica's index, written on the stream a byte at a time (little-endian i64): no
      // kernel, no copy from the host, no wait.
      launch = [gpu, communicator = exec.communicator_, what = plan.what](void *const *b) {
        uint64_t index = *communicator ? uint64_t((*communicator)->rank()) : 0;
        for (int byte = 0; byte < 8; ++byte)
          if (Status s = gpu->check(
                  gpu->driver().memsetD8Async(devicePointer(static_cast<char *>(b[0]) + byte),
                                              uint8_t(index >> (8 * byte)), 1, gpu->stream()),
                  "cuMemsetD8Async");
              !s.ok())
            return inStep(what, s);
        return Status();
      };
      break;
    }
    exec.launches_.push_back(std::move(launch));
  }
  // The first all_reduce over several replicas: a graph holds it only when the communicator
  // reduces on the stream (GpuGraphs.cpp).
  auto grouped = std::find_if(plans.begin(), plans.end(), [](const Plan &plan) {
    return plan.kind == Plan::AllReduce && plan.allReduce.replicas > 1;
  });
  exec.graphs_ =
      makeGraphs(device, exe, cudaGraphs, grouped == plans.end() ? std::string() : grouped->what);
  return exec;
}

Status GpuExecutor::run(const std::vector<HostTensor> &inputs, std::vector<HostTensor> &outputs) {
  return run(pointersTo(inputs), outputs);
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
  if (Status s = device_->makeCurrent(); !s.ok())
    return s;
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
    if (Status s = buffers_.beginRun(heldBytes_); !s.ok())
      return s;
    if (Status s = upload(inputs); !s.ok())
      return s;
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
        if (Status st = buffers_.take(step.results[r]); !st.ok())
          return st;
      }
      for (BufferId id : step.results)
        bindings_.push_back(buffers_[id]);
      if (!asGraph) {
        queued = true;
        if (Status st = launchStep(s); !st.ok())
          return st;
      }
      buffers_.giveBackAfter(s);
    }
    queued = true;
    if (asGraph)
      if (Status s = launchAsGraph(); !s.ok())
        return s;
    if (Status s = waitForCollectives(); !s.ok())
      return s;
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
    Expected<std::vector<DeviceArray>> kept = keptOutputs(residency);
    if (!kept)
      return kept.status();
    if (Status s = download(reusableOutputs(exe, hostInputs, hostOutputs), hostOutputs, residency);
        !s.ok())
      return s;
    outputs.clear();
    for (size_t i = 0; i < exe.outputs.size(); ++i)
      outputs.push_back(residency.keeps(i) ? Value(std::move((*kept)[i]))
                                           : Value(std::move(hostOutputs[i])));
    return Status();
  });
}

} // namespace smelt::rt::cuda
