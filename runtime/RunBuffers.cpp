// Dataflow and schedule checks, and the buffers of a run, shared by the executors.
#include "runtime/RunBuffers.h"

#include "runtime/StepOps.h"
#include "runtime/cpu/Kernels.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace smelt::rt {

std::string bufferLabel(const Executable &exe, BufferId id) {
  return fmt::format("b{} ({}, {})", id, exe.buffers[id].name, exe.buffers[id].type.str());
}

namespace {

/// Whether a run of `exe` as one gives buffers back where its steps' frees say. Those of an
/// Executable of several segments are each segment's, valid in the segment's own Executable
/// (segmentExecutable) and unchecked in the whole (validateDataflow): run whole (smelt bench of
/// a GPU artifact on the CPU), it keeps every buffer to the end.
bool followsFrees(const Executable &exe) { return exe.segments.size() <= 1; }

/// The buffers `step` gives back (the schedule's frees): each one written and not given back
/// before, and none an all_reduce uses; marked given back in `state` (validateDataflow's).
Status checkFrees(const Executable &exe, const Step &step, std::vector<char> &state,
                  std::vector<char> &reduced) {
  if (!followsFrees(exe))
    return Status();
  if (step.op == StepOp::AllReduce) {
    for (BufferId id : step.operands)
      reduced[id] = 1;
    for (BufferId id : step.results)
      reduced[id] = 1;
  }
  for (BufferId id : step.frees) {
    if (id < 0 || size_t(id) >= exe.buffers.size() || state[id] != 1)
      return Status::error(
          fmt::format("{}: gives back buffer {}, which {}", cpu::describe(step), id,
                      id < 0 || size_t(id) >= exe.buffers.size() ? "is out of range"
                      : state[id]                                ? "an earlier step gave back"
                                                                 : "has no value yet"));
    if (reduced[id])
      return Status::error(fmt::format("{}: gives back buffer {}, which an all_reduce uses "
                                       "until the run waits for it at its end",
                                       cpu::describe(step), bufferLabel(exe, id)));
    state[id] = 2;
  }
  return Status();
}

} // namespace

Status validateDataflow(const Executable &exe) {
  size_t count = exe.buffers.size();
  // Per buffer: 0 no value yet, 1 written, 2 given back after a step (Step::frees).
  std::vector<char> defined(count, 0);
  // An all_reduce's buffers, which the reduction uses until the executor waits for it.
  std::vector<char> reduced(count, 0);
  auto inRange = [&](BufferId id) { return id >= 0 && size_t(id) < count; };
  auto define = [&](BufferId id, const std::string &by) -> Status {
    if (!inRange(id))
      return Status::error(fmt::format("{}: buffer id {} is out of range (the executable has "
                                       "{} buffers)",
                                       by, id, count));
    if (defined[id])
      return Status::error(fmt::format("{}: buffer {} already has a value; each buffer is "
                                       "written once",
                                       by, bufferLabel(exe, id)));
    defined[id] = 1;
    return Status();
  };
  for (size_t i = 0; i < exe.inputs.size(); ++i)
    SMELT_RETURN_IF_ERROR(define(exe.inputs[i], fmt::format("input #{}", i)));
  for (const Constant &c : exe.constants) {
    SMELT_RETURN_IF_ERROR(define(c.buffer, "constant"));
    if (c.bytes.size() != exe.buffers[c.buffer].type.byteSize())
      return Status::error(fmt::format("constant {} has {} bytes, its type needs {}",
                                       bufferLabel(exe, c.buffer), c.bytes.size(),
                                       exe.buffers[c.buffer].type.byteSize()));
  }
  for (const Step &step : exe.steps) {
    // Hand-built or damaged steps: an op outside the set, or parameters of another op's kind.
    if (uint8_t(step.op) >= kNumStepOps)
      return Status::error(fmt::format("step op #{} is not one the runtime knows",
                                       unsigned(step.op)));
    if (step.params.index() != paramsFor(step.op).index())
      return Status::error(fmt::format("{}: its parameters are not those of '{}'",
                                       cpu::describe(step), step.name()));
    for (BufferId id : step.operands)
      if (!inRange(id) || defined[id] != 1)
        return Status::error(fmt::format("{}: operand buffer {} {}", cpu::describe(step), id,
                                         !inRange(id)  ? "is out of range"
                                         : defined[id] ? "was given back by an earlier step"
                                                       : "is read before any step writes it"));
    const StepFamily &family = stepFamily(step.op);
    // A fused kernel or an all_reduce bucket writes one or more results; every other step
    // exactly one.
    bool several = family.writesSeveralResults();
    if (several ? step.results.empty() : step.results.size() != 1)
      return Status::error(fmt::format("{}: a step writes {}, this one {}", cpu::describe(step),
                                       several ? "at least one result" : "one result",
                                       step.results.size()));
    for (BufferId id : step.results)
      SMELT_RETURN_IF_ERROR(define(id, cpu::describe(step)));
    SMELT_RETURN_IF_ERROR(family.validate(exe, step));
    SMELT_RETURN_IF_ERROR(checkFrees(exe, step, defined, reduced));
  }
  for (size_t i = 0; i < exe.outputs.size(); ++i)
    if (!inRange(exe.outputs[i]) || defined[exe.outputs[i]] != 1)
      return Status::error(fmt::format("output #{} (buffer {}) is {}", i, exe.outputs[i],
                                       inRange(exe.outputs[i]) && defined[exe.outputs[i]]
                                           ? "given back before the end of the run"
                                           : "never written"));
  return Status();
}

