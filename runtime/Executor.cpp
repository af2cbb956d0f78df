// The multi-device executor (Executor.h): segments by device, a runner per segment, values
// passed between them on their device or through the host.
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
      HostTensor t = HostTensor::zeros(executable.buffers[c.buffer].type);
      std::copy(c.bytes.begin(), c.bytes.end(), t.data<uint8_t>());
      exec->constants_[c.buffer] = std::move(t);
      exec->constantOutputs_.push_back(c.buffer);
    }
  }
  // Which input each value is, which segments read it, whether the caller gets it back, and
  // per segment what a later segment on its device reads of what it computes.
  exec->inputIndex_.assign(executable.buffers.size(), -1);
  for (size_t i = 0; i < executable.inputs.size(); ++i)
    exec->inputIndex_[executable.inputs[i]] = int64_t(i);
  exec->readers_.assign(executable.buffers.size(), 0);
  exec->returned_.assign(executable.buffers.size(), 0);
  for (const Segment &segment : exec->segments_)
    for (BufferId id : segment.reads)
      ++exec->readers_[id];
  for (BufferId id : executable.outputs)
    exec->returned_[exec->valueOf_[id]] = 1;
  exec->readOnDevice_.resize(exec->segments_.size());
  for (size_t k = 0; k < exec->segments_.size(); ++k)
    for (size_t later = k + 1; later < exec->segments_.size(); ++later)
      if (exec->segments_[later].device == exec->segments_[k].device)
        exec->readOnDevice_[k].insert(exec->segments_[later].reads.begin(),
                                      exec->segments_[later].reads.end());
  // The runners hold their segments; only the cut stays here.
  for (Segment &segment : exec->segments_)
    segment.executable = Executable();
  return exec;
}

Status Executor::run(const std::vector<const HostTensor *> &inputs,
                     std::vector<HostTensor> &outputs) {
  if (whole_)
    return segments_[0].runner->run(inputs, outputs);
  if (Status s = checkRunInputs(*executable_, inputs); !s.ok())
    return s;
  std::vector<Value> lent;
  lent.reserve(inputs.size());
  for (const HostTensor *t : inputs)
    lent.push_back(Value::lent(*t));
  std::vector<Value> results;
  if (Status s = run(pointersTo(lent), results, RunValues()); !s.ok())
    return s;
  outputs.clear();
  for (Value &v : results)
    outputs.push_back(std::move(*v.ownedHost()));
  return Status();
}

Status Executor::run(const std::vector<HostTensor> &inputs, std::vector<HostTensor> &outputs) {
  return run(pointersTo(inputs), outputs);
}

