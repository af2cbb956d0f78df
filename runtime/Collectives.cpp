// The reduction every deterministic backend shares (reduceInRankOrder) and the in-process
// backend, LocalGroup: N replicas as threads of one process, meeting in a shared State.
//
// A collective is a "round", matched across replicas by its sequence number (the k-th start() of
// every replica is round k). Each replica's start() leaves its buffer in the round; the replica
// that arrives last reduces every buffer in rank order, outside the lock, and writes the result
// into all of them. Waits sleep on a condition variable until the round is done, the group is
// aborted, or the timeout passes; a timeout aborts the whole group, since the round can no
// longer finish and the late replica must not write into a buffer its owner has given up.
#include "runtime/Collectives.h"

#include "runtime/DTypeDispatch.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

namespace smelt::rt {

std::string_view reduceKindName(ReduceKind kind) {
  return kind == ReduceKind::sum ? "sum" : "mean";
}

std::string namingReplica(const Communicator *communicator, const std::string &message) {
  if (!communicator)
    return message;
  std::string who = communicator->describe();
  return message.find(who) == std::string::npos ? who + ": " + message : message;
}

Expected<int64_t> Communicator::startOnStream(void *, void *, int64_t, DType, ReduceKind,
                                              std::string what) {
  return Status::error(fmt::format("{}: {} cannot reduce on a GPU stream", what, describe()));
}

Status Communicator::captureOnStream(void *, void *, int64_t, DType, ReduceKind, std::string what) {
  return Status::error(fmt::format("{}: {} cannot reduce inside a CUDA graph", what, describe()));
}

Expected<int64_t> Communicator::fenceOnStream(void *, std::string what) {
  return Status::error(fmt::format("{}: {} has no work on GPU streams", what, describe()));
}

std::string Communicator::collectiveName(const std::string &what, int64_t count, DType dtype,
                                         ReduceKind kind) const {
  return fmt::format("all_reduce '{}' ({} bytes of {}, {}) on {}", what,
                     count * int64_t(byteWidth(dtype)), dtypeName(dtype), reduceKindName(kind),
                     describe());
}

Status Communicator::checkReduceArguments(const void *data, int64_t count, DType dtype,
                                          ReduceKind kind, const std::string &what) const {
  if (dtype == DType::i1)
    return Status::error(fmt::format("{}: i1 (boolean) tensors cannot be summed; convert them "
                                     "to an integer type first",
                                     collectiveName(what, count, dtype, kind)));
  if (count < 0 || (count > 0 && !data))
    return Status::error(fmt::format("{}: {}", collectiveName(what, count, dtype, kind),
                                     count < 0 ? fmt::format("negative count {}", count)
                                               : std::string("null buffer")));
  return Status();
}

Status Communicator::allReduce(void *data, int64_t count, DType dtype, ReduceKind kind,
                               std::string what) {
  SMELT_ASSIGN_OR_RETURN(int64_t ticket, start(data, count, dtype, kind, std::move(what)));
  return wait(ticket);
}

namespace {

// GCC and Clang's 128-bit integer: sums of i64 in it are exact for any practical replica count.
__extension__ using Int128 = __int128;

/// reduceInRankOrder over contributions given by pointer. `out` may be one of them: element i
/// of every contribution is read before out[i] is written.
template <typename T>
void reduceTyped(const void *const *contributions, int replicas, int64_t count, ReduceKind kind,
                 void *out) {
  const T *const *in = reinterpret_cast<const T *const *>(contributions);
  T *result = static_cast<T *>(out);
  if constexpr (kIsFloat<T>) {
    // Every float type adds in double, replica 0 first, and rounds once at the end.
    for (int64_t i = 0; i < count; ++i) {
      double sum = 0;
      for (int r = 0; r < replicas; ++r)
        sum += double(toCompute(in[r][i]));
      if (kind == ReduceKind::mean)
        sum /= replicas;
      result[i] = fromCompute<T>(sum);
    }
  } else {
    // Integers: the exact sum (i32 in 64 bits, i64 in 128), which sum wraps to the type's width
    // (two's complement, as MPI_SUM does) and mean divides, truncating toward zero like C++.
    using Wide = std::conditional_t<sizeof(T) <= 4, int64_t, Int128>;
    using Unsigned = std::make_unsigned_t<T>;
    for (int64_t i = 0; i < count; ++i) {
      Wide sum = 0;
      for (int r = 0; r < replicas; ++r)
        sum += Wide(in[r][i]);
      if (kind == ReduceKind::mean)
        sum /= replicas;            // |mean| <= max |x|: fits T
      result[i] = T(Unsigned(sum)); // modulo 2^bits, well defined through the unsigned type
    }
  }
}

/// The pointer form of reduceInRankOrder, shared with LocalGroup. i1 has no sum: callers
/// reject it before getting here, and it leaves `out` unchanged.
void reduceRanks(const void *const *contributions, int replicas, int64_t count, DType dtype,
                 ReduceKind kind, void *out) {
  if (dtype == DType::i1 || replicas < 1 || count <= 0)
    return;
  visitDType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>)
      reduceTyped<T>(contributions, replicas, count, kind, out);
  });
}

} // namespace

