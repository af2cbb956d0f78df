// Opens libnccl with dlopen and resolves its table (Nccl.h), once per process, and implements
// NcclCommunicator: collectives enqueued on a stream, each followed by an event that wait()
// blocks on, and a watchdog thread per communicator that aborts the NCCL communicator when a
// wait outlives the timeout or NCCL reports an asynchronous error. The abort ends the stuck
// kernels, so their events complete and the blocked wait returns the watchdog's reason: the
// waiting thread never sleeps in a polling loop, and the watchdog is off the step's path.
#include "runtime/cuda/Nccl.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/DynamicLibrary.h"

#include "runtime/DTypeDispatch.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <system_error>

namespace smelt::rt::cuda {

Expected<const Nccl *> Nccl::get() {
  // Thread-safe, tried once.
  static const Expected<const Nccl *> nccl = []() -> Expected<const Nccl *> {
    // Never closed, like the driver. Searched as DynamicLibrary.h says: SMELT_CUDA_LIBRARY_PATH,
    // a pip wheel's nvidia/nccl/lib, the CUDA toolkit, then the loader's path.
    static Nccl table;
    SMELT_ASSIGN_OR_RETURN(void *opened, openCudaTable("NCCL", "libnccl.so.2",
                                                       {SMELT_NCCL_ENTRIES(SMELT_CUDA_TABLE_ENTRY)},
                                                       "it is older than this program needs"));
    table.getLastError =
        reinterpret_cast<decltype(table.getLastError)>(dlsym(opened, "ncclGetLastError"));
    SMELT_RETURN_IF_ERROR(table.check(table.getVersion(&table.version), "ncclGetVersion"));
    return &table;
  }();
  return nccl;
}

Status Nccl::check(ncclResult_t result, const char *call, ncclComm_t comm) const {
  if (result == ncclSuccess)
    return {};
  const char *description = getErrorString(result);
  const char *last = getLastError ? getLastError(comm) : nullptr;
  return Status::error(
      fmt::format("{} failed: {}{}", call,
                  description ? description : fmt::format("NCCL error {}", int(result)),
                  last && *last ? fmt::format(" ({})", last) : std::string()));
}

std::string Nccl::versionName() const {
  // Codes before 2.9 were major * 1000 + minor * 100 + patch; since, major * 10000 + ...
  if (version >= 10000)
    return fmt::format("{}.{}.{}", version / 10000, version % 10000 / 100, version % 100);
  return fmt::format("{}.{}.{}", version / 1000, version % 1000 / 100, version % 100);
}

namespace {

std::optional<ncclDataType_t> ncclType(DType dtype) {
  switch (dtype) {
  case DType::f32:
    return ncclFloat32;
  case DType::f64:
    return ncclFloat64;
  case DType::f16:
    return ncclFloat16;
  case DType::bf16:
    return ncclBfloat16;
  case DType::i32:
    return ncclInt32;
  case DType::i64:
    return ncclInt64;
  case DType::i1:
    break;
  }
  return std::nullopt;
}

void *devicePointer(CUdeviceptr pointer) { return reinterpret_cast<void *>(uintptr_t(pointer)); }

} // namespace

std::string NcclCommunicator::describe() const {
  return fmt::format("nccl rank {} of {} (gpu {})", rank_, size_, ordinal_);
}

std::string NcclCommunicator::name(const Pending &p) const {
  return p.fence ? fmt::format("{} on {}", p.what, describe())
                 : collectiveName(p.what, p.count, p.dtype, p.kind);
}

Status NcclCommunicator::openDevice(int ordinal) {
  ordinal_ = ordinal;
  // The NCCL communicator is made with the device's primary context current: the CUDA runtime
  // inside NCCL then uses it, and so do our streams and events.
  SMELT_ASSIGN_OR_RETURN(device_, CudaDevice::open(ordinal));
  return device_->check(cu_.streamCreate(&ownStream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
}

NcclCommunicator::~NcclCommunicator() {
  if (watchdog_.joinable()) { // first, so nothing else touches comm_ below
    {
      std::lock_guard<std::mutex> guard(lock_);
      closing_ = true;
    }
    wake_.notify_all();
    watchdog_.join();
  }
  if (device_)
    (void)device_->makeCurrent();
  if (comm_) {
    // Destroying waits for collectives in flight, which may never end: abort those instead.
    if (pending_.empty())
      nccl_.commDestroy(comm_);
    else
      nccl_.commAbort(comm_);
  }
  for (auto &[ticket, p] : pending_)
    release(p);
  if (ownStream_)
    cu_.streamDestroy(ownStream_);
}

void NcclCommunicator::release(Pending &p) {
  if (p.done)
    cu_.eventDestroy(p.done);
  if (p.staging)
    cu_.memFree(p.staging);
  p.done = nullptr;
  p.staging = 0;
}

void NcclCommunicator::breakWith(const std::string &why) {
  std::lock_guard<std::mutex> guard(lock_);
  breakLocked(why);
}

void NcclCommunicator::breakLocked(const std::string &why) {
  if (!broken_)
    broken_ = why;
  if (comm_)
    nccl_.commAbort(comm_); // ends this rank's kernels in flight, so the GPU is not held
  comm_ = nullptr;
}

NcclCommunicator::Pending NcclCommunicator::collective(void *data, int64_t count, DType dtype,
                                                       ReduceKind kind, std::string what) {
  Pending p;
  p.data = devicePointer(data);
  p.count = count;
  p.dtype = dtype;
  p.kind = kind;
  p.what = std::move(what);
  return p;
}

Expected<int64_t> NcclCommunicator::start(void *data, int64_t count, DType dtype, ReduceKind kind,
                                          std::string what) {
  return enqueue(collective(data, count, dtype, kind, std::move(what)), ownStream_,
                 /*tracked=*/true);
}

Status NcclCommunicator::startWatchdog() {
  // Started with the first collective, so that a communicator that never reduces has no thread.
  if (watchdog_.joinable())
    return {};
  try {
    watchdog_ = std::thread([this] { watch(); });
    // Named here, not by the thread, so it has its name before it first runs: top -H, gdb and
    // the tests see "nccl-watchdog".
    pthread_setname_np(watchdog_.native_handle(), "nccl-watchdog");
  } catch (const std::system_error &error) {
    return Status::error(fmt::format("cannot start the watchdog thread: {}", error.what()));
  }
  return {};
}

int64_t NcclCommunicator::addPending(Pending p) {
  int64_t ticket = nextTicket_++;
  pending_.emplace(ticket, std::move(p));
  if (watchdogIdle_)
    wake_.notify_one();
  return ticket;
}

Expected<int64_t> NcclCommunicator::enqueue(Pending p, CUstream stream, bool tracked) {
  std::lock_guard<std::mutex> guard(lock_);
  auto fail = [&](const std::string &why) -> Status {
    std::string message = fmt::format("{}: {}", name(p), why);
    release(p);
    return Status::error(std::move(message));
  };
  if (broken_)
    return fail("the communicator is unusable: " + *broken_);
  std::optional<ncclDataType_t> type = ncclType(p.dtype);
  if (!p.fence) {
    if (Status s = checkReduceArguments(reinterpret_cast<const void *>(p.data), p.count, p.dtype,
                                        p.kind, p.what);
        !s.ok()) {
      release(p);
      return s;
    }
    if (p.kind == ReduceKind::mean && !options_.deterministic && nccl_.version < 21000)
      return fail(fmt::format("NCCL {} has no ncclAvg (2.10 and later have): use sum and scale, "
                              "or a newer NCCL",
                              nccl_.versionName()));
  }
  // The collective itself; a fence has none.
  auto queue = [&]() -> Status {
    void *data = devicePointer(p.data);
    size_t count = size_t(p.count);
    if (p.fence)
      return Status();
    if (!options_.deterministic)
      return nccl_.check(nccl_.allReduce(data, data, count, *type,
                                         p.kind == ReduceKind::mean ? ncclAvg : ncclSum, comm_,
                                         stream),
                         "ncclAllReduce", comm_);
    size_t bytes = count * byteWidth(p.dtype);
    SMELT_RETURN_IF_ERROR(
        cu_.check(cu_.memAlloc(&p.staging, std::max<size_t>(bytes * size_t(size_), 1)),
                  "cuMemAlloc (staging for every rank's contribution)"));
    return nccl_.check(nccl_.allGather(data, devicePointer(p.staging), count, *type, comm_, stream),
                       "ncclAllGather", comm_);
  };
  // One after another: each call needs the one before it to have succeeded.
  Status status = device_->makeCurrent();
  if (status.ok())
    status = startWatchdog();
  if (status.ok() && tracked)
    status = cu_.check(cu_.eventCreate(&p.done, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  if (status.ok())
    status = queue();
  if (status.ok() && tracked)
    status = cu_.check(cu_.eventRecord(p.done, stream), "cuEventRecord");
  if (!status.ok())
    return fail(status.message());
  return tracked ? addPending(std::move(p)) : kUntracked;
}

Status NcclCommunicator::captureOnStream(void *stream, void *data, int64_t count, DType dtype,
                                         ReduceKind kind, std::string what) {
  if (!reducesOnStreams())
    return Communicator::captureOnStream(stream, data, count, dtype, kind, std::move(what));
  return enqueue(collective(data, count, dtype, kind, std::move(what)),
                 static_cast<CUstream>(stream), /*tracked=*/false)
      .status();
}

Expected<int64_t> NcclCommunicator::fenceOnStream(void *stream, std::string what) {
  Pending p;
  p.fence = true;
  p.what = std::move(what);
  return enqueue(std::move(p), static_cast<CUstream>(stream), /*tracked=*/true);
}

Status NcclCommunicator::reduceGathered(Pending &p) {
  size_t bytes = size_t(p.count) * byteWidth(p.dtype);
  if (bytes == 0)
    return {};
  std::vector<std::byte> everyone(bytes * size_t(size_)), result(bytes);
  // Both copies are synchronous, then the legacy stream's synchronize.
  countTransfers({.toDevice = bytes, .toHost = everyone.size(), .hostSyncs = 3});
  SMELT_RETURN_IF_ERROR(cu_.check(cu_.memcpyDtoH(everyone.data(), p.staging, everyone.size()),
                                  "cuMemcpyDtoH (gathered contributions)"));
  reduceInRankOrder(everyone.data(), size_, p.count, p.dtype, p.kind, result.data());
  // From pageable memory the copy may return before its DMA ends; it runs on the legacy
  // stream, so synchronizing that one makes the result visible to whatever runs next.
  return firstError({cu_.check(cu_.memcpyHtoD(p.data, result.data(), bytes), "cuMemcpyHtoD"),
                     cu_.check(cu_.streamSynchronize(CU_STREAM_LEGACY), "cuStreamSynchronize")});
}

Expected<int64_t> NcclCommunicator::startOnStream(void *stream, void *data, int64_t count,
                                                  DType dtype, ReduceKind kind, std::string what) {
  if (!reducesOnStreams())
    return Communicator::startOnStream(stream, data, count, dtype, kind, std::move(what));
  return enqueue(collective(data, count, dtype, kind, std::move(what)),
                 static_cast<CUstream>(stream), /*tracked=*/true);
}

Status NcclCommunicator::wait(int64_t ticket) {
  std::map<int64_t, Pending>::iterator it;
  std::string name;
  {
    std::lock_guard<std::mutex> guard(lock_);
    if (broken_)
      return Status::error(
          fmt::format("{}: the communicator is unusable: {}", describe(), *broken_));
    it = pending_.find(ticket);
    if (it == pending_.end())
      return Status::error(fmt::format(
          "{}: ticket {} is not a collective started and not yet waited for", describe(), ticket));
    name = this->name(it->second);
  }
  Pending &p = it->second; // a map's node stays put; only this wait erases it
  auto finish = [&](Status status) {
    Pending done;
    {
      std::lock_guard<std::mutex> guard(lock_);
      done = std::move(p);
      pending_.erase(it);
    }
    release(done); // outside the lock: freeing device memory may wait for the device
    return status;
  };
  if (Status status = device_->makeCurrent(); !status.ok())
    return finish(Status::error(name + ": " + status.message()));

  {
    std::lock_guard<std::mutex> guard(lock_);
    p.waitedSince = std::chrono::steady_clock::now(); // the watchdog times the wait from here
  }
  // Blocks until the collective completes, or until the watchdog's ncclCommAbort ends it. Not a
  // condition variable that the watchdog signals: the emulated driver runs queued work inside
  // synchronize calls, and on a GPU the watchdog's period would be on the step's path.
  CUresult result = cu_.eventSynchronize(p.done);
  std::string message;
  {
    std::lock_guard<std::mutex> guard(lock_);
    p.waitedSince.reset();
    if (!p.failure.empty()) // the watchdog's timeout or NCCL's error, found during this wait
      message = p.failure;
    // Broken by abort() from another thread: the collective did not happen (ncclCommAbort
    // ends it, and its event may then complete), so the abort's reason is the answer.
    else if (broken_)
      message = fmt::format("{}: the communicator was broken while waiting: {}", name, *broken_);
    else if (result != CUDA_SUCCESS) {
      message = fmt::format("{}: {}", name, cu_.check(result, "cuEventSynchronize").message());
      breakLocked(message);
    }
  }
  if (!message.empty())
    return finish(Status::error(std::move(message)));
  countTransfers({.hostSyncs = 1}); // the host waited for the collective
  if (options_.deterministic)
    if (Status status = reduceGathered(p); !status.ok())
      return finish(Status::error(name + ": " + status.message()));
  return finish({});
}

void NcclCommunicator::watch() {
  // Coarse: a hung collective is found within a tenth of the timeout (at most 0.1 s late).
  std::chrono::duration<double> period(
      options_.timeoutSeconds > 0 ? std::min(options_.timeoutSeconds / 10, 0.1) : 0.1);
  std::unique_lock<std::mutex> held(lock_);
  while (!closing_) {
    if (pending_.empty() || broken_) { // nothing to watch until start() or the destructor
      watchdogIdle_ = true;
      wake_.wait(held);
      watchdogIdle_ = false;
      continue;
    }
    auto now = std::chrono::steady_clock::now();
    std::optional<ncclResult_t> async; // asked once a round, and only while a wait blocks
    for (auto &[ticket, p] : pending_) {
      if (!p.waitedSince)
        continue;
      // A peer that failed shows up here (with NCCL_ASYNC_ERROR_HANDLING, or a network error)
      // long before the timeout.
      if (!async) {
        async = ncclSuccess;
        nccl_.commGetAsyncError(comm_, &*async);
      }
      bool failed = *async != ncclSuccess && *async != ncclInProgress;
      double waited = std::chrono::duration<double>(now - *p.waitedSince).count();
      if (!failed && !(options_.timeoutSeconds > 0 && waited >= options_.timeoutSeconds))
        continue;
      std::string name = this->name(p);
      p.failure =
          failed ? fmt::format("{}: NCCL reports an asynchronous error: {}", name,
                               nccl_.check(*async, "the collective", comm_).message())
                 : fmt::format("{}: the other ranks did not complete it within {:.1f} s; another "
                               "rank died or is stuck (or started different collectives). The "
                               "NCCL communicator was aborted",
                               name, waited);
      breakLocked(p.failure); // ends the kernels in flight: the blocked wait returns
      break;
    }
    if (!broken_)
      wake_.wait_for(held, period);
  }
}

void NcclCommunicator::abort(const std::string &reason) {
  std::fprintf(stderr, "smelt: %s: %s\n", describe().c_str(), reason.c_str());
  std::fflush(stderr);
  breakWith("aborted: " + reason);
}

Expected<std::pair<const CudaDriver *, const Nccl *>> openDriverAndNccl() {
  SMELT_ASSIGN_OR_RETURN(const CudaDriver *cu, CudaDriver::get());
  SMELT_ASSIGN_OR_RETURN(const Nccl *nccl, Nccl::get());
  return std::pair{cu, nccl};
}

Expected<std::vector<std::unique_ptr<NcclCommunicator>>>
createNcclCommunicators(const std::vector<int> &devices, CollectiveOptions options) {
  SMELT_ASSIGN_OR_RETURN(auto both, openDriverAndNccl());
  auto [cu, nccl] = both;
  if (devices.empty())
    return Status::error("createNcclCommunicators: no devices given");
  std::vector<std::unique_ptr<NcclCommunicator>> communicators;
  for (size_t i = 0; i < devices.size(); ++i) {
    communicators.emplace_back(new NcclCommunicator(*cu, *nccl, options));
    SMELT_RETURN_IF_ERROR(communicators.back()->openDevice(devices[i]));
  }
  std::vector<ncclComm_t> comms(devices.size());
  if (Status status = nccl->check(
          nccl->commInitAll(comms.data(), int(devices.size()), devices.data()), "ncclCommInitAll");
      !status.ok())
    return Status::error(fmt::format("NCCL {} over gpus {}: {}", nccl->versionName(),
                                     fmt::join(devices, ", "), status.message()));
  for (size_t i = 0; i < devices.size(); ++i) {
    communicators[i]->comm_ = comms[i];
    communicators[i]->rank_ = int(i);
    communicators[i]->size_ = int(devices.size());
  }
  return std::move(communicators);
}

Expected<std::unique_ptr<NcclCommunicator>>
createNcclCommunicator(Communicator &bootstrap, int device, CollectiveOptions options) {
  // A broadcast from any Communicator: rank 0 contributes [1, id], every other rank zeros, so
  // the i64 sum is rank 0's words exactly. Rank 0 joins even when it has no id (a leading 0),
  // so the others learn that instead of waiting.
  constexpr size_t kWords = sizeof(ncclUniqueId) / sizeof(int64_t);
  static_assert(sizeof(ncclUniqueId) % sizeof(int64_t) == 0);
  int64_t words[1 + kWords] = {};
  std::string rootError;
  if (bootstrap.rank() == 0) {
    Expected<const Nccl *> nccl = Nccl::get();
    ncclUniqueId id{};
    if (Status made =
            nccl ? (*nccl)->check((*nccl)->getUniqueId(&id), "ncclGetUniqueId") : nccl.status();
        made.ok()) {
      words[0] = 1;
      std::memcpy(words + 1, &id, sizeof(ncclUniqueId));
    } else {
      rootError = made.message();
    }
  }
  SMELT_RETURN_IF_ERROR(bootstrap.allReduce(words, int64_t(std::size(words)), DType::i64,
                                            ReduceKind::sum, "NCCL unique id from rank 0"));
  if (words[0] != 1)
    return Status::error(fmt::format("{}: rank 0 could not make an NCCL unique id{}",
                                     bootstrap.describe(),
                                     rootError.empty() ? "" : ": " + rootError));
  ncclUniqueId id;
  std::memcpy(&id, words + 1, sizeof(ncclUniqueId));
  SMELT_ASSIGN_OR_RETURN(auto both, openDriverAndNccl());
  auto [cu, nccl] = both;
  std::unique_ptr<NcclCommunicator> communicator(new NcclCommunicator(*cu, *nccl, options));
  communicator->rank_ = bootstrap.rank();
  communicator->size_ = bootstrap.size();
  SMELT_RETURN_IF_ERROR(communicator->openDevice(device));
  ncclComm_t comm = nullptr;
  if (Status status =
          nccl->check(nccl->commInitRank(&comm, communicator->size_, id, communicator->rank_),
                      "ncclCommInitRank");
      !status.ok())
    return Status::error(fmt::format("{} (NCCL {}): {}", communicator->describe(),
                                     nccl->versionName(), status.message()));
  communicator->comm_ = comm;
  return std::move(communicator);
}

} // namespace smelt::rt::cuda
