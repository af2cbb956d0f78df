// CPU executor: validation, kernel preparation and the run loop.
#include "runtime/CpuExecutor.h"

#include "runtime/CpuLoad.h"
#include "runtime/CpuThreads.h"
#include "runtime/DeviceMemory.h"
#include "runtime/RunBuffers.h"
#include "runtime/StepOps.h"
#include "runtime/cpu/Fused.h"
#include "runtime/cpu/Kernels.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace smelt::rt {

namespace {

// The CPU executor runs every step on the caller's thread: one stream of cpu:0.
const char *const kDevice = "cpu:0";
const char *const kStream = "stream 0";

} // namespace

Expected<CpuExecutor> CpuExecutor::create(const Executable &executable, Trace *trace,
                                           Allocator *allocator) {
  SMELT_RETURN_IF_ERROR(validateDataflow(executable));
  // A bad SMELT_CPU_THREADS is said here, before any kernel runs on a guessed count.
  SMELT_RETURN_IF_ERROR(cpuThreads().status());
  if (!allocator) {
    SMELT_ASSIGN_OR_RETURN(allocator, deviceAllocator(kDevice));
  }
  // Every buffer's byte size, checked once, so no kernel sees a negative or overflowing shape;
  // a buffer past the device's limit could never be allocated: said now, not mid-run. (Inputs
  // are the caller's memory.)
  SMELT_RETURN_IF_ERROR(checkBufferSizes(executable, allocator, /*inputsOnDevice=*/false));
  // The load other processes put on the CPUs is watched from now: the first run then finds
  // an estimate sooner than a whole window after it (CpuLoad::othersCores).
  if (cpuThreadsFollowLoad())
    CpuLoad::instance().watch();
  CpuExecutor exec;
  exec.executable_ = std::make_shared<const Executable>(executable);
  const Executable &exe = *exec.executable_;
  // Inputs are the caller's memory and constants the executor's: a run takes the rest, each
  // given back after the last step that reads it.
  std::vector<BufferId> fixed = exe.inputs;
  for (const Constant &c : exe.constants)
    fixed.push_back(c.buffer);
  SMELT_ASSIGN_OR_RETURN(exec.buffers_, RunBuffers::create(exe, allocator, fixed));
  exec.intoCaller_.assign(exe.buffers.size(), nullptr);
  // Steps read constants where the Executable holds them (no step writes a constant): a
  // copy would hold a model's weights twice. executable_ keeps them alive.
  std::vector<const void *> constantAt(exe.buffers.size(), nullptr);
  for (const Constant &c : exe.constants) {
    exec.buffers_.place(c.buffer, const_cast<uint8_t *>(c.bytes.data()));
    exec.constantBytes_ += c.bytes.size();
    constantAt[c.buffer] = c.bytes.data();
  }
  exec.setTrace(trace);
  SMELT_ASSIGN_OR_RETURN(exec.collectives_, CollectiveSteps::prepare(exe));
  for (size_t s = 0; s < exe.steps.size(); ++s) {
    const Step &step = exe.steps[s];
    if (exec.collectives_.isCollective(s)) {
      exec.kernels_.push_back(nullptr);
      continue;
    }
    if (step.kind() == StepKind::Kernel) {
      SMELT_ASSIGN_OR_RETURN(cpu::FusedRunner fused, cpu::prepareFused(exe, step));
      exec.kernels_.push_back(std::move(fused));
      continue;
    }
    cpu::StepTypes types;
    for (BufferId id : step.operands) {
      types.operands.push_back(exe.buffers[id].type);
      types.constants.push_back(constantAt[id]);
    }
    types.result = exe.buffers[step.results[0]].type;
    SMELT_ASSIGN_OR_RETURN(cpu::Kernel kernel, stepFamily(step.op).prepareCpu(step, types));
    size_t operands = step.operands.size();
    exec.kernels_.push_back([kernel = std::move(kernel), operands](void *const *buffers) {
      kernel(buffers, buffers[operands]);
    });
  }
  return exec;
}

void CpuExecutor::setTrace(Trace *trace) {
  trace_ = trace;
  costs_.clear();
  spanArgs_.clear();
  if (!trace_)
    return;
  for (const Step &step : executable_->steps) {
    costs_.push_back(stepCost(*executable_, step));
    spanArgs_.push_back(costs_.back().traceArgs());
    spanArgs_.back()["device"] = kDevice;
  }
  recordMemory(double(constantBytes_));
}

void CpuExecutor::recordMemory(double inUse) {
  tracePeak_ = std::max(tracePeak_, inUse);
  trace_->counter(kDevice, "memory", trace_->now(), {{"in use", inUse}, {"peak", tracePeak_}});
}

Status CpuExecutor::allocateResults(const Step &step) {
  for (BufferId id : step.results)
    SMELT_RETURN_IF_ERROR(buffers_.take(id, intoCaller_[id] ? intoCaller_[id]->raw() : nullptr));
  return Status();
}

Status CpuExecutor::waitForCollectives(size_t step) {
  Trace::Scope span(trace_, {kDevice, kStream}, trace_ ? "wait for all_reduce" : "", "collective");
  return collectives_.waitBefore(step, communicator_);
}

Status CpuExecutor::run(const std::vector<Value *> &inputs, std::vector<Value> &outputs,
                        const RunValues &) {
  std::vector<HostTensor> downloads;
  SMELT_ASSIGN_OR_RETURN(std::vector<const HostTensor *> in, hostInputs(inputs, downloads));
  std::vector<HostTensor> out(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i)
    if (HostTensor *h = outputs[i].ownedHost())
      out[i] = std::move(*h);
  Status status = run(in, out);
  outputs.clear();
  for (HostTensor &t : out)
    outputs.emplace_back(std::move(t));
  return status;
}

