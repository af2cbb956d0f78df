// Included before CUDA C++ that Smelt's renderer wrote, so that the host compiler builds it
// unchanged into functions the SIMT emulator (Simt.h) launches: CUDA's keywords become plain
// C++, threadIdx and its kin read the running fiber's coordinates, __syncthreads and the warp
// shuffles and votes go to the emulator, and the device-only intrinsics the renderer calls get
// host definitions. f16 and bf16 are the toolkit's own cuda_fp16.h / cuda_bf16.h, whose host
// paths compile with -I<cuda>/include; the rendered source includes them again, a no-op.
#pragma once

#include "Simt.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <math.h> // the CUDA math functions (expf, erff, ...) are global names, as here
#include <type_traits>

// ---- CUDA's keywords ---------------------------------------------------------------------------
// The toolkit's host_defines.h spells these as annotations for nvcc; a host build wants C++.
#undef __global__
#undef __device__
#undef __forceinline__
#undef __shared__
#undef __launch_bounds__
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
// The CUDA prelude's shared kernel body: __noinline__ is a CUDA keyword, not GNU C++.
#define SMELT_SHARED_BODY static __attribute__((noinline))
// A block's threads are fibers of one OS thread that runs the whole block before the next, so
// a thread_local static is one array per running block, as shared memory is. It is not cleared
// between blocks: neither is shared memory. The barriers below are calls into Simt.cpp, which
// the compiler cannot see into, so it rereads shared memory after each (checked: g++ 12 and
// clang 14 keep the loads after the call).
#define __shared__ static thread_local

// ---- Coordinates -------------------------------------------------------------------------------
#define threadIdx (::smelt::simt::here().threadIdx)
#define blockIdx (::smelt::simt::here().blockIdx)
#define blockDim (::smelt::simt::here().blockDim)
#define gridDim (::smelt::simt::here().gridDim)
#define warpSize 32

// ---- Barriers, shuffles and votes --------------------------------------------------------------
inline void __syncthreads() { ::smelt::simt::syncthreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::smelt::simt::ballot("__syncwarp", mask, false);
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return ::smelt::simt::ballot("__ballot_sync", mask, predicate != 0);
}
inline int __any_sync(unsigned mask, int predicate) {
  return ::smelt::simt::ballot("__any_sync", mask, predicate != 0) != 0;
}
inline int __all_sync(unsigned mask, int predicate) {
  return ::smelt::simt::ballot("__all_sync", mask, predicate != 0) == mask;
}

namespace smelt::simt {
template <typename T> T shuffled(const char *what, unsigned mask, Shuffle kind, int arg, int width,
                                 T value) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8,
                "CUDA shuffles move at most 8 bytes of a trivially copyable type");
  T result;
  shuffle(what, mask, kind, arg, width, &value, &result, sizeof(T));
  return result;
}
} // namespace smelt::simt

template <typename T> T __shfl_sync(unsigned mask, T var, int srcLane, int width = 32) {
  return ::smelt::simt::shuffled("__shfl_sync", mask, ::smelt::simt::Shuffle::Index, srcLane,
                                 width, var);
}
template <typename T> T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  return ::smelt::simt::shuffled("__shfl_up_sync", mask, ::smelt::simt::Shuffle::Up, int(delta),
                                 width, var);
}
template <typename T> T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  return ::smelt::simt::shuffled("__shfl_down_sync", mask, ::smelt::simt::Shuffle::Down,
                                 int(delta), width, var);
}
template <typename T> T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = 32) {
  return ::smelt::simt::shuffled("__shfl_xor_sync", mask, ::smelt::simt::Shuffle::Xor, laneMask,
                                 width, var);
}

// ---- Atomics and fences ------------------------------------------------------------------------
// The blocks of a split reduction count themselves in (the CUDA prelude's smelt_last_block).
// Blocks run on the host's threads, so these are the host's: the count's read-modify-write
// orders each block's partials, written by the fibers of the OS thread that runs the block,
// before the reads of the last block to arrive.
inline unsigned atomicAdd(unsigned *address, unsigned value) {
  return __atomic_fetch_add(address, value, __ATOMIC_ACQ_REL);
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// ---- Device intrinsics the renderer calls ------------------------------------------------------
inline float __int_as_float(int bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}
inline double __longlong_as_double(long long bits) {
  double value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }

// ---- The rendered prelude's stdint names -------------------------------------------------------
// It typedefs int64_t as long long, as on every CUDA device; glibc's is long. Renamed, the
// kernels keep the device's types and the host's <cstdint> names stay as they are.
#define int8_t smelt_simt_int8_t
#define uint8_t smelt_simt_uint8_t
#define int32_t smelt_simt_int32_t
#define uint32_t smelt_simt_uint32_t
#define int64_t smelt_simt_int64_t
#define uint64_t smelt_simt_uint64_t
