// The step op table and its families (StepOps.h).
#include "runtime/StepOps.h"

#include "runtime/RunBuffers.h"

#include <fmt/format.h>

namespace smelt::rt {

Status StepFamily::validate(const Executable &, const Step &) const { return Status(); }

void StepFamily::cost(const Executable &, const Step &, const std::vector<TensorType> &,
                      const TensorType &, int64_t touched, StepCost &cost) const {
  cost.flops = double(touched);
}

Expected<cpu::Kernel> StepFamily::prepareCpu(const Step &step, const cpu::StepTypes &) const {
  return Status::error(
      fmt::format("{}: not a library call; the executor runs it", cpu::describe(step)));
}

namespace {

/// A kernel step's buffers (a fusion's, or an argmax's or scatter_add's with a GPU kernel)
/// against the kernel it runs: its code indexes them by the types it was compiled for, so a
/// buffer of another type (a damaged artifact, a hand-built step) would make it read or write
/// out of bounds.
Status checkKernelBuffers(const Executable &exe, const Step &step) {
  int64_t index = step.kernel();
  if (index < 0 || size_t(index) >= exe.kernels.size())
    return Status::error(fmt::format("{}: kernel #{} does not exist (the executable has {})",
                                     cpu::describe(step), index, exe.kernels.size()));
  const FusedKernel &kernel = exe.kernels[size_t(index)];
  std::string what = fmt::format("{}: kernel #{} ('{}')", cpu::describe(step), index, kernel.name);
  if (step.operands.size() != kernel.inputs.size() || step.results.size() != kernel.results.size())
    return Status::error(fmt::format("{} reads {} buffers and writes {}, but the step passes {} "
                                     "operands and {} results",
                                     what, kernel.inputs.size(), kernel.results.size(),
                                     step.operands.size(), step.results.size()));
  auto check = [&](const std::vector<BufferId> &ids, const std::vector<TensorType> &types,
                   const char *role) -> Status {
    for (size_t i = 0; i < ids.size(); ++i)
      if (exe.buffers[ids[i]].type != types[i])
        return Status::error(fmt::format("{} was compiled for {} #{} of type {}, but the step "
                                         "passes {}",
                                         what, role, i, types[i].str(), bufferLabel(exe, ids[i])));
    return Status();
  };
  SMELT_RETURN_IF_ERROR(check(step.operands, kernel.inputs, "operand"));
  SMELT_RETURN_IF_ERROR(check(step.results, kernel.results, "result"));
  // Results written in place of an operand: of its type, one result per operand.
  const KernelParams *params = step.paramsAs<KernelParams>();
  if (!params || params->inPlace.empty())
    return Status();
  if (params->inPlace.size() != step.results.size())
    return Status::error(fmt::format("{}: in_place has {} entries for {} results", what,
                                     params->inPlace.size(), step.results.size()));
  std::vector<char> taken(step.operands.size(), 0);
  for (size_t r = 0; r < step.results.size(); ++r) {
    int64_t operand = params->inPlace[r];
    if (operand == -1)
      continue;
    if (operand < 0 || size_t(operand) >= step.operands.size() || taken[size_t(operand)]++)
      return Status::error(fmt::format("{}: result #{} is written in place of operand #{}, "
                                       "which {}",
                                       what, r, operand,
                                       operand < 0 || size_t(operand) >= step.operands.size()
                                           ? "does not exist"
                                           : "another result is written in place of already"));
    if (kernel.inputs[size_t(operand)] != kernel.results[r])
      return Status::error(fmt::format("{}: result #{} ({}) is written in place of operand #{} "
                                       "of another type ({})",
                                       what, r, kernel.results[r].str(), operand,
                                       kernel.inputs[size_t(operand)].str()));
  }
  return Status();
}

/// An error unless `step` reads `count` operands; `which` names them (" (updates, indices)").
Status expectOperands(const Step &step, size_t count, const char *which = "") {
  if (step.operands.size() == count)
    return Status();
  return Status::error(fmt::format("{}: takes {} operand{}{}, got {}", cpu::describe(step), count,
                                   count == 1 ? "" : "s", which, step.operands.size()));
}

/// An argmax's or scatter_add's GPU kernel, where it has one.
Status checkOwnKernel(const Executable &exe, const Step &step) {
  return step.kernel() == kNoKernel ? Status() : checkKernelBuffers(exe, step);
}

/// A fused kernel codegen compiled (every elementwise, shape and reduce op).
class Fusion final : public StepFamily {
  bool writesSeveralResults() const override { return true; }
  Status validate(const Executable &exe, const Step &step) const override {
    return checkKernelBuffers(exe, step);
  }
  void cost(const Executable &exe, const Step &step, const std::vector<TensorType> &,
            const TensorType &, int64_t touched, StepCost &cost) const override {
    const KernelParams *params = step.paramsAs<KernelParams>();
    if (!params || params->kernel < 0 || size_t(params->kernel) >= exe.kernels.size())
      return;
    const FusedKernel &kernel = exe.kernels[size_t(params->kernel)];
    cost.name = kernel.name;
    cost.ops = kernel.ops;
    // About one FLOP per element touched for each of its ops that computes.
    cost.flops = double(touched) * double(kernel.computeOps);
  }
};

int64_t dim(const TensorType &t, size_t fromEnd) {
  return t.shape.size() >= fromEnd ? t.shape[t.shape.size() - fromEnd] : 1;
}

/// matmul, conv2d and conv2d's gradients: oneDNN on the CPU, cuBLASLt and cuDNN on a GPU.
class Contraction final : public StepFamily {
  Status validate(const Executable &exe, const Step &step) const override {
    if (const ConvParams *conv = step.paramsAs<ConvParams>())
      SMELT_RETURN_IF_ERROR(firstError({cpu::expectCount(step, "strides", conv->strides, 2),
                                        cpu::expectCount(step, "padding", conv->padding, 4),
                                        cpu::expectCount(step, "dilation", conv->dilation, 2)}));
    return checkEpilogue(exe, step);
  }