Status CpuExecutor::run(const std::vector<const HostTensor *> &inputs,
                        std::vector<HostTensor> &outputs) {
  const Executable &exe = *executable_;
  Trace::Scope runSpan(trace_, {kDevice, kStream}, trace_ ? "run @" + exe.name : "", "run");
  SMELT_RETURN_IF_ERROR(checkRunInputs(exe, inputs));
  // This run's threads: fewer while other processes keep some of the CPUs busy.
  applyRunThreadsToOpenMp();
  // Every block this run takes goes back however it ends; inputs are the caller's again.
  struct EndOfRun {
    CpuExecutor &exec;
    ~EndOfRun() {
      // A reduction that cannot be waited for may still write its buffers: they stay taken
      // (the job is ending: a collective failure ends it).
      if (exec.collectives_.waitForAll(exec.communicator_).ok())
        exec.buffers_.giveBackAll();
      for (BufferId id : exec.executable_->inputs)
        exec.buffers_.place(id, nullptr);
      std::fill(exec.intoCaller_.begin(), exec.intoCaller_.end(), nullptr);
    }
  } endOfRun{*this};
  for (size_t i = 0; i < inputs.size(); ++i)
    buffers_.place(exe.inputs[i], const_cast<void *>(inputs[i]->raw()));
  // An output a step computes goes straight into the caller's tensor where there is one (the
  // first time it is returned; a buffer returned twice is copied the second time).
  std::vector<HostTensor *> reusable = reusableOutputs(exe, inputs, outputs);
  for (size_t i = 0; i < exe.outputs.size(); ++i)
    if (BufferId id = exe.outputs[i]; reusable[i] && buffers_.perRun(id) && !intoCaller_[id])
      intoCaller_[id] = reusable[i];
  SMELT_RETURN_IF_ERROR(buffers_.beginRun(constantBytes_));
  stepMicros_.assign(exe.steps.size(), 0.0);
  std::vector<void *> buffers;
  for (size_t s = 0; s < exe.steps.size(); ++s) {
    const Step &step = exe.steps[s];
    buffers.clear();
    // Kernels only read their operands; one array carries operands and results alike.
    SMELT_RETURN_IF_ERROR(allocateResults(step));
    for (BufferId id : step.operands)
      buffers.push_back(buffers_[id]);
    for (BufferId id : step.results)
      buffers.push_back(buffers_[id]);
    if (collectives_.mustWaitBefore(s))
      SMELT_RETURN_IF_ERROR(waitForCollectives(s));
    // Every step is timed (lastRunStepMicros); with a trace, it is also a span.
    auto start = std::chrono::steady_clock::now();
    auto timed = [&] {
      stepMicros_[s] =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count();
      if (trace_)
        trace_->span({kDevice, kStream}, costs_[s].name, costs_[s].kind, trace_->at(start),
                     stepMicros_[s], spanArgs_[s]);
    };
    if (!kernels_[s]) {
      SMELT_RETURN_IF_ERROR(collectives_.start(s, buffers.data(), communicator_));
      timed();
      buffers_.giveBackAfter(s); // a replica_id nobody reads
      continue;
    }
    // Running all_reduces advance only when the communicator is called (MPI's progress).
    if (communicator_)
      communicator_->progress();
    kernels_[s](buffers.data());
    timed();
    if (trace_)
      recordMemory(double(buffers_.liveBytes()));
    buffers_.giveBackAfter(s);
  }
  if (collectives_.mustWaitBefore(exe.steps.size()))
    SMELT_RETURN_IF_ERROR(waitForCollectives(exe.steps.size()));
  return collectOutputs(reusable, outputs);
}

Status CpuExecutor::collectOutputs(const std::vector<HostTensor *> &reusable,
                                   std::vector<HostTensor> &outputs) {
  const Executable &exe = *executable_;
  double copiedBytes = 0;
  for (size_t i = 0; i < exe.outputs.size(); ++i)
    if (!reusable[i] || intoCaller_[exe.outputs[i]] != reusable[i])
      copiedBytes += double(exe.buffers[exe.outputs[i]].type.byteSize());
  Trace::Scope span(trace_, {kDevice, kStream}, "copy outputs", "copy",
                    trace_ ? std::map<std::string, std::string>{{"bytes", fmt::format(
                                                                      "{:.0f}", copiedBytes)}}
                           : std::map<std::string, std::string>{});
  // Results go to a fresh vector, assigned last: `outputs` may hold the very tensors `inputs`
  // points at (a training loop feeding its state back in), which must stay alive until here.
  std::vector<HostTensor> results;
  for (size_t i = 0; i < exe.outputs.size(); ++i) {
    BufferId id = exe.outputs[i];
    if (reusable[i] && intoCaller_[id] == reusable[i]) {
      results.push_back(std::move(*reusable[i]));
      continue;
    }
    if (reusable[i]) {
      std::memcpy(reusable[i]->raw(), buffers_[id], reusable[i]->byteSize());
      results.push_back(std::move(*reusable[i]));
      continue;
    }
    SMELT_ASSIGN_OR_RETURN(
        HostTensor out, HostTensor::allocate(exe.buffers[id].type, fmt::format("output #{}", i)));
    std::memcpy(out.raw(), buffers_[id], out.byteSize());
    results.push_back(std::move(out));
  }
  outputs = std::move(results);
  // Copies are the caller's from here: the counter shows them as a spike per run.
  if (trace_) {
    recordMemory(double(buffers_.liveBytes()) + copiedBytes);
    recordMemory(double(constantBytes_));
  }
  return Status();
}

} // namespace smelt::rt
