// The hand-written kernels of BrokenKernels.h, in CUDA C++ as the renderer writes it, built like
// the corpus: the host compiler, SimtPrelude.h first.
#include "BrokenKernels.h"

#include "SimtPrelude.h"

namespace smelt::simt::broken {

namespace {

__device__ float warpSum(float a, int firstOffset) {
  for (int offset = firstOffset; offset > 0; offset /= 2)
    a += __shfl_down_sync(0xffffffffu, a, offset);
  return a;
}

} // namespace

__global__ void warpSums(bool broken, const float *in, float *out) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  float sum = warpSum(in[i], broken ? 8 : 16);
  if (threadIdx.x % 32 == 0)
    out[i / 32] = sum;
}

__global__ void blockSums(bool broken, const float *in, float *out) {
  __shared__ float partial[8];
  float sum = warpSum(in[blockIdx.x * blockDim.x + threadIdx.x], 16);
  if (threadIdx.x % 32 == 0)
    partial[threadIdx.x / 32] = sum;
  if (!broken)
    __syncthreads();
  if (threadIdx.x < 32) {
    sum = warpSum(threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.0f, 16);
    if (threadIdx.x == 0)
      out[blockIdx.x] = sum;
  }
}

__global__ void shiftByOne(bool broken, const float *in, float *out) {
  __shared__ float staged[1024];
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  staged[threadIdx.x] = in[i];
  if (!broken)
    __syncthreads();
  out[i] = threadIdx.x == 0 ? 0.0f : staged[threadIdx.x - 1];
}

__global__ void doubled(LoopBug bug, int n, const float *in, float *out) {
  struct alignas(16) Vec {
    float v[4];
  };
  const int first = blockIdx.x * blockDim.x + threadIdx.x;
  const int stride = gridDim.x * blockDim.x;
  const int vectors = bug == LoopBug::Overrun ? (n + 3) / 4 : n / 4;
  for (int v = first; v < vectors; v += stride) {
    Vec x = reinterpret_cast<const Vec *>(in)[v];
    for (int lane = 0; lane < 4; ++lane)
      x.v[lane] *= 2.0f;
    reinterpret_cast<Vec *>(out)[v] = x;
  }
  const int end = bug == LoopBug::ShortTail ? n - 1 : n;
  for (int i = vectors * 4 + first; i < end; i += stride)
    out[i] = 2.0f * in[i];
}

__global__ void shuffleAfterReturn(const float *in, float *out) {
  if (threadIdx.x % 32 >= 16)
    return;
  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, in[threadIdx.x], 1);
}

__global__ void barrierAgainstShuffle(const float *in, float *out) {
  float x = in[threadIdx.x];
  if (threadIdx.x % 32 < 16)
    __syncthreads();
  else
    x = __shfl_down_sync(0xffffffffu, x, 1);
  out[threadIdx.x] = x;
}

__global__ void laneOutsideMask(const float *in, float *out) {
  out[threadIdx.x] = __shfl_down_sync(0x0000ffffu, in[threadIdx.x], 1);
}

__global__ void signedOverflow(const int *in, int *out) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[i] + 2147483647;
}

} // namespace smelt::simt::broken