void reduceInRankOrder(const void *contributions, int replicas, int64_t count, DType dtype,
                       ReduceKind kind, void *out) {
  std::vector<const void *> pointers(size_t(std::max(replicas, 0)));
  size_t bytes = size_t(std::max<int64_t>(count, 0)) * byteWidth(dtype);
  for (int r = 0; r < replicas; ++r)
    pointers[size_t(r)] = static_cast<const char *>(contributions) + size_t(r) * bytes;
  reduceRanks(pointers.data(), replicas, count, dtype, kind, out);
}

// --- LocalGroup ---------------------------------------------------------------------------

namespace {

/// One replica's part of a round: what it asked for, and its buffer.
struct Arrival {
  void *data = nullptr;
  int64_t count = 0;
  DType dtype = DType::f32;
  ReduceKind kind = ReduceKind::sum;
  std::string what;
};

/// "replica 2" or "replicas 1, 3".
std::string listReplicas(const std::vector<int> &ranks) {
  return fmt::format("replica{} {}", ranks.size() == 1 ? "" : "s", fmt::join(ranks, ", "));
}

struct Round {
  std::vector<std::optional<Arrival>> arrivals; // by rank
  int arrived = 0;
  bool reducing = false; // every replica arrived; the last one is reducing, outside the lock
  bool done = false;
  std::vector<bool> waited; // by rank; the round is dropped once every replica has waited
  int waitedCount = 0;
};

/// What the replicas of a group share. LocalGroup::State (private to the header) is this, so
/// the communicators below can hold it.
struct GroupState {
  int replicas;
  CollectiveOptions options;
  std::mutex mutex;                // guards everything below
  std::condition_variable changed; // a round finished, or the group was aborted
  std::optional<std::string> abortReason;
  std::vector<int64_t> started;    // by rank: how many collectives each replica has started
  std::map<int64_t, Round> rounds; // by sequence number

  GroupState(int replicas, CollectiveOptions options)
      : replicas(std::max(replicas, 1)), options(options), started(size_t(this->replicas)) {
    if (replicas < 1)
      abortReason = fmt::format("a LocalGroup needs at least one replica, not {}", replicas);
  }

  /// Fails every collective in flight and every later one (the first reason sticks).
  void abortLocked(std::string reason) {
    if (!abortReason)
      abortReason = std::move(reason);
    changed.notify_all();
  }

  std::string describe(int rank) const {
    return fmt::format("local replica {} of {}", rank, replicas);
  }
};

class LocalCommunicator final : public Communicator {
public:
  LocalCommunicator(std::shared_ptr<GroupState> state, int rank)
      : state_(std::move(state)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return state_->replicas; }
  std::string describe() const override { return state_->describe(rank_); }

  Expected<int64_t> start(void *data, int64_t count, DType dtype, ReduceKind kind,
                          std::string what) override;
  Status wait(int64_t ticket) override;
  void abort(const std::string &reason) override {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->abortLocked(fmt::format("{}: {}", describe(), reason));
  }

private:
  /// The last replica to arrive: reduces in rank order into replica 0's buffer, copies that to
  /// the others, and marks the round done. Called with the lock held; releases it meanwhile.
  void reduce(std::unique_lock<std::mutex> &lock, Round &round);
  std::string name(const Arrival &a) const {
    return collectiveName(a.what, a.count, a.dtype, a.kind);
  }