Status checkBufferSizes(const Executable &exe, const Allocator *allocator, bool inputsOnDevice) {
  for (size_t id = 0; id < exe.buffers.size(); ++id)
    SMELT_RETURN_IF_ERROR(checkedByteSize(exe.buffers[id].type,
                                          fmt::format("buffer b{} ({})", id, exe.buffers[id].name))
                              .status());
  if (!allocator)
    return Status();
  uint64_t limit = allocator->stats().limitBytes;
  std::vector<char> skip(exe.buffers.size(), 0);
  if (!inputsOnDevice)
    for (BufferId id : exe.inputs)
      skip[id] = 1;
  for (size_t id = 0; id < exe.buffers.size(); ++id)
    if (uint64_t bytes = exe.buffers[id].type.byteSize(); !skip[id] && bytes > limit)
      return Status::error(fmt::format("{}: buffer {} needs {}, more than the device's memory "
                                       "limit of {} ({})",
                                       allocator->device(), bufferLabel(exe, BufferId(id)),
                                       formatBytes(bytes), formatBytes(limit),
                                       allocator->policy().str()));
  // A value a kernel computes but never stores, as large: refused as such a buffer is (an
  // artifact carries no IR for `smelt run`'s check of every value to see).
  for (const Step &step : exe.steps)
    if (int64_t k = step.kernel(); k >= 0 && size_t(k) < exe.kernels.size() &&
                                   exe.kernels[size_t(k)].largestValueBytes > limit) {
      const FusedKernel &kernel = exe.kernels[size_t(k)];
      return Status::error(fmt::format(
          "{}: kernel {} ({}{}) computes a value of {}, more than the device's memory limit of "
          "{} ({}); a value that large is refused even where the kernel would not store it",
          allocator->device(), kernel.name, kernel.ops,
          step.location.empty() ? "" : " at " + step.location,
          formatBytes(kernel.largestValueBytes), formatBytes(limit), allocator->policy().str()));
    }
  return Status();
}

namespace {

/// The run-input check of every executor: the count, then each input's type, which `typeOf(i)`
/// gives, or null with `missing(i)` saying what is there instead.
template <typename TypeOf, typename Missing>
Status checkInputs(const Executable &exe, size_t count, TypeOf typeOf, Missing missing) {
  if (count != exe.inputs.size())
    return Status::error(
        fmt::format("@{} takes {} inputs, got {}", exe.name, exe.inputs.size(), count));
  for (size_t i = 0; i < count; ++i) {
    const BufferInfo &info = exe.buffers[exe.inputs[i]];
    const TensorType *type = typeOf(i);
    if (!type || *type != info.type)
      return Status::error(fmt::format("input #{} ({}): expected {}, got {}", i, info.name,
                                       info.type.str(), type ? type->str() : missing(i)));
  }
  return Status();
}

} // namespace

Status checkRunInputs(const Executable &exe, const std::vector<const HostTensor *> &inputs) {
  return checkInputs(
      exe, inputs.size(), [&](size_t i) { return inputs[i] ? &inputs[i]->type() : nullptr; },
      [](size_t) { return "nothing"; });
}

Status checkRunInputs(const Executable &exe, const std::vector<Value *> &inputs) {
  auto empty = [&](size_t i) {
    const DeviceArray *array = inputs[i] ? inputs[i]->array() : nullptr;
    return array && !*array;
  };
  return checkInputs(
      exe, inputs.size(),
      [&](size_t i) { return inputs[i] && !empty(i) ? &inputs[i]->type() : nullptr; },
      [&](size_t i) { return empty(i) ? "an empty device array (donated before?)" : "nothing"; });
}

