// The SIMT emulator's scheduler: a block's threads are fibers resumed in passes, each running
// until it waits at a barrier or returns; between passes, a warp whose live lanes all wait at a
// collective, or a block whose live threads all wait at __syncthreads, is released. A pass that
// ends with nothing to release is a deadlock, reported with where every thread waits.
#include "Simt.h"

#include <boost/context/fiber.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace smelt::simt {
namespace {

namespace ctx = boost::context;

constexpr unsigned kWarp = 32;
constexpr unsigned kMaxBlock = 1024;
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kStackBytes = 256 * 1024; // ASan's redzones make frames several times larger
#else
constexpr size_t kStackBytes = 64 * 1024;
#endif

/// One worker's fiber stacks, reused from block to block: a grid of a thousand blocks of 256
/// threads would otherwise allocate a quarter of a million stacks. A worker ends with its
/// launch; its stacks go to a spare list that the next launch's workers take from.
class StackPool {
public:
  StackPool() = default;
  StackPool(const StackPool &) = delete;
  StackPool &operator=(const StackPool &) = delete;
  ~StackPool() {
    std::lock_guard<std::mutex> guard(spare_.lock);
    spare_.stacks.insert(spare_.stacks.end(), free_.begin(), free_.end());
  }
  ctx::stack_context take() {
    if (free_.empty()) {
      std::lock_guard<std::mutex> guard(spare_.lock);
      size_t moved = std::min<size_t>(spare_.stacks.size(), kMaxBlock);
      free_.assign(spare_.stacks.end() - moved, spare_.stacks.end());
      spare_.stacks.resize(spare_.stacks.size() - moved);
    }
    void *stack;
    if (free_.empty()) {
      stack = std::malloc(kStackBytes);
      if (!stack)
        throw std::bad_alloc();
    } else {
      stack = free_.back();
      free_.pop_back();
#if defined(__SANITIZE_ADDRESS__)
      // A thread unwound mid-kernel leaves its frames' redzones poisoned.
      ASAN_UNPOISON_MEMORY_REGION(stack, kStackBytes);
#endif
    }
    ctx::stack_context context;
    context.size = kStackBytes;
    context.sp = static_cast<char *>(stack) + kStackBytes;
    return context;
  }
  void give(ctx::stack_context &context) {
    free_.push_back(static_cast<char *>(context.sp) - context.size);
  }

private:
  std::vector<void *> free_;
  /// Kept for the process's life, as a GPU driver keeps memory it has mapped.
  static struct Spare {
    std::mutex lock;
    std::vector<void *> stacks;
    ~Spare() {
      for (void *stack : stacks)
        std::free(stack);
    }
  } spare_;
};
StackPool::Spare StackPool::spare_;

/// The stack allocator a fiber holds (Boost keeps a copy in the fiber): a handle on the pool.
struct PooledStack {
  StackPool *pool;
  ctx::stack_context allocate() { return pool->take(); }
  void deallocate(ctx::stack_context &context) noexcept { pool->give(context); }
};

enum class State { Runnable, AtBarrier, AtWarp, Finished, Failed };

struct Thread {
  Coordinates at{};
  ctx::fiber fiber;     // the suspended thread, as the scheduler resumes it
  ctx::fiber scheduler; // inside the thread: where it goes back to when it waits
  State state = State::Runnable;
  const char *what = nullptr; // the warp collective it waits at, and its mask
  unsigned mask = 0;
};

/// A warp's collectives. Values are published in two alternating rounds: after a release the
/// lanes read round r while the first of them may already publish round r + 1, and no lane can
/// publish r + 2 before every live lane has arrived at r + 1, that is, has read r.
struct Warp {
  unsigned live = 0; // lanes that exist and have not returned
  unsigned round = 0;
  alignas(8) unsigned char slots[2][kWarp][8];
};

std::string hex(unsigned mask) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", mask);
  return text;
}

/// One worker's block: the threads of one block index at a time.
class Block {
public:
  std::string run(unsigned index, unsigned grid, unsigned size, Order order,
                  const std::function<void()> &kernel, StackPool &stacks);

  Warp &warpOf(const Thread &thread) { return warps_[thread.at.threadIdx.x / kWarp]; }
  Thread &lane(unsigned warp, unsigned lane) { return threads_[warp * kWarp + lane]; }
  /// Keeps the first error of the block.
  void setError(const std::string &message) {
    if (error_.empty())
      error_ = message;
  }

private:
  bool release();
  bool releaseWarp(unsigned w);
  std::string deadlock() const;

  unsigned index_ = 0;
  std::vector<Thread> threads_;
  std::vector<Warp> warps_;
  std::string error_;
};

thread_local Thread *tThread = nullptr; // the fiber running on this OS thread
thread_local Block *tBlock = nullptr;

