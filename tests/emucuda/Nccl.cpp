// The emulated NCCL (libnccl.so.2): the part of nccl.h that Smelt's runtime resolves
// (runtime/cuda/Nccl.h), written from NVIDIA's documented contract on the emulated CUDA
// (EmuCuda.h). A rank is a thread of this process (or one thread driving several ranks in a
// group) on its own emulated device, or a rank of another process with its own emulation; a
// collective queues one part of a GroupWork per rank of this process, and the group reads and
// writes those ranks' buffers once each rank's stream has reached its part. When the
// communicator spans processes, the group also passes the data through the unique id's
// shared-memory rendezvous (NcclRendezvous.h), waiting there for the other processes' ranks.
// A collective queued on a stream that captures a CUDA graph is recorded, and issued anew at
// each launch of the graph (NCCL's graph support).
//
// What it holds to, beyond the happy path: every argument the real library rejects is rejected
// with the documented result and a reason in ncclGetLastError; ranks that never arrive fail
// after SMELT_EMUCUDA_NCCL_TIMEOUT seconds (default 300) instead of hanging, and a peer process
// that exits fails the others at once; sums are reduced in rank order, so results are
// deterministic and the same in one process or several; ranks that disagree on a collective
// fail it with a Fault naming both sides.
#include "EmuCuda.h"
#include "NcclRendezvous.h"

#include "runtime/Half.h" // the runtime's own f16/bf16 rounding

#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <unistd.h>
#include <vector>

namespace emu = smelt::emucuda;
using emu::nccl::Rendezvous;
using Clock = std::chrono::steady_clock;

