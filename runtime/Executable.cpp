// Executable helpers: the step table (each op's kind, name and parameters; StepOps.cpp has
// each op's family) and a readable listing.
#include "runtime/Executable.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <numeric>

namespace smelt::rt {

namespace {

struct StepOpInfo {
  const char *name;
  StepKind kind;
  StepParams params;
};

/// Indexed by StepOp.
const StepOpInfo &info(StepOp op) {
  static const StepOpInfo table[kNumStepOps] = {
      {"fusion", StepKind::Kernel, KernelParams{}},
      {"matmul", StepKind::Library, MatmulParams{}},
      {"conv2d", StepKind::Library, ConvParams{}},
      {"conv2d_backward_input", StepKind::Library, ConvParams{}},
      {"conv2d_backward_filter", StepKind::Library, ConvParams{}},
      {"max_pool2d", StepKind::Library, PoolParams{}},
      {"avg_pool2d", StepKind::Library, PoolParams{}},
      {"max_pool2d_backward", StepKind::Library, PoolParams{}},
      {"avg_pool2d_backward", StepKind::Library, PoolParams{}},
      {"argmax", StepKind::Library, ArgmaxParams{}},
      {"slice", StepKind::Library, SliceParams{}},
      {"concat", StepKind::Library, AxisParams{}},
      {"pad", StepKind::Library, PadParams{}},
      {"copy", StepKind::Copy, NoParams{}},
      {"all_reduce", StepKind::Collective, AllReduceParams{}},
      {"replica_id", StepKind::Collective, NoParams{}},
      {"scatter_add", StepKind::Library, ScatterAddParams{}},
  };
  return table[uint8_t(op) < kNumStepOps ? uint8_t(op) : uint8_t(StepOp::Copy)];
}

std::string fieldText(bool v) { return v ? "true" : "false"; }
std::string fieldText(int64_t v) { return std::to_string(v); }
std::string fieldText(double v) { return fmt::format("{}", v); }
std::string fieldText(ReduceKind v) { return v == ReduceKind::sum ? "sum" : "mean"; }
std::string fieldText(Activation v) { return activationName(v); }
std::string fieldText(FilterLayout v) { return v == FilterLayout::ohwi ? "ohwi" : "hwio"; }
std::string fieldText(const std::vector<int64_t> &v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

/// "transpose_lhs=true, transpose_rhs=false": a step's parameters, for listings.
std::string paramsText(const Step &step) {
  std::vector<std::string> parts;
  std::visit(
      [&](auto params) {
        params.fields([&](const char *name, const auto &value) {
          // A fusion lists in_place only when some result is written in place.
          if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::vector<int64_t>>)
            if (value.empty() && std::string_view(name) == "in_place")
              return;
          parts.push_back(fmt::format("{}={}", name, fieldText(value)));
        });
      },
      step.params);
  return fmt::format("{}", fmt::join(parts, ", "));
}

} // namespace

const char *activationName(Activation activation) {
  static constexpr const char *kNames[kNumActivations] = {"none",  "relu",      "tanh", "logistic",
                                                          "relu6", "hardswish", "swish"};
  return uint8_t(activation) < kNumActivations ? kNames[uint8_t(activation)] : "unknown";
}

int64_t Step::kernel() const {
  return std::visit(
      [](const auto &p) -> int64_t {
        if constexpr (requires { p.kernel; })
          return p.kernel;
        else
          return kNoKernel;
      },
      params);
}

StepKind stepKind(StepOp op) { return info(op).kind; }
const char *stepOpName(StepOp op) { return info(op).name; }
StepParams paramsFor(StepOp op) { return info(op).params; }

bool isCopyStep(const Step &step) {
  return step.op == StepOp::Copy && step.operands.size() == 1 && step.results.size() == 1;
}

std::vector<BufferId> copiedValues(const Executable &exe) {
  std::vector<BufferId> value(exe.buffers.size());
  std::iota(value.begin(), value.end(), 0);
  for (const Step &step : exe.steps)
    if (isCopyStep(step))
      value[step.results[0]] = value[step.operands[0]];
  return value;
}

std::string Executable::inputName(size_t i) const {
  return i < inputNames.size() ? inputNames[i] : buffers[size_t(inputs[i])].name;
}

std::string Executable::outputName(size_t i) const {
  return i < outputNames.size() ? outputNames[i] : buffers[size_t(outputs[i])].name;
}

std::string Executable::str() const {
  std::string out = fmt::format("executable @{} ({} buffers, {} steps)\n", name, buffers.size(),
                                steps.size());
  auto bufferList = [&](const std::vector<BufferId> &ids) {
    std::vector<std::string> parts;
    for (BufferId id : ids)
      parts.push_back(fmt::format("b{}:{}{}", id, buffers[id].type.str(),
                                  buffers[id].offset < 0
                                      ? ""
                                      : fmt::format("@{}", buffers[id].offset)));
    return fmt::format("{}", fmt::join(parts, ", "));
  };
  auto named = [&](const std::vector<BufferId> &ids, auto nameOf) {
    std::vector<std::string> parts;
    for (size_t i = 0; i < ids.size(); ++i)
      parts.push_back(fmt::format("{}={}", nameOf(i), bufferList({ids[i]})));
    return fmt::format("{}", fmt::join(parts, ", "));
  };
  out += fmt::format("  inputs: {}\n", named(inputs, [&](size_t i) { return inputName(i); }));
  for (const Constant &c : constants)
    out += fmt::format("  constant b{}: {}\n", c.buffer, buffers[c.buffer].type.str());
  auto ids = [](const std::vector<BufferId> &list) {
    std::vector<std::string> parts;
    for (BufferId id : list)
      parts.push_back(fmt::format("b{}", id));
    return fmt::format("{}", fmt::join(parts, " "));
  };
  for (const Step &step : steps)
    out += fmt::format("  {} = {}({}) {{{}}}{}{}\n", bufferList(step.results), step.name(),
                       bufferList(step.operands), paramsText(step),
                       step.device == "cpu:0" ? "" : " on " + step.device,
                       step.frees.empty() ? "" : " frees " + ids(step.frees));
  out += fmt::format("  outputs: {}\n", named(outputs, [&](size_t i) { return outputName(i); }));
  for (size_t k = 0; k < kernels.size(); ++k)
    out += fmt::format("  kernel {} {} ({}, {} units): {}\n", k, kernels[k].name, kernels[k].kind,
                       kernels[k].units, kernels[k].ops);
  for (const Segment &segment : segments)
    out += fmt::format("  segment on {}: steps [{}, {}), reads [{}], writes [{}]\n", segment.device,
                       segment.begin, segment.end, ids(segment.reads), ids(segment.writes));
  for (const auto &[device, bytes] : peakBytes)
    out += fmt::format("  peak bytes on {}: {}\n", device, bytes);
  return out;
}

} // namespace smelt::rt