std::string describe(const Thread &t) {
  unsigned x = t.at.threadIdx.x;
  return "block " + std::to_string(t.at.blockIdx.x) + ", thread " + std::to_string(x) + " (warp " +
         std::to_string(x / kWarp) + ", lane " + std::to_string(x % kWarp) + "): ";
}

Thread &current(const char *what) {
  if (!tThread) {
    std::fprintf(stderr, "smelt::simt: %s called outside a launch\n", what);
    std::abort();
  }
  return *tThread;
}

/// Back to the scheduler until it resumes this thread (or unwinds it, after an error).
void suspend(Thread &t) { t.scheduler = std::move(t.scheduler).resume(); }

std::string Block::run(unsigned index, unsigned grid, unsigned size, Order order,
                       const std::function<void()> &kernel, StackPool &stacks) {
  index_ = index;
  error_.clear();
  threads_.clear();
  threads_.resize(size);
  warps_.assign((size + kWarp - 1) / kWarp, Warp{});
  for (unsigned w = 0; w < warps_.size(); ++w) {
    unsigned lanes = std::min(kWarp, size - w * kWarp);
    warps_[w].live = lanes == kWarp ? ~0u : (1u << lanes) - 1;
  }
  for (unsigned t = 0; t < size; ++t) {
    threads_[t].at = {{t, 0, 0}, {index, 0, 0}, {size, 1, 1}, {grid, 1, 1}};
    threads_[t].fiber = ctx::fiber(std::allocator_arg, PooledStack{&stacks},
                                   [this, t, &kernel](ctx::fiber &&scheduler) {
                                     Thread &self = threads_[t];
                                     self.scheduler = std::move(scheduler);
                                     kernel();
                                     self.state = State::Finished;
                                     return std::move(self.scheduler);
                                   });
  }
  tBlock = this;
  unsigned finished = 0;
  while (error_.empty()) {
    for (unsigned k = 0; k < size && error_.empty(); ++k) {
      Thread &t = threads_[order == Order::Forward ? k : size - 1 - k];
      if (t.state != State::Runnable)
        continue;
      tThread = &t;
      t.fiber = std::move(t.fiber).resume();
      tThread = nullptr;
      if (t.state == State::Finished) {
        warpOf(t).live &= ~(1u << t.at.threadIdx.x % kWarp);
        ++finished;
      }
    }
    if (!error_.empty() || finished == size)
      break;
    if (!release())
      setError(deadlock());
  }
  for (Thread &t : threads_)
    t.fiber = {}; // unwinds the stacks of threads left waiting by an error
  tBlock = nullptr;
  return error_;
}

/// Every warp whose live lanes all wait at one collective, else the block barrier when every
/// live thread waits there. False when nothing can go on.
bool Block::release() {
  bool released = false;
  for (unsigned w = 0; w < warps_.size() && error_.empty(); ++w)
    released |= releaseWarp(w);
  if (released || !error_.empty())
    return true;
  for (const Thread &t : threads_)
    if (t.state != State::Finished && t.state != State::AtBarrier)
      return false;
  for (Thread &t : threads_)
    if (t.state == State::AtBarrier)
      t.state = State::Runnable;
  return true;
}

bool Block::releaseWarp(unsigned w) {
  Warp &warp = warps_[w];
  unsigned waiting = 0;
  for (unsigned l = 0; l < kWarp; ++l)
    if (warp.live >> l & 1 && lane(w, l).state == State::AtWarp)
      waiting |= 1u << l;
  if (waiting == 0 || waiting != warp.live)
    return false; // some live lane is elsewhere: at __syncthreads, or not there yet
  const Thread &first = lane(w, __builtin_ctz(waiting));
  for (unsigned l = 0; l < kWarp; ++l) {
    const Thread &t = lane(w, l);
    if (waiting >> l & 1 && (std::strcmp(t.what, first.what) != 0 || t.mask != first.mask)) {
      setError(describe(t) + t.what + "(mask " + hex(t.mask) + ") while lane " +
               std::to_string(first.at.threadIdx.x % kWarp) + " is at " + first.what + "(mask " +
               hex(first.mask) + ")");
      return true;
    }
  }
  if (first.mask != warp.live) {
    setError(describe(first) + first.what + " with mask " + hex(first.mask) +
             " names lanes " + hex(first.mask & ~warp.live) +
             " that have returned or do not exist (live lanes " + hex(warp.live) + ")");
    return true;
  }
  ++warp.round;
  for (unsigned l = 0; l < kWarp; ++l)
    if (waiting >> l & 1)
      lane(w, l).state = State::Runnable;
  return true;
}

