// A SIMT emulator for CUDA kernels compiled by the host compiler: each CUDA thread of a 1-D
// launch is a fiber (Boost.Context), the threads of a block run on one OS thread, blocks are
// spread over one std::thread per core. __syncthreads is a barrier over the block's live
// threads, a warp shuffle or vote a barrier over the warp's live lanes that checks the mask
// against them; a kernel that breaks those rules, or deadlocks, fails its launch with a message
// instead of hanging. SimtPrelude.h maps CUDA's names (threadIdx, __shfl_down_sync, ...) onto
// the functions below; docs/simt.md says what passing here proves and what it does not.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace smelt::simt {

/// In which order a block's threads are resumed, each running until it blocks or returns:
/// 0, 1, 2 ... or the reverse. A kernel whose result depends on it races (a missing
/// __syncthreads shows in one order or the other).
enum class Order { Forward, Reversed };

/// Runs `thread` once in every thread of `grid` blocks of `block` threads (at most 1024), the
/// fibers ordered by `order`. Returns "" or the first error: a broken warp or block barrier
/// rule, or a block whose threads all wait and none can go on (with where each waits).
std::string launch(unsigned grid, unsigned block, Order order, const std::function<void()> &thread);

// ---- What SimtPrelude.h calls from inside a launch ----------------------------------------------

struct Index3 {
  unsigned x, y, z;
};
/// The running thread's coordinates (y and z are 0 or 1: launches are 1-D).
struct Coordinates {
  Index3 threadIdx, blockIdx, blockDim, gridDim;
};
const Coordinates &here();

/// __syncthreads: waits until every live thread of the block is there.
void syncthreads();

/// Which lane a shuffle reads (CUDA's __shfl*_sync): `arg` is the source lane, the delta or the
/// xor mask; `width` a power of two up to 32 splitting the warp into segments.
enum class Shuffle { Index, Up, Down, Xor };
/// Publishes `size` (at most 8) bytes of `in` to the warp, waits for every live lane (which
/// must all call `what` with `mask` equal to the live lanes), then copies the source lane's
/// bytes (or this lane's when the source is outside the segment) to `out`.
void shuffle(const char *what, unsigned mask, Shuffle kind, int arg, int width, const void *in,
             void *out, size_t size);
/// __ballot_sync and __syncwarp (with `predicate` ignored): the bits of the lanes in `mask`
/// whose predicate holds, once every live lane is there.
unsigned ballot(const char *what, unsigned mask, bool predicate);

/// Ends the launch with `message`, reported with the thread's coordinates; never returns.
[[noreturn]] void fail(const std::string &message);

} // namespace smelt::simt
