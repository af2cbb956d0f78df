// The emulated devices' memory (EmuCuda.h): each device owns a window of address space the host
// cannot touch (PROT_NONE), handed out by cuMemAlloc, and a twin window of the same size where
// the bytes really live, reached only through hostView(). Pinned host memory (cuMemAllocHost) is
// ordinary memory, tracked so that copies know they may complete late. A host access to device
// memory lands in the PROT_NONE window; the SIGSEGV handler names the allocation before the
// process dies, which is what a GPU would give (a wrong pointer) made loud.
#include "Core.h"

#include <sys/mman.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unistd.h>

namespace smelt::emucuda {
namespace {

constexpr uint64_t kWindow = uint64_t(128) << 30; // per device: more than kDeviceMemory
constexpr uint64_t kAlignment = 256;              // what cuMemAlloc guarantees

struct Allocation {
  uint64_t bytes;     // as asked
  uint64_t reserved;  // rounded to kAlignment
};

struct Space {
  char *device = nullptr;  // PROT_NONE: the addresses the program sees
  char *storage = nullptr; // read-write: where the bytes are
  std::mutex lock;
  /// Per device: live allocations and free ranges, by offset in the window.
  std::map<uint64_t, Allocation> live[kMaxDevices];
  std::map<uint64_t, uint64_t> free[kMaxDevices];
  uint64_t inUse[kMaxDevices] = {};
  /// Freed allocations, remembered to tell "freed" from "never allocated" (bounded).
  std::map<uint64_t, uint64_t> freed[kMaxDevices];
  std::map<uintptr_t, uint64_t> pinned;
  std::map<uintptr_t, uint64_t> freedPinned; // to name a stale pointer into one (bounded)
};

struct sigaction previousHandler;

void onSegfault(int signal, siginfo_t *info, void *context);

Space &space() {
  static Space *s = [] {
    auto *created = new Space;
    size_t total = kWindow * kMaxDevices;
    void *device = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                        -1, 0);
    void *storage = mmap(nullptr, total, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (device == MAP_FAILED || storage == MAP_FAILED) {
      std::fprintf(stderr, "emulated CUDA: cannot reserve %zu bytes of address space\n", total);
      std::abort();
    }
    created->device = static_cast<char *>(device);
    created->storage = static_cast<char *>(storage);
    for (int d = 0; d < kMaxDevices; ++d)
      created->free[d][0] = kDeviceMemory;
    struct sigaction action {};
    action.sa_sigaction = onSegfault;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &previousHandler);
    return created;
  }();
  return *s;
}

/// Device and offset of an address in the device window, or false.
bool locate(const void *pointer, int &device, uint64_t &offset) {
  Space &s = space();
  auto address = reinterpret_cast<uintptr_t>(pointer);
  auto base = reinterpret_cast<uintptr_t>(s.device);
  if (address < base || address >= base + kWindow * kMaxDevices)
    return false;
  device = int((address - base) / kWindow);
  offset = (address - base) % kWindow;
  return true;
}

/// The live allocation holding `offset` on `device` (s.lock held), or end().
std::map<uint64_t, Allocation>::iterator holding(Space &s, int device, uint64_t offset) {
  auto &live = s.live[device];
  auto it = live.upper_bound(offset);
  if (it == live.begin())
    return live.end();
  --it;
  return offset < it->first + it->second.reserved ? it : live.end();
}

/// Why [pointer, pointer + bytes) is not usable (s.lock held), "" when it is; `view` its bytes.
std::string inspect(Space &s, const void *pointer, size_t bytes, void **view) {
  int device = 0;
  uint64_t offset = 0;
  if (locate(pointer, device, offset)) {
    auto it = holding(s, device, offset);
    if (it == s.live[device].end()) {
      auto was = s.freed[device].upper_bound(offset);
      if (was != s.freed[device].begin() && offset < std::prev(was)->first + std::prev(was)->second)
        return "it is in device memory that was freed (cuMemFree)";
      return "it is outside any allocation of gpu:" + std::to_string(device);
    }
    if (offset + bytes > it->first + it->second.bytes)
      return "it runs " + std::to_string(offset + bytes - it->first - it->second.bytes) +
             " bytes past the end of a " + std::to_string(it->second.bytes) +
             "-byte allocation of gpu:" + std::to_string(device);
    if (view)
      *view = s.storage + (reinterpret_cast<const char *>(pointer) - s.device);
    return "";
  }
  auto address = reinterpret_cast<uintptr_t>(pointer);
  auto it = s.pinned.upper_bound(address);
  if (it != s.pinned.begin() && address < std::prev(it)->first + std::prev(it)->second) {
    --it;
    if (address + bytes > it->first + it->second)
      return "it runs past the end of a " + std::to_string(it->second) +
             "-byte pinned host allocation";
    if (view)
      *view = const_cast<void *>(pointer);
    return "";
  }
  auto was = s.freedPinned.upper_bound(address);
  if (was != s.freedPinned.begin() && address < std::prev(was)->first + std::prev(was)->second)
    return "it is pinned host memory that was freed (cuMemFreeHost)";
  return "it is neither device memory nor pinned host memory";
}

void onSegfault(int signal, siginfo_t *info, void *context) {
  Space &s = space();
  auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  auto base = reinterpret_cast<uintptr_t>(s.device);
  if (address >= base && address < base + kWindow * kMaxDevices) {
    char message[200];
    int n = std::snprintf(message, sizeof message,
                          "emulated CUDA: the host touched device memory at %p (gpu:%d, offset "
                          "%llu): device memory is reached only through copies and kernels\n",
                          info->si_addr, int((address - base) / kWindow),
                          (unsigned long long)((address - base) % kWindow));
    if (n > 0)
      (void)!write(2, message, size_t(n));
  }
  // Hand the fault on: the previous handler (a sanitizer's, a test's death check) or the
  // default, which ends the process.
  if (previousHandler.sa_flags & SA_SIGINFO && previousHandler.sa_sigaction)
    previousHandler.sa_sigaction(signal, info, context);
  else if (previousHandler.sa_handler != SIG_DFL && previousHandler.sa_handler != SIG_IGN)
    previousHandler.sa_handler(signal);
  else {
    std::signal(SIGSEGV, SIG_DFL);
    std::raise(SIGSEGV);
  }
}

} // namespace

