// The MPI communicator (MpiCommunicator.h): MPI initialization once per process, and
// collectives as non-blocking MPI requests that wait() polls, so a wait can give up after the
// timeout instead of blocking forever inside MPI when another rank died or is stuck.
#include "runtime/mpi/MpiCommunicator.h"

#include "runtime/DTypeDispatch.h"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <thread>
#include <vector>

namespace smelt::rt {

bool launchedByMpi() {
  // OpenMPI, PMIx (OpenMPI 4+, srun --mpi=pmix), PMI-1/2 (MPICH's hydra, srun), MVAPICH.
  for (const char *name :
       {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"})
    if (std::getenv(name))
      return true;
  return false;
}

namespace {

std::string mpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return fmt::format("MPI error code {}", code);
  return std::string(text, size_t(length));
}

/// Set when finalizing at exit could hang: a collective timed out (its request can never
/// complete) or this rank called abort().
std::atomic<bool> skipFinalize{false};

/// How long wait() polls in a tight loop before it sleeps between tests (see wait()).
constexpr double kSpinSeconds = 1.0;

void finalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && !skipFinalize)
    MPI_Finalize();
}

/// f16 and bf16 sums for MPI_Iallreduce: MPI has no such types, so they travel as MPI_UINT16_T
/// with these operations, which add in double and round once per addition.
template <typename T> void sumHalves(void *in, void *inout, int *length, MPI_Datatype *) {
  const T *a = static_cast<const T *>(in);
  T *b = static_cast<T *>(inout);
  for (int i = 0; i < *length; ++i)
    b[i] = fromCompute<T>(double(float(a[i])) + double(float(b[i])));
}

struct MpiProcess {
  Status status;
  MPI_Op sumHalf = MPI_OP_NULL, sumBFloat16 = MPI_OP_NULL;
};

/// MPI initialized (by us, or by the program before us), and our operations created.
const MpiProcess &mpiProcess() {
  static const MpiProcess process = [] {
    MpiProcess p;
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (finalized) {
      p.status = Status::error("MPI was already finalized in this process");
      return p;
    }
    if (!initialized) {
      int provided = 0;
      if (int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
          code != MPI_SUCCESS) {
        p.status = Status::error("MPI_Init_thread failed: " + mpiErrorText(code));
        return p;
      }
      std::atexit(finalizeAtExit); // we initialized it, so we finalize it
    }
    if (int code = MPI_Op_create(&sumHalves<Half>, 1, &p.sumHalf); code != MPI_SUCCESS)
      p.status = Status::error("MPI_Op_create (f16 sum) failed: " + mpiErrorText(code));
    else if ((code = MPI_Op_create(&sumHalves<BFloat16>, 1, &p.sumBFloat16)) != MPI_SUCCESS)
      p.status = Status::error("MPI_Op_create (bf16 sum) failed: " + mpiErrorText(code));
    return p;
  }();
  return process;
}

/// The MPI type an element travels as (f16 and bf16 as their 16-bit patterns).
MPI_Datatype mpiType(DType dtype) {
  switch (dtype) {
  case DType::f32:
    return MPI_FLOAT;
  case DType::f64:
    return MPI_DOUBLE;
  case DType::i32:
    return MPI_INT32_T;
  case DType::i64:
    return MPI_INT64_T;
  case DType::f16:
  case DType::bf16:
    return MPI_UINT16_T;
  case DType::i1:
    break;
  }
  return MPI_DATATYPE_NULL;
}

/// A started collective, until wait() returns it.
struct Pending {
  MPI_Request request = MPI_REQUEST_NULL;
  void *data;
  int64_t count;
  DType dtype;
  ReduceKind kind;
  std::string what;
  std::vector<std::byte> staging; // deterministic mode: every rank's contribution, in order
  bool done = false;
  Status status; // of MPI_Test, once done
};

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(MPI_Comm comm, CollectiveOptions options) : comm_(comm), options_(options) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    char name[MPI_MAX_PROCESSOR_NAME];
    int length = 0;
    if (MPI_Get_processor_name(name, &length) == MPI_SUCCESS)
      host_.assign(name, size_t(length));
  }
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override {
    return fmt::format("mpi rank {} of {} (host {})", rank_, size_, host_);
  }

  Expected<int64_t> start(void *data, int64_t count, DType dtype, ReduceKind kind,
                          std::string what) override;
  void progress() override;
  Status wait(int64_t ticket) override;
  void abort(const std::string &reason) override;