namespace {

// ---------------------------------------------------------------------------------------------
// Errors: ncclGetLastError's text. The docs say the comm argument is unused and the text may
// come from another call; each thread keeps its own so that a rank's thread reads its own
// error, and falls back to the process's latest (an asynchronous failure, for instance).

thread_local std::string threadError;
std::mutex processErrorMutex;
std::string processError;

void noteError(const std::string &why) {
  threadError = why;
  std::lock_guard<std::mutex> lock(processErrorMutex);
  processError = why;
  // Real NCCL prints its warnings with NCCL_DEBUG=WARN or INFO; so does this one.
  if (const char *debug = std::getenv("NCCL_DEBUG"); debug && *debug)
    std::fprintf(stderr, "emulated NCCL WARN %s\n", why.c_str());
}

ncclResult_t fail(ncclResult_t code, const std::string &why) {
  noteError(why);
  return code;
}

std::string typeName(ncclDataType_t type) {
  static const char *const names[] = {"int8",  "uint8", "int32", "uint32",   "int64",   "uint64",
                                      "f16",   "f32",   "f64",   "bf16",     "f8e4m3",  "f8e5m2"};
  return type >= 0 && type < ncclNumTypes ? names[type] : "type " + std::to_string(int(type));
}

std::string opName(ncclRedOp_t op) {
  static const char *const names[] = {"sum", "prod", "max", "min", "avg"};
  return op >= 0 && op < ncclNumOps ? names[op] : "op " + std::to_string(int(op));
}

size_t typeSize(ncclDataType_t type) {
  switch (type) {
  case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
  case ncclFloat16: case ncclBfloat16: return 2;
  case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
  default: return 8;
  }
}

/// How long a rank waits for its peers (to join, or to issue what it needs) before failing.
Clock::duration peerTimeout() {
  double seconds = 300;
  if (const char *text = std::getenv("SMELT_EMUCUDA_NCCL_TIMEOUT"); text && *text)
    seconds = std::strtod(text, nullptr);
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

std::string timeoutHelp() { return "(SMELT_EMUCUDA_NCCL_TIMEOUT sets the wait)"; }

// ---------------------------------------------------------------------------------------------
// Unique ids: a magic, the process that made it and a serial, so that an id not made by
// ncclGetUniqueId (a zeroed one) is recognised at once instead of waited for, and so that the
// id names its rendezvous in /dev/shm uniquely.

constexpr char kIdMagic[16] = "smelt-emu-nccl";
struct IdContents {
  char magic[16];
  uint64_t pid;
  uint64_t processNonce; // tells this process from an earlier one with the same pid
  uint64_t serial;
};
static_assert(sizeof(IdContents) <= NCCL_UNIQUE_ID_BYTES);

uint64_t processNonce() {
  static const uint64_t nonce = std::random_device{}() * 0x100000001ull ^ uint64_t(getpid());
  return nonce;
}

/// The file in /dev/shm where the ranks of the id meet.
std::string rendezvousName(const IdContents &id) {
  char name[96];
  std::snprintf(name, sizeof name, "smelt-emu-nccl-%llu-%016llx-%llu",
                (unsigned long long)id.pid, (unsigned long long)id.processNonce,
                (unsigned long long)id.serial);
  return name;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Communicators and cliques. One lock guards them all: the emulation's ranks are few.

struct ncclComm;

namespace {

enum class Kind { AllReduce, AllGather };

/// One rank's arguments to one collective.
struct Part {
  Kind kind;
  const void *send;
  void *recv;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  std::string what; // "ncclAllReduce f32 x1024 sum, rank 0 of 2 (device 0)"
};

/// The k-th collective of every rank of a clique: filled one part at a time, run once.
struct Collective {
  uint64_t sequence;
  std::vector<std::optional<Part>> parts;
  int queued = 0;
  bool aborted = false; // run does nothing: a rank aborted, so results are undefined
  std::shared_ptr<emu::GroupWork> work;
};

/// The ranks made from one unique id (or one ncclCommInitAll); of this process, where the id's
/// ranks are in several (`acrossProcesses`).
struct Clique {
  uint64_t serial;
  int nranks;
  std::string name; // "unique id #3 (2 ranks)"
  std::vector<std::weak_ptr<ncclComm>> ranks; // this process's; the others' stay empty
  std::vector<int> devices;                   // -1 for a rank of another process
  int joined = 0;     // by this process's ranks
  int localRanks = 0; // once made: how many ranks are this process's (each collective's parts)
  bool failed = false;
  bool acrossProcesses = false;
  /// Where the id's ranks meet (null when /dev/shm cannot be used: then only ranks of this
  /// process can join); kept once made only when the ranks are in several processes.
  std::shared_ptr<Rendezvous> rendezvous;
  std::map<uint64_t, std::shared_ptr<Collective>> collectives; // until each runs or is aborted
};

} // namespace

struct ncclComm {
  int rank = 0, nranks = 1, device = 0;
  std::shared_ptr<Clique> clique;
  /// ncclCommGetAsyncError's answer: ncclInProgress until the init completes.
  ncclResult_t state = ncclInProgress;
  std::string stateWhy;
  uint64_t issued = 0;
  uint64_t idSerial = 0;
  std::string idName;          // "unique id #3", or "unique id #3 of pid 1234" from another process
  std::string rendezvousName;  // the id's meeting place in /dev/shm
  bool foreignId = false;      // made by another process: only the rendezvous reaches its ranks
  CUcontext primary = nullptr; // retained when a null stream needs the comm's device
  std::string describe() const {
    return "rank " + std::to_string(rank) + " of " + std::to_string(nranks) + " (device " +
           std::to_string(device) + ")";
  }
};

namespace {

struct Registry {
  std::mutex mutex;
  std::condition_variable changed;
  uint64_t nextId = 1, nextClique = 1;
  std::set<uint64_t> issuedIds;
  /// Ids made by other processes (pid, nonce, serial), by the serial they have here.
  std::map<std::tuple<uint64_t, uint64_t, uint64_t>, uint64_t> foreignIds;
  std::map<uint64_t, std::shared_ptr<Clique>> joining; // by id serial
  // By id serial: "" when it made a communicator, else why that failed.
  std::map<uint64_t, std::string> finished;
  std::map<ncclComm *, std::shared_ptr<ncclComm>> comms;
};

Registry &registry() {
  static Registry *instance = new Registry; // never destroyed: rank threads may outlive statics
  return *instance;
}

std::shared_ptr<ncclComm> findComm(ncclComm *comm) {
  auto &r = registry();
  auto it = r.comms.find(comm);
  return it == r.comms.end() ? nullptr : it->second;
}

/// Fails every rank of `clique` (lock held): `culprit` gets `code`, the others ncclRemoteError
/// (NCCL's "a peer died"); collectives not yet run become no-ops, and the parts their missing
/// ranks will never queue are returned for the caller to queue once the lock is released.
std::vector<std::pair<int, std::shared_ptr<Collective>>>
breakClique(Clique &clique, int culprit, ncclResult_t code, const std::string &why) {
  clique.failed = true;
  for (int rank = 0; rank < clique.nranks; ++rank)
    if (auto comm = clique.ranks[rank].lock()) {
      if (comm->state != ncclSuccess && comm->state != ncclInProgress)
        continue;
      comm->state = rank == culprit ? code : ncclRemoteError;
      comm->stateWhy = why;
    }
  std::vector<std::pair<int, std::shared_ptr<Collective>>> missing;
  for (auto &[sequence, collective] : clique.collectives) {
    collective->aborted = true;
    for (int rank = 0; rank < clique.nranks; ++rank)
      if (!collective->parts[rank] && clique.devices[rank] >= 0) // parts of this process only
        missing.emplace_back(clique.devices[rank], collective);
  }
  clique.collectives.clear();
  if (clique.acrossProcesses) { // the other processes' ranks fail too, and a wait here ends
    clique.rendezvous->fail(why);
    clique.rendezvous->abandoned = true;
    clique.rendezvous->turn.notify_all();
  }
  registry().changed.notify_all();
  return missing;
}

/// The parts of aborted collectives that their ranks never queued, queued on a stream of the
/// rank's device made for this, so the ranks that did queue theirs are not blocked forever.
void queueMissingParts(const std::vector<std::pair<int, std::shared_ptr<Collective>>> &missing) {
  static std::mutex mutex;
  static std::map<int, CUstream> helpers; // per device, never destroyed
  std::lock_guard<std::mutex> lock(mutex);
  for (auto &[device, collective] : missing) {
    CUstream &stream = helpers[device];
    if (!stream) {
      CUdevice dev;
      CUcontext context = nullptr, previous = nullptr;
      if (cuDeviceGet(&dev, device) != CUDA_SUCCESS ||
          cuDevicePrimaryCtxRetain(&context, dev) != CUDA_SUCCESS ||
          cuCtxPushCurrent(context) != CUDA_SUCCESS)
        continue;
      cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
      cuCtxPopCurrent(&previous);
    }
    if (stream)
      emu::enqueuePart(collective->work, stream, "an aborted NCCL collective's missing part");
  }
}

// ---------------------------------------------------------------------------------------------
// Arithmetic. f16 and bf16 are computed in float and rounded to their type (to nearest even)
// after every operation, as the GPU's half arithmetic does; integers wrap.

template <class T> struct Plain {
  using Stored = T;
  using Math = T;
  static Math load(Stored x) { return x; }
  static Stored store(Math x) { return x; }
};
struct Half {
  using Stored = uint16_t;
  using Math = float;
  static float load(uint16_t x) {
    smelt::rt::Half h;
    h.bits = x;
    return float(h);
  }
  static uint16_t store(float x) { return smelt::rt::Half(x).bits; }
};
struct Bf16 {
  using Stored = uint16_t;
  using Math = float;
  static float load(uint16_t x) {
    smelt::rt::BFloat16 h;
    h.bits = x;
    return float(h);
  }
  static uint16_t store(float x) { return smelt::rt::BFloat16(x).bits; }
};

template <class A>
typename A::Math combine(ncclRedOp_t op, typename A::Math a, typename A::Math b) {
  using M = typename A::Math;
  if constexpr (std::is_integral_v<M>) {
    using U = std::make_unsigned_t<M>;
    switch (op) {
    case ncclProd: return M(U(U(a) * U(b)));
    case ncclMax: return std::max(a, b);
    case ncclMin: return std::min(a, b);
    default: return M(U(U(a) + U(b))); // sum, and avg before its division
    }
  } else {
    switch (op) {
    case ncclProd: return a * b;
    case ncclMax: return std::fmax(a, b);
    case ncclMin: return std::fmin(a, b);
    default: return a + b;
    }
  }
}

/// result[i] = in[0][i] op in[1][i] op ... in rank order. Average as NCCL computes it: integers
/// are summed then divided (truncating); floats are each multiplied by 1/nranks in their own
/// type, then summed.
template <class A>
void reduceAs(ncclRedOp_t op, const std::vector<std::vector<std::byte>> &inputs, size_t count,
              std::byte *out) {
  using S = typename A::Stored;
  using M = typename A::Math;
  int nranks = int(inputs.size());
  bool preScale = op == ncclAvg && !std::is_integral_v<M>;
  M scale = preScale ? A::load(A::store(M(1.0 / nranks))) : M(1);
  for (size_t i = 0; i < count; ++i) {
    auto element = [&](int rank) {
      S x;
      std::memcpy(&x, inputs[rank].data() + i * sizeof(S), sizeof(S));
      return preScale ? A::load(A::store(A::load(x) * scale)) : A::load(x);
    };
    M acc = element(0);
    for (int rank = 1; rank < nranks; ++rank)
      acc = A::load(A::store(combine<A>(op, acc, element(rank))));
    if constexpr (std::is_integral_v<M>)
      if (op == ncclAvg)
        acc = M(acc / M(nranks));
    S stored = A::store(acc);
    std::memcpy(out + i * sizeof(S), &stored, sizeof(S));
  }
}

void reduce(ncclDataType_t type, ncclRedOp_t op, const std::vector<std::vector<std::byte>> &in,
            size_t count, std::byte *out) {
  switch (type) {
  case ncclInt8: return reduceAs<Plain<int8_t>>(op, in, count, out);
  case ncclUint8: return reduceAs<Plain<uint8_t>>(op, in, count, out);
  case ncclInt32: return reduceAs<Plain<int32_t>>(op, in, count, out);
  case ncclUint32: return reduceAs<Plain<uint32_t>>(op, in, count, out);
  case ncclInt64: return reduceAs<Plain<int64_t>>(op, in, count, out);
  case ncclUint64: return reduceAs<Plain<uint64_t>>(op, in, count, out);
  case ncclFloat16: return reduceAs<Half>(op, in, count, out);
  case ncclFloat32: return reduceAs<Plain<float>>(op, in, count, out);
  case ncclFloat64: return reduceAs<Plain<double>>(op, in, count, out);
  case ncclBfloat16: return reduceAs<Bf16>(op, in, count, out);
  default: throw emu::Fault(CUDA_ERROR_LAUNCH_FAILED, "no reduction for " + typeName(type));
  }
}

// ---------------------------------------------------------------------------------------------
// Running a collective: on the scheduler's thread, once every rank's stream has reached it.

std::string describePart(const Part &p) {
  return std::string(p.kind == Kind::AllReduce ? "ncclAllReduce " : "ncclAllGather ") +
         typeName(p.type) + " x" + std::to_string(p.count) +
         (p.kind == Kind::AllReduce ? " " + opName(p.op) : "");
}

/// "" when every rank's part (in rank order) is the same collective as rank 0's; else why not,
/// naming both sides.
std::string disagreement(const Clique &clique, uint64_t sequence, const std::vector<Part> &parts) {
  const Part &first = parts[0];
  for (size_t rank = 1; rank < parts.size(); ++rank) {
    const Part &p = parts[rank];
    if (p.kind == first.kind && p.type == first.type && p.count == first.count &&
        (p.kind == Kind::AllGather || p.op == first.op))
      continue;
    return "collective #" + std::to_string(sequence) + " of " + clique.name + ": rank 0 issued " +
           describePart(first) + ", rank " + std::to_string(rank) + " " + describePart(p) +
           "; every rank must issue the same collective with the same count, type and op";
  }
  return "";
}

/// Puts this process's ranks of `clique` in error state `code` (those not failed already) and
/// fails the running work with `why`.
[[noreturn]] void failRanks(Clique &clique, ncclResult_t code, const std::string &why) {
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    for (auto &weak : clique.ranks)
      if (auto comm = weak.lock(); comm && comm->state == ncclSuccess) {
        comm->state = code;
        comm->stateWhy = why;
      }
  }
  noteError(why);
  throw emu::Fault(CUDA_ERROR_LAUNCH_FAILED, why);
}

/// Every rank is a thread of this process: read every input, then write every output.
void runInProcess(const std::vector<Part> &parts) {
  const Part &first = parts[0];
  // Every input is read before any output is written, so in-place calls need no care.
  size_t elementBytes = typeSize(first.type), bytes = first.count * elementBytes;
  std::vector<std::vector<std::byte>> inputs;
  for (const Part &p : parts) {
    const void *view = emu::hostView(p.send, bytes, p.what + ": sendbuff");
    auto *begin = static_cast<const std::byte *>(view);
    inputs.emplace_back(begin, begin + bytes);
  }
  if (first.kind == Kind::AllReduce) {
    std::vector<std::byte> result(bytes);
    reduce(first.type, first.op, inputs, first.count, result.data());
    for (const Part &p : parts)
      std::memcpy(emu::hostView(p.recv, bytes, p.what + ": recvbuff"), result.data(), bytes);
  } else {
    for (const Part &p : parts) {
      auto *out = static_cast<std::byte *>(
          emu::hostView(p.recv, bytes * parts.size(), p.what + ": recvbuff"));
      for (size_t rank = 0; rank < inputs.size(); ++rank)
        std::memcpy(out + rank * bytes, inputs[rank].data(), bytes);
    }
  }
}

/// The ranks are in several processes: this process's ranks (`mine`, by rank) pass their data
/// through the rendezvous a chunk a round (NcclRendezvous.h), and each reduces every rank's
/// chunk in rank order, so every process computes the same bits as one process would.
void runAcrossProcesses(Clique &clique, uint64_t sequence,
                        const std::vector<std::pair<int, Part>> &mine) {
  Rendezvous &meeting = *clique.rendezvous;
  const Part &first = mine[0].second;
  std::string ranks;
  for (auto &[rank, part] : mine)
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(rank);
  std::string what = describePart(first) + " #" + std::to_string(sequence) + " of " + clique.name +
                     " on rank(s) " + ranks + " (pid " + std::to_string(getpid()) + ")";
  // Rounds line up across processes only if each process runs the collectives in order.
  {
    std::unique_lock<std::mutex> lock(meeting.order);
    Clock::time_point deadline = Clock::now() + peerTimeout();
    while (meeting.nextSequence != sequence) {
      if (meeting.abandoned)
        return;
      if (Clock::now() >= deadline)
        failRanks(clique, ncclInvalidUsage,
                  what + ": ran before collective #" + std::to_string(meeting.nextSequence) +
                      " of the same communicator, which never ran; collectives of one "
                      "communicator must reach the device in the order they were issued " +
                      timeoutHelp());
      meeting.turn.wait_for(lock, std::chrono::milliseconds(10));
    }
  }
  struct NextInTurn {
    Rendezvous &meeting;
    ~NextInTurn() {
      std::lock_guard<std::mutex> lock(meeting.order);
      ++meeting.nextSequence;
      meeting.turn.notify_all();
    }
  } next{meeting};

  size_t elementBytes = typeSize(first.type), bytes = first.count * elementBytes;
  size_t perRank = first.kind == Kind::AllGather ? size_t(clique.nranks) : 1;
  std::vector<const std::byte *> sends;
  std::vector<std::byte *> recvs;
  for (auto &[rank, part] : mine) {
    sends.push_back(static_cast<const std::byte *>(
        emu::hostView(part.send, bytes, part.what + ": sendbuff")));
    recvs.push_back(static_cast<std::byte *>(
        emu::hostView(part.recv, bytes * perRank, part.what + ": recvbuff")));
  }
  size_t chunk = Rendezvous::kChunkBytes / elementBytes * elementBytes;
  size_t rounds = (bytes + chunk - 1) / chunk;
  try {
    for (size_t i = 0; i < rounds; ++i) {
      uint64_t round = ++meeting.round;
      size_t offset = i * chunk, length = std::min(chunk, bytes - offset);
      meeting.awaitDepartures(round - 1, Clock::now() + peerTimeout(), what);
      for (size_t k = 0; k < mine.size(); ++k) {
        auto &[rank, part] = mine[k];
        std::memcpy(meeting.data(rank), sends[k] + offset, length);
        if (i == 0) {
          emu::nccl::SlotCollective &said = meeting.collective(rank);
          said = {sequence, int32_t(part.kind), int32_t(part.type), int32_t(part.op), 0,
                  part.count, {}};
          std::snprintf(said.what, sizeof said.what, "%s", part.what.c_str());
        }
        meeting.arrive(rank, round);
      }
      meeting.awaitArrivals(round, Clock::now() + peerTimeout(), what);
      if (i == 0) {
        std::vector<Part> everyone;
        for (int rank = 0; rank < clique.nranks; ++rank) {
          const emu::nccl::SlotCollective &said = meeting.collective(rank);
          everyone.push_back({Kind(said.kind), nullptr, nullptr, size_t(said.count),
                              ncclDataType_t(said.type), ncclRedOp_t(said.op), said.what});
          if (said.sequence != sequence) // cannot be, while rounds line up
            everyone.back().count = ~size_t(0);
        }
        if (std::string why = disagreement(clique, sequence, everyone); !why.empty()) {
          meeting.fail(why);
          failRanks(clique, ncclInvalidUsage, why);
        }
      }
      if (first.kind == Kind::AllReduce) {
        std::vector<std::vector<std::byte>> inputs;
        for (int rank = 0; rank < clique.nranks; ++rank)
          inputs.emplace_back(meeting.data(rank), meeting.data(rank) + length);
        std::vector<std::byte> result(length);
        reduce(first.type, first.op, inputs, length / elementBytes, result.data());
        for (std::byte *recv : recvs)
          std::memcpy(recv + offset, result.data(), length);
      } else {
        for (std::byte *recv : recvs)
          for (int rank = 0; rank < clique.nranks; ++rank)
            std::memcpy(recv + size_t(rank) * bytes + offset, meeting.data(rank), length);
      }
      for (auto &[rank, part] : mine)
        meeting.depart(rank, round);
    }
  } catch (const emu::nccl::Abandoned &) {
    return; // ncclCommAbort here: the collective does nothing, as in one process
  } catch (const emu::Fault &fault) {
    failRanks(clique, ncclRemoteError, fault.what());
  }
}

void runCollective(const std::shared_ptr<Clique> &clique,
                   const std::shared_ptr<Collective> &collective) {
  std::vector<std::pair<int, Part>> mine;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    collective->work.reset(); // its run holds the collective: no cycle once it has run
    if (collective->aborted)
      return;
    clique->collectives.erase(collective->sequence);
    for (int rank = 0; rank < clique->nranks; ++rank)
      if (collective->parts[rank])
        mine.emplace_back(rank, *collective->parts[rank]);
  }
  if (clique->acrossProcesses)
    return runAcrossProcesses(*clique, collective->sequence, mine);
  std::vector<Part> parts;
  for (auto &[rank, part] : mine)
    parts.push_back(part);
  if (std::string why = disagreement(*clique, collective->sequence, parts); !why.empty())
    failRanks(*clique, ncclInvalidUsage, why);
  runInProcess(parts);
}

// ---------------------------------------------------------------------------------------------
// Groups. Collectives called inside ncclGroupStart/ncclGroupEnd are checked at once and issued
// at ncclGroupEnd (nothing reaches a stream before it, as documented); ncclCommInitRank calls
// join their cliques at ncclGroupEnd and wait there, so one thread can initialise every rank.

struct GroupState {
  int depth = 0;
  std::vector<std::shared_ptr<ncclComm>> inits;
  std::vector<std::function<ncclResult_t()>> collectives;
  ncclResult_t error = ncclSuccess;
  std::string errorWhy;
};
thread_local GroupState group;

/// Outside a group, the ranks this thread issued collectives for, by clique: NCCL documents
/// that one thread driving several ranks must group their calls, as each call may block.
thread_local std::map<uint64_t, int> ungroupedRank;

ncclResult_t inGroup(ncclResult_t result) {
  if (result != ncclSuccess && group.depth > 0 && group.error == ncclSuccess) {
    group.error = result;
    group.errorWhy = threadError;
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// Joining: a rank enters its clique; the last one to arrive completes it.

ncclResult_t deviceCount(int &count) {
  CUresult result = cuInit(0);
  if (result == CUDA_SUCCESS)
    result = cuDeviceGetCount(&count);
  if (result != CUDA_SUCCESS)
    return fail(ncclUnhandledCudaError,
                "cuInit/cuDeviceGetCount failed with CUDA error " + std::to_string(int(result)));
  return ncclSuccess;
}

/// The lock is held. Fails the clique being joined with `code` and `why` (in every process).
void failJoining(const std::shared_ptr<Clique> &clique, uint64_t idSerial, ncclResult_t code,
                 const std::string &why) {
  auto &r = registry();
  for (int rank = 0; rank < clique->nranks; ++rank)
    if (auto comm = clique->ranks[rank].lock(); comm && comm->state == ncclInProgress) {
      comm->state = code;
      comm->stateWhy = why;
    }
  clique->failed = true;
  if (clique->rendezvous) {
    clique->rendezvous->fail(why);
    clique->rendezvous->unlink();
  }
  r.joining.erase(idSerial);
  r.finished[idSerial] = why;
  r.changed.notify_all();
}

/// The lock is held. Makes the communicator once every rank, of any process, has joined.
void completeIfJoined(const std::shared_ptr<Clique> &clique, uint64_t id) {
  auto &r = registry();
  int joined = clique->rendezvous ? clique->rendezvous->joined() : clique->joined;
  if (clique->failed || joined < clique->nranks)
    return;
  // NCCL refuses two ranks on one GPU ("Duplicate GPU detected"); ranks of other processes
  // have their own emulated devices.
  for (int a = 0; a < clique->nranks; ++a)
    for (int b = a + 1; b < clique->nranks; ++b)
      if (clique->devices[a] >= 0 && clique->devices[a] == clique->devices[b])
        return failJoining(clique, id, ncclInvalidUsage,
                           "Duplicate GPU detected: rank " + std::to_string(a) + " and rank " +
                               std::to_string(b) + " of " + clique->name +
                               " both on CUDA device " + std::to_string(clique->devices[a]));
  clique->localRanks = clique->joined;
  clique->acrossProcesses = clique->localRanks < clique->nranks;
  if (clique->rendezvous) {
    clique->rendezvous->unlink(); // every rank has it mapped: the name is litter from now on
    if (!clique->acrossProcesses)
      clique->rendezvous.reset();
  }
  for (auto &weak : clique->ranks)
    if (auto member = weak.lock())
      member->state = ncclSuccess;
  r.joining.erase(id);
  r.finished[id] = "";
  r.changed.notify_all();
}

/// The lock is held. Either the comm's state is an error (and the reason noted), or it waits in
/// its clique, which is complete once all ranks have joined.
void join(const std::shared_ptr<ncclComm> &comm) {
  auto &r = registry();
  uint64_t id = comm->idSerial;
  auto setFailed = [&](ncclResult_t code, std::string why) {
    comm->state = code;
    comm->stateWhy = std::move(why);
  };
  if (auto done = r.finished.find(id); done != r.finished.end()) {
    if (done->second.empty())
      return setFailed(ncclInvalidUsage,
                       "ncclCommInitRank: " + comm->idName +
                           " already made a communicator; call ncclGetUniqueId once per "
                           "communicator");
    return setFailed(ncclSystemError, "ncclCommInitRank: the communicator of " + comm->idName +
                                          " failed: " + done->second);
  }
  std::shared_ptr<Clique> &clique = r.joining[id];
  if (!clique) {
    clique = std::make_shared<Clique>();
    clique->serial = r.nextClique++;
    clique->nranks = comm->nranks;
    clique->name = comm->idName + " (" + std::to_string(comm->nranks) + " ranks)";
    clique->ranks.resize(comm->nranks);
    clique->devices.assign(comm->nranks, -1);
    std::string why;
    clique->rendezvous = Rendezvous::open(comm->rendezvousName, comm->nranks, why);
    if (!clique->rendezvous && comm->foreignId) {
      std::shared_ptr<Clique> failed = clique;
      comm->clique = failed;
      why = "ncclCommInitRank: rank " + std::to_string(comm->rank) + " of " + failed->name +
            " cannot meet the ranks of the process that made the id: " + why;
      setFailed(ncclSystemError, why);
      return failJoining(failed, id, ncclSystemError, why);
    }
  }
  std::shared_ptr<Clique> joined = clique;
  comm->clique = joined;
  int sharedRanks = joined->rendezvous ? joined->rendezvous->nranks() : joined->nranks;
  if (joined->nranks != comm->nranks || sharedRanks != comm->nranks) {
    std::string why = "ncclCommInitRank: rank " + std::to_string(comm->rank) + " of " +
                      clique->name + " was given nranks " + std::to_string(comm->nranks) +
                      (joined->nranks == comm->nranks
                           ? ", a rank of another process " + std::to_string(sharedRanks)
                           : "") +
                      "; every rank must pass the same nranks";
    setFailed(ncclInvalidUsage, why);
    return failJoining(joined, id, ncclInvalidUsage, why);
  }
  int holder = 0;
  if (!joined->ranks[comm->rank].expired() ||
      (joined->rendezvous && (holder = joined->rendezvous->claim(comm->rank, comm->device)))) {
    std::string why = "ncclCommInitRank: rank " + std::to_string(comm->rank) + " of " +
                      joined->name + " joined twice" +
                      (holder ? " (pid " + std::to_string(holder) + " has it)" : "") +
                      "; ranks must be unique";
    setFailed(ncclInvalidUsage, why);
    return failJoining(joined, id, ncclInvalidUsage, why);
  }
  joined->ranks[comm->rank] = comm;
  joined->devices[comm->rank] = comm->device;
  ++joined->joined;
  completeIfJoined(joined, id);
}

/// The lock is held. What other processes did to a clique being joined: failed it, exited, or
/// joined its last ranks.
void pollJoining(const std::shared_ptr<Clique> &clique, uint64_t id) {
  if (clique->failed || !clique->rendezvous)
    return;
  if (std::optional<std::string> why = clique->rendezvous->failure())
    return failJoining(clique, id, ncclRemoteError,
                       "ncclCommInitRank: " + clique->name + " failed in another process: " + *why);
  completeIfJoined(clique, id); // first: a peer may join and exit before this looks
  if (clique->failed || clique->rendezvous->joined() == clique->nranks)
    return;
  if (std::string dead = clique->rendezvous->deadPeer(); !dead.empty())
    return failJoining(clique, id, ncclRemoteError,
                       "ncclCommInitRank: " + dead + " before " + clique->name + " was made");
}

/// The lock is held. Waits until every comm of `comms` has left ncclInProgress, or fails their
/// cliques at `deadline`. Ranks of other processes are seen by polling the rendezvous.
void waitJoined(std::unique_lock<std::mutex> &lock,
                const std::vector<std::shared_ptr<ncclComm>> &comms, Clock::time_point deadline) {
  auto &r = registry();
  for (auto &comm : comms) {
    while (comm->state == ncclInProgress) {
      std::shared_ptr<Clique> clique = comm->clique;
      Clock::time_point until =
          clique->rendezvous ? std::min(deadline, Clock::now() + std::chrono::milliseconds(5))
                             : deadline;
      if (r.changed.wait_until(lock, until, [&] { return comm->state != ncclInProgress; }))
        break;
      pollJoining(clique, comm->idSerial);
      if (comm->state != ncclInProgress || Clock::now() < deadline)
        continue;
      std::string missing;
      for (int rank = 0; rank < clique->nranks; ++rank)
        if (clique->rendezvous ? clique->rendezvous->pid(rank) == 0
                               : clique->ranks[rank].expired())
          missing += (missing.empty() ? "" : ", ") + std::to_string(rank);
      failJoining(clique, comm->idSerial, ncclSystemError,
                  "ncclCommInitRank: " + comm->describe() + " of " + clique->name +
                      " gave up waiting for rank(s) " + missing + " to join " + timeoutHelp());
    }
  }
}

/// Checks `comm` for use by a collective (the lock is held).
ncclResult_t usable(ncclComm *handle, const char *call, std::shared_ptr<ncclComm> &comm) {
  if (!handle)
    return fail(ncclInvalidArgument, std::string(call) + ": comm is NULL");
  comm = findComm(handle);
  if (!comm)
    return fail(ncclInvalidArgument,
                std::string(call) + ": comm is not a live communicator (destroyed or aborted?)");
  if (comm->state == ncclInProgress)
    return fail(ncclInvalidArgument, std::string(call) + ": " + comm->describe() +
                                         " is still being initialised (ncclGroupEnd not called)");
  if (comm->state != ncclSuccess)
    return fail(comm->state, std::string(call) + ": " + comm->describe() +
                                 " is in an error state: " + comm->stateWhy);
  return ncclSuccess;
}

bool isNullStream(CUstream stream) {
  return !stream || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
}

/// Queues this rank's part of its next collective on `stream`. On a stream that is capturing a
/// graph it is recorded instead, and issued anew at each launch of the graph (NCCL's CUDA graph
/// support): every replay is the communicator's next collective, so ranks must replay their
/// graphs in the same order as they would issue the calls.
ncclResult_t issue(ncclComm *handle, Part part, CUstream stream) {
  bool captured = false;
  CUresult recorded = emu::captureRequeue(
      stream, part.what,
      [handle, part](CUstream launching) {
        return issue(handle, part, launching) == ncclSuccess ? CUDA_SUCCESS
                                                             : CUDA_ERROR_LAUNCH_FAILED;
      },
      captured);
  if (captured)
    return recorded == CUDA_SUCCESS
               ? ncclSuccess
               : fail(ncclUnhandledCudaError, part.what + ": the stream's capture is invalidated");
  auto &r = registry();
  std::shared_ptr<ncclComm> comm;
  std::shared_ptr<emu::GroupWork> work;
  std::shared_ptr<Collective> collective;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    const char *call = part.kind == Kind::AllReduce ? "ncclAllReduce" : "ncclAllGather";
    if (ncclResult_t result = usable(handle, call, comm); result != ncclSuccess)
      return result;
    uint64_t sequence = comm->issued++;
    std::shared_ptr<Clique> clique = comm->clique;
    collective = clique->collectives[sequence];
    if (!collective) {
      collective = clique->collectives[sequence] = std::make_shared<Collective>();
      collective->sequence = sequence;
      collective->parts.resize(clique->nranks);
      collective->work = std::make_shared<emu::GroupWork>(clique->localRanks);
      collective->work->waitsForOtherProcesses = clique->acrossProcesses;
      collective->work->what = describePart(part) + " #" + std::to_string(sequence) + " of " +
                               clique->name;
      collective->work->run = [clique, collective] { runCollective(clique, collective); };
    }
    collective->parts[comm->rank] = part;
    ++collective->queued;
    work = collective->work;
    r.changed.notify_all(); // a peer's ncclCommDestroy may be waiting for this part
  }
  // A null stream is the legacy stream of the communicator's device, as NCCL sets the device
  // before it launches; so that device's primary context is current while the part is queued.
  CUcontext previous = nullptr;
  bool pushed = false;
  if (isNullStream(stream) && emu::currentDevice() != comm->device) {
    CUdevice device;
    if (!comm->primary && (cuDeviceGet(&device, comm->device) != CUDA_SUCCESS ||
                           cuDevicePrimaryCtxRetain(&comm->primary, device) != CUDA_SUCCESS))
      comm->primary = nullptr;
    pushed = comm->primary && cuCtxPushCurrent(comm->primary) == CUDA_SUCCESS;
  }
  CUresult result = emu::enqueuePart(work, stream, part.what);
  if (pushed)
    cuCtxPopCurrent(&previous);
  if (result == CUDA_SUCCESS)
    return ncclSuccess;
  std::string why = part.what + ": queueing it on its stream failed with CUDA error " +
                    std::to_string(int(result));
  std::vector<std::pair<int, std::shared_ptr<Collective>>> missing;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    collective->parts[comm->rank].reset(); // never queued: the abort queues it instead
    missing = breakClique(*comm->clique, comm->rank, ncclUnhandledCudaError, why);
  }
  queueMissingParts(missing);
  return fail(ncclUnhandledCudaError, why);
}

/// The checks ncclAllReduce and ncclAllGather make at the call; then the part is issued, or
/// kept for ncclGroupEnd.
ncclResult_t collective(const char *call, Part part, ncclComm *handle, CUstream stream) {
  auto &r = registry();
  std::shared_ptr<ncclComm> comm;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (group.depth > 0 && !group.inits.empty())
      return fail(ncclInvalidUsage,
                  std::string(call) + ": called in the same group as ncclCommInitRank; NCCL "
                                      "groups hold either initialisations or collectives");
    if (ncclResult_t result = usable(handle, call, comm); result != ncclSuccess)
      return result;
  }
  std::string where = std::string(call) + " on " + comm->describe();
  if (part.type < 0 || part.type >= ncclNumTypes)
    return fail(ncclInvalidArgument, where + ": invalid datatype " + std::to_string(part.type));
  if (part.kind == Kind::AllReduce) {
    if (part.op < 0 || part.op >= ncclNumOps)
      return fail(ncclInvalidArgument, where + ": invalid reduction op " +
                                           std::to_string(part.op) +
                                           " (user-defined ops are not emulated)");
    if (part.type == ncclFloat8e4m3 || part.type == ncclFloat8e5m2)
      return fail(ncclInvalidArgument,
                  where + ": the emulated device has no fp8 reductions (sm_90 and later have)");
  }
  if (part.count == 0)
    return ncclSuccess; // nothing to do, and nothing queued (as NCCL)
  size_t perRank = part.kind == Kind::AllGather ? size_t(comm->nranks) : 1;
  size_t element = typeSize(part.type);
  if (part.count > SIZE_MAX / element / perRank)
    return fail(ncclInvalidArgument, where + ": count " + std::to_string(part.count) +
                                         " overflows the address space");
  size_t sendBytes = part.count * element, recvBytes = sendBytes * perRank;
  for (auto [pointer, bytes, name] : {std::tuple<const void *, size_t, const char *>{
                                          part.send, sendBytes, "sendbuff"},
                                      {part.recv, recvBytes, "recvbuff"}}) {
    if (!pointer)
      return fail(ncclInvalidArgument, where + ": " + name + " is NULL");
    if (!emu::isDeviceAddress(pointer))
      return fail(ncclInvalidArgument, where + ": " + name + " is not device memory");
    if (std::string why = emu::checkRange(pointer, bytes); !why.empty())
      return fail(ncclInvalidArgument,
                  where + ": " + name + " (" + std::to_string(bytes) + " bytes): " + why);
  }
  if (!isNullStream(stream)) {
    int device = emu::streamDevice(stream);
    if (device < 0)
      return fail(ncclUnhandledCudaError, where + ": stream is not a live CUDA stream");
    if (device != comm->device)
      return fail(ncclUnhandledCudaError, where + ": stream belongs to device " +
                                              std::to_string(device) +
                                              ", not the communicator's device");
  }
  part.what = describePart(part) + ", " + comm->describe();
  if (group.depth > 0) {
    group.collectives.push_back([=] { return issue(handle, part, stream); });
    return ncclSuccess;
  }
  if (comm->nranks > 1) {
    auto [it, added] = ungroupedRank.emplace(comm->clique->serial, comm->rank);
    if (!added && it->second != comm->rank)
      return fail(ncclInvalidUsage,
                  where + ": this thread already issued collectives for rank " +
                      std::to_string(it->second) + " of the same communicator; one thread "
                      "driving several ranks must bracket their calls with ncclGroupStart and "
                      "ncclGroupEnd, or NCCL can deadlock");
  }
  return issue(handle, part, stream);
}

/// Destroy and abort: `abort` ends what is in flight at once; destroy first waits (as
/// ncclCommFinalize documents) until the peers have issued every collective this rank issued.
ncclResult_t release(ncclComm *handle, bool abort) {
  const char *call = abort ? "ncclCommAbort" : "ncclCommDestroy";
  if (!handle)
    return ncclSuccess;
  auto &r = registry();
  std::vector<std::pair<int, std::shared_ptr<Collective>>> missing;
  ncclResult_t result = ncclSuccess;
  std::shared_ptr<ncclComm> comm;
  {
    std::unique_lock<std::mutex> lock(r.mutex);
    comm = findComm(handle);
    if (!comm)
      return fail(ncclInvalidArgument,
                  std::string(call) + ": comm is not a live communicator (destroyed already?)");
    std::shared_ptr<Clique> clique = comm->clique;
    auto waitingOnPeers = [&] {
      for (auto &[sequence, collective] : clique->collectives)
        if (collective->parts[comm->rank] && collective->queued < clique->localRanks)
          return true;
      return false;
    };
    if (!abort && clique && comm->state == ncclSuccess &&
        !r.changed.wait_until(lock, Clock::now() + peerTimeout(),
                              [&] { return !waitingOnPeers() || clique->failed; })) {
      result = fail(ncclSystemError,
                    std::string(call) + ": " + comm->describe() + " of " + clique->name +
                        " gave up waiting for its peers to issue the collectives it issued; "
                        "NCCL would wait forever here (ncclCommAbort does not) " +
                        timeoutHelp());
    }
    if (clique && comm->state == ncclInProgress)
      failJoining(clique, comm->idSerial, ncclRemoteError,
                  comm->describe() + " was aborted before the communicator was made");
    else if (clique && (abort || result != ncclSuccess) && !clique->failed)
      missing = breakClique(*clique, comm->rank, ncclInvalidUsage,
                            comm->describe() + " of " + clique->name + " was aborted");
    r.comms.erase(handle);
  }
  queueMissingParts(missing);
  if (comm->primary) {
    CUdevice device;
    if (cuDeviceGet(&device, comm->device) == CUDA_SUCCESS)
      cuDevicePrimaryCtxRelease(device);
  }
  return result;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// The C API.

extern "C" {

ncclResult_t ncclGetVersion(int *version) {
  if (!version)
    return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess: return "no error";
  case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
  case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
  case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
  case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
  case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
  case ncclRemoteError: return "remote process exited or there was a network error";
  case ncclInProgress: return "NCCL operation in progress";
  default: return "unknown result code";
  }
}

const char *ncclGetLastError(ncclComm_t) {
  thread_local std::string copy;
  if (!threadError.empty())
    return threadError.c_str();
  std::lock_guard<std::mutex> lock(processErrorMutex);
  copy = processError;
  return copy.c_str();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId) {
  if (!uniqueId)
    return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  IdContents contents{};
  std::memcpy(contents.magic, kIdMagic, sizeof kIdMagic);
  contents.pid = uint64_t(getpid());
  contents.processNonce = processNonce();
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    contents.serial = registry().nextId++;
    registry().issuedIds.insert(contents.serial);
  }
  std::memset(uniqueId, 0, sizeof *uniqueId);
  std::memcpy(uniqueId->internal, &contents, sizeof contents);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
  if (!comm)
    return inGroup(fail(ncclInvalidArgument, "ncclCommInitRank: comm is NULL"));
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return inGroup(fail(ncclInvalidArgument, "ncclCommInitRank: invalid rank requested: " +
                                                 std::to_string(rank) + "/" +
                                                 std::to_string(nranks)));
  if (group.depth > 0 && !group.collectives.empty())
    return inGroup(fail(ncclInvalidUsage, "ncclCommInitRank: called in the same group as "
                                          "collectives; NCCL groups hold either "
                                          "initialisations or collectives"));
  IdContents id;
  std::memcpy(&id, commId.internal, sizeof id);
  if (std::memcmp(id.magic, kIdMagic, sizeof kIdMagic) != 0)
    return inGroup(fail(ncclInvalidArgument,
                        "ncclCommInitRank: commId was not made by ncclGetUniqueId"));
  // As the CUDA runtime NCCL uses: the current context's device, else device 0.
  int count = 0;
  if (ncclResult_t result = deviceCount(count); result != ncclSuccess)
    return inGroup(result);
  int device = std::max(emu::currentDevice(), 0);
  if (device >= count)
    return inGroup(fail(ncclInvalidArgument, "ncclCommInitRank: device " +
                                                 std::to_string(device) + " does not exist"));

  auto made = std::make_shared<ncclComm>();
  made->rank = rank;
  made->nranks = nranks;
  made->device = device;
  made->rendezvousName = rendezvousName(id);
  made->foreignId = id.pid != uint64_t(getpid()) || id.processNonce != processNonce();
  auto &r = registry();
  std::unique_lock<std::mutex> lock(r.mutex);
  if (made->foreignId) {
    // Another process's serials are not this one's: the id gets one here.
    auto [known, added] = r.foreignIds.emplace(std::tuple{id.pid, id.processNonce, id.serial}, 0);
    if (added)
      known->second = r.nextId++;
    made->idSerial = known->second;
    made->idName = "unique id #" + std::to_string(id.serial) + " of pid " + std::to_string(id.pid);
  } else {
    if (!r.issuedIds.count(id.serial))
      return inGroup(fail(ncclInvalidArgument,
                          "ncclCommInitRank: commId was not made by ncclGetUniqueId"));
    made->idSerial = id.serial;
    made->idName = "unique id #" + std::to_string(id.serial);
  }
  r.comms[made.get()] = made;
  if (group.depth > 0) {
    group.inits.push_back(made); // joins at ncclGroupEnd
    *comm = made.get();
    return ncclSuccess;
  }
  join(made);
  waitJoined(lock, {made}, Clock::now() + peerTimeout());
  if (made->state != ncclSuccess) {
    r.comms.erase(made.get());
    return fail(made->state, made->stateWhy);
  }
  *comm = made.get();
  return ncclSuccess;
}

ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist) {
  if (!comm)
    return fail(ncclInvalidArgument, "ncclCommInitAll: comm is NULL");
  if (ndev < 1)
    return fail(ncclInvalidArgument, "ncclCommInitAll: invalid ndev " + std::to_string(ndev));
  int count = 0;
  if (ncclResult_t result = deviceCount(count); result != ncclSuccess)
    return result;
  std::vector<int> devices(ndev);
  for (int i = 0; i < ndev; ++i) {
    devices[i] = devlist ? devlist[i] : i;
    if (devices[i] < 0 || devices[i] >= count)
      return fail(ncclInvalidArgument, "ncclCommInitAll: invalid device " +
                                           std::to_string(devices[i]) + " (there are " +
                                           std::to_string(count) + ")");
    for (int j = 0; j < i; ++j)
      if (devices[j] == devices[i])
        return fail(ncclInvalidUsage, "ncclCommInitAll: duplicate device " +
                                          std::to_string(devices[i]) + " in devlist");
  }
  auto &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto clique = std::make_shared<Clique>();
  clique->serial = r.nextClique++;
  clique->nranks = ndev;
  clique->name = "ncclCommInitAll #" + std::to_string(clique->serial) + " (" +
                 std::to_string(ndev) + " ranks)";
  clique->joined = ndev;
  clique->localRanks = ndev;
  clique->devices = devices;
  for (int i = 0; i < ndev; ++i) {
    auto made = std::make_shared<ncclComm>();
    made->rank = i;
    made->nranks = ndev;
    made->device = devices[i];
    made->clique = clique;
    made->state = ncclSuccess;
    clique->ranks.push_back(made);
    r.comms[made.get()] = made;
    comm[i] = made.get();
  }
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) { return release(comm, false); }