  std::shared_ptr<GroupState> state_;
  int rank_;
};

Expected<int64_t> LocalCommunicator::start(void *data, int64_t count, DType dtype, ReduceKind kind,
                                           std::string what) {
  Arrival mine{data, count, dtype, kind, std::move(what)};
  SMELT_RETURN_IF_ERROR(checkReduceArguments(data, count, dtype, kind, mine.what));
  GroupState &s = *state_;
  std::unique_lock<std::mutex> lock(s.mutex);
  if (s.abortReason)
    return Status::error(fmt::format("{}: aborted: {}", name(mine), *s.abortReason));

  int64_t sequence = s.started[size_t(rank_)]++;
  auto [it, created] = s.rounds.try_emplace(sequence);
  Round &round = it->second;
  if (created) {
    round.arrivals.resize(size_t(s.replicas));
    round.waited.resize(size_t(s.replicas));
  }
  // Compare with a replica that arrived earlier: a mismatch means the replicas' programs
  // diverged, and nothing later can be trusted, so it fails the whole group.
  for (int r = 0; r < s.replicas; ++r) {
    const std::optional<Arrival> &other = round.arrivals[size_t(r)];
    if (!other)
      continue;
    if (other->count != count || other->dtype != dtype || other->kind != kind) {
      s.abortLocked(fmt::format(
          "collective #{} does not match across replicas: {} started '{}' with {} elements of {} "
          "({}), but {} started '{}' with {} elements of {} ({}); every replica must start the "
          "same collectives in the same order",
          sequence, describe(), mine.what, count, dtypeName(dtype), reduceKindName(kind),
          s.describe(r), other->what, other->count, dtypeName(other->dtype),
          reduceKindName(other->kind)));
      round.arrivals[size_t(rank_)] = std::move(mine);
      return Status::error(
          fmt::format("{}: {}", name(*round.arrivals[size_t(rank_)]), *s.abortReason));
    }
    break;
  }
  round.arrivals[size_t(rank_)] = std::move(mine);
  if (++round.arrived == s.replicas)
    reduce(lock, round);
  return sequence;
}

void LocalCommunicator::reduce(std::unique_lock<std::mutex> &lock, Round &round) {
  GroupState &s = *state_;
  round.reducing = true;
  // Waiters do not return while `reducing` (the buffers are in use), and the round is erased
  // only after every replica waited, so `round` and the buffers stay valid without the lock.
  std::vector<const void *> inputs;
  for (const std::optional<Arrival> &a : round.arrivals)
    inputs.push_back(a->data);
  const Arrival &first = *round.arrivals[0];
  lock.unlock();
  void *out = first.data;
  reduceRanks(inputs.data(), s.replicas, first.count, first.dtype, first.kind, out);
  size_t bytes = size_t(first.count) * byteWidth(first.dtype);
  for (size_t r = 1; r < round.arrivals.size(); ++r)
    if (bytes)
      std::memcpy(round.arrivals[r]->data, out, bytes);
  lock.lock();
  round.reducing = false;
  round.done = true;
  s.changed.notify_all();
}

Status LocalCommunicator::wait(int64_t ticket) {
  GroupState &s = *state_;
  std::unique_lock<std::mutex> lock(s.mutex);
  auto it = s.rounds.find(ticket);
  if (it == s.rounds.end() || !it->second.arrivals[size_t(rank_)] ||
      it->second.waited[size_t(rank_)])
    return Status::error(fmt::format("{}: ticket {} is not a collective this replica started "
                                     "and has not yet waited for",
                                     describe(), ticket));
  Round &round = it->second;
  const Arrival &mine = *round.arrivals[size_t(rank_)];

  // Finished, or failed and no longer touching the buffers.
  auto settled = [&] { return round.done || (s.abortReason && !round.reducing); };
  bool timedOut = false;
  if (s.options.timeoutSeconds > 0) {
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(s.options.timeoutSeconds);
    if (!s.changed.wait_until(lock, deadline, settled)) {
      if (round.reducing) // all arrived just now: the reduction is bounded work, let it finish
        s.changed.wait(lock, settled);
      else
        timedOut = true;
    }
  } else {
    s.changed.wait(lock, settled);
  }

  Status status;
  if (timedOut) {
    std::vector<int> missing;
    for (int r = 0; r < s.replicas; ++r)
      if (!round.arrivals[size_t(r)])
        missing.push_back(r);
    std::string message = fmt::format(
        "{}: the other replicas did not arrive within {} s: {} never started it (it failed, is "
        "stuck, or started different collectives)",
        name(mine), s.options.timeoutSeconds, listReplicas(missing));
    // The round can never finish now: fail everyone rather than let a late replica reduce into
    // this replica's buffer after its caller has moved on.
    s.abortLocked(message);
    status = Status::error(std::move(message));
  } else if (!round.done) {
    status = Status::error(fmt::format("{}: aborted: {}", name(mine), *s.abortReason));
  }
  round.waited[size_t(rank_)] = true;
  if (++round.waitedCount == s.replicas)
    s.rounds.erase(it);
  return status;
}

} // namespace

struct LocalGroup::State : GroupState {
  using GroupState::GroupState;
};

LocalGroup::LocalGroup(int replicas, CollectiveOptions options)
    : state_(std::make_shared<State>(replicas, options)) {}

LocalGroup::~LocalGroup() = default;

int LocalGroup::size() const { return state_->replicas; }

std::unique_ptr<Communicator> LocalGroup::communicator(int rank) {
  if (rank < 0 || rank >= state_->replicas)
    return nullptr;
  return std::make_unique<LocalCommunicator>(state_, rank);
}

void LocalGroup::abort(const std::string &reason) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->abortLocked(reason);
}

} // namespace smelt::rt