Status Executor::run(const std::vector<Value *> &inputs, std::vector<Value> &outputs,
                     const RunValues &residency) {
  const Executable &exe = *executable_;
  if (whole_)
    return segments_[0].runner->run(inputs, outputs, residency);
  if (Status s = checkRunInputs(exe, inputs); !s.ok())
    return s;
  // Per value of this run: whether the caller keeps it on its device (an output it keeps).
  std::vector<char> kept(exe.buffers.size(), 0);
  for (size_t i = 0; i < exe.outputs.size(); ++i)
    if (residency.keeps(i))
      kept[valueOf_[exe.outputs[i]]] = 1;

  values_.assign(exe.buffers.size(), nullptr);
  // Emptied at the end however the run ends: a device array here holds device memory.
  // The run's traffic is what this thread counted meanwhile: the segments' and the arrays
  // brought to the host here.
  struct EndOfRun {
    Executor &exec;
    size_t buffers;
    TransferStats before = threadTransfers();
    void clear() {
      exec.produced_.clear();
      exec.onHost_.clear();
      exec.produced_.resize(buffers);
      exec.onHost_.resize(buffers);
    }
    ~EndOfRun() {
      clear();
      exec.lastRunTransfers_ = threadTransfers() - before;
    }
  } endOfRun{*this, exe.buffers.size()};
  endOfRun.clear();
  for (size_t i = 0; i < exe.inputs.size(); ++i)
    values_[exe.inputs[i]] = inputs[i];
  for (BufferId id : constantOutputs_)
    values_[id] = &constants_[id];
  std::vector<Value *> segmentInputs;
  std::vector<Value> segmentOutputs;
  for (size_t k = 0; k < segments_.size(); ++k) {
    Segment &segment = segments_[k];
    bool onCpu = segment.device == "cpu:0";
    segmentInputs.clear();
    RunValues segmentResidency;
    for (BufferId id : segment.reads) {
      Value *v = values_[id];
      // The CPU reads host memory: an array it needs comes over once per run.
      if (onCpu && v->onDevice()) {
        if (!onHost_[id].host()) {
          Expected<HostTensor> copy = v->toHost();
          if (!copy)
            return Status::error(fmt::format("{}: {}", bufferLabel(exe, id), copy.message()));
          onHost_[id] = std::move(*copy);
        }
        v = &onHost_[id];
      }
      segmentInputs.push_back(v);
      // A donated input goes on to the one segment that reads it, unless the caller also gets
      // it back.
      int64_t input = inputIndex_[id];
      segmentResidency.donated.push_back(input >= 0 && residency.donates(size_t(input)) &&
                                         readers_[id] == 1 && !returned_[id]);
    }
    // What a GPU segment computes stays there for the caller or a later segment on its device.
    for (BufferId id : segment.writes)
      segmentResidency.keepOnDevice.push_back(!onCpu && (kept[id] || readOnDevice_[k].count(id)));
    Trace::Scope span(onCpu ? nullptr : options_.trace, {segment.device, "stream 0"},
                      "segment on " + segment.device, "segment",
                      {{"steps", std::to_string(segment.steps)}});
    if (Status s = segment.runner->run(segmentInputs, segmentOutputs, segmentResidency); !s.ok())
      return s;
    for (size_t i = 0; i < segment.writes.size(); ++i) {
      produced_[segment.writes[i]] = std::move(segmentOutputs[i]);
      values_[segment.writes[i]] = &produced_[segment.writes[i]];
    }
  }
  // Each output once from its value: moved out of a segment's result the last time it is
  // returned, copied before that and from inputs and constants; on the host unless the caller
  // keeps it on its device.
  std::vector<Value> results(exe.outputs.size());
  for (size_t i = 0; i < exe.outputs.size(); ++i) {
    BufferId value = valueOf_[exe.outputs[i]];
    bool lastUse = std::none_of(exe.outputs.begin() + i + 1, exe.outputs.end(),
                                [&](BufferId o) { return valueOf_[o] == value; });
    Value *v = values_[value];
    if (lastUse && v == &produced_[value] && (residency.keeps(i) || !v->onDevice())) {
      results[i] = std::move(produced_[value]);
    } else if (const HostTensor *host = v->host()) {
      results[i] = HostTensor(*host);
    } else {
      Expected<HostTensor> copy = v->toHost();
      if (!copy)
        return Status::error(fmt::format("output #{}: {}", i, copy.message()));
      results[i] = std::move(*copy);
    }
  }
  outputs = std::move(results);
  return Status();
}

Status runOnHost(const std::vector<Value *> &inputs, std::vector<Value> &outputs,
                 const std::function<Status(const std::vector<const HostTensor *> &,
                                            std::vector<HostTensor> &)> &hostRun) {
  std::vector<HostTensor> downloads;
  Expected<std::vector<const HostTensor *>> in = hostInputs(inputs, downloads);
  if (!in)
    return in.status();
  std::vector<HostTensor> out(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i)
    if (HostTensor *h = outputs[i].ownedHost())
      out[i] = std::move(*h);
  Status status = hostRun(*in, out);
  outputs.clear();
  for (HostTensor &t : out)
    outputs.emplace_back(std::move(t));
  return status;
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
  return whole_ ? segments_[0].runner->lastRunTransfers() : lastRunTransfers_;
}

} // namespace smelt::rt
