// The emulated NCCL's meeting place across processes (Nccl.cpp): a shared-memory file in
// /dev/shm named from the unique id, where every rank of a communicator registers (its pid and
// device) and, once the communicator spans processes, passes each collective's data through its
// own slot, one chunk a round. Emulated device memory is per process, so this is the only way a
// rank in another process can see another's contribution.
//
// A round: a rank waits until every rank has departed the previous round (its slot may then be
// overwritten), copies its chunk and the collective's description into its slot and arrives;
// waits until every rank has arrived, reads every slot, then departs. Waits poll, and end with a
// Fault when a rank fails the communicator (its reason is in the header), a peer process exits,
// or SMELT_EMUCUDA_NCCL_TIMEOUT passes; with Abandoned when this process aborts it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace smelt::emucuda::nccl {

/// A wait ended because this process abandoned the communicator (ncclCommAbort): the
/// collective does nothing, as an aborted one in one process does.
struct Abandoned {};

/// What a rank says it is issuing, in its slot: ranks compare these before reducing anything.
struct SlotCollective {
  uint64_t sequence;
  int32_t kind, type, op, unused;
  uint64_t count;
  char what[160]; // describePart's text, for a message naming both sides
};

class Rendezvous {
public:
  using Deadline = std::chrono::steady_clock::time_point;
  /// Each rank's slot holds this many bytes of a collective per round.
  static constexpr size_t kChunkBytes = size_t(4) << 20;

  /// Opens the rendezvous `name` (a file name in /dev/shm), creating it for `nranks` when this
  /// rank comes first; null with `why` when that fails.
  static std::shared_ptr<Rendezvous> open(const std::string &name, int nranks, std::string &why);
  ~Rendezvous();
  Rendezvous(const Rendezvous &) = delete;
  Rendezvous &operator=(const Rendezvous &) = delete;

  /// The nranks its creator was given.
  int nranks() const;
  /// Takes `rank`'s slot for this process: 0, or the pid of the process that holds it already.
  int claim(int rank, int device);
  int joined() const;
  /// The process that claimed `rank`, 0 when none has.
  int pid(int rank) const;
  /// Removes the name; the mapping stays for those that have it. Once every rank has joined (or
  /// the communicator failed) nobody needs the name, so nothing is left behind in /dev/shm.
  void unlink();

  /// Fails the communicator for every process; the first reason stays. Ends every wait.
  void fail(const std::string &why);
  std::optional<std::string> failure() const;
  /// "rank 1 (pid 1234) exited" for a registered peer process that is gone, else "".
  std::string deadPeer() const;

  std::byte *data(int rank);
  SlotCollective &collective(int rank);
  void arrive(int rank, uint64_t round);
  void depart(int rank, uint64_t round);
  /// Waits until every rank has arrived at (departed from) `round`; `what` names the waiter and
  /// the collective in the messages.
  void awaitArrivals(uint64_t round, Deadline deadline, const std::string &what);
  void awaitDepartures(uint64_t round, Deadline deadline, const std::string &what);

  /// Set by ncclCommAbort in this process: waits end with Abandoned.
  std::atomic<bool> abandoned{false};
  /// This process runs the communicator's collectives one at a time, in sequence order, since
  /// rounds must line up across processes: the next sequence to run, and the round counter.
  std::mutex order;
  std::condition_variable turn;
  uint64_t nextSequence = 0;
  uint64_t round = 0;

private:
  Rendezvous() = default;
  struct Header;
  struct Slot;
  Header &header() const;
  Slot &slot(int rank) const;
  void await(bool arrivals, uint64_t round, Deadline deadline, const std::string &what);

  std::string path_;
  void *base_ = nullptr;
  size_t size_ = 0;
};

} // namespace smelt::emucuda::nccl
