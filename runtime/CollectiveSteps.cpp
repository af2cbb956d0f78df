// Collective steps: preparation (checks, wait points), start and wait.
#include "runtime/CollectiveSteps.h"

#include "runtime/cpu/Kernels.h"

#include <fmt/format.h>

#include <cstring>

namespace smelt::rt {

Status AllReduceSpec::checkGroup(const Communicator *communicator) const {
  if (replicas == 1)
    return Status();
  if (!communicator)
    return Status::error(fmt::format("all_reduce '{}': reduces over {} replicas, but this "
                                     "function runs alone; run it in a replica group (smelt "
                                     "train --replicas={}, or mpirun -n {})",
                                     what, replicas, replicas, replicas));
  if (communicator->size() != replicas)
    return Status::error(fmt::format("all_reduce '{}': compiled for {} replicas, but {} has {}",
                                     what, replicas, communicator->describe(),
                                     communicator->size()));
  return Status();
}

Expected<CollectiveSteps> CollectiveSteps::prepare(const Executable &exe) {
  CollectiveSteps steps;
  steps.index_.assign(exe.steps.size(), kOther);
  steps.waitBefore_.resize(exe.steps.size() + 1);
  // The all_reduce writing each buffer, to find the first step that reads it.
  std::vector<int> writtenBy(exe.buffers.size(), -1);
  for (size_t s = 0; s < exe.steps.size(); ++s) {
    const Step &step = exe.steps[s];
    if (step.op == StepOp::ReplicaId) {
      if (!step.operands.empty() || exe.buffers[step.results[0]].type != TensorType{DType::i64, {}})
        return Status::error(fmt::format("{}: takes no operands and writes a rank-0 i64",
                                         cpu::describe(step)));
      steps.index_[s] = kReplicaId;
      continue;
    }
    if (step.op != StepOp::AllReduce)
      continue;
    AllReduce reduce;
    AllReduceSpec &spec = reduce.spec;
    const AllReduceParams &params = std::get<AllReduceParams>(step.params);
    spec.replicas = params.replicas;
    spec.kind = params.kind;
    if (spec.replicas < 1)
      return Status::error(fmt::format("{}: replicas = {} must be at least 1",
                                       cpu::describe(step), spec.replicas));
    if (step.operands.empty() || step.operands.size() != step.results.size())
      return Status::error(fmt::format("{}: {} operands and {} results; an all_reduce has one "
                                       "result per operand",
                                       cpu::describe(step), step.operands.size(),
                                       step.results.size()));
    spec.dtype = exe.buffers[step.operands[0]].type.dtype;
    for (size_t i = 0; i < step.operands.size(); ++i) {
      const TensorType &operand = exe.buffers[step.operands[i]].type;
      if (operand != exe.buffers[step.results[i]].type || operand.dtype != spec.dtype)
        return Status::error(fmt::format(
            "{}: operand #{} is {} and its result {}; results must match their operands and "
            "a bucket has one element type ({})",
            cpu::describe(step), i, operand.str(), exe.buffers[step.results[i]].type.str(),
            dtypeName(spec.dtype)));
      spec.operandBytes.push_back(operand.byteSize());
      spec.count += operand.numElements();
    }
    if (spec.dtype == DType::i1 || (spec.kind == ReduceKind::mean && !isFloat(spec.dtype)))
      return Status::error(fmt::format("{}: cannot take the {} of {} elements",
                                       cpu::describe(step), reduceKindName(spec.kind), dtypeName(spec.dtype)));
    // The communicator's messages say "all_reduce '<what>'": the step's place, and its size.
    spec.what = step.location.empty() ? fmt::format("step {}", s) : step.location;
    if (step.operands.size() > 1) {
      spec.what += fmt::format(", a bucket of {} tensors", step.operands.size());
      reduce.staging.resize(size_t(spec.count) * byteWidth(spec.dtype));
    }
    steps.index_[s] = int(steps.allReduces_.size());
    for (BufferId id : step.results)
      writtenBy[id] = int(steps.allReduces_.size());
    steps.allReduces_.push_back(std::move(reduce));
  }
  // Each all_reduce is waited for before the first step that reads any of its results, or
  // before the outputs are read when no step does.
  std::vector<char> placed(steps.allReduces_.size(), 0);
  for (size_t s = 0; s < exe.steps.size(); ++s)
    for (BufferId id : exe.steps[s].operands)
      if (int r = writtenBy[id]; r >= 0 && !placed[r]) {
        placed[r] = 1;
        steps.waitBefore_[s].push_back(r);
      }
  for (size_t r = 0; r < placed.size(); ++r)
    if (!placed[r])
      steps.waitBefore_[exe.steps.size()].push_back(int(r));
  return steps;
}

Status CollectiveSteps::start(size_t step, void *const *buffers, Communicator *communicator) {
  if (index_[step] == kReplicaId) {
    *static_cast<int64_t *>(buffers[0]) = communicator ? communicator->rank() : 0;
    return Status();
  }
  AllReduce &reduce = allReduces_[index_[step]];
  const AllReduceSpec &spec = reduce.spec;
  size_t operands = spec.operandBytes.size();
  // Alone, a sum or mean over one replica is the operand itself.
  if (spec.replicas == 1) {
    for (size_t i = 0; i < operands; ++i)
      std::memcpy(buffers[operands + i], buffers[i], spec.operandBytes[i]);
    return Status();
  }
  SMELT_RETURN_IF_ERROR(spec.checkGroup(communicator));
  if (communicator->cudaDevice() >= 0)
    return Status::error(fmt::format("{} runs on the CPU, but {} reduces GPU memory: place it "
                                     "on gpu:{}, or give this replica a host communicator",
                                     spec.what, communicator->describe(),
                                     communicator->cudaDevice()));
  reduce.results.assign(buffers + operands, buffers + 2 * operands);
  void *data = buffers[operands];
  if (operands == 1) {
    std::memcpy(data, buffers[0], spec.operandBytes[0]);
  } else {
    data = reduce.staging.data();
    size_t offset = 0;
    for (size_t i = 0; i < operands; ++i) {
      std::memcpy(reduce.staging.data() + offset, buffers[i], spec.operandBytes[i]);
      offset += spec.operandBytes[i];
    }
  }
  SMELT_ASSIGN_OR_RETURN(reduce.ticket,
                         communicator->start(data, spec.count, spec.dtype, spec.kind, spec.what));
  return Status();
}

bool CollectiveSteps::mustWaitBefore(size_t step) const {
  for (int r : waitBefore_[step])
    if (allReduces_[r].ticket)
      return true;
  return false;
}

Status CollectiveSteps::waitBefore(size_t step, Communicator *communicator) {
  for (int r : waitBefore_[step])
    if (allReduces_[r].ticket)
      SMELT_RETURN_IF_ERROR(finish(allReduces_[r], communicator));
  return Status();
}

Status CollectiveSteps::waitForAll(Communicator *communicator) {
  Status first;
  for (AllReduce &reduce : allReduces_)
    if (reduce.ticket)
      if (Status s = finish(reduce, communicator); !s.ok() && first.ok())
        first = s;
  return first;
}

Status CollectiveSteps::finish(AllReduce &reduce, Communicator *communicator) {
  int64_t ticket = *reduce.ticket;
  reduce.ticket.reset();
  SMELT_RETURN_IF_ERROR(communicator->wait(ticket));
  if (reduce.staging.empty())
    return Status();
  size_t offset = 0;
  for (size_t i = 0; i < reduce.results.size(); ++i) {
    std::memcpy(reduce.results[i], reduce.staging.data() + offset, reduce.spec.operandBytes[i]);
    offset += reduce.spec.operandBytes[i];
  }
  return Status();
}

} // namespace smelt::rt