std::string Block::deadlock() const {
  std::string text = "block " + std::to_string(index_) + ": every live thread waits and none can "
                     "go on (a barrier some threads skip, or a collective some lanes miss):";
  for (unsigned w = 0; w < warps_.size(); ++w) {
    unsigned atBarrier = 0, atWarp = 0;
    const char *what = "";
    for (unsigned l = 0; l < kWarp && w * kWarp + l < threads_.size(); ++l) {
      const Thread &t = threads_[w * kWarp + l];
      atBarrier |= unsigned(t.state == State::AtBarrier) << l;
      atWarp |= unsigned(t.state == State::AtWarp) << l;
      if (t.state == State::AtWarp)
        what = t.what;
    }
    if (atWarp)
      text += " warp " + std::to_string(w) + " lanes " + hex(atWarp) + " at " + what + ";";
    if (atBarrier)
      text += " warp " + std::to_string(w) + " lanes " + hex(atBarrier) + " at __syncthreads;";
  }
  return text;
}

/// Publishes `size` bytes of `value`, waits at the warp collective `what`, and returns the
/// round's slots, every live lane's value in them.
unsigned char (*exchange(const char *what, unsigned mask, const void *value,
                         size_t size))[8] {
  Thread &t = current(what);
  unsigned laneIndex = t.at.threadIdx.x % kWarp;
  if (!(mask >> laneIndex & 1))
    fail(std::string(what) + " with mask " + hex(mask) + " leaves out the lane calling it");
  Warp &warp = tBlock->warpOf(t);
  unsigned char(*slots)[8] = warp.slots[warp.round & 1];
  std::memcpy(slots[laneIndex], value, size);
  t.state = State::AtWarp;
  t.what = what;
  t.mask = mask;
  suspend(t);
  return slots;
}

} // namespace

std::string launch(unsigned grid, unsigned block, Order order,
                   const std::function<void()> &thread) {
  if (block == 0 || block > kMaxBlock)
    return "a block of " + std::to_string(block) + " threads: CUDA allows 1 to 1024";
  if (grid == 0)
    return "a grid of no blocks";
  std::atomic<unsigned> next{0};
  std::atomic<bool> failed{false};
  std::mutex lock;
  std::string firstError;
  auto work = [&] {
    StackPool stacks;
    Block state;
    for (unsigned b; !failed && (b = next++) < grid;) {
      std::string error = state.run(b, grid, block, order, thread, stacks);
      if (!error.empty()) {
        std::lock_guard<std::mutex> guard(lock);
        if (firstError.empty())
          firstError = error;
        failed = true;
      }
    }
  };
  unsigned workers = std::min(grid, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> helpers;
  for (unsigned w = 1; w < workers; ++w)
    helpers.emplace_back(work);
  work();
  for (std::thread &helper : helpers)
    helper.join();
  return firstError;
}

const Coordinates &here() { return current("threadIdx/blockIdx/blockDim/gridDim").at; }

void syncthreads() {
  Thread &t = current("__syncthreads");
  t.state = State::AtBarrier;
  suspend(t);
}

void shuffle(const char *what, unsigned mask, Shuffle kind, int arg, int width, const void *in,
             void *out, size_t size) {
  if (width < 1 || width > int(kWarp) || (width & (width - 1)) != 0)
    fail(std::string(what) + " with width " + std::to_string(width) +
         ": a power of two from 1 to 32");
  unsigned char(*slots)[8] = exchange(what, mask, in, size);
  unsigned lane = current(what).at.threadIdx.x % kWarp;
  unsigned start = lane & ~unsigned(width - 1), end = start + unsigned(width);
  unsigned source = lane;
  switch (kind) {
  case Shuffle::Index:
    source = start + (unsigned(arg) & unsigned(width - 1));
    break;
  case Shuffle::Up:
    source = lane - start >= unsigned(arg) ? lane - unsigned(arg) : lane;
    break;
  case Shuffle::Down:
    source = lane + unsigned(arg) < end ? lane + unsigned(arg) : lane;
    break;
  case Shuffle::Xor: // a lane may read earlier segments, not later ones
    source = (lane ^ unsigned(arg)) < end ? lane ^ unsigned(arg) : lane;
    break;
  }
  if (!(mask >> source & 1))
    fail(std::string(what) + " reads lane " + std::to_string(source) +
         ", which is not in the mask " + hex(mask));
  std::memcpy(out, slots[source], size);
}

unsigned ballot(const char *what, unsigned mask, bool predicate) {
  unsigned char byte = predicate;
  unsigned char(*slots)[8] = exchange(what, mask, &byte, 1);
  unsigned bits = 0;
  for (unsigned l = 0; l < kWarp; ++l)
    if (mask >> l & 1)
      bits |= unsigned(slots[l][0] != 0) << l;
  return bits;
}

void fail(const std::string &message) {
  Thread &t = current("a failing check");
  tBlock->setError(describe(t) + message);
  t.state = State::Failed;
  suspend(t); // never resumed: unwound when the block ends
  std::abort();
}

} // namespace smelt::simt
