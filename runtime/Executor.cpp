// The multi-device executor (Executor.h): segments by device, a runner per segment, values
// passed between them on their device or through the host.
#include "runtime/Executor.h"

#include "runtime/CpuExecutor.h"
#include "runtime/RunBuffers.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

namespace smelt::rt {

namespace {

/// "@main: schedule segment #1 (on cpu:0)": how messages name a segment.
std::string segmentName(const Executable &exe, size_t k) {
  return fmt::format("@{}: schedule segment #{} (on {})", exe.name, k, exe.segments[k].device);
}

/// Whether the schedule is sound enough to run: its segments split the steps in order (there
/// are none when every step is a copy), each step runs on its segment's device, each segment
/// reads only inputs and earlier segments' writes, and every output is an input, a constant or
/// written. (That each segment writes
/// what it says, and reads all its steps need, segmentExecutable checks.)
Status checkSchedule(const Executable &exe, const std::vector<BufferId> &value) {
  std::vector<char> available(exe.buffers.size(), 0);
  for (BufferId id : exe.inputs)
    available[id] = 1;
  for (const Constant &c : exe.constants)
    available[c.buffer] = 1;
  uint32_t next = 0;
  for (size_t k = 0; k < exe.segments.size(); ++k) {
    const Segment &segment = exe.segments[k];
    std::string which = segmentName(exe, k);
    if (segment.begin != next || segment.end < segment.begin || segment.end > exe.steps.size())
      return Status::error(fmt::format("{}: steps [{}, {}) do not follow on from step {} within "
                                       "the {} steps",
                                       which, segment.begin, segment.end, next, exe.steps.size()));
    next = segment.end;
    for (size_t s = segment.begin; s < segment.end; ++s)
      if (!isCopyStep(exe.steps[s]) && exe.steps[s].device != segment.device)
        return Status::error(fmt::format("{}: step {} ('{}' at {}) runs on {}", which, s,
                                         exe.steps[s].name(), exe.steps[s].location,
                                         exe.steps[s].device));
    for (BufferId id : segment.reads)
      if (id < 0 || size_t(id) >= exe.buffers.size() || !available[id])
        return Status::error(fmt::format("{}: reads buffer {}, which is no input and no earlier "
                                         "segment writes",
                                         which, id));
    for (BufferId id : segment.writes)
      if (id >= 0 && size_t(id) < exe.buffers.size())
        available[id] = 1;
  }
  // Only a function with nothing to compute (constants and arguments moved between devices,
  // as an imported model's initializer is) has no segment at all.
  if (next != exe.steps.size() && !std::all_of(exe.steps.begin(), exe.steps.end(), isCopyStep))
    return Status::error(fmt::format("@{}: the schedule's segments end at step {} of {}", exe.name,
                                     next, exe.steps.size()));
  for (size_t i = 0; i < exe.outputs.size(); ++i)
    if (!available[value[exe.outputs[i]]])
      return Status::error(fmt::format("@{}: output #{} ({}) is written by no segment", exe.name, i,
                                       bufferLabel(exe, exe.outputs[i])));
  return Status();
}

/// Whether the Executable runs as it is, as one segment: it has no copies and its steps are
/// on one device (a hand-built one without a schedule must be).
bool runsWhole(const Executable &exe) {
  for (const Step &step : exe.steps)
    if (isCopyStep(step) || step.device != exe.steps.front().device)
      return false;
  return true;
}

} // namespace

Expected<std::unique_ptr<SegmentRunner>> cpuSegmentRunner(const Executable &segment,
                                                         const std::string &,
                                                         const ExecutorOptions &options) {
  SMELT_ASSIGN_OR_RETURN(CpuExecutor cpu, CpuExecutor::create(segment, options.trace));
  cpu.setCommunicator(options.communicator);
  return std::unique_ptr<SegmentRunner>(std::make_unique<CpuExecutor>(std::move(cpu)));
}

namespace {

/// `executable` with the steps and segments on a device `moves` accepts on `to` instead.
template <typename Moves>
Executable moved(Executable executable, const std::string &to, Moves moves) {
  for (Step &step : executable.steps)
    if (moves(step.device))
      step.device = to;
  for (Segment &segment : executable.segments)
    if (moves(segment.device))
      segment.device = to;
  return executable;
}

} // namespace

Executable movedToDevice(Executable executable, const std::string &from, const std::string &to) {
  return moved(std::move(executable), to,
               [&](const std::string &device) { return device == from; });
}

Executable movedToCpu(Executable executable) {
  return moved(std::move(executable), "cpu:0", [](const std::string &) { return true; });
}

Expected<Executable> segmentExecutable(const Executable &exe, size_t k) {
  const Segment &segment = exe.segments[k];
  std::vector<BufferId> value = copiedValues(exe);
  Executable part;
  part.name = exe.name;
  part.placement = exe.placement;
  part.kernels = exe.kernels;
  part.cpu = exe.cpu;
  part.cuda = exe.cuda;
  // Its buffers numbered afresh: its reads first, as its inputs, then as its steps use them.
  std::vector<BufferId> local(exe.buffers.size(), -1);
  auto add = [&](BufferId global) {
    if (local[global] < 0) {
      local[global] = BufferId(part.buffers.size());
      part.buffers.push_back(exe.buffers[global]);
    }
    return local[global];
  };
  for (BufferId global : segment.reads)
    part.inputs.push_back(add(global));
  std::vector<const Constant *> constantOf(exe.buffers.size(), nullptr);
  for (const Constant &c : exe.constants)
    constantOf[c.buffer] = &c;
  std::string which = segmentName(exe, k);
  for (size_t s = segment.begin; s < segment.end; ++s) {
    if (isCopyStep(exe.steps[s]))
      continue;
    Step step = exe.steps[s];
    for (BufferId &operand : step.operands) {
      BufferId v = value[operand];
      if (local[v] < 0 && !constantOf[v])
        return Status::error(fmt::format("{}: step {} ('{}' at {}) reads {}, which the segment "
                                         "neither reads nor computes before it",
                                         which, s, step.name(), step.location,
                                         bufferLabel(exe, v)));
      if (local[v] < 0)
        part.constants.push_back({add(v), constantOf[v]->bytes});
      operand = local[v];
    }
    for (BufferId &result : step.results)
      result = add(result);
    for (BufferId &id : step.frees) {
      if (local[id] < 0)
        return Status::error(fmt::format("{}: step {} ('{}' at {}) gives back {}, which the "
                                         "segment does not use",
                                         which, s, step.name(), step.location,
                                         bufferLabel(exe, id)));
      id = local[id];
    }
    part.steps.push_back(std::move(step));
  }
  for (BufferId global : segment.writes) {
    if (local[global] < 0 || std::count(segment.reads.begin(), segment.reads.end(), global))
      return Status::error(fmt::format("{}: says it writes {}, which none of its steps computes",
                                       which, bufferLabel(exe, global)));
    part.outputs.push_back(local[global]);
  }
  return part;
}

Expected<std::unique_ptr<Executor>> Executor::create(const Executable &executable,
                                                     ExecutorOptions options) {
  SMELT_RETURN_IF_ERROR(validateDataflow(executable));
  std::unique_ptr<Executor> exec(new Executor());
  exec->executable_ = std::make_shared<const Executable>(executable);
  exec->options_ = std::move(options);
  exec->valueOf_ = copiedValues(executable);
  exec->whole_ = runsWhole(executable);
  if (executable.segments.empty() && !exec->whole_ &&
      !std::all_of(executable.steps.begin(), executable.steps.end(), isCopyStep))
    return Status::error(fmt::format("@{}: its steps run on several devices or move values "
                                     "between them, and it has no schedule "
                                     "(codegen::planSchedule makes one)",
                                     executable.name));
  SMELT_RETURN_IF_ERROR(checkSchedule(executable, exec->valueOf_));
  size_t segmentCount = exec->whole_ ? 1 : executable.segments.size();
  for (size_t k = 0; k < segmentCount; ++k) {
    SegmentRun &segment = exec->segments_.emplace_back();
    Executable part;
    if (exec->whole_) {
      part = executable;
      segment.device = executable.steps.empty() ? "cpu:0" : executable.steps.front().device;
      segment.reads = executable.inputs;
      segment.writes = executable.outputs;
    } else {
      SMELT_ASSIGN_OR_RETURN(part, segmentExecutable(executable, k));
      segment.device = executable.segments[k].device;
      segment.reads = executable.segments[k].reads;
      segment.writes = executable.segments[k].writes;
    }
    segment.steps = part.steps.size();
    const std::string &device = segment.device;
    std::string where = segmentCount == 1 ? "" : "on " + device + ": ";
    bool onGpu = device.rfind("gpu:", 0) == 0;
    if (onGpu && !exec->options_.gpuRunner)
      return Status::error(fmt::format(
          "@{} has steps placed on {} ('{}' at {}), and this program was built without the "
          "GPU executor: compile for cpu:0 (no GPU placement) or build Smelt with CUDA",
          executable.name, device, part.steps.front().name(), part.steps.front().location));
    if (!onGpu && device != "cpu:0")
      return Status::error(fmt::format("@{}: step '{}' ({}) is placed on '{}', which is not a "
                                       "device this runtime drives (cpu:0, gpu:N)",
                                       executable.name, part.steps.front().name(),
                                       part.steps.front().location, device));
    SegmentRunnerFactory make =
        onGpu ? exec->options_.gpuRunner : SegmentRunnerFactory(cpuSegmentRunner);
    Expected<std::unique_ptr<SegmentRunner>> runner = make(part, device, exec->options_);
    if (!runner)
      return Status::error(where + runner.message());
    segment.runner = std::move(*runner);
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
  for (const SegmentRun &segment : exec->segments_)
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
  return exec;
}

Status Executor::run(const std::vector<const HostTensor *> &inputs,
                     std::vector<HostTensor> &outputs) {
  if (whole_)
    return segments_[0].runner->run(inputs, outputs);
  SMELT_RETURN_IF_ERROR(checkRunInputs(*executable_, inputs));
  std::vector<Value> lent;
  lent.reserve(inputs.size());
  for (const HostTensor *t : inputs)
    lent.push_back(Value::lent(*t));
  std::vector<Value> results;
  SMELT_RETURN_IF_ERROR(run(pointersTo(lent), results, RunValues()));
  outputs.clear();
  for (Value &v : results)
    outputs.push_back(std::move(*v.ownedHost()));
  return Status();
}

Status Executor::run(const std::vector<Value *> &inputs, std::vector<Value> &outputs,
                     const RunValues &residency) {
  const Executable &exe = *executable_;
  if (whole_)
    return segments_[0].runner->run(inputs, outputs, residency);
  SMELT_RETURN_IF_ERROR(checkRunInputs(exe, inputs));
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
    SegmentRun &segment = segments_[k];
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
    SMELT_RETURN_IF_ERROR(segment.runner->run(segmentInputs, segmentOutputs, segmentResidency));
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

std::vector<std::string> Executor::segmentDevices() const {
  std::vector<std::string> devices;
  for (const SegmentRun &segment : segments_)
    devices.push_back(segment.device);
  return devices;
}

uint64_t Executor::lastRunPeakBytes() const {
  uint64_t peak = 0;
  for (const SegmentRun &segment : segments_)
    peak = std::max(peak, segment.runner->lastRunPeakBytes());
  return peak;
}

TransferStats Executor::lastRunTransfers() const {
  return whole_ ? segments_[0].runner->lastRunTransfers() : lastRunTransfers_;
}

} // namespace smelt::rt