std::vector<HostTensor *> reusableOutputs(const Executable &exe,
                                          const std::vector<const HostTensor *> &inputs,
                                          std::vector<HostTensor> &outputs) {
  std::vector<HostTensor *> reusable(exe.outputs.size(), nullptr);
  auto overlaps = [](const HostTensor &a, const HostTensor &b) {
    auto *aStart = static_cast<const char *>(a.raw()), *bStart = static_cast<const char *>(b.raw());
    return aStart < bStart + b.byteSize() && bStart < aStart + a.byteSize();
  };
  for (size_t i = 0; i < exe.outputs.size() && i < outputs.size(); ++i) {
    HostTensor &out = outputs[i];
    // A moved-from or default tensor has no storage, whatever its type says.
    if (!out.raw() || out.type() != exe.buffers[exe.outputs[i]].type || out.byteSize() == 0)
      continue;
    if (std::none_of(inputs.begin(), inputs.end(),
                     [&](const HostTensor *in) { return in->byteSize() && overlaps(out, *in); }))
      reusable[i] = &out;
  }
  return reusable;
}

namespace {

/// Arena offsets are multiples of this (what smelt-assign-buffers gives): a cache line, and
/// any vector access's alignment.
constexpr int64_t kArenaAlignment = 64;

} // namespace

Expected<RunBuffers> RunBuffers::create(const Executable &exe, Allocator *allocator,
                                        const std::vector<BufferId> &fixed) {
  RunBuffers buffers;
  size_t count = exe.buffers.size();
  buffers.exe_ = &exe;
  buffers.allocator_ = allocator;
  buffers.address_.assign(count, nullptr);
  buffers.perRun_.assign(count, 1);
  buffers.callers_.assign(count, 0);
  buffers.inArena_.assign(count, 0);
  for (BufferId id : fixed)
    buffers.perRun_[id] = 0;

  // The arena holds the offset buffers the steps on this device write; a buffer lives from its
  // step to the step that gives it back (the end of the run if none does).
  std::vector<size_t> first(count, 0), last(count, exe.steps.size());
  if (followsFrees(exe))
    for (size_t s = 0; s < exe.steps.size(); ++s)
      for (BufferId id : exe.steps[s].frees)
        last[id] = s;
  std::vector<BufferId> members;
  for (size_t s = 0; s < exe.steps.size(); ++s)
    for (BufferId id : exe.steps[s].results) {
      first[id] = s;
      const BufferInfo &info = exe.buffers[id];
      if (!buffers.perRun_[id] || info.offset < 0 || exe.steps[s].device != allocator->device())
        continue;
      uint64_t bytes = info.type.byteSize();
      if (info.offset % kArenaAlignment != 0 ||
          uint64_t(info.offset) > std::numeric_limits<uint64_t>::max() / 2 - bytes)
        return Status::error(fmt::format("buffer {}: arena offset {} is not a multiple of {} "
                                         "within 2^63 bytes",
                                         bufferLabel(exe, id), info.offset, kArenaAlignment));
      buffers.inArena_[id] = 1;
      buffers.arenaBytes_ = std::max(buffers.arenaBytes_, uint64_t(info.offset) + bytes);
      members.push_back(id);
    }
  // Two buffers live at one step must not share a byte, or one would overwrite the other.
  for (size_t i = 0; i < members.size(); ++i)
    for (size_t j = i + 1; j < members.size(); ++j) {
      BufferId a = members[i], b = members[j];
      uint64_t aBegin = uint64_t(exe.buffers[a].offset), bBegin = uint64_t(exe.buffers[b].offset);
      uint64_t aEnd = aBegin + exe.buffers[a].type.byteSize();
      uint64_t bEnd = bBegin + exe.buffers[b].type.byteSize();
      if (first[a] <= last[b] && first[b] <= last[a] && aBegin < bEnd && bBegin < aEnd)
        return Status::error(fmt::format("buffers {} and {} share arena bytes [{}, {}) while "
                                         "both are live",
                                         bufferLabel(exe, a), bufferLabel(exe, b),
                                         std::max(aBegin, bBegin), std::min(aEnd, bEnd)));
    }
  return buffers;
}

