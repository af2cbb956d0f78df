// The multi-device executor (Executor.h): segments by device, a runner per segment, values
// passed between them through the host.
#include "runtime/Executor.h"

#include "runtime/BufferLiveness.h"
#include "runtime/CpuExecutor.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

namespace smelt::rt {

namespace {

bool isCopy(const Step &step) {
  return step.op == StepOp::Copy && step.operands.size() == 1 && step.results.size() == 1;
}

/// Per buffer, the buffer whose value it holds: copies only move values between devices.
/// Steps are in dataflow order (validateDataflow), so a copy's operand is resolved first.
std::vector<BufferId> valueSources(const Executable &exe) {
  std::vector<BufferId> source(exe.buffers.size());
  std::iota(source.begin(), source.end(), 0);
  for (const Step &step : exe.steps)
    if (isCopy(step))
      source[step.results[0]] = source[step.operands[0]];
  return source;
}

/// Whether the Executable runs as it is: every step on one device and no copies.
bool isSingleSegment(const Executable &exe) {
  for (const Step &step : exe.steps)
    if (isCopy(step) || step.device != exe.steps.front().device)
      return false;
  return true;
}

} // namespace

Expected<std::unique_ptr<SegmentRunner>> cpuSegmentRunner(const Executable &segment,
                                                         const std::string &,
                                                         const ExecutorOptions &options) {
  Expected<CpuExecutor> cpu = CpuExecutor::create(segment, options.trace);
  if (!cpu)
    return cpu.status();
  cpu->setCommunicator(options.communicator);
  return std::unique_ptr<SegmentRunner>(
      std::make_unique<ExecutorRunner<CpuExecutor>>(std::move(*cpu)));
}

Executable movedToDevice(Executable executable, const std::string &from, const std::string &to) {
  for (Step &step : executable.steps)
    if (step.device == from)
      step.device = to;
  return executable;
}

std::vector<Executor::Segment> splitByDevice(const Executable &exe) {
  std::vector<Executor::Segment> segments;
  if (isSingleSegment(exe)) {
    Executor::Segment &only = segments.emplace_back();
    only.device = exe.steps.empty() ? "cpu:0" : exe.steps.front().device;
    only.executable = exe;
    only.reads = exe.inputs;
    only.writes = exe.outputs;
    only.steps = exe.steps.size();
    return segments;
  }
  std::vector<BufferId> source = valueSources(exe);
  std::map<BufferId, const Constant *> constants;
  for (const Constant &c : exe.constants)
    constants[c.buffer] = &c;

  // Each segment's buffers numbered afresh, and what it produced, by the whole's ids.
  std::vector<std::map<BufferId, BufferId>> local;
  std::vector<std::vector<BufferId>> produced;
  auto localBuffer = [&](BufferId global) {
    Executable &part = segments.back().executable;
    auto [it, added] = local.back().try_emplace(global, BufferId(part.buffers.size()));
    if (added)
      part.buffers.push_back(exe.buffers[global]);
    return std::pair{it->second, added};
  };
  for (const Step &step : exe.steps) {
    if (isCopy(step))
      continue;
    if (segments.empty() || segments.back().device != step.device) {
      Executor::Segment &segment = segments.emplace_back();
      segment.device = step.device;
      segment.executable.name = exe.name;
      segment.executable.placement = exe.placement;
      segment.executable.kernels = exe.kernels;
      segment.executable.cpu = exe.cpu;
      segment.executable.cuda = exe.cuda;
      local.emplace_back();
      produced.emplace_back();
    }
    Executor::Segment &segment = segments.back();
    Step copy = step;
    for (BufferId &operand : copy.operands) {
      BufferId value = source[operand];
      auto [id, added] = localBuffer(value);
      if (added && constants.count(value))
        segment.executable.constants.push_back({id, constants[value]->bytes});
      else if (added) {
        segment.executable.inputs.push_back(id);
        segment.reads.push_back(value);
      }
      operand = id;
    }
    for (BufferId &result : copy.results) {
      produced.back().push_back(result);
      result = localBuffer(result).first;
    }
    segment.executable.steps.push_back(std::move(copy));
  }

  // A segment hands on what a later one reads or the caller gets back.
  std::set<BufferId> wanted;
  for (const Executor::Segment &segment : segments)
    wanted.insert(segment.reads.begin(), segment.reads.end());
  for (BufferId output : exe.outputs)
    wanted.insert(source[output]);
  for (size_t k = 0; k < segments.size(); ++k) {
    segments[k].steps = segments[k].executable.steps.size();
    for (BufferId global : produced[k])
      if (wanted.count(global)) {
        segments[k].writes.push_back(global);
        segments[k].executable.outputs.push_back(local[k].at(global));
      }
  }
  return segments;
}

Expected<std::unique_ptr<Executor>> Executor::create(const Executable &executable,
                                                     ExecutorOptions options) {
  if (Status s = validateDataflow(executable); !s.ok())
    return s;
  std::unique_ptr<Executor> exec(new Executor());
  exec->executable_ = std::make_shared<const Executable>(executable);
  exec->options_ = std::move(options);
  exec->segments_ = splitByDevice(executable);
  exec->whole_ = isSingleSegment(executable);
  exec->valueOf_ = valueSources(executable);
  for (Segment &segment : exec->segments_) {
    const std::string &device = segment.device;
    std::string where = exec->segments_.size() == 1 ? "" : "on " + device + ": ";
    if (device == "cpu:0") {
      Expected<std::unique_ptr<SegmentRunner>> cpu =
          cpuSegmentRunner(segment.executable, device, exec->options_);
      if (!cpu)
        return Status::error(where + cpu.message());
      segment.runner = std::move(*cpu);
    } else if (device.rfind("gpu:", 0) == 0) {
      if (!exec->options_.gpuRunner)
        return Status::error(fmt::format(
            "@{} has steps placed on {} ('{}' at {}), and this program was built without the "
            "GPU executor: compile for cpu:0 (no GPU placement) or build Smelt with CUDA",
            executable.name, device, segment.executable.steps.front().name(),
            segment.executable.steps.front().location));
      Expected<std::unique_ptr<SegmentRunner>> gpu =
          exec->options_.gpuRunner(segment.executable, device, exec->options_);
      if (!gpu)
        return Status::error(where + gpu.message());
      segment.runner = std::move(*gpu);
    } else {
      return Status::error(fmt::format("@{}: step '{}' ({}) is placed on '{}', which is not a "
                                       "device this runtime drives (cpu:0, gpu:N)",
                                       executable.name, segment.executable.steps.front().name(),
                                       segment.executable.steps.front().location, device));
    }
  }
  // Outputs that are constants are handed back from host copies made once; the constants that
  // segments read are their own (and a single segment hands back its own outputs).
  if (!exec->whole_) {
    exec->constants_.resize(executable.buffers.size());
    for (const Constant &c : executable.constants) {
      if (std::none_of(executable.outputs.begin(), executable.outputs.end(),
                       [&](BufferId o) { return exec->valueOf_[o] == c.buffer; }))
        continue;
      HostTensor &t = exec->constants_[c.buffer] =
          HostTensor::zeros(executable.buffers[c.buffer].type);
      std::copy(c.bytes.begin(), c.bytes.end(), t.data<uint8_t>());
      exec->constantOutputs_.push_back(c.buffer);
    }
  }
  // The runners hold their segments; only the cut stays here.
  for (Segment &segment : exec->segments_)
    segment.executable = Executable();
  return exec;
}

Status Executor::run(const std::vector<const HostTensor *> &inputs,
                     std::vector<HostTensor> &outputs) {
  const Executable &exe = *executable_;
  if (whole_)
    return segments_[0].runner->run(inputs, outputs);
  if (Status s = checkRunInputs(exe, inputs); !s.ok())
    return s;
  values_.assign(exe.buffers.size(), nullptr);
  produced_.assign(exe.buffers.size(), HostTensor());
  for (size_t i = 0; i < exe.inputs.size(); ++i)
    values_[exe.inputs[i]] = inputs[i];
  for (BufferId id : constantOutputs_)
    values_[id] = &constants_[id];
  std::vector<const HostTensor *> segmentInputs;
  std::vector<HostTensor> segmentOutputs;
  for (Segment &segment : segments_) {
    segmentInputs.clear();
    for (BufferId id : segment.reads)
      segmentInputs.push_back(values_[id]);
    Trace::Scope span(segment.device == "cpu:0" ? nullptr : options_.trace,
                      {segment.device, "stream 0"}, "segment on " + segment.device, "segment",
                      {{"steps", std::to_string(segment.steps)}});
    if (Status s = segment.runner->run(segmentInputs, segmentOutputs); !s.ok()) {
      produced_.assign(exe.buffers.size(), HostTensor());
      return s;
    }
    for (size_t i = 0; i < segment.writes.size(); ++i) {
      produced_[segment.writes[i]] = std::move(segmentOutputs[i]);
      values_[segment.writes[i]] = &produced_[segment.writes[i]];
    }
  }
  // Each output once from its value: moved out of a segment's result the last time it is
  // returned, copied before that and from inputs and constants.
  outputs.resize(exe.outputs.size());
  for (size_t i = 0; i < exe.outputs.size(); ++i) {
    BufferId value = valueOf_[exe.outputs[i]];
    bool lastUse = std::none_of(exe.outputs.begin() + i + 1, exe.outputs.end(),
                                [&](BufferId o) { return valueOf_[o] == value; });
    if (lastUse && values_[value] == &produced_[value])
      outputs[i] = std::move(produced_[value]);
    else
      outputs[i] = *values_[value];
  }
  produced_.assign(exe.buffers.size(), HostTensor());
  return Status();
}

Status Executor::run(const std::vector<HostTensor> &inputs, std::vector<HostTensor> &outputs) {
  return run(pointersTo(inputs), outputs);
}

std::vector<std::string> Executor::segmentDevices() const {
  std::vector<std::string> devices;
  for (const Segment &segment : segments_)
    devices.push_back(segment.device);
  return devices;
}

uint64_t Executor::lastRunPeakBytes() const {
  uint64_t peak = 0;
  for (const Segment &segment : segments_)
    peak = std::max(peak, segment.runner->lastRunPeakBytes());
  return peak;
}

TransferStats Executor::lastRunTransfers() const {
  TransferStats total;
  for (const Segment &segment : segments_)
    total += segment.runner->lastRunTransfers();
  return total;
}

} // namespace smelt::rt
