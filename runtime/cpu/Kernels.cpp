// Library kernel dispatch by step op, and the parameter checks every family uses.
#include "runtime/cpu/Kernels.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace smelt::rt::cpu {

std::string describe(const Step &step) {
  return step.location.empty() ? fmt::format("'{}'", step.name())
                               : fmt::format("'{}' ({})", step.name(), step.location);
}

Status expectCount(const Step &step, const char *name, const std::vector<int64_t> &values,
                   size_t count) {
  if (values.size() == count)
    return Status();
  return Status::error(fmt::format("{}: {} = [{}] needs {} values", describe(step), name,
                                   fmt::join(values, ", "), count));
}

Expected<Kernel> prepareKernel(const Step &step, const StepTypes &types) {
  switch (step.op) {
  case StepOp::Matmul:
  case StepOp::Conv2D:
  case StepOp::Conv2DBackwardInput:
  case StepOp::Conv2DBackwardFilter:
    return prepareContraction(step, types);
  case StepOp::MaxPool2D:
  case StepOp::AvgPool2D:
  case StepOp::MaxPool2DBackward:
  case StepOp::AvgPool2DBackward:
    return preparePooling(step, types);
  case StepOp::Argmax:
    return prepareArgmax(step, types);
  case StepOp::ScatterAdd:
    return prepareScatterAdd(step, types);
  case StepOp::Slice:
  case StepOp::Concat:
  case StepOp::Pad:
  case StepOp::Copy:
    return prepareDataMovement(step, types);
  case StepOp::RngUniform:
  case StepOp::RngNormal:
    return prepareRandom(step, types);
  case StepOp::Fusion:
  case StepOp::AllReduce:
  case StepOp::ReplicaId:
    break;
  }
  return Status::error(fmt::format("{}: not a library call; the executor runs it", describe(step)));
}

} // namespace smelt::rt::cpu
