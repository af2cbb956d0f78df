// The emulated NCCL's shared-memory rendezvous across processes (NcclRendezvous.h): the file's
// layout, creating it without a reader ever seeing it half made, and the polling waits.
#include "NcclRendezvous.h"

#include "EmuCuda.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

namespace smelt::emucuda::nccl {

namespace {
constexpr char kMagic[16] = "smelt-emu-rdv1";
constexpr size_t kHeaderBytes = 4096, kSlotHeaderBytes = 256;
using Clock = std::chrono::steady_clock;

template <class T> std::atomic_ref<T> shared(T &field) { return std::atomic_ref<T>(field); }

/// Whether process `pid` has exited (a zombie not yet reaped counts as exited).
bool exited(int pid) {
  if (kill(pid, 0) != 0)
    return errno == ESRCH;
  char path[64], text[256] = {};
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *file = std::fopen(path, "r");
  if (!file)
    return false;
  size_t length = std::fread(text, 1, sizeof text - 1, file);
  std::fclose(file);
  const char *state = std::strrchr(text, ')'); // "pid (comm) S ...": the name may hold spaces
  return length > 0 && state && state[1] == ' ' && (state[2] == 'Z' || state[2] == 'X');
}
} // namespace

// Fields other processes change are read and written through atomic_ref only.
struct Rendezvous::Header {
  char magic[16];
  int32_t nranks;
  int32_t joined;
  int32_t failing; // 0 until one rank takes the right to write `reason`
  int32_t failed;  // then 1, once `reason` is written
  char reason[2048];
};

struct Rendezvous::Slot {
  int32_t pid;
  int32_t device;
  uint64_t arrived;  // the last round this rank's chunk is in place for
  uint64_t departed; // the last round this rank has finished reading
  SlotCollective collective;
};

std::shared_ptr<Rendezvous> Rendezvous::open(const std::string &name, int nranks,
                                             std::string &why) {
  static_assert(sizeof(Header) <= kHeaderBytes && sizeof(Slot) <= kSlotHeaderBytes);
  std::shared_ptr<Rendezvous> made(new Rendezvous);
  made->path_ = "/dev/shm/" + name;
  // Made whole under a private name, then linked to the shared one: whoever links first made
  // it, and nobody opens a file whose header is still being written.
  std::string temporary = made->path_ + "." + std::to_string(getpid()) + "." +
                          std::to_string(std::random_device{}());
  size_t size = kHeaderBytes + size_t(nranks) * (kSlotHeaderBytes + kChunkBytes);
  int fd = ::open(temporary.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) {
    bool written = ftruncate(fd, off_t(size)) == 0;
    if (written) {
      Header header{};
      std::memcpy(header.magic, kMagic, sizeof kMagic);
      header.nranks = nranks;
      written = pwrite(fd, &header, sizeof header, 0) == ssize_t(sizeof header);
    }
    bool linked = written && ::link(temporary.c_str(), made->path_.c_str()) == 0;
    int linkError = errno;
    ::unlink(temporary.c_str());
    if (!linked) {
      ::close(fd);
      fd = -1;
      if (!written || linkError != EEXIST) {
        why = "cannot create " + made->path_ + ": " + std::strerror(written ? linkError : errno);
        return nullptr;
      }
    }
  }
  if (fd < 0) // another rank made it
    fd = ::open(made->path_.c_str(), O_RDWR | O_CLOEXEC);
  struct stat status {};
  if (fd < 0 || fstat(fd, &status) != 0) {
    why = "cannot open " + made->path_ + ": " + std::strerror(errno);
    if (fd >= 0)
      ::close(fd);
    return nullptr;
  }
  made->size_ = size_t(status.st_size);
  void *base = mmap(nullptr, made->size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) {
    why = "cannot map " + made->path_ + ": " + std::strerror(errno);
    return nullptr;
  }
  made->base_ = base;
  Header &header = made->header();
  if (made->size_ < kHeaderBytes || std::memcmp(header.magic, kMagic, sizeof kMagic) != 0 ||
      made->size_ < kHeaderBytes + size_t(header.nranks) * (kSlotHeaderBytes + kChunkBytes)) {
    why = made->path_ + " is not an emulated NCCL rendezvous of this version";
    return nullptr;
  }
  return made;
}

Rendezvous::~Rendezvous() {
  if (base_)
    munmap(base_, size_);
}

Rendezvous::Header &Rendezvous::header() const { return *static_cast<Header *>(base_); }

Rendezvous::Slot &Rendezvous::slot(int rank) const {
  auto *at = static_cast<std::byte *>(base_) + kHeaderBytes +
             size_t(rank) * (kSlotHeaderBytes + kChunkBytes);
  return *reinterpret_cast<Slot *>(at);
}

std::byte *Rendezvous::data(int rank) {
  return reinterpret_cast<std::byte *>(&slot(rank)) + kSlotHeaderBytes;
}

SlotCollective &Rendezvous::collective(int rank) { return slot(rank).collective; }

int Rendezvous::nranks() const { return header().nranks; }

int Rendezvous::claim(int rank, int device) {
  Slot &mine = slot(rank);
  int32_t expected = 0;
  if (!shared(mine.pid).compare_exchange_strong(expected, int32_t(getpid())))
    return expected;
  mine.device = device;
  shared(header().joined).fetch_add(1);
  return 0;
}

int Rendezvous::joined() const { return shared(header().joined).load(); }

int Rendezvous::pid(int rank) const { return shared(slot(rank).pid).load(); }

void Rendezvous::unlink() { ::unlink(path_.c_str()); }

void Rendezvous::fail(const std::string &why) {
  Header &h = header();
  int32_t expected = 0;
  if (!shared(h.failing).compare_exchange_strong(expected, 1))
    return;
  size_t length = std::min(why.size(), sizeof h.reason - 1);
  std::memcpy(h.reason, why.data(), length);
  h.reason[length] = '\0';
  shared(h.failed).store(1, std::memory_order_release);
}

std::optional<std::string> Rendezvous::failure() const {
  if (!shared(header().failed).load(std::memory_order_acquire))
    return std::nullopt;
  return std::string(header().reason);
}

std::string Rendezvous::deadPeer() const {
  for (int rank = 0; rank < nranks(); ++rank)
    if (int owner = pid(rank); owner > 0 && owner != getpid() && exited(owner))
      return "rank " + std::to_string(rank) + " (pid " + std::to_string(owner) + ") exited";
  return "";
}

void Rendezvous::arrive(int rank, uint64_t round) {
  shared(slot(rank).arrived).store(round, std::memory_order_release);
}

void Rendezvous::depart(int rank, uint64_t round) {
  shared(slot(rank).departed).store(round, std::memory_order_release);
}

void Rendezvous::awaitArrivals(uint64_t round, Deadline deadline, const std::string &what) {
  await(true, round, deadline, what);
}

void Rendezvous::awaitDepartures(uint64_t round, Deadline deadline, const std::string &what) {
  await(false, round, deadline, what);
}

void Rendezvous::await(bool arrivals, uint64_t round, Deadline deadline, const std::string &what) {
  auto missing = [&] {
    std::string ranks;
    for (int rank = 0; rank < nranks(); ++rank) {
      Slot &s = slot(rank);
      uint64_t reached = shared(arrivals ? s.arrived : s.departed).load(std::memory_order_acquire);
      if (reached < round)
        ranks += (ranks.empty() ? "" : ", ") + std::to_string(rank);
    }
    return ranks;
  };
  // Short sleeps first (a collective's peers are usually close), then up to 1 ms; the peers'
  // liveness is looked at every 50 ms.
  auto sleep = std::chrono::microseconds(20);
  auto nextLivenessCheck = Clock::now();
  for (;;) {
    std::string waitingFor = missing();
    if (waitingFor.empty())
      return;
    if (abandoned.load())
      throw Abandoned{};
    // A rank may arrive, fail the communicator (a disagreement it saw) and exit between the
    // look above and these: when every rank has arrived by now, this one goes on to see (and
    // report) what that rank saw, as it would have had it looked a moment later.
    if (std::optional<std::string> why = failure()) {
      if (missing().empty())
        return;
      throw Fault(CUDA_ERROR_LAUNCH_FAILED, what + ": another rank failed the communicator: " + *why);
    }
    Clock::time_point now = Clock::now();
    if (now >= nextLivenessCheck) {
      if (std::string dead = deadPeer(); !dead.empty()) {
        if (missing().empty())
          return;
        std::string why = what + ": " + dead + " while rank(s) " + waitingFor +
                          " had not " + (arrivals ? "arrived" : "finished");
        fail(why);
        throw Fault(CUDA_ERROR_LAUNCH_FAILED, why);
      }
      nextLivenessCheck = now + std::chrono::milliseconds(50);
    }
    if (now >= deadline) {
      std::string why = what + ": gave up waiting for rank(s) " + waitingFor + " to " +
                        (arrivals ? "issue it" : "finish the previous round") +
                        " (SMELT_EMUCUDA_NCCL_TIMEOUT sets the wait)";
      fail(why);
      throw Fault(CUDA_ERROR_LAUNCH_FAILED, why);
    }
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::microseconds(1000));
  }
}

} // namespace smelt::emucuda::nccl