CUresult allocateDevice(int device, size_t bytes, CUdeviceptr *pointer) {
  if (bytes == 0)
    return CUDA_ERROR_INVALID_VALUE;
  Space &s = space();
  std::lock_guard<std::mutex> guard(s.lock);
  uint64_t reserved = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  auto &free = s.free[device];
  for (auto it = free.begin(); it != free.end(); ++it) {
    if (it->second < reserved)
      continue;
    uint64_t offset = it->first, size = it->second;
    free.erase(it);
    if (size > reserved)
      free[offset + reserved] = size - reserved;
    s.live[device][offset] = {bytes, reserved};
    s.inUse[device] += reserved;
    s.freed[device].erase(offset);
    *pointer = CUdeviceptr(reinterpret_cast<uintptr_t>(s.device + device * kWindow + offset));
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult freeDevice(CUdeviceptr pointer) {
  Space &s = space();
  std::lock_guard<std::mutex> guard(s.lock);
  int device = 0;
  uint64_t offset = 0;
  if (!locate(reinterpret_cast<void *>(uintptr_t(pointer)), device, offset))
    return CUDA_ERROR_INVALID_VALUE;
  auto it = s.live[device].find(offset);
  if (it == s.live[device].end())
    return CUDA_ERROR_INVALID_VALUE; // not the start of a live allocation: freed twice, or inside
  uint64_t reserved = it->second.reserved;
  s.live[device].erase(it);
  s.inUse[device] -= reserved;
  if (s.freed[device].size() > 4096)
    s.freed[device].clear();
  s.freed[device][offset] = reserved;
  // Leave garbage, as a GPU does, so that whatever reads freed memory later reads what no one
  // wrote; a large block gives its pages back instead (an arena would otherwise stay resident).
  char *bytes = s.storage + device * kWindow + offset;
  if (reserved <= (uint64_t(1) << 20))
    std::memset(bytes, 0xA5, reserved);
  else { // only whole pages inside the block: a neighbour may share the first and last
    auto first = (reinterpret_cast<uintptr_t>(bytes) + 4095) / 4096 * 4096;
    auto last = (reinterpret_cast<uintptr_t>(bytes) + reserved) / 4096 * 4096;
    madvise(reinterpret_cast<void *>(first), last - first, MADV_DONTNEED);
  }
  // Coalesce with the free neighbours.
  auto &free = s.free[device];
  auto next = free.lower_bound(offset);
  uint64_t start = offset, size = reserved;
  if (next != free.begin()) {
    auto before = std::prev(next);
    if (before->first + before->second == offset) {
      start = before->first;
      size += before->second;
      free.erase(before);
    }
  }
  if (next != free.end() && offset + reserved == next->first) {
    size += next->second;
    free.erase(next);
  }
  free[start] = size;
  return CUDA_SUCCESS;
}

CUresult allocatePinned(size_t bytes, void **pointer) {
  void *memory = std::aligned_alloc(4096, (std::max<size_t>(bytes, 1) + 4095) / 4096 * 4096);
  if (!memory)
    return CUDA_ERROR_OUT_OF_MEMORY;
  Space &s = space();
  std::lock_guard<std::mutex> guard(s.lock);
  s.pinned[reinterpret_cast<uintptr_t>(memory)] = bytes;
  s.freedPinned.erase(reinterpret_cast<uintptr_t>(memory));
  *pointer = memory;
  return CUDA_SUCCESS;
}

CUresult freePinned(void *pointer) {
  Space &s = space();
  std::lock_guard<std::mutex> guard(s.lock);
  auto it = s.pinned.find(reinterpret_cast<uintptr_t>(pointer));
  if (it == s.pinned.end())
    return CUDA_ERROR_INVALID_VALUE;
  if (s.freedPinned.size() > 4096)
    s.freedPinned.clear();
  s.freedPinned[it->first] = it->second;
  s.pinned.erase(it);
  std::free(pointer);
  return CUDA_SUCCESS;
}

uint64_t deviceBytesInUse(int device) {
  Space &s = space();
  std::lock_guard<std::mutex> guard(s.lock);
  return s.inUse[device];
}

bool isPinned(const void *pointer, size_t bytes) {
  Space &s = space();
  std::lock_guard<std::mutex> guard(s.lock);
  int device = 0;
  uint64_t offset = 0;
  return !locate(pointer, device, offset) && inspect(s, pointer, bytes, nullptr).empty();
}

int deviceOf(const void *pointer) {
  int device = -1;
  uint64_t offset = 0;
  return locate(pointer, device, offset) ? device : -1;
}

bool isDeviceAddress(const void *pointer) { return deviceOf(pointer) >= 0; }

std::string checkRange(const void *pointer, size_t bytes) {
  Space &s = space();
  std::lock_guard<std::mutex> guard(s.lock);
  return inspect(s, pointer, bytes, nullptr);
}

void *hostView(const void *pointer, size_t bytes, const std::string &what) {
  Space &s = space();
  std::lock_guard<std::mutex> guard(s.lock);
  void *view = nullptr;
  std::string why = inspect(s, pointer, bytes, &view);
  if (!why.empty()) {
    char address[32];
    std::snprintf(address, sizeof address, "%p", pointer);
    throw Fault(CUDA_ERROR_ILLEGAL_ADDRESS, what + ": " + std::to_string(bytes) + " bytes at " +
                                                address + ": " + why);
  }
  return view;
}

} // namespace smelt::emucuda
