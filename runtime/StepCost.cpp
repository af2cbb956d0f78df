// Step costs from shapes and attributes alone: no timing, so the profiler and the bench tool
// can compute them once per Executable.
#include "runtime/StepCost.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace smelt::rt {

namespace {

/// Ops that only move or reinterpret data: they count bytes but no FLOPs.
bool movesData(const std::string &op) {
  static const std::set<std::string> ops = {"broadcast_in_dim", "reshape", "transpose", "slice",
                                            "concat", "pad", "copy", "convert", "iota",
                                            "constant"};
  return ops.count(op) != 0;
}

int64_t dim(const TensorType &t, size_t fromEnd) {
  return t.shape.size() >= fromEnd ? t.shape[t.shape.size() - fromEnd] : 1;
}

/// 2*M*N*K over the batch: every result element is a K-long dot product.
double matmulFlops(const Step &step, const TensorType &lhs, const TensorType &result) {
  auto flag = step.attrs.find("transpose_lhs");
  bool transposed = flag != step.attrs.end() && std::holds_alternative<int64_t>(flag->second) &&
                    std::get<int64_t>(flag->second) != 0;
  return 2.0 * double(result.numElements()) * double(dim(lhs, transposed ? 2 : 1));
}

/// Forward and both backward convolutions do the same multiply-adds: each output element
/// (N, OH, OW, F) takes KH*KW*C of them from the HWIO filter.
double convFlops(const Step &step, const std::vector<TensorType> &operands,
                 const TensorType &result) {
  if (operands.size() < 2)
    return 0;
  const TensorType &filter = step.op == "conv2d_backward_filter" ? result : operands[1];
  const TensorType &output = step.op == "conv2d"                  ? result
                             : step.op == "conv2d_backward_input" ? operands[0]
                                                                  : operands[1];
  int64_t features = dim(filter, 1);
  if (filter.shape.size() != 4 || features <= 0)
    return 0;
  return 2.0 * double(output.numElements()) * double(filter.numElements() / features);
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
  cost.name = step.op;
  cost.ops = step.op;
  cost.location = step.location;
  cost.kind = step.op == "copy" ? "copy" : "kernel";
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

  if (step.op == "matmul" && !operands.empty()) {
    cost.kind = "library";
    cost.flops = matmulFlops(step, operands[0], result);
  } else if (step.op.rfind("conv2d", 0) == 0) {
    cost.kind = "library";
    cost.flops = convFlops(step, operands, result);
  } else if (step.op == "all_reduce" || step.op == "replica_id") {
    // Start of a collective: its time is in the wait; the sum is a FLOP per element a replica.
    cost.kind = "collective";
    cost.flops = double(touched);
  } else if (step.op == "fusion") {
    auto index = step.attrs.find("kernel");
    if (index != step.attrs.end() && std::holds_alternative<int64_t>(index->second) &&
        size_t(std::get<int64_t>(index->second)) < exe.kernels.size()) {
      const FusedKernel &kernel = exe.kernels[size_t(std::get<int64_t>(index->second))];
      cost.name = kernel.name;
      cost.ops = kernel.ops;
    }
    // About one FLOP per element touched for each op of the fusion that computes.
    size_t begin = 0;
    while (begin <= cost.ops.size()) {
      size_t end = std::min(cost.ops.find('+', begin), cost.ops.size());
      if (!movesData(cost.ops.substr(begin, end - begin)))
        cost.flops += double(touched);
      begin = end + 1;
    }
  } else if (!movesData(step.op)) {
    cost.flops = double(touched);
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
