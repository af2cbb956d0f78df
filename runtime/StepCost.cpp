// Step costs from shapes and attributes alone: no timing, so the profiler and the bench tool
// can compute them once per Executable. What a family computes is its own (StepOps.cpp).
#include "runtime/StepCost.h"

#include "runtime/StepOps.h"

#include <fmt/format.h>

#include <algorithm>

namespace smelt::rt {

namespace {

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
  cost.kind = "kernel";
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

  stepFamily(step.op).cost(exe, step, operands, result, touched, cost);
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
