// The GPU's step kinds (GpuSteps.h): each plans its call from the step, then binds it to the
// device's kernels and libraries.
#include "runtime/cuda/GpuSteps.h"

#include "runtime/CollectiveSteps.h"
#include "runtime/RunBuffers.h"
#include "runtime/StepOps.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/Cudnn.h"
#include "runtime/cuda/GpuAllReduce.h"

#include <fmt/format.h>

#include <algorithm>

namespace smelt::rt::cuda {
namespace {

/// "<what>: <error>": library errors already begin with the step, driver errors do not.
Status inStep(const std::string &what, Status status) {
  return status.ok() ? status : Status::error(what + ": " + status.message());
}

const TensorType &typeOf(const Executable &exe, BufferId id) { return exe.buffers[id].type; }

/// The cuBLASLt call of a matmul step: its problem (matmulShape), dtype and epilogue.
Expected<MatmulCall> matmulCall(const Executable &exe, const Step &step, bool allowTf32) {
  const MatmulParams &params = std::get<MatmulParams>(step.params);
  std::vector<TensorType> operands;
  for (BufferId id : step.operands)
    operands.push_back(typeOf(exe, id));
  SMELT_ASSIGN_OR_RETURN(MatmulShape shape,
                         matmulShape(step, operands, typeOf(exe, step.results[0])));
  MatmulCall call;
  call.batch = shape.batch;
  call.m = shape.m;
  call.k = shape.k;
  call.n = shape.n;
  call.dtype = operands[0].dtype;
  call.transposeLhs = params.transposeLhs;
  call.transposeRhs = params.transposeRhs;
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
  SMELT_RETURN_IF_ERROR(CublasLt::validate(call, cpu::describe(step)));
  return call;
}

/// What a run's address of `id` is known to be aligned to: a block of the allocator is aligned
/// to 256 bytes (Allocator::kAlignment), and the arena is one such block, in which a buffer
/// lies at its offset (smelt-assign-buffers: a multiple of 64).
unsigned alignmentOf(const Executable &exe, BufferId id) {
  int64_t offset = exe.buffers[id].offset;
  return offset <= 0 ? 256u : unsigned(std::min<int64_t>(offset & -offset, 256));
}

/// A library call prepared once for the binding's device (its Library opened there) with the
/// binding's workspace: Library::prepare(args..., workspace bytes, what).
template <typename Library, typename... Args>
Expected<std::shared_ptr<const typename Library::Plan>>
prepareOn(const StepBinding &binding, const std::string &what, const Args &...args) {
  Expected<Library *> library = Library::get(*binding.device);
  if (!library)
    return inStep(what, library.status());
  return (*library)->prepare(args..., binding.workspaceBytes, what);
}

/// A fusion's kernel, or the kernel of an argmax or scatter_add of its own: the NVRTC code's
/// entry, launched with one pointer per buffer.
class KernelStep final : public GpuStep {
public:
  static Expected<std::unique_ptr<GpuStep>> plan(const Executable &exe, const Step &step) {
    // planGpuSteps ran validateDataflow first: the index is in range and the step's buffers
    // have the kernel's types.
    std::unique_ptr<KernelStep> k(new KernelStep(cpu::describe(step)));
    k->kernel_ = &exe.kernels[size_t(step.kernel())];
    k->buffers_ = step.operands.size() + step.results.size();
    if (!exe.cuda || (exe.cuda->cubin.empty() && exe.cuda->ptx.empty()))
      return Status::error(fmt::format("{}: @{} has no CUDA code for kernel {} (compile it for "
                                       "a CUDA target)",
                                       k->what_, exe.name, k->kernel_->name));
    // CUDA's limits: 1024 threads per block, 2^31 - 1 blocks in x.
    if (k->kernel_->cudaBlock < 1 || k->kernel_->cudaBlock > 1024 || k->kernel_->cudaGrid < 1 ||
        k->kernel_->cudaGrid > int64_t(0x7fffffff))
      return Status::error(fmt::format("{}: kernel {} has no valid CUDA launch (block {}, grid "
                                       "{})",
                                       k->what_, k->kernel_->name, k->kernel_->cudaBlock,
                                       k->kernel_->cudaGrid));
    return std::unique_ptr<GpuStep>(std::move(k));
  }
  bool launchesKernel() const override { return true; }
  Expected<Launch> bind(const StepBinding &binding) const override {
    const CudaDevice *gpu = binding.device.get();
    CUfunction function = nullptr;
    if (Status st = gpu->check(
            gpu->driver().moduleGetFunction(&function, binding.module, kernel_->name.c_str()),
            "cuModuleGetFunction");
        !st.ok())
      return inStep(what_, st);
    auto grid = unsigned(kernel_->cudaGrid), block = unsigned(kernel_->cudaBlock);
    return Launch([gpu, function, grid, block, n = buffers_, what = what_](void *const *b) {
      // Kernel parameters: one CUdeviceptr per buffer, inputs then results.
      std::vector<CUdeviceptr> pointers(n);
      std::vector<void *> params(n);
      for (size_t i = 0; i < n; ++i) {
        pointers[i] = devicePointer(b[i]);
        params[i] = &pointers[i];
      }
      return inStep(what,
                    gpu->check(gpu->driver().launchKernel(function, grid, 1, 1, block, 1, 1, 0,
                                                          gpu->stream(), params.data(), nullptr),
                               "cuLaunchKernel"));
    });
  }

private:
  using GpuStep::GpuStep;
  const FusedKernel *kernel_ = nullptr; // the planned Executable's: bound while it lives
  size_t buffers_ = 0;
};

/// A copy onto this GPU from this GPU (the executor brings other devices' values in).
class CopyStep final : public GpuStep {
public:
  static Expected<std::unique_ptr<GpuStep>> plan(const Executable &exe, const Step &step) {
    std::unique_ptr<CopyStep> copy(new CopyStep(cpu::describe(step)));
    copy->bytes_ = typeOf(exe, step.operands[0]).byteSize();
    if (const TensorType &result = typeOf(exe, step.results[0]); result.byteSize() != copy->bytes_)
      return Status::error(fmt::format("{}: {} and {} differ in size", copy->what_,
                                       typeOf(exe, step.operands[0]).str(), result.str()));
    return std::unique_ptr<GpuStep>(std::move(copy));
  }
  Expected<Launch> bind(const StepBinding &binding) const override {
    const CudaDevice *gpu = binding.device.get();
    return Launch([gpu, bytes = bytes_, what = what_](void *const *b) {
      if (bytes == 0)
        return Status();
      return inStep(
          what, gpu->check(gpu->driver().memcpyDtoDAsync(devicePointer(b[1]), devicePointer(b[0]),
                                                         bytes, gpu->stream()),
                           "cuMemcpyDtoDAsync"));
    });
  }

private:
  using GpuStep::GpuStep;
  uint64_t bytes_ = 0;
};

/// matmul through cuBLASLt. Buffers: lhs, rhs, [bias,] result.
class MatmulStep final : public GpuStep {
public:
  static Expected<std::unique_ptr<GpuStep>> plan(const Executable &exe, const Step &step,
                                                 bool allowTf32) {
    std::unique_ptr<MatmulStep> matmul(new MatmulStep(cpu::describe(step)));
    SMELT_ASSIGN_OR_RETURN(matmul->call_, matmulCall(exe, step, allowTf32));
    MatmulAlignment &alignment = matmul->alignment_;
    alignment.lhs = alignmentOf(exe, step.operands[0]);
    alignment.rhs = alignmentOf(exe, step.operands[1]);
    alignment.result = alignmentOf(exe, step.results[0]);
    if (step.epilogue().bias)
      alignment.bias = alignmentOf(exe, step.operands[2]);
    matmul->workspace_ = CublasLt::kWorkspaceBytes;
    return std::unique_ptr<GpuStep>(std::move(matmul));
  }
  Expected<Launch> bind(const StepBinding &binding) const override {
    SMELT_ASSIGN_OR_RETURN(auto plan, prepareOn<CublasLt>(binding, what_, call_, alignment_));
    bool bias = hasBias(call_.epilogue);
    return Launch([plan, bias, ws = binding.workspace](void *const *b) {
      return plan->run(b[0], b[1], bias ? b[2] : nullptr, b[bias ? 3 : 2], ws);
    });
  }

private:
  using GpuStep::GpuStep;
  MatmulCall call_;
  MatmulAlignment alignment_;
};

/// What convolutions and pooling share: a cuDNN call, checked by cuDNN's rules when planned
/// (which gives its workspace), and prepared once by the device's cuDNN when bound: `Kind`
/// says which of the call's computations the step is (a convolution's pass, pooling's
/// backward flag).
template <typename Call, typename Kind> class CudnnStep : public GpuStep {
public:
  /// The algorithm (and layout) is chosen now: a convolution cuDNN cannot run fails the
  /// creation, naming the step, not a run half way through.
  Expected<Launch> bind(const StepBinding &binding) const override {
    SMELT_ASSIGN_OR_RETURN(auto plan, prepareOn<Cudnn>(binding, what_, kind_, call_));
    return Launch([plan, ws = binding.workspace](void *const *b) { return plan->run(b, ws); });
  }

protected:
  using GpuStep::GpuStep;
  /// Checks call_ by cuDNN's rules and takes its workspace.
  Status check() {
    SMELT_RETURN_IF_ERROR(Cudnn::validate(call_, what_));
    workspace_ = Cudnn::workspaceBytes(call_);
    return {};
  }
  Call call_;
  Kind kind_{};
};

/// conv2d (input, filter) -> output; conv2d_backward_input (grad_output, filter) -> input;
/// conv2d_backward_filter (input, grad_output) -> filter, through cuDNN. The call holds the
/// forward shapes; the filter is OHWI and the padding symmetric (smelt-gpu-conv-layouts).
class ConvStep final : public CudnnStep<Conv2DCall, Cudnn::ConvPass> {
public:
  static Expected<std::unique_ptr<GpuStep>> plan(const Executable &exe, const Step &step,
                                                 bool allowTf32) {
    std::unique_ptr<ConvStep> conv(new ConvStep(cpu::describe(step)));
    const ConvParams &params = std::get<ConvParams>(step.params); // lengths checked on load
    if (params.epilogue.any())
      return Status::error(fmt::format("{}: the cuDNN convolution here takes no epilogue (bias "
                                       "{}, activation {}); smelt-fuse folds conv2d epilogues "
                                       "only on the CPU",
                                       conv->what_, params.epilogue.bias,
                                       activationName(params.epilogue.activation)));
    if (params.filterLayout != FilterLayout::ohwi)
      return Status::error(fmt::format("{}: cuDNN reads the filter as OHWI (KRSC), this step's "
                                       "is HWIO; smelt-gpu-conv-layouts gives the convolutions "
                                       "on a GPU that layout",
                                       conv->what_));
    Conv2DCall &call = conv->call_;
    call.strides = params.strides;
    call.padding = params.padding;
    call.dilation = params.dilation;
    call.groups = params.groups;
    const TensorType &first = typeOf(exe, step.operands[0]),
                     &second = typeOf(exe, step.operands[1]),
                     &result = typeOf(exe, step.results[0]);
    bool forward = step.op == StepOp::Conv2D,
         backwardInput = step.op == StepOp::Conv2DBackwardInput;
    conv->kind_ = forward         ? Cudnn::ConvPass::Forward
                  : backwardInput ? Cudnn::ConvPass::BackwardInput
                                  : Cudnn::ConvPass::BackwardFilter;
    call.input = backwardInput ? result : first;
    call.filter = forward || backwardInput ? second : result;
    call.output = forward ? result : backwardInput ? first : second;
    call.allowTf32 = allowTf32;
    SMELT_RETURN_IF_ERROR(conv->check());
    return std::unique_ptr<GpuStep>(std::move(conv));
  }

private:
  using CudnnStep::CudnnStep;
};

/// max/avg_pool2d (input) -> output; max_pool2d_backward (input, grad_output) -> input's type;
/// avg_pool2d_backward (grad_output) -> input's type, through cuDNN.
class PoolStep final : public CudnnStep<Pool2DCall, bool> {
public:
  static Expected<std::unique_ptr<GpuStep>> plan(const Executable &exe, const Step &step) {
    std::unique_ptr<PoolStep> pool(new PoolStep(cpu::describe(step)));
    bool backward = step.op == StepOp::MaxPool2DBackward || step.op == StepOp::AvgPool2DBackward;
    bool isMax = step.op == StepOp::MaxPool2D || step.op == StepOp::MaxPool2DBackward;
    const PoolParams &params = std::get<PoolParams>(step.params); // lengths checked on load
    Pool2DCall &call = pool->call_;
    call.window = params.window;
    call.strides = params.strides;
    call.padding = params.padding;
    const TensorType &result = typeOf(exe, step.results[0]);
    call.kind = isMax ? PoolKind::Max : PoolKind::Avg;
    call.input = backward ? result : typeOf(exe, step.operands[0]);
    call.output = backward ? typeOf(exe, step.operands.back()) : result;
    pool->kind_ = backward;
    SMELT_RETURN_IF_ERROR(pool->check());
    return std::unique_ptr<GpuStep>(std::move(pool));
  }

private:
  using CudnnStep::CudnnStep;
};

/// all_reduce on the executor's communicator (GpuAllReduce.h): a bucket of several operands is
/// packed into the workspace, reduced there and unpacked.
class AllReduceStep final : public GpuStep {
public:
  static Expected<std::unique_ptr<GpuStep>> plan(const Step &step, const AllReduceSpec &spec) {
    std::unique_ptr<AllReduceStep> reduce(new AllReduceStep(cpu::describe(step)));
    reduce->spec_ = spec;
    reduce->operands_ = step.operands.size();
    if (step.operands.size() > 1)
      reduce->workspace_ = size_t(spec.count) * byteWidth(spec.dtype);
    return std::unique_ptr<GpuStep>(std::move(reduce));
  }
  bool reducesAcrossReplicas() const override { return spec_.replicas > 1; }
  Expected<Launch> bind(const StepBinding &binding) const override {
    return Launch([gpu = binding.device.get(), spec = spec_, ws = binding.workspace,
                   communicator = binding.communicator, collectives = binding.collectives,
                   operands = operands_](void *const *b) {
      return allReduceOnGpu(*gpu, spec, b, b + operands, ws, *communicator,
                            collectives->capturing ? nullptr : &collectives->started);
    });
  }

private:
  using GpuStep::GpuStep;
  AllReduceSpec spec_;
  size_t operands_ = 0;
};

/// The replica's index, written on the stream a byte at a time (little-endian i64): no kernel,
/// no copy from the host, no wait. CollectiveSteps checked its one i64 result.
class ReplicaIdStep final : public GpuStep {
public:
  static Expected<std::unique_ptr<GpuStep>> plan(const Step &step) {
    return std::unique_ptr<GpuStep>(new ReplicaIdStep(cpu::describe(step)));
  }
  Expected<Launch> bind(const StepBinding &binding) const override {
    return Launch([gpu = binding.device.get(), communicator = binding.communicator,
                   what = what_](void *const *b) {
      uint64_t index = *communicator ? uint64_t((*communicator)->rank()) : 0;
      for (int byte = 0; byte < 8; ++byte)
        if (Status s = gpu->check(
                gpu->driver().memsetD8Async(devicePointer(static_cast<char *>(b[0]) + byte),
                                            uint8_t(index >> (8 * byte)), 1, gpu->stream()),
                "cuMemsetD8Async");
            !s.ok())
          return inStep(what, s);
      return Status();
    });
  }

private:
  using GpuStep::GpuStep;
};

/// Plans step `index` of `exe`, whose collective steps `collectives` prepared.
Expected<std::unique_ptr<GpuStep>> planStep(const Executable &exe, size_t index,
                                            const CollectiveSteps &collectives, bool allowTf32) {
  const Step &step = exe.steps[index];
  switch (step.op) {
  case StepOp::Fusion:
    return KernelStep::plan(exe, step);
  case StepOp::Argmax:
  case StepOp::ScatterAdd:
    if (step.kernel() != kNoKernel)
      return KernelStep::plan(exe, step);
    break;
  case StepOp::Copy:
    return CopyStep::plan(exe, step);
  case StepOp::Matmul:
    return MatmulStep::plan(exe, step, allowTf32);
  case StepOp::AllReduce:
    return AllReduceStep::plan(step, collectives.allReduce(index));
  case StepOp::ReplicaId:
    return ReplicaIdStep::plan(step);
  case StepOp::Conv2D:
  case StepOp::Conv2DBackwardInput:
  case StepOp::Conv2DBackwardFilter:
    return ConvStep::plan(exe, step, allowTf32);
  case StepOp::MaxPool2D:
  case StepOp::AvgPool2D:
  case StepOp::MaxPool2DBackward:
  case StepOp::AvgPool2DBackward:
    return PoolStep::plan(exe, step);
  default:
    break;
  }
  return Status::error(fmt::format("{} has no GPU kernel: smelt-place-devices should have put "
                                   "it on cpu:0",
                                   cpu::describe(step)));
}

} // namespace

Expected<std::vector<std::unique_ptr<GpuStep>>> planGpuSteps(const Executable &exe,
                                                             bool allowTf32) {
  SMELT_RETURN_IF_ERROR(validateDataflow(exe));
  SMELT_RETURN_IF_ERROR(checkBufferSizes(exe, nullptr, /*inputsOnDevice=*/true));
  // The all_reduce steps' attributes and types, checked as the CPU executor checks them.
  SMELT_ASSIGN_OR_RETURN(CollectiveSteps collectives, CollectiveSteps::prepare(exe));
  std::vector<std::unique_ptr<GpuStep>> steps;
  for (size_t s = 0; s < exe.steps.size(); ++s) {
    SMELT_ASSIGN_OR_RETURN(std::unique_ptr<GpuStep> step, planStep(exe, s, collectives, allowTf32));
    steps.push_back(std::move(step));
  }
  return steps;
}

} // namespace smelt::rt::cuda