ncclResult_t ncclCommAbort(ncclComm_t comm) { return release(comm, true); }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
  if (!comm || !asyncError)
    return fail(ncclInvalidArgument,
                std::string("ncclCommGetAsyncError: ") + (comm ? "asyncError" : "comm") +
                    " is NULL");
  std::lock_guard<std::mutex> lock(registry().mutex);
  std::shared_ptr<ncclComm> live = findComm(comm);
  if (!live)
    return fail(ncclInvalidArgument,
                "ncclCommGetAsyncError: comm is not a live communicator (destroyed or aborted?)");
  *asyncError = live->state;
  if (live->state != ncclSuccess && live->state != ncclInProgress)
    noteError(live->stateWhy);
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  Part part{Kind::AllReduce, sendbuff, recvbuff, count, datatype, op, ""};
  return inGroup(collective("ncclAllReduce", part, comm, stream));
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  Part part{Kind::AllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, ""};
  return inGroup(collective("ncclAllGather", part, comm, stream));
}

ncclResult_t ncclGroupStart() {
  ++group.depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (group.depth == 0)
    return fail(ncclInvalidUsage, "ncclGroupEnd: not in a group (no ncclGroupStart)");
  if (--group.depth > 0)
    return ncclSuccess;
  GroupState ended = std::move(group);
  group = GroupState{};
  auto &r = registry();
  if (!ended.inits.empty()) {
    std::unique_lock<std::mutex> lock(r.mutex);
    if (ended.error != ncclSuccess) {
      // A call of the group failed: the group is dropped, and its communicators are unusable.
      for (auto &comm : ended.inits) {
        comm->state = ended.error;
        comm->stateWhy = "its group failed: " + ended.errorWhy;
      }
      return fail(ended.error, ended.errorWhy);
    }
    for (auto &comm : ended.inits)
      join(comm);
    waitJoined(lock, ended.inits, Clock::now() + peerTimeout());
    for (auto &comm : ended.inits)
      if (comm->state != ncclSuccess)
        return fail(comm->state, comm->stateWhy);
    return ncclSuccess;
  }
  if (ended.error != ncclSuccess)
    return fail(ended.error, ended.errorWhy);
  ncclResult_t first = ncclSuccess;
  for (auto &issueOne : ended.collectives)
    if (ncclResult_t result = issueOne(); result != ncclSuccess && first == ncclSuccess)
      first = result;
  return first;
}

} // extern "C"
