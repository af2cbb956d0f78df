// What every executor checks of an Executable, whatever device runs it, and the buffers of its
// runs: that the dataflow and the compiler's schedule (Step::frees) are well formed, that each
// buffer's size is sane and fits the device, that the run's inputs match, which of the
// caller's tensors outputs may go into; and RunBuffers, which takes each buffer's memory as
// its step comes and gives it back where the schedule says.
#pragma once

#include "runtime/Allocator.h"
#include "runtime/DeviceArray.h"
#include "runtime/Executable.h"
#include "runtime/HostTensor.h"
#include "runtime/Status.h"

#include <map>
#include <string>
#include <vector>

namespace smelt::rt {

/// "b7 (matmul at m.mlir:3:8, tensor<64x128xf32>)": how messages name a buffer.
std::string bufferLabel(const Executable &exe, BufferId id);

/// Checks buffer ids, constants' sizes and that each buffer has one producer before any use.
Status validateDataflow(const Executable &exe);

/// Checks every buffer's byte size (no negative or overflowing shape), and with an allocator
/// that none the executor allocates could never fit under its limit: said at creation, not
/// mid-run. Inputs count only when `inputsOnDevice` (a GPU copies them in; the CPU reads the
/// caller's).
Status checkBufferSizes(const Executable &exe, const Allocator *allocator, bool inputsOnDevice);

/// Checks a run's inputs against the Executable's: count and each one's type.
Status checkRunInputs(const Executable &exe, const std::vector<const HostTensor *> &inputs);
/// The same for values; a device array donated before (empty) is an error saying so.
Status checkRunInputs(const Executable &exe, const std::vector<Value *> &inputs);

/// Per output of a run: the caller's tensor `outputs[i]` when the result may go into it instead
/// of a fresh tensor (it has the output's type, holds bytes, and shares no memory with an
/// input), else null. A training loop that swaps its state with the outputs, rather than
/// moving them in, then runs without allocating them: its old state is the next run's output
/// memory, as XLA's donated buffers are.
std::vector<HostTensor *> reusableOutputs(const Executable &exe,
                                          const std::vector<const HostTensor *> &inputs,
                                          std::vector<HostTensor> &outputs);

/// The buffers of one executor's runs on one device: each buffer's address; the blocks a run
/// takes from the allocator as the step that writes a buffer comes and gives back after the
/// step the schedule says (Step::frees) or when the run ends; and the bytes live now and at most in
/// the run. Both executors keep their buffers in one.
///
/// Buffers with an arena offset (smelt-assign-buffers) written by steps on this device live in
/// one block a run takes at its start: the arena, as long as the furthest offset + size. Its
/// layout is checked when the buffers are made: offsets aligned, and no two buffers live at the
/// same step sharing a byte.
class RunBuffers {
public:
  RunBuffers() = default;
  /// Every buffer of `exe` is taken per run from `allocator` except those in `fixed`, whose
  /// memory the executor places itself (constants, and the CPU's inputs, which are the caller's
  /// memory). `exe` and `allocator` must outlive the result.
  static Expected<RunBuffers> create(const Executable &exe, Allocator *allocator,
                                     const std::vector<BufferId> &fixed);

  /// Where buffer `id` is now (null: not taken yet, or given back).
  void *operator[](BufferId id) const { return address_[id]; }
  /// Whether a run takes buffer `id` (it is not fixed).
  bool perRun(BufferId id) const { return perRun_[id]; }
  /// Places a fixed buffer at `address` (null: clears it).
  void place(BufferId id, void *address) { address_[id] = address; }

  /// A run begins with `heldBytes` (constants, workspace) live besides its buffers, and takes
  /// the arena; running out of memory for it is the error.
  Status beginRun(uint64_t heldBytes);
  /// Takes buffer `id`'s block (the error names the buffer), or uses `callerMemory` when given
  /// (a caller's output tensor, never given to the allocator). Live bytes count it either way,
  /// but an arena buffer is counted with the arena.
  Status take(BufferId id, void *callerMemory = nullptr);
  /// Takes buffer `id` as `block`, a block of the allocator the run now owns (a donated
  /// input's): given back to the allocator like the blocks take() allocates.
  void adopt(BufferId id, void *block);
  /// Takes result #`result` of step `step` as the block of the operand it is written in place
  /// of (KernelParams::inPlace), when that operand dies at the step (the step frees it) and the
  /// run owns its block: one it allocated or adopted, not the caller's memory nor the arena's.
  /// The operand then holds nothing; the bytes stay counted once. False (nothing changed) when
  /// it cannot: the caller takes the result as usual.
  bool takeInPlace(size_t step, size_t result);
  /// Hands buffer `id`'s block to the caller, who frees it to the allocator (an output kept on
  /// the device), or null when the run cannot give it up: a block of the arena, the caller's
  /// memory, a fixed buffer, or one already handed over. Its bytes stay counted in this run.
  void *release(BufferId id);
  /// Takes `block`, a block the run owns, back from wherever the run holds it now: a buffer it
  /// went to (in place, or reused after its buffer was given back) or the blocks waiting for
  /// the run's end. For a run that failed before any step was queued, whose donated inputs are
  /// whole: null when the run does not hold it. Its bytes stay counted in this run.
  void *reclaim(void *block);
  /// Gives back the buffers step `step` frees (Step::frees) that this run holds.
  void giveBackAfter(size_t step);
  /// Gives back every buffer the run still holds, and the arena: at its end, however it ends.
  void giveBackAll();
  /// Whether the blocks a run gives back wait for the run's end before they go to the
  /// allocator: for a run that queues its steps only after taking every buffer (a GPU executor
  /// launching them as one CUDA graph), whose freed blocks the allocator must not hand to
  /// another user, or give back to the device, while no step that reads them is queued yet.
  /// Meanwhile take() reuses a waiting block of the same rounded size for a later step, which
  /// runs after every earlier step; live and peak bytes count as without it. Set between runs.
  void deferFrees(bool defer) { defer_ = defer; }

  uint64_t liveBytes() const { return liveBytes_; }
  uint64_t peakBytes() const { return peakBytes_; }

private:
  void giveBack(BufferId id);

  const Executable *exe_ = nullptr;
  Allocator *allocator_ = nullptr;
  std::vector<void *> address_;
  /// Per buffer: whether a run takes it (not fixed), whether its memory is the caller's, and
  /// whether it lives in the arena.
  std::vector<char> perRun_, callers_, inArena_;
  bool defer_ = false;
  /// Blocks given back while defer_, by their rounded size, until the run ends.
  std::multimap<uint64_t, void *> deferred_;
  uint64_t arenaBytes_ = 0;
  void *arena_ = nullptr;
  uint64_t liveBytes_ = 0, peakBytes_ = 0;
};

} // namespace smelt::rt