private:
  /// "all_reduce '<what>' (<bytes> bytes of <dtype>, <kind>) on mpi rank R of N (host H)".
  std::string name(const Pending &p) const {
    return collectiveName(p.what, p.count, p.dtype, p.kind);
  }
  /// MPI_Test once; when the request is complete, finishes the reduction into the buffer.
  void test(Pending &p);

  MPI_Comm comm_;
  CollectiveOptions options_;
  int rank_ = 0, size_ = 1;
  std::string host_ = "unknown";
  int64_t nextTicket_ = 0;
  std::map<int64_t, Pending> pending_;
  std::optional<std::string> broken_; // why every later call fails (a timeout)
};

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  bool inFlight = std::any_of(pending_.begin(), pending_.end(),
                              [](const auto &entry) { return !entry.second.done; });
  if (inFlight) {
    // MPI may still write into a collective's staging buffer, and freeing the communicator or
    // finalizing would wait for it: leave both to the end of the process.
    skipFinalize = true;
    for (auto &[ticket, p] : pending_)
      if (!p.done)
        new std::vector<std::byte>(std::move(p.staging)); // deliberately never freed
    return;
  }
  if (!finalized)
    MPI_Comm_free(&comm_);
}

Expected<int64_t> MpiCommunicator::start(void *data, int64_t count, DType dtype, ReduceKind kind,
                                         std::string what) {
  if (broken_)
    return Status::error(fmt::format("{}: {}", collectiveName(what, count, dtype, kind), *broken_));
  SMELT_RETURN_IF_ERROR(checkReduceArguments(data, count, dtype, kind, what));
  // MPI-3 counts are int; the deterministic mode's staging holds size() contributions.
  if (count > INT_MAX)
    return Status::error(fmt::format("{}: count outside [0, 2^31) for MPI",
                                     collectiveName(what, count, dtype, kind)));

  int64_t ticket = nextTicket_++;
  Pending &p = pending_[ticket];
  p.data = data;
  p.count = count;
  p.dtype = dtype;
  p.kind = kind;
  p.what = std::move(what);
  MPI_Datatype type = mpiType(dtype);
  int code;
  const char *call;
  if (options_.deterministic) {
    call = "MPI_Iallgather";
    p.staging.resize(size_t(count) * byteWidth(dtype) * size_t(size_));
    code = MPI_Iallgather(data, int(count), type, p.staging.data(), int(count), type, comm_,
                          &p.request);
  } else {
    call = "MPI_Iallreduce";
    MPI_Op op = dtype == DType::f16    ? mpiProcess().sumHalf
                : dtype == DType::bf16 ? mpiProcess().sumBFloat16
                                       : MPI_SUM;
    code = MPI_Iallreduce(MPI_IN_PLACE, data, int(count), type, op, comm_, &p.request);
  }
  if (code != MPI_SUCCESS) {
    std::string message = fmt::format("{}: {} failed: {}", name(p), call, mpiErrorText(code));
    pending_.erase(ticket);
    return Status::error(std::move(message));
  }
  return ticket;
}

