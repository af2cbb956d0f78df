// Step costs from shapes and attributes alone: no timing, so the profiler and the bench tool
// can compute them once per Executable.
#include "runtime/StepCost.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace smelt::rt {

namespace {

int64_t dim(const TensorType &t, size_t fromEnd) {
  return t.shape.size() >= fromEnd ? t.shape[t.shape.size() - fromEnd] : 1;
}

/// 2*M*N*K over the batch: every result element is a K-long dot product.
double matmulFlops(const Step &step, const TensorType &lhs, const TensorType &result) {
  const MatmulParams *params = step.paramsAs<MatmulParams>();
  bool transposed = params && params->transposeLhs;
  return 2.0 * double(result.numElements()) * double(dim(lhs, transposed ? 2 : 1));
}

/// Forward and both backward convolutions do the same multiply-adds: each output element
/// (N, OH, OW, F) takes KH*KW*C/G of them from the filter, [KH, KW, C/G, F] in HWIO (the
/// GPU's OHWI is read through hwioDims).
double convFlops(const Step &step, const std::vector<TensorType> &operands,
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

std::string shapeList(const Executable &exe, const std::vector<BufferId> &ids) {
  std::string out;
  for (BufferId id : ids)
    out += (out.empty() ? "" : ", ") + exe.buffers[id].type.str();
  return out;
}

} // namespace

StepCost stepCost(const Executable &exe, const Step &step) {
  StepCost cost;
  cost.name = step.name();
  cost.ops = step.name();
  cost.location = step.location;
  cost.kind = step.kind() == StepKind::Copy ? "copy" : "kernel";
  std::vector<TensorType> operands;
  int64_t touched = 0;
  for (BufferId id : step.operands) {
    operands.push_back(exe.buffers[id].type);
    cost.bytes += double(exe.buffers[id].type.byteSize());
    touched = std::max(touched, exe.buffers[id].type.numElements());
  }
  TensorType result;
  for (BufferId id : step.results) {
    result = exe.buffers[id].type;
    cost.bytes += double(result.byteSize());
    touched = std::max(touched, result.numElements());
  }
  cost.shapes = shapeList(exe, step.operands) + " -> " + shapeList(exe, step.results);

  switch (step.kind()) {
  case StepKind::Kernel:
    if (const KernelParams *params = step.paramsAs<KernelParams>();
        params && params->kernel >= 0 && size_t(params->kernel) < exe.kernels.size()) {
      const FusedKernel &kernel = exe.kernels[size_t(params->kernel)];
      cost.name = kernel.name;
      cost.ops = kernel.ops;
      // About one FLOP per element touched for each of its ops that computes.
      cost.flops = double(touched) * double(kernel.computeOps);
    }
    break;
  case StepKind::Library:
    if (step.op == StepOp::Matmul && !operands.empty()) {
      cost.kind = "library";
      cost.flops = matmulFlops(step, operands[0], result);
    } else if (step.op == StepOp::Conv2D || step.op == StepOp::Conv2DBackwardInput ||
               step.op == StepOp::Conv2DBackwardFilter) {
      cost.kind = "library";
      cost.flops = convFlops(step, operands, result);
    } else if (step.op == StepOp::Argmax || step.op == StepOp::MaxPool2D ||
               step.op == StepOp::AvgPool2D || step.op == StepOp::MaxPool2DBackward ||
               step.op == StepOp::AvgPool2DBackward) {
      cost.flops = double(touched); // a compare or add per element; slice, concat, pad move
    } else if (step.op == StepOp::ScatterAdd && !operands.empty()) {
      // An add per element of the updates; the result is zeroed first and written once.
      cost.flops = double(operands[0].numElements());
    }
    if (Epilogue epilogue = step.epilogue(); epilogue.any()) {
      // The epilogue, as a fused kernel counts its ops: one FLOP per result element each.
      if (epilogue.bias)
        cost.ops += "+bias";
      if (epilogue.activation != Activation::none)
        cost.ops += std::string("+") + activationName(epilogue.activation);
      cost.flops += double(int(epilogue.bias) + int(epilogue.activation != Activation::none)) *
                    double(result.numElements());
    }
    break;
  case StepKind::Collective:
    // Start of a collective: its time is in the wait; the sum is a FLOP per element a replica.
    cost.kind = "collective";
    cost.flops = double(touched);
    break;
  case StepKind::Random:
    cost.flops = double(touched);
    break;
  case StepKind::Copy:
    break;
  }
  return cost;
}

std::map<std::string, std::string> StepCost::traceArgs() const {
  return {{"op", ops},
          {"kind", kind},
          {"shapes", shapes},
          {"bytes", fmt::format("{:.0f}", bytes)},
          {"flops", fmt::format("{:.0f}", flops)},
          {"location", location}};
}

} // namespace smelt::rt