Status RunBuffers::beginRun(uint64_t heldBytes) {
  liveBytes_ = peakBytes_ = heldBytes;
  if (arenaBytes_ == 0)
    return Status();
  // A run that failed waiting for a collective keeps its buffers, and so its arena.
  if (!arena_) {
    SMELT_ASSIGN_OR_RETURN(
        arena_, allocator_->allocate(arenaBytes_,
                                     fmt::format("the arena of @{} ({} buffers)", exe_->name,
                                                 std::count(inArena_.begin(), inArena_.end(), 1))));
  }
  liveBytes_ = peakBytes_ = heldBytes + arenaBytes_;
  return Status();
}

Status RunBuffers::take(BufferId id, void *callerMemory) {
  if (inArena_[id]) {
    address_[id] = callerMemory ? callerMemory
                                : static_cast<uint8_t *>(arena_) + exe_->buffers[id].offset;
    callers_[id] = callerMemory != nullptr;
    return Status();
  }
  uint64_t bytes = exe_->buffers[id].type.byteSize();
  if (callerMemory) {
    address_[id] = callerMemory;
    callers_[id] = 1;
  } else if (auto waiting = deferred_.find(Allocator::blockBytes(bytes));
             waiting != deferred_.end()) {
    address_[id] = waiting->second;
    deferred_.erase(waiting);
  } else {
    SMELT_ASSIGN_OR_RETURN(address_[id],
                           allocator_->allocate(bytes, "buffer " + bufferLabel(*exe_, id)));
  }
  liveBytes_ += bytes;
  peakBytes_ = std::max(peakBytes_, liveBytes_);
  return Status();
}

void RunBuffers::adopt(BufferId id, void *block) {
  address_[id] = block;
  callers_[id] = 0;
  liveBytes_ += exe_->buffers[id].type.byteSize();
  peakBytes_ = std::max(peakBytes_, liveBytes_);
}

bool RunBuffers::takeInPlace(size_t step, size_t result) {
  const Step &s = exe_->steps[step];
  const KernelParams *kernel = s.paramsAs<KernelParams>();
  if (!kernel || result >= kernel->inPlace.size() || kernel->inPlace[result] < 0 ||
      !followsFrees(*exe_))
    return false;
  BufferId id = s.results[result], operand = s.operands[size_t(kernel->inPlace[result])];
  if (std::find(s.frees.begin(), s.frees.end(), operand) == s.frees.end() || !perRun_[id] ||
      inArena_[id] || address_[id] || !perRun_[operand] || inArena_[operand] || callers_[operand] ||
      !address_[operand] ||
      exe_->buffers[id].type.byteSize() != exe_->buffers[operand].type.byteSize())
    return false;
  address_[id] = address_[operand];
  address_[operand] = nullptr;
  callers_[id] = 0;
  return true;
}

void *RunBuffers::release(BufferId id) {
  if (!perRun_[id] || inArena_[id] || callers_[id] || !address_[id])
    return nullptr;
  void *block = address_[id];
  address_[id] = nullptr;
  return block;
}

void *RunBuffers::reclaim(void *block) {
  for (auto it = deferred_.begin(); it != deferred_.end(); ++it)
    if (it->second == block) {
      deferred_.erase(it);
      return block;
    }
  for (size_t id = 0; id < address_.size(); ++id)
    if (address_[id] == block && perRun_[id] && !inArena_[id] && !callers_[id]) {
      address_[id] = nullptr;
      return block;
    }
  return nullptr;
}

void RunBuffers::giveBack(BufferId id) {
  if (!inArena_[id]) {
    uint64_t bytes = exe_->buffers[id].type.byteSize();
    if (!callers_[id] && defer_)
      deferred_.emplace(Allocator::blockBytes(bytes), address_[id]);
    else if (!callers_[id])
      allocator_->free(address_[id]);
    liveBytes_ -= bytes;
  }
  callers_[id] = 0;
  address_[id] = nullptr;
}

void RunBuffers::giveBackAfter(size_t step) {
  if (!followsFrees(*exe_))
    return;
  for (BufferId id : exe_->steps[step].frees)
    if (perRun_[id] && address_[id])
      giveBack(id);
}

void RunBuffers::giveBackAll() {
  for (size_t id = 0; id < address_.size(); ++id)
    if (perRun_[id] && address_[id])
      giveBack(BufferId(id));
  for (auto &[bytes, block] : deferred_)
    allocator_->free(block);
  deferred_.clear();
  if (arena_) {
    allocator_->free(arena_);
    arena_ = nullptr;
    liveBytes_ -= arenaBytes_;
  }
}

} // namespace smelt::rt