void MpiCommunicator::test(Pending &p) {
  int flag = 0;
  if (int code = MPI_Test(&p.request, &flag, MPI_STATUS_IGNORE); code != MPI_SUCCESS) {
    p.done = true;
    p.status = Status::error(fmt::format("{}: MPI_Test failed: {}", name(p), mpiErrorText(code)));
    return;
  }
  if (!flag)
    return;
  p.done = true;
  if (options_.deterministic) {
    reduceInRankOrder(p.staging.data(), size_, p.count, p.dtype, p.kind, p.data);
    p.staging = {};
  } else if (p.kind == ReduceKind::mean) {
    visitDType(p.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T *values = static_cast<T *>(p.data);
      for (int64_t i = 0; i < p.count; ++i) {
        if constexpr (kIsFloat<T>)
          values[i] = fromCompute<T>(double(toCompute(values[i])) / size_);
        else if constexpr (!std::is_same_v<T, bool>)
          values[i] = T(values[i] / size_); // toward zero
      }
    });
  }
}

void MpiCommunicator::progress() {
  if (broken_)
    return;
  for (auto &[ticket, p] : pending_)
    if (!p.done)
      test(p);
}

Status MpiCommunicator::wait(int64_t ticket) {
  if (broken_)
    return Status::error(fmt::format("{}: {}", describe(), *broken_));
  auto it = pending_.find(ticket);
  if (it == pending_.end())
    return Status::error(fmt::format(
        "{}: ticket {} is not a collective started and not yet waited for", describe(), ticket));
  Pending &p = it->second;
  // Poll rather than MPI_Wait, which could block forever. A non-blocking collective advances
  // only inside MPI calls (each round of its algorithm needs another MPI_Test), so polling
  // starts as a busy loop, as MPI_Wait itself would be, yielding the core to any other rank
  // sharing it; after a second, a collective that is huge or stuck no longer needs a tight
  // loop, and sleeps of 1 ms between tests cost little CPU while the timeout runs.
  auto begin = std::chrono::steady_clock::now();
  while (!p.done) {
    test(p);
    if (p.done)
      break;
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    if (options_.timeoutSeconds > 0 && waited >= options_.timeoutSeconds) {
      // The request can never be cancelled (MPI has no cancel for collectives): keep it and its
      // buffers as they are, refuse everything from now on, and do not finalize at exit.
      broken_ = fmt::format("the communicator is unusable after {} did not complete within {} s",
                            name(p), options_.timeoutSeconds);
      skipFinalize = true;
      return Status::error(fmt::format(
          "{}: the other ranks did not complete it within {:.1f} s; another rank died or is "
          "stuck (or started different collectives)",
          name(p), waited));
    }
    if (waited < kSpinSeconds)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  Status status = p.status;
  pending_.erase(it);
  return status;
}

void MpiCommunicator::abort(const std::string &reason) {
  std::fprintf(stderr, "smelt: %s: %s\n", describe().c_str(), reason.c_str());
  std::fflush(stderr);
  skipFinalize = true;
  MPI_Abort(comm_, 1); // ends every rank of the job; returns only if MPI itself is broken
  std::_Exit(1);
}

} // namespace

Expected<std::unique_ptr<Communicator>> createMpiCommunicator(CollectiveOptions options) {
  const MpiProcess &process = mpiProcess();
  if (!process.status.ok())
    return process.status;
  MPI_Comm comm = MPI_COMM_NULL;
  // Our own communicator: the program's messages on MPI_COMM_WORLD never mix with ours.
  if (int code = MPI_Comm_dup(MPI_COMM_WORLD, &comm); code != MPI_SUCCESS)
    return Status::error("MPI_Comm_dup(MPI_COMM_WORLD) failed: " + mpiErrorText(code));
  // Errors come back as codes we turn into Status, instead of MPI ending the process.
  if (int code = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN); code != MPI_SUCCESS)
    return Status::error("MPI_Comm_set_errhandler failed: " + mpiErrorText(code));
  return std::unique_ptr<Communicator>(std::make_unique<MpiCommunicator>(comm, options));
}

} // namespace smelt::rt
