// The executor's collective steps, all_reduce and replica_id, kept apart from the kernels
// because they talk to the other replicas. An all_reduce copies its operands into its results
// (through one flat staging buffer when it is a bucket of several), starts the reduction on the
// replicas' Communicator and returns; the executor waits for it just before the first step that
// reads one of its results, so the reduction overlaps with the steps in between (the rest of
// the backward pass), and copies a bucket's reduced values into place then.
#pragma once

#include "runtime/Collectives.h"
#include "runtime/Executable.h"

#include <optional>
#include <vector>

namespace smelt::rt {

/// One all_reduce step as prepare() checked it: what any executor, CPU or GPU, needs to run it.
struct AllReduceSpec {
  ReduceKind kind = ReduceKind::sum;
  int64_t replicas = 1;
  DType dtype = DType::f32;
  std::vector<size_t> operandBytes;
  int64_t count = 0;
  /// "'all_reduce' (step.mlir:4:3), 3 tensors": how errors name it.
  std::string what;

  /// Whether `communicator` (null: the function runs alone) is a group of `replicas`; the
  /// error says how to run it in one. Over one replica no group is needed.
  Status checkGroup(const Communicator *communicator) const;
};

class CollectiveSteps {
public:
  /// Finds the collective steps of `exe`, checks their attributes (kind sum/mean, replicas >=
  /// 1) and types (results like operands, one element type per bucket), and notes before which
  /// step each all_reduce must be finished. Errors name the step.
  static Expected<CollectiveSteps> prepare(const Executable &exe);

  bool isCollective(size_t step) const { return index_[step] != kOther; }
  /// The spec of all_reduce step `step` (which must be one).
  const AllReduceSpec &allReduce(size_t step) const { return allReduces_[index_[step]].spec; }

  /// Runs collective step `step` over its operand and result addresses (operands first):
  /// replica_id writes this replica's index; all_reduce starts. `communicator` may be null
  /// when the function runs alone, which an all_reduce over several replicas reports.
  Status start(size_t step, void *const *buffers, Communicator *communicator);
  /// Whether any all_reduce must finish before step `step` (steps.size(): before the outputs
  /// are read, i.e. all that are still running).
  bool mustWaitBefore(size_t step) const;
  Status waitBefore(size_t step, Communicator *communicator);
  /// Waits for every all_reduce still running: a run that stops early must not free buffers
  /// a reduction may still write. The first error wins; every one is waited for.
  Status waitForAll(Communicator *communicator);

private:
  struct AllReduce {
    AllReduceSpec spec;
    /// A bucket's flat buffer; empty for one operand, which is reduced in its result.
    std::vector<uint8_t> staging;
    std::optional<int64_t> ticket;
    std::vector<void *> results;
  };
  std::vector<AllReduce> allReduces_;
  /// Per step: its index in allReduces_, kReplicaId or kOther.
  static constexpr int kReplicaId = -2, kOther = -1;
  std::vector<int> index_;
  /// Per step (and one past the last): the all_reduces whose results it reads first.
  std::vector<std::vector<int>> waitBefore_;

  Status finish(AllReduce &reduce, Communicator *communicator);
};

} // namespace smelt::rt