  /// A matmul or conv2d reads a third operand exactly when its epilogue adds a bias, of the
  /// result's dtype and one value per element of its last dimension; conv2d's gradients take
  /// no epilogue. Checked here once for every device.
  static Status checkEpilogue(const Executable &exe, const Step &step) {
    Epilogue epilogue = step.epilogue();
    if (uint8_t(epilogue.activation) >= kNumActivations)
      return Status::error(fmt::format("{}: activation #{} is not one the runtime knows",
                                       cpu::describe(step), unsigned(epilogue.activation)));
    if (epilogue.any() && step.op != StepOp::Matmul && step.op != StepOp::Conv2D)
      return Status::error(fmt::format("{}: only matmul and conv2d take an epilogue (bias {}, "
                                       "activation {})",
                                       cpu::describe(step), epilogue.bias,
                                       activationName(epilogue.activation)));
    SMELT_RETURN_IF_ERROR(expectOperands(step, epilogue.bias ? 3 : 2,
                                         epilogue.bias ? " (the third is the bias)" : ""));
    // One value per element of the result's last dimension (matmul's N, conv2d's F).
    const TensorType &result = exe.buffers[step.results[0]].type;
    std::vector<int64_t> perLast{result.shape.empty() ? 0 : result.shape.back()};
    if (const TensorType &bias = exe.buffers[step.operands.back()].type;
        epilogue.bias && (bias.dtype != result.dtype || bias.shape != perLast))
      return Status::error(fmt::format("{}: the bias is {}, the result {} needs [{}] of {}",
                                       cpu::describe(step), bias.str(), result.str(), perLast[0],
                                       dtypeName(result.dtype)));
    return Status();
  }

  void cost(const Executable &, const Step &step, const std::vector<TensorType> &operands,
            const TensorType &result, int64_t, StepCost &cost) const override {
    cost.kind = "library";
    cost.flops = step.op == StepOp::Matmul ? matmulFlops(step, operands, result)
                                           : convFlops(step, operands, result);
    if (Epilogue epilogue = step.epilogue(); epilogue.any()) {
      // The epilogue, as a fused kernel counts its ops: one FLOP per result element each.
      if (epilogue.bias)
        cost.ops += "+bias";
      if (epilogue.activation != Activation::none)
        cost.ops += std::string("+") + activationName(epilogue.activation);
      cost.flops += double(int(epilogue.bias) + int(epilogue.activation != Activation::none)) *
                    double(result.numElements());
    }
  }

  /// 2*M*N*K over the batch: every result element is a K-long dot product.
  static double matmulFlops(const Step &step, const std::vector<TensorType> &operands,
                            const TensorType &result) {
    const MatmulParams *params = step.paramsAs<MatmulParams>();
    if (operands.empty())
      return 0;
    bool transposed = params && params->transposeLhs;
    return 2.0 * double(result.numElements()) * double(dim(operands[0], transposed ? 2 : 1));
  }

