// Hand-written CUDA kernels (BrokenKernels.cpp, compiled against SimtPrelude.h), each with a
// bug of a kind a kernel emitter can make, next to the same kernel without it: the emulator's
// tests expect the correct one to pass and the broken one to fail, by a wrong result or a
// detected error. Launched 1-D; every parameter that is not a pointer is a plain value.
#pragma once

namespace smelt::simt::broken {

/// out[w] = the sum of warp w's 32 values. The bug: the shuffles start at offset 8, not 16.
void warpSums(bool broken, const float *in, float *out);
/// out[b] = the sum of block b's values (blocks of 256): the warps' sums meet in shared memory.
/// The bug: no __syncthreads between writing them and reading them (caught in forward order).
void blockSums(bool broken, const float *in, float *out);
/// out[i] = in[i - 1] within each block (0 for its first thread), through shared memory. The
/// bug: no __syncthreads between the writes and the reads (caught in reversed order).
void shiftByOne(bool broken, const float *in, float *out);
/// out[i] = 2 in[i] for n elements, 4 per vector access, a scalar loop for the tail. The bugs:
/// the tail loop stops one short; the vector loop rounds its count up (one past the end).
enum class LoopBug { None, ShortTail, Overrun };
void doubled(LoopBug bug, int n, const float *in, float *out);

/// Broken by the emulator's rules, which the hardware leaves undefined or deadlocks on:
/// a full-mask shuffle after half the warp returned;
void shuffleAfterReturn(const float *in, float *out);
/// half a warp waits at __syncthreads while the other half waits at a full-mask shuffle;
void barrierAgainstShuffle(const float *in, float *out);
/// every lane shuffles with a mask holding only lanes 0-15.
void laneOutsideMask(const float *in, float *out);
/// out[i] = in[i] + INT_MAX computed in int, overflowing: undefined behaviour that UBSan
/// reports (the renderer computes integers unsigned, where they wrap).
void signedOverflow(const int *in, int *out);

} // namespace smelt::simt::broken