  /// Forward and both backward convolutions do the same multiply-adds: each output element
  /// (N, OH, OW, F) takes KH*KW*C/G of them from the filter, [KH, KW, C/G, F] in HWIO (the
  /// GPU's OHWI is read through hwioDims).
  static double convFlops(const Step &step, const std::vector<TensorType> &operands,
                          const TensorType &result) {
    const ConvParams *params = step.paramsAs<ConvParams>();
    if (operands.size() < 2 || !params)
      return 0;
    const TensorType &filter = step.op == StepOp::Conv2DBackwardFilter ? result : operands[1];
    const TensorType &output = step.op == StepOp::Conv2D                ? result
                               : step.op == StepOp::Conv2DBackwardInput ? operands[0]
                                                                        : operands[1];
    std::vector<int64_t> hwio = params->hwioDims(filter.shape);
    if (hwio.size() != 4 || hwio[3] <= 0)
      return 0;
    return 2.0 * double(output.numElements()) * double(filter.numElements() / hwio[3]);
  }

  Expected<cpu::Kernel> prepareCpu(const Step &step, const cpu::StepTypes &types) const override {
    return cpu::prepareContraction(step, types);
  }
};

/// max_pool2d, avg_pool2d and their gradients.
class Pooling final : public StepFamily {
  Status validate(const Executable &exe, const Step &step) const override {
    const PoolParams *pool = step.paramsAs<PoolParams>();
    // max_pool2d_backward reads (input, grad_output) and gives the input's gradient, of its
    // type; the others read one tensor.
    bool maxBackward = step.op == StepOp::MaxPool2DBackward;
    SMELT_RETURN_IF_ERROR(expectOperands(step, maxBackward ? 2 : 1));
    const TensorType &input = exe.buffers[step.operands[0]].type,
                     &result = exe.buffers[step.results[0]].type;
    if (maxBackward && input != result)
      return Status::error(fmt::format("{}: result {} must have the input's type {}",
                                       cpu::describe(step), result.str(), input.str()));
    return firstError({cpu::expectCount(step, "window", pool->window, 2),
                       cpu::expectCount(step, "strides", pool->strides, 2),
                       cpu::expectCount(step, "padding", pool->padding, 4)});
  }
  Expected<cpu::Kernel> prepareCpu(const Step &step, const cpu::StepTypes &types) const override {
    return cpu::preparePooling(step, types);
  }
};

/// argmax: a CPU routine, or a GPU kernel of its own (ArgmaxParams::kernel).
class Argmax final : public StepFamily {
  Status validate(const Executable &exe, const Step &step) const override {
    SMELT_RETURN_IF_ERROR(expectOperands(step, 1));
    return checkOwnKernel(exe, step);
  }
  Expected<cpu::Kernel> prepareCpu(const Step &step, const cpu::StepTypes &types) const override {
    return cpu::prepareArgmax(step, types);
  }
};

/// scatter_add: a CPU routine, or a GPU kernel of its own (ScatterAddParams::kernel).
class ScatterAdd final : public StepFamily {
  Status validate(const Executable &exe, const Step &step) const override {
    SMELT_RETURN_IF_ERROR(expectOperands(step, 2, " (updates, indices)"));
    return checkOwnKernel(exe, step);
  }
  void cost(const Executable &, const Step &, const std::vector<TensorType> &operands,
            const TensorType &, int64_t, StepCost &cost) const override {
    // An add per element of the updates; the result is zeroed first and written once.
    if (!operands.empty())
      cost.flops = double(operands[0].numElements());
  }
  Expected<cpu::Kernel> prepareCpu(const Step &step, const cpu::StepTypes &types) const override {
    return cpu::prepareScatterAdd(step, types);
  }
};

/// slice, concat, pad, and copy between devices: they move data and compute nothing.
class DataMovement final : public StepFamily {
  /// Slice's and pad's lists have one entry per dimension of the operand.
  Status validate(const Executable &exe, const Step &step) const override {
    // concat joins one or more operands; the others read one.
    if (step.op == StepOp::Concat ? step.operands.empty() : step.operands.size() != 1)
      return Status::error(fmt::format("{}: wrong number of operands ({})", cpu::describe(step),
                                       step.operands.size()));
    size_t rank = exe.buffers[step.operands[0]].type.shape.size();
    if (const SliceParams *slice = step.paramsAs<SliceParams>())
      return firstError({cpu::expectCount(step, "start_indices", slice->start, rank),
                         cpu::expectCount(step, "limit_indices", slice->limit, rank),
                         cpu::expectCount(step, "strides", slice->strides, rank)});
    if (const PadParams *pad = step.paramsAs<PadParams>())
      return firstError({cpu::expectCount(step, "low", pad->low, rank),
                         cpu::expectCount(step, "high", pad->high, rank)});
    return Status();
  }
  void cost(const Executable &, const Step &step, const std::vector<TensorType> &,
            const TensorType &, int64_t, StepCost &cost) const override {
    if (step.op == StepOp::Copy)
      cost.kind = "copy";
  }
  Expected<cpu::Kernel> prepareCpu(const Step &step, const cpu::StepTypes &types) const override {
    return cpu::prepareDataMovement(step, types);
  }
};

/// all_reduce and replica_id: the executors run them with their communicator
/// (CollectiveSteps.h checks them). An all_reduce bucket writes several results.
class Collective final : public StepFamily {
public:
  explicit Collective(bool severalResults) : severalResults_(severalResults) {}

private:
  bool writesSeveralResults() const override { return severalResults_; }
  void cost(const Executable &exe, const Step &step, const std::vector<TensorType> &operands,
            const TensorType &result, int64_t touched, StepCost &cost) const override {
    // Start of a collective: its time is in the wait; the sum is a FLOP per element a replica.
    StepFamily::cost(exe, step, operands, result, touched, cost);
    cost.kind = "collective";
  }
  bool severalResults_;
};

} // namespace

Expected<MatmulShape> matmulShape(const Step &step, const std::vector<TensorType> &operands,
                                  const TensorType &result) {
  const MatmulParams &params = std::get<MatmulParams>(step.params);
  bool tl = params.transposeLhs, tr = params.transposeRhs;
  const TensorType &a = operands[0], &b = operands[1], &c = result;
  size_t rank = a.shape.size();
  bool ok = rank >= 2 && b.shape.size() == rank && c.shape.size() == rank;
  MatmulShape shape;
  for (size_t i = 0; ok && i + 2 < rank; ++i) {
    ok = a.shape[i] == b.shape[i] && a.shape[i] == c.shape[i];
    shape.batch *= a.shape[i];
  }
  if (ok) {
    shape.m = a.shape[rank - (tl ? 1 : 2)];
    shape.k = a.shape[rank - (tl ? 2 : 1)];
    shape.n = b.shape[rank - (tr ? 2 : 1)];
    ok = b.shape[rank - (tr ? 1 : 2)] == shape.k && c.shape[rank - 2] == shape.m &&
         c.shape[rank - 1] == shape.n;
  }
  if (!ok || a.dtype != b.dtype || a.dtype != c.dtype)
    return Status::error(fmt::format("{}: {} x {}{}{} does not give {}", cpu::describe(step),
                                     a.str(), b.str(), tl ? " (lhs transposed)" : "",
                                     tr ? " (rhs transposed)" : "", c.str()));
  return shape;
}

const StepFamily &stepFamily(StepOp op) {
  static const Fusion fusion;
  static const Contraction contraction;
  static const Pooling pooling;
  static const Argmax argmax;
  static const ScatterAdd scatterAdd;
  static const DataMovement dataMovement;
  static const Collective allReduce(/*severalResults=*/true);
  static const Collective replicaId(/*severalResults=*/false);
  // Indexed by StepOp, as Executable.cpp's table of names, kinds and parameters.
  static const StepFamily *const families[kNumStepOps] = {
      &fusion,       // fusion
      &contraction,  // matmul
      &contraction,  // conv2d
      &contraction,  // conv2d_backward_input
      &contraction,  // conv2d_backward_filter
      &pooling,      // max_pool2d
      &pooling,      // avg_pool2d
      &pooling,      // max_pool2d_backward
      &pooling,      // avg_pool2d_backward
      &argmax,       // argmax
      &dataMovement, // slice
      &dataMovement, // concat
      &dataMovement, // pad
      &dataMovement, // copy
      &allReduce,    // all_reduce
      &replicaId,    // replica_id
      &scatterAdd,   // scatter_add
  };
  return *families[uint8_t(op) < kNumStepOps ? uint8_t(op) : uint8_t(StepOp::Copy)];
}

} // namespace smelt::rt
