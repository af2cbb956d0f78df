// The emulated cuDNN 9 (libcudnn.so.9): the legacy calls Smelt's runtime resolves
// (runtime/cuda/Cudnn.cpp's table) and their Create/Destroy partners, written on the CPU from the
// cuDNN API reference (cudnn_ops and cudnn_cnn libraries) and the "Legacy API" developer guide.
//
// Each call validates at once and returns the documented status (BAD_PARAM for inconsistent
// descriptors or pointers, NOT_SUPPORTED for what no algorithm runs); the arithmetic is queued
// on the handle's stream (EmuCuda.h) and reads device memory only through hostView() when it
// runs. Descriptors and host scalars (alpha, beta) are read at the call, as cuDNN does.
//
// Grouped convolutions (cudnnSetConvolutionGroupCount, the Legacy API guide's "Grouped
// Convolutions"): the descriptors describe the whole convolution, x with C channels, y with K,
// and the filter [K, C/groupCount, R, S]; group g convolves x's channels g*C/G .. (g+1)*C/G - 1
// into y's channels g*K/G .. (g+1)*K/G - 1 with filters g*K/G .. (g+1)*K/G - 1. A descriptor
// starts with a group count of 1; cudnnSetConvolution2dDescriptor leaves it as it is.
//
// Arithmetic: each operand is gathered from its strided layout into a dense NHWC array of the
// compute type (float; double for f64 data), computed there, and scattered back as
// y = alpha * result + beta * y (y is not read when beta is 0). TRUE_HALF_CONFIG also
// accumulates in float, and TF32 is not emulated: f32 is always exact FMA math. Max pooling's
// gradient goes to the first position (row-major in the window) whose x equals the y passed in;
// cuDNN documents no tie rule.
//
// Algorithms: the _v7 getters list every algorithm of the enum. IMPLICIT_GEMM,
// IMPLICIT_PRECOMP_GEMM and (NCHW only) GEMM forward, ALGO_0/1 backward data and ALGO_0/1/3
// backward filter run, all with the same arithmetic; their workspace sizes are this file's
// model and `time` an estimate at 10 GFLOP/s (real _v7 heuristics may report -1). The others
// (DIRECT, FFT, Winograd) are NOT_SUPPORTED.
//
// Support limits emulated because Smelt's fallbacks depend on them (supportLimit()):
// 1. f16/bf16 in NHWC (channels-last activations or an NHWC filter) needs C and K multiples of
//    8, and 16-byte aligned x, w, y. The Legacy API guide ("Convolution Functions", Data and
//    Filter Formats, docs.nvidia.com/deeplearning/cudnn/latest/developer/legacy-api.html) lists
//    these as the conditions for Tensor Core kernels, and its Padding section pads unaligned
//    channels automatically for packed NCHW data only. The emulation is stricter than the guide: it
//    offers no NHWC half kernel at all without them, so every getter entry is NOT_SUPPORTED and the
//    calls return CUDNN_STATUS_NOT_SUPPORTED. Grouped, it asks the same of each group's channels
//    (C/G and K/G), so a depthwise half convolution runs in NCHW only: whether cuDNN asks it of
//    the whole C and K or of each group is not settled here, and the stricter reading is the
//    one that exercises Smelt's NCHW fallback.
// 2. f64 in NHWC: not supported (PyTorch gives cuDNN only NCHW doubles, "disable NHWC for
//    float64 input", aten/src/ATen/native/ConvUtils.h since pytorch#33784).
// 3. TRUE_HALF_CONFIG backward filter in NHWC: the cuDNN 7.6.5 reference lists no algorithm.
#include "EmuCuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_set>
#include <vector>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace emu = smelt::emucuda;

// The opaque types cudnn.h declares. `set` is false until the descriptor's Set call succeeds.
struct cudnnContext {
  CUstream stream = nullptr; // 0: the legacy stream of the context current at each call
  int device = -1;
};
struct cudnnTensorStruct {
  bool set = false;
  cudnnDataType_t type{};
  int rank = 0;
  int64_t dims[CUDNN_DIM_MAX]{}, strides[CUDNN_DIM_MAX]{};
};
struct cudnnFilterStruct {
  bool set = false;
  cudnnDataType_t type{};
  cudnnTensorFormat_t format{};
  int k = 0, c = 0, h = 0, w = 0;
};
struct cudnnConvolutionStruct {
  bool set = false;
  int pad[2]{}, stride[2]{}, dilation[2]{};
  cudnnConvolutionMode_t mode{};
  cudnnDataType_t compute{};
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  int groups = 1; // cudnnSetConvolutionGroupCount
};
struct cudnnPoolingStruct {
  bool set = false;
  cudnnPoolingMode_t mode{};
  cudnnNanPropagation_t nan{};
  int window[2]{}, pad[2]{}, stride[2]{};
};

namespace {

// ---------------------------------------------------------------------------------------------
// Errors and live objects
// ---------------------------------------------------------------------------------------------

thread_local std::string lastError; // cudnnGetLastErrorString's answer

cudnnStatus_t fail(cudnnStatus_t status, const std::string &call, const std::string &why) {
  lastError = call + ": " + why;
  return status;
}

#define EMU_TRY(expr)                                                                              \
  do {                                                                                             \
    if (cudnnStatus_t status_ = (expr); status_ != CUDNN_STATUS_SUCCESS)                           \
      return status_;                                                                              \
  } while (0)

// Every handle and descriptor alive, so a destroyed or made-up one is BAD_PARAM, not a crash.
std::mutex liveMutex;
std::unordered_set<const void *> liveObjects;

template <typename T> cudnnStatus_t create(T **out, const char *call) {
  if (!out)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "null output pointer");
  *out = new T();
  std::lock_guard<std::mutex> lock(liveMutex);
  liveObjects.insert(*out);
  return CUDNN_STATUS_SUCCESS;
}

template <typename T> cudnnStatus_t destroy(T *object, const char *call) {
  if (!object)
    return CUDNN_STATUS_SUCCESS; // documented: no effect
  {
    std::lock_guard<std::mutex> lock(liveMutex);
    if (!liveObjects.erase(object))
      return fail(CUDNN_STATUS_BAD_PARAM, call, "not a live object (destroyed twice?)");
  }
  delete object;
  return CUDNN_STATUS_SUCCESS;
}

bool live(const void *object) {
  std::lock_guard<std::mutex> lock(liveMutex);
  return object && liveObjects.count(object);
}

/// BAD_PARAM unless `d` is a live descriptor whose Set call succeeded.
template <typename T> cudnnStatus_t usable(const T *d, const char *call, const char *name) {
  if (!live(d))
    return fail(CUDNN_STATUS_BAD_PARAM, call, std::string(name) + " is not a live descriptor");
  if (!d->set)
    return fail(CUDNN_STATUS_BAD_PARAM, call, std::string(name) + " was never set");
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t devicePointer(const void *p, const char *call, const char *name) {
  if (!p || !emu::isDeviceAddress(p))
    return fail(CUDNN_STATUS_BAD_PARAM, call,
                std::string(name) + (p ? " is not device memory" : " is null"));
  return CUDNN_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// Strided views and element access
// ---------------------------------------------------------------------------------------------

size_t elementBytes(cudnnDataType_t t) {
  switch (t) {
  case CUDNN_DATA_FLOAT: return 4;
  case CUDNN_DATA_DOUBLE: return 8;
  case CUDNN_DATA_HALF:
  case CUDNN_DATA_BFLOAT16: return 2;
  default: return 0; // not emulated
  }
}

const char *typeName(cudnnDataType_t t) {
  switch (t) {
  case CUDNN_DATA_FLOAT: return "f32";
  case CUDNN_DATA_DOUBLE: return "f64";
  case CUDNN_DATA_HALF: return "f16";
  case CUDNN_DATA_BFLOAT16: return "bf16";
  default: return "unemulated-type";
  }
}

/// A tensor or filter as dims and strides in elements; 4-D ones are in cuDNN's n, c, h, w order.
struct View {
  cudnnDataType_t type{};
  int rank = 0;
  int64_t dims[CUDNN_DIM_MAX]{}, strides[CUDNN_DIM_MAX]{};

  int64_t elements() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i)
      n *= dims[i];
    return n;
  }
  /// Bytes from the first element to the end of the last (strides are non-negative here).
  size_t extentBytes() const {
    int64_t last = 0;
    for (int i = 0; i < rank; ++i)
      last += (dims[i] - 1) * strides[i];
    return size_t(last + 1) * elementBytes(type);
  }
  bool negativeStride() const {
    return std::any_of(strides, strides + rank, [](int64_t s) { return s < 0; });
  }
  /// Whether two elements share an address, which no output may (cuDNN's tensor rules).
  bool overlaps() const {
    std::vector<int> order(rank);
    for (int i = 0; i < rank; ++i)
      order[i] = i;
    std::sort(order.begin(), order.end(), [&](int a, int b) { return strides[a] < strides[b]; });
    int64_t span = 1;
    for (int i : order) {
      if (dims[i] == 1)
        continue;
      if (strides[i] < span)
        return true;
      span = strides[i] * dims[i];
    }
    return false;
  }
  /// Channels-last: C has the smallest stride, as in NHWC (meaningless when C is 1).
  bool channelsLast() const { return dims[1] > 1 && strides[1] < strides[3]; }
  std::string str() const {
    std::string s = std::string(typeName(type)) + "[";
    for (int i = 0; i < rank; ++i)
      s.append(i ? "," : "").append(std::to_string(dims[i]));
    return s + "]";
  }
};

View view(const cudnnTensorStruct &t) {
  View v;
  v.type = t.type, v.rank = t.rank;
  std::copy(t.dims, t.dims + t.rank, v.dims);
  std::copy(t.strides, t.strides + t.rank, v.strides);
  return v;
}

/// A filter as a [k, c, h, w] tensor: NCHW is KCRS, NHWC is KRSC.
View view(const cudnnFilterStruct &f) {
  View v;
  v.type = f.type, v.rank = 4;
  int64_t d[4] = {f.k, f.c, f.h, f.w};
  std::copy(d, d + 4, v.dims);
  int64_t nchw[4] = {int64_t(f.c) * f.h * f.w, int64_t(f.h) * f.w, f.w, 1};
  int64_t nhwc[4] = {int64_t(f.h) * f.w * f.c, 1, int64_t(f.w) * f.c, f.c};
  const int64_t *strides = f.format == CUDNN_TENSOR_NHWC ? nhwc : nchw;
  std::copy(strides, strides + 4, v.strides);
  return v;
}

template <typename Acc, typename E> Acc load(const E &e) {
  if constexpr (std::is_same_v<E, __half>)
    return Acc(__half2float(e));
  else if constexpr (std::is_same_v<E, __nv_bfloat16>)
    return Acc(__bfloat162float(e));
  else
    return Acc(e);
}

template <typename E, typename Acc> E store(Acc v) {
  if constexpr (std::is_same_v<E, __half>)
    return __float2half_rn(float(v));
  else if constexpr (std::is_same_v<E, __nv_bfloat16>)
    return __float2bfloat16_rn(float(v));
  else
    return E(v);
}

/// Calls f(E{}) with E the element type of `t` (one of the four elementBytes() knows).
template <typename F> void dispatch(cudnnDataType_t t, F &&f) {
  switch (t) {
  case CUDNN_DATA_DOUBLE: f(double{}); break;
  case CUDNN_DATA_HALF: f(__half{}); break;
  case CUDNN_DATA_BFLOAT16: f(__nv_bfloat16{}); break;
  default: f(float{}); break;
  }
}

constexpr int kNhwc[4] = {0, 2, 3, 1}; // dim order n, h, w, c of a 4-D view
constexpr int kIdentity[CUDNN_DIM_MAX] = {0, 1, 2, 3, 4, 5, 6, 7};

/// Calls f(offset) for every element of `v`, walking dims in `order` (outermost first).
template <typename F> void forEach(const View &v, const int *order, F &&f) {
  if (v.elements() == 0)
    return;
  int64_t index[CUDNN_DIM_MAX] = {};
  int last = order[v.rank - 1];
  int64_t inner = v.dims[last], innerStride = v.strides[last], offset = 0;
  for (;;) {
    for (int64_t i = 0; i < inner; ++i)
      f(offset + i * innerStride);
    int d = v.rank - 2;
    for (; d >= 0; --d) {
      int a = order[d];
      offset += v.strides[a];
      if (++index[a] < v.dims[a])
        break;
      offset -= index[a] * v.strides[a];
      index[a] = 0;
    }
    if (d < 0)
      return;
  }
}

/// The elements of `v` at `base` (host memory), dense in `order`, in the compute type.
template <typename Acc> std::vector<Acc> gather(const View &v, const void *base, const int *order) {
  std::vector<Acc> out(size_t(v.elements()));
  dispatch(v.type, [&](auto tag) {
    using E = decltype(tag);
    const E *p = static_cast<const E *>(base);
    size_t k = 0;
    forEach(v, order, [&](int64_t off) { out[k++] = load<Acc>(p[off]); });
  });
  return out;
}

/// v = alpha * result + beta * v, `result` dense in `order`; v is not read when beta is 0.
template <typename Acc>
void scatter(const View &v, void *base, const int *order, const std::vector<Acc> &result, Acc alpha,
             Acc beta) {
  dispatch(v.type, [&](auto tag) {
    using E = decltype(tag);
    E *p = static_cast<E *>(base);
    size_t k = 0;
    forEach(v, order, [&](int64_t off) {
      Acc r = alpha * result[k++];
      if (beta != Acc(0))
        r += beta * load<Acc>(p[off]);
      p[off] = store<E>(r);
    });
  });
}

/// Runs body(begin, end, chunk) over [0, count) in a fixed number of chunks, so sums made per
/// chunk and added in chunk order are the same on any machine.
void parallelChunks(int64_t count, const std::function<void(int64_t, int64_t, int)> &body) {
  int chunks = int(std::min<int64_t>(count, 16));
  int threads = std::max(1, std::min<int>(chunks, int(std::thread::hardware_concurrency())));
  auto run = [&](int t) {
    for (int c = t; c < chunks; c += threads)
      body(count * c / chunks, count * (c + 1) / chunks, c);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t)
    pool.emplace_back(run, t);
  run(0);
  for (auto &t : pool)
    t.join();
}

/// alpha or beta: a host double for f64 data, a host float otherwise.
double scalar(const void *p, cudnnDataType_t t) {
  return t == CUDNN_DATA_DOUBLE ? *static_cast<const double *>(p)
                                : double(*static_cast<const float *>(p));
}

cudnnStatus_t scalars(const void *alpha, const void *beta, const char *call) {
  if (!alpha || !beta)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "null alpha or beta");
  if (emu::isDeviceAddress(alpha) || emu::isDeviceAddress(beta))
    return fail(CUDNN_STATUS_BAD_PARAM, call, "alpha and beta are host pointers");
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t queue(cudnnHandle_t handle, const char *call, std::string what,
                    std::function<void()> work) {
  CUresult r = emu::enqueue(handle->stream, std::move(what), std::move(work));
  if (r != CUDA_SUCCESS)
    return fail(CUDNN_STATUS_EXECUTION_FAILED, call,
                "the stream refused the work (CUresult " + std::to_string(int(r)) + ")");
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t usableHandle(cudnnHandle_t handle, const char *call) {
  return live(handle) ? CUDNN_STATUS_SUCCESS
                      : fail(CUDNN_STATUS_BAD_PARAM, call, "not a live cuDNN handle");
}

// ---------------------------------------------------------------------------------------------
// Convolutions
// ---------------------------------------------------------------------------------------------

enum class Pass { Forward, BackwardData, BackwardFilter };

/// One checked 2-D convolution: x [n, c, h, w], w [k, c/groups, r, s], y [n, k, oh, ow].
struct Conv {
  View x, w, y;
  cudnnConvolutionStruct desc;
  int64_t n = 0, c = 0, h = 0, wd = 0, k = 0, r = 0, s = 0, oh = 0, ow = 0, groups = 1;
  bool nhwc = false; // channels-last activations or an NHWC (KRSC) filter
  cudnnDataType_t type() const { return x.type; }
  int64_t cg() const { return c / groups; } // input channels of one group (the filter's c)
  int64_t kg() const { return k / groups; } // output channels of one group
  double flops() const { return 2.0 * n * k * oh * ow * cg() * r * s; }
  std::string str() const {
    return std::string("x") + x.str() + " w" + w.str() + " y" + y.str() + " pad " +
           std::to_string(desc.pad[0]) + "," + std::to_string(desc.pad[1]) + " stride " +
           std::to_string(desc.stride[0]) + "," + std::to_string(desc.stride[1]) + " dilation " +
           std::to_string(desc.dilation[0]) + "," + std::to_string(desc.dilation[1]) +
           (groups == 1 ? "" : " groups " + std::to_string(groups));
  }
};

/// The documented checks shared by the three calls and their getters.
cudnnStatus_t checkConv(const char *call, const cudnnTensorStruct *x, const cudnnFilterStruct *w,
                        const cudnnConvolutionStruct *desc, const cudnnTensorStruct *y, Conv &out) {
  EMU_TRY(usable(x, call, "x descriptor"));
  EMU_TRY(usable(w, call, "filter descriptor"));
  EMU_TRY(usable(desc, call, "convolution descriptor"));
  EMU_TRY(usable(y, call, "y descriptor"));
  if (x->rank != y->rank)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "x and y have different ranks");
  if (x->rank != 4)
    return fail(CUDNN_STATUS_BAD_PARAM, call,
                "a 2-D convolution descriptor takes rank-4 tensors, x has rank " +
                    std::to_string(x->rank));
  out.x = view(*x), out.w = view(*w), out.y = view(*y), out.desc = *desc;
  out.nhwc = w->format == CUDNN_TENSOR_NHWC || out.x.channelsLast() || out.y.channelsLast();
  if (x->type != w->type || x->type != y->type)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "x, w and y have different data types: " + out.str());
  out.n = x->dims[0], out.c = x->dims[1], out.h = x->dims[2], out.wd = x->dims[3];
  out.k = w->k, out.r = w->h, out.s = w->w, out.groups = desc->groups;
  // Grouped, w's c is one group's: x has groupCount times as many.
  if (int64_t(w->c) * out.groups != out.c)
    return fail(CUDNN_STATUS_BAD_PARAM, call,
                "x and w disagree on input channels" +
                    (out.groups == 1 ? std::string()
                                     : " (w's c times the group count is not x's c)") +
                    ": " + out.str());
  if (out.k % out.groups)
    return fail(CUDNN_STATUS_BAD_PARAM, call,
                "the group count does not divide w's k output channels: " + out.str());
  if (y->dims[0] != out.n || y->dims[1] != out.k)
    return fail(CUDNN_STATUS_BAD_PARAM, call,
                "y's batch or channels do not match x and w: " + out.str());
  int64_t spanH = int64_t(desc->dilation[0]) * (out.r - 1) + 1;
  int64_t spanW = int64_t(desc->dilation[1]) * (out.s - 1) + 1;
  if (spanH > out.h + 2 * desc->pad[0] || spanW > out.wd + 2 * desc->pad[1])
    return fail(CUDNN_STATUS_BAD_PARAM, call,
                "the dilated filter is larger than the padded input: " + out.str());
  if (out.x.negativeStride() || out.y.negativeStride())
    return fail(CUDNN_STATUS_NOT_SUPPORTED, call, "negative strides");
  // cudnnGetConvolutionNdForwardOutputDim's formula; a mismatch is NOT_SUPPORTED (documented).
  out.oh = (out.h + 2 * desc->pad[0] - spanH) / desc->stride[0] + 1;
  out.ow = (out.wd + 2 * desc->pad[1] - spanW) / desc->stride[1] + 1;
  if (y->dims[2] != out.oh || y->dims[3] != out.ow)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, call,
                "y's spatial size should be " + std::to_string(out.oh) + "x" +
                    std::to_string(out.ow) + ": " + out.str());
  cudnnDataType_t t = x->type, ct = desc->compute;
  bool config = (t == CUDNN_DATA_FLOAT && ct == CUDNN_DATA_FLOAT) ||
                (t == CUDNN_DATA_DOUBLE && ct == CUDNN_DATA_DOUBLE) ||
                (t == CUDNN_DATA_HALF && (ct == CUDNN_DATA_FLOAT || ct == CUDNN_DATA_HALF)) ||
                (t == CUDNN_DATA_BFLOAT16 && ct == CUDNN_DATA_FLOAT);
  if (!config)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, call,
                std::string("no configuration for ") + typeName(t) + " data with " + typeName(ct) +
                    " compute");
  for (const View *v : {&out.x, &out.w, &out.y})
    if (v->elements() > std::numeric_limits<int32_t>::max())
      return fail(CUDNN_STATUS_NOT_SUPPORTED, call, "a tensor over 2^31 elements");
  return CUDNN_STATUS_SUCCESS;
}

/// "" or why no algorithm runs this convolution (the header's support limits).
std::string supportLimit(const Conv &g, Pass pass) {
  cudnnDataType_t t = g.type();
  if (!g.nhwc)
    return "";
  if ((t == CUDNN_DATA_HALF || t == CUDNN_DATA_BFLOAT16) && (g.cg() % 8 || g.kg() % 8))
    return std::string("NHWC ") + typeName(t) +
           " needs input and output channels (per group) that are multiples of 8, not C=" +
           std::to_string(g.cg()) + " K=" + std::to_string(g.kg()) +
           (g.groups == 1 ? "" : " in each of " + std::to_string(g.groups) + " groups");
  if (t == CUDNN_DATA_DOUBLE)
    return "no NHWC algorithm for f64";
  if (pass == Pass::BackwardFilter && g.desc.compute == CUDNN_DATA_HALF)
    return "no NHWC backward-filter algorithm for TRUE_HALF_CONFIG";
  return "";
}

/// One algorithm as the emulation offers it: workspace bytes and a relative speed for the
/// getters' time estimates (the arithmetic is the same for all).
struct Algo {
  int id;
  bool supported, deterministic, tensorOps;
  double speed;
  size_t workspace;
};

size_t align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

std::vector<Algo> algorithms(Pass pass, const Conv &g) {
  size_t filterFloats = align256(size_t(g.k * g.cg() * g.r * g.s) * 4);
  switch (pass) {
  case Pass::Forward:
    return {{CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, true, true, false, 1.0, 0},
            {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, true, true, true, 2.0,
             align256(size_t(g.cg() * g.r * g.s) * 4)},
            // An explicit im2col of one image's group: NCHW only.
            {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, !g.nhwc, true, false, 1.5,
             align256(size_t(g.cg() * g.r * g.s * g.oh * g.ow) * elementBytes(g.type()))},
            {CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, false, true, false, 0, 0},
            {CUDNN_CONVOLUTION_FWD_ALGO_FFT, false, true, false, 0, 0},
            {CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING, false, true, false, 0, 0},
            {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, false, true, false, 0, 0},
            {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, false, true, false, 0, 0}};
  case Pass::BackwardData:
    return {{CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, true, false, false, 1.2, 0},
            {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, true, true, true, 1.0, 0},
            {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, false, true, false, 0, 0},
            {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING, false, true, false, 0, 0},
            {CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD, false, true, false, 0, 0},
            {CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED, false, true, false, 0, 0}};
  case Pass::BackwardFilter:
    return {{CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, true, false, false, 1.2, 0},
            {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, true, true, true, 1.0, filterFloats},
            {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, false, true, false, 0, 0},
            {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, true, false, false, 1.5, 2 * filterFloats},
            {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD, false, true, false, 0, 0},
            {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED, false, true, false, 0, 0},
            {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING, false, true, false, 0, 0}};
  }
  return {};
}

/// The _v7 getters: every algorithm's status, the supported ones first by estimated time.
template <typename Perf>
cudnnStatus_t heuristic(const char *call, cudnnHandle_t handle, Pass pass,
                        const cudnnTensorStruct *x, const cudnnFilterStruct *w,
                        const cudnnConvolutionStruct *desc, const cudnnTensorStruct *y,
                        int requested, int *returned, Perf *perf) {
  EMU_TRY(usableHandle(handle, call));
  if (!returned || !perf || requested < 1)
    return fail(CUDNN_STATUS_BAD_PARAM, call,
                "null returnedAlgoCount or perfResults, or requestedAlgoCount < 1");
  Conv g;
  cudnnStatus_t shape = checkConv(call, x, w, desc, y, g);
  if (shape != CUDNN_STATUS_SUCCESS && shape != CUDNN_STATUS_NOT_SUPPORTED)
    return shape;
  // What the calls would reject as NOT_SUPPORTED is every entry's status here.
  std::string limit = shape == CUDNN_STATUS_SUCCESS ? supportLimit(g, pass) : lastError;
  if (shape == CUDNN_STATUS_SUCCESS && !limit.empty())
    lastError = std::string(call) + ": " + limit;
  std::vector<Perf> all;
  for (const Algo &a : algorithms(pass, g)) {
    Perf p{};
    p.algo = decltype(p.algo)(a.id);
    bool ok = a.supported && limit.empty();
    p.status = ok ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_NOT_SUPPORTED;
    p.time = ok ? float(g.flops() / (a.speed * 1e10) * 1e3) : -1.0f; // ms at 10 GFLOP/s
    p.memory = ok ? a.workspace : 0;
    p.determinism = a.deterministic ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC;
    cudnnMathType_t m = desc->math;
    bool tensorMath = m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    p.mathType = tensorMath && !a.tensorOps ? CUDNN_DEFAULT_MATH : m;
    if (g.type() == CUDNN_DATA_DOUBLE && tensorMath)
      p.mathType = CUDNN_DEFAULT_MATH;
    all.push_back(p);
  }
  std::stable_sort(all.begin(), all.end(), [](const Perf &a, const Perf &b) {
    bool aok = a.status == CUDNN_STATUS_SUCCESS, bok = b.status == CUDNN_STATUS_SUCCESS;
    return aok != bok ? aok : aok && a.time < b.time;
  });
  *returned = std::min<int>(requested, int(all.size()));
  std::copy(all.begin(), all.begin() + *returned, perf);
  return CUDNN_STATUS_SUCCESS;
}

/// The checks every convolution call makes before queueing: descriptors, the algorithm and its
/// workspace (`needed`: the bytes it uses), the pointers in the call's order and the scalars.
cudnnStatus_t checkConvCall(const char *call, cudnnHandle_t handle, Pass pass, Conv &g,
                            size_t &needed, const cudnnTensorStruct *x, const cudnnFilterStruct *w,
                            const cudnnConvolutionStruct *desc, const cudnnTensorStruct *y,
                            int algo, const void *workspace, size_t workspaceBytes,
                            const void *alpha, const void *beta,
                            std::initializer_list<std::pair<const void *, const char *>> ptrs) {
  EMU_TRY(usableHandle(handle, call));
  EMU_TRY(checkConv(call, x, w, desc, y, g));
  const View &written = pass == Pass::Forward ? g.y : pass == Pass::BackwardData ? g.x : g.w;
  if (written.overlaps())
    return fail(CUDNN_STATUS_BAD_PARAM, call, "the output tensor's elements overlap");
  EMU_TRY(scalars(alpha, beta, call));
  for (auto [p, name] : ptrs)
    EMU_TRY(devicePointer(p, call, name));
  std::string limit = supportLimit(g, pass);
  if (!limit.empty())
    return fail(CUDNN_STATUS_NOT_SUPPORTED, call, limit + ": " + g.str());
  if (g.nhwc && (g.type() == CUDNN_DATA_HALF || g.type() == CUDNN_DATA_BFLOAT16))
    for (auto [p, name] : ptrs)
      if (uintptr_t(p) % 16)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, call,
                    std::string("NHWC half data needs 16-byte aligned pointers; ") + name +
                        " is not");
  std::vector<Algo> all = algorithms(pass, g);
  auto a = std::find_if(all.begin(), all.end(), [&](const Algo &a) { return a.id == algo; });
  if (a == all.end())
    return fail(CUDNN_STATUS_BAD_PARAM, call, "invalid algorithm " + std::to_string(algo));
  if (!a->supported)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, call,
                "algorithm " + std::to_string(algo) + " does not support " + g.str());
  if (workspaceBytes < a->workspace || (a->workspace && !workspace))
    return fail(CUDNN_STATUS_BAD_PARAM, call,
                "algorithm " + std::to_string(algo) + " needs " + std::to_string(a->workspace) +
                    " bytes of workspace, given " + std::to_string(workspace ? workspaceBytes : 0));
  if (a->workspace)
    EMU_TRY(devicePointer(workspace, call, "workSpace"));
  needed = a->workspace;
  return CUDNN_STATUS_SUCCESS;
}

/// The filter as [r][s][c][k] (k innermost, for the kernels' inner loops; c one group's) from
/// its dense [k][r][s][c] gather; CUDNN_CONVOLUTION flips it in r and s.
template <typename Acc> std::vector<Acc> filterRsck(const Conv &g, const std::vector<Acc> &krsc) {
  bool flip = g.desc.mode == CUDNN_CONVOLUTION;
  const int64_t cg = g.cg();
  std::vector<Acc> out(krsc.size());
  for (int64_t k = 0; k < g.k; ++k)
    for (int64_t r = 0; r < g.r; ++r)
      for (int64_t s = 0; s < g.s; ++s)
        for (int64_t c = 0; c < cg; ++c) {
          int64_t rr = flip ? g.r - 1 - r : r, ss = flip ? g.s - 1 - s : s;
          out[((rr * g.s + ss) * cg + c) * g.k + k] = krsc[((k * g.r + r) * g.s + s) * cg + c];
        }
  return out;
}

/// Calls f(r, s, ih, iw) for each filter tap of output (oh, ow) that lands inside the input.
template <typename F> void taps(const Conv &g, int64_t oh, int64_t ow, F &&f) {
  for (int64_t r = 0; r < g.r; ++r) {
    int64_t ih = oh * g.desc.stride[0] - g.desc.pad[0] + r * g.desc.dilation[0];
    if (ih < 0 || ih >= g.h)
      continue;
    for (int64_t s = 0; s < g.s; ++s) {
      int64_t iw = ow * g.desc.stride[1] - g.desc.pad[1] + s * g.desc.dilation[1];
      if (iw >= 0 && iw < g.wd)
        f(r, s, ih, iw);
    }
  }
}

/// The queued work of one convolution pass: `a` and `b` are the inputs in the call's order
/// (x, w / w, dy / x, dy), `out` the result.
template <typename Acc>
void convolve(Pass pass, const Conv &g, const void *a, const void *b, void *out, Acc alpha,
              Acc beta, const std::string &what) {
  const View &av = pass == Pass::Forward ? g.x : pass == Pass::BackwardData ? g.w : g.x;
  const View &bv = pass == Pass::Forward ? g.w : g.y;
  const View &ov = pass == Pass::Forward ? g.y : pass == Pass::BackwardData ? g.x : g.w;
  std::vector<Acc> A = gather<Acc>(av, emu::hostView(a, av.extentBytes(), what + " input"), kNhwc);
  std::vector<Acc> B = gather<Acc>(bv, emu::hostView(b, bv.extentBytes(), what + " input"), kNhwc);
  void *o = emu::hostView(out, ov.extentBytes(), what + " output");
  // Channel c of x meets only the filters of its group: k in [kBegin(c), kBegin(c) + KG), at
  // c's index within the group, c % CG (the filter's c). One group: every k, at c itself.
  const int64_t C = g.c, K = g.k, CG = g.cg(), KG = g.kg();
  auto kBegin = [&](int64_t c) { return c / CG * KG; };
  std::vector<Acc> result(size_t(ov.elements()), Acc(0));
  if (pass == Pass::Forward) {
    std::vector<Acc> w = filterRsck(g, B);
    parallelChunks(g.n, [&](int64_t n0, int64_t n1, int) {
      std::vector<Acc> acc(K);
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t oh = 0; oh < g.oh; ++oh)
          for (int64_t ow = 0; ow < g.ow; ++ow) {
            std::fill(acc.begin(), acc.end(), Acc(0));
            taps(g, oh, ow, [&](int64_t r, int64_t s, int64_t ih, int64_t iw) {
              const Acc *xr = &A[((n * g.h + ih) * g.wd + iw) * C];
              const Acc *wr = &w[(r * g.s + s) * CG * K];
              for (int64_t c = 0; c < C; ++c) {
                const Acc *wc = wr + c % CG * K;
                for (int64_t k = kBegin(c), end = k + KG; k < end; ++k)
                  acc[k] += xr[c] * wc[k];
              }
            });
            std::copy(acc.begin(), acc.end(), &result[((n * g.oh + oh) * g.ow + ow) * K]);
          }
    });
  } else if (pass == Pass::BackwardData) {
    std::vector<Acc> w = filterRsck(g, A);
    parallelChunks(g.n, [&](int64_t n0, int64_t n1, int) {
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t oh = 0; oh < g.oh; ++oh)
          for (int64_t ow = 0; ow < g.ow; ++ow) {
            const Acc *dy = &B[((n * g.oh + oh) * g.ow + ow) * K];
            taps(g, oh, ow, [&](int64_t r, int64_t s, int64_t ih, int64_t iw) {
              Acc *dx = &result[((n * g.h + ih) * g.wd + iw) * C];
              const Acc *wr = &w[(r * g.s + s) * CG * K];
              for (int64_t c = 0; c < C; ++c) {
                const Acc *wc = wr + c % CG * K;
                Acc sum = 0;
                for (int64_t k = kBegin(c), end = k + KG; k < end; ++k)
                  sum += dy[k] * wc[k];
                dx[c] += sum;
              }
            });
          }
    });
  } else {
    // Per-chunk partial gradients as [r][s][c][k], added in chunk order.
    int chunks = int(std::min<int64_t>(g.n, 16));
    std::vector<std::vector<Acc>> parts(chunks, std::vector<Acc>(result.size(), Acc(0)));
    parallelChunks(g.n, [&](int64_t n0, int64_t n1, int chunk) {
      std::vector<Acc> &dw = parts[chunk];
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t oh = 0; oh < g.oh; ++oh)
          for (int64_t ow = 0; ow < g.ow; ++ow) {
            const Acc *dy = &B[((n * g.oh + oh) * g.ow + ow) * K];
            taps(g, oh, ow, [&](int64_t r, int64_t s, int64_t ih, int64_t iw) {
              const Acc *xr = &A[((n * g.h + ih) * g.wd + iw) * C];
              Acc *dwr = &dw[(r * g.s + s) * CG * K];
              for (int64_t c = 0; c < C; ++c) {
                Acc *dwc = dwr + c % CG * K;
                for (int64_t k = kBegin(c), end = k + KG; k < end; ++k)
                  dwc[k] += xr[c] * dy[k];
              }
            });
          }
    });
    bool flip = g.desc.mode == CUDNN_CONVOLUTION;
    for (int64_t k = 0; k < K; ++k)
      for (int64_t r = 0; r < g.r; ++r)
        for (int64_t s = 0; s < g.s; ++s)
          for (int64_t c = 0; c < CG; ++c) {
            int64_t rr = flip ? g.r - 1 - r : r, ss = flip ? g.s - 1 - s : s;
            Acc sum = 0;
            for (const auto &part : parts)
              sum += part[((rr * g.s + ss) * CG + c) * K + k];
            result[((k * g.r + r) * g.s + s) * CG + c] = sum;
          }
  }
  scatter(ov, o, kNhwc, result, alpha, beta);
}

std::string convWhat(const char *call, const Conv &g, int algo) {
  return std::string(call) + " " + g.str() + " algo " + std::to_string(algo);
}

cudnnStatus_t queueConv(const char *call, cudnnHandle_t handle, Pass pass, const Conv &g, int algo,
                        const void *a, const void *b, void *out, const void *alpha,
                        const void *beta, const void *workspace, size_t needed) {
  std::string what = convWhat(call, g, algo);
  double al = scalar(alpha, g.type()), be = scalar(beta, g.type());
  return queue(handle, call, what, [=] {
    if (needed) // the algorithm's scratch: freeing it before the work runs is a fault
      emu::hostView(workspace, needed, what + " workspace");
    if (g.type() == CUDNN_DATA_DOUBLE)
      convolve<double>(pass, g, a, b, out, al, be, what);
    else
      convolve<float>(pass, g, a, b, out, float(al), float(be), what);
  });
}

// ---------------------------------------------------------------------------------------------
// Pooling
// ---------------------------------------------------------------------------------------------

struct Pool {
  View x, y;
  cudnnPoolingStruct desc;
  int64_t n, c, h, w, oh, ow;
  bool isMax() const {
    return desc.mode == CUDNN_POOLING_MAX || desc.mode == CUDNN_POOLING_MAX_DETERMINISTIC;
  }
  std::string str() const {
    return std::string("x") + x.str() + " y" + y.str() + " window " +
           std::to_string(desc.window[0]) + "x" + std::to_string(desc.window[1]) + " mode " +
           std::to_string(int(desc.mode));
  }
};

cudnnStatus_t checkPool(const char *call, const cudnnPoolingStruct *desc,
                        const cudnnTensorStruct *x, const cudnnTensorStruct *y, Pool &out) {
  EMU_TRY(usable(desc, call, "pooling descriptor"));
  EMU_TRY(usable(x, call, "x descriptor"));
  EMU_TRY(usable(y, call, "y descriptor"));
  if (x->rank != 4 || y->rank != 4)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "a 2-D pooling descriptor takes rank-4 tensors");
  out.x = view(*x), out.y = view(*y), out.desc = *desc;
  if (x->type != y->type)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "x and y have different data types: " + out.str());
  if (x->dims[0] != y->dims[0] || x->dims[1] != y->dims[1])
    return fail(CUDNN_STATUS_BAD_PARAM, call, "x and y differ in n or c: " + out.str());
  out.n = x->dims[0], out.c = x->dims[1], out.h = x->dims[2], out.w = x->dims[3];
  if (out.h + 2 * desc->pad[0] < desc->window[0] || out.w + 2 * desc->pad[1] < desc->window[1])
    return fail(CUDNN_STATUS_BAD_PARAM, call, "the window is larger than the padded input");
  // cudnnGetPooling2dForwardOutputDim's formula; the emulation insists y has it.
  out.oh = 1 + (out.h + 2 * desc->pad[0] - desc->window[0]) / desc->stride[0];
  out.ow = 1 + (out.w + 2 * desc->pad[1] - desc->window[1]) / desc->stride[1];
  if (y->dims[2] != out.oh || y->dims[3] != out.ow)
    return fail(CUDNN_STATUS_BAD_PARAM, call,
                "y's spatial size should be " + std::to_string(out.oh) + "x" +
                    std::to_string(out.ow) + ": " + out.str());
  if (!elementBytes(x->type) || out.x.negativeStride() || out.y.negativeStride())
    return fail(CUDNN_STATUS_NOT_SUPPORTED, call, "data type or negative strides: " + out.str());
  if (desc->pad[0] >= desc->window[0] || desc->pad[1] >= desc->window[1])
    return fail(CUDNN_STATUS_NOT_SUPPORTED, call,
                "padding not smaller than the window (not emulated): " + out.str());
  return CUDNN_STATUS_SUCCESS;
}

/// Calls f(ih, iw) for each input position of window (oh, ow); returns the window's size
/// counting padding (the include-padding divisor).
template <typename F> int64_t window(const Pool &p, int64_t oh, int64_t ow, F &&f) {
  int64_t h0 = oh * p.desc.stride[0] - p.desc.pad[0], w0 = ow * p.desc.stride[1] - p.desc.pad[1];
  for (int64_t ih = std::max<int64_t>(h0, 0); ih < std::min(h0 + p.desc.window[0], p.h); ++ih)
    for (int64_t iw = std::max<int64_t>(w0, 0); iw < std::min(w0 + p.desc.window[1], p.w); ++iw)
      f(ih, iw);
  return int64_t(p.desc.window[0]) * p.desc.window[1];
}

/// Forward (y from x) or backward (dx from y, dy, x); NHWC dense internally.
template <typename Acc>
void pool(const Pool &p, bool backward, const void *xp, const void *yp, const void *dyp, void *out,
          Acc alpha, Acc beta, const std::string &what) {
  const int64_t C = p.c;
  bool max = p.isMax(), propagate = p.desc.nan == CUDNN_PROPAGATE_NAN;
  bool exclude = p.desc.mode == CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  std::vector<Acc> x, y, dy;
  if (!backward || max)
    x = gather<Acc>(p.x, emu::hostView(xp, p.x.extentBytes(), what + " x"), kNhwc);
  if (backward && max)
    y = gather<Acc>(p.y, emu::hostView(yp, p.y.extentBytes(), what + " y"), kNhwc);
  if (backward)
    dy = gather<Acc>(p.y, emu::hostView(dyp, p.y.extentBytes(), what + " dy"), kNhwc);
  const View &ov = backward ? p.x : p.y;
  void *o = emu::hostView(out, ov.extentBytes(), what + " output");
  std::vector<Acc> result(size_t(ov.elements()), Acc(0));
  parallelChunks(p.n, [&](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t oh = 0; oh < p.oh; ++oh)
        for (int64_t ow = 0; ow < p.ow; ++ow)
          for (int64_t c = 0; c < C; ++c) {
            int64_t yi = ((n * p.oh + oh) * p.ow + ow) * C + c;
            auto xi = [&](int64_t ih, int64_t iw) { return ((n * p.h + ih) * p.w + iw) * C + c; };
            if (max && !backward) {
              Acc m = -std::numeric_limits<Acc>::infinity();
              bool nan = false;
              window(p, oh, ow, [&](int64_t ih, int64_t iw) {
                Acc v = x[xi(ih, iw)];
                nan |= std::isnan(v);
                m = v > m ? v : m;
              });
              result[yi] = nan && propagate ? std::numeric_limits<Acc>::quiet_NaN() : m;
            } else if (max) {
              // The gradient goes to the first position, in row-major window order, whose
              // input equals y: cuDNN finds the maximum by comparing with the y it is given.
              Acc target = y[yi];
              bool done = false;
              window(p, oh, ow, [&](int64_t ih, int64_t iw) {
                Acc v = x[xi(ih, iw)];
                if (!done && (v == target || (std::isnan(v) && std::isnan(target))))
                  result[xi(ih, iw)] += dy[yi], done = true;
              });
            } else {
              Acc sum = 0;
              int64_t count = 0;
              int64_t size = window(p, oh, ow, [&](int64_t ih, int64_t iw) {
                if (!backward)
                  sum += x[xi(ih, iw)];
                ++count;
              });
              Acc divisor = Acc(exclude ? count : size);
              if (!backward)
                result[yi] = sum / divisor;
              else
                window(p, oh, ow,
                       [&](int64_t ih, int64_t iw) { result[xi(ih, iw)] += dy[yi] / divisor; });
            }
          }
  });
  scatter(ov, o, kNhwc, result, alpha, beta);
}

cudnnStatus_t queuePool(const char *call, cudnnHandle_t handle, const Pool &p, bool backward,
                        const void *x, const void *y, const void *dy, void *out, const void *alpha,
                        const void *beta) {
  std::string what = std::string(call) + " " + p.str();
  double al = scalar(alpha, p.x.type), be = scalar(beta, p.x.type);
  return queue(handle, call, what, [=] {
    if (p.x.type == CUDNN_DATA_DOUBLE)
      pool<double>(p, backward, x, y, dy, out, al, be, what);
    else
      pool<float>(p, backward, x, y, dy, out, float(al), float(be), what);
  });
}

} // namespace

// ---------------------------------------------------------------------------------------------
// The C API
// ---------------------------------------------------------------------------------------------

extern "C" {

size_t cudnnGetVersion() { return CUDNN_VERSION; }

const char *cudnnGetErrorString(cudnnStatus_t status) {
  switch (status) {
#define EMU_NAME(s)                                                                                \
  case s: return #s;
    EMU_NAME(CUDNN_STATUS_SUCCESS)
    EMU_NAME(CUDNN_STATUS_NOT_INITIALIZED)
    EMU_NAME(CUDNN_STATUS_BAD_PARAM)
    EMU_NAME(CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
    EMU_NAME(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER)
    EMU_NAME(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH)
    EMU_NAME(CUDNN_STATUS_NOT_SUPPORTED)
    EMU_NAME(CUDNN_STATUS_INTERNAL_ERROR)
    EMU_NAME(CUDNN_STATUS_EXECUTION_FAILED)
#undef EMU_NAME
  default: return "CUDNN_UNKNOWN_STATUS";
  }
}

void cudnnGetLastErrorString(char *message, size_t maxSize) {
  if (!message || maxSize == 0)
    return;
  size_t n = std::min(maxSize - 1, lastError.size());
  std::memcpy(message, lastError.data(), n);
  message[n] = '\0';
  lastError.clear();
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *handle) {
  int device = emu::currentDevice();
  if (handle && device < 0)
    return fail(CUDNN_STATUS_NOT_INITIALIZED, "cudnnCreate", "no current CUDA context");
  EMU_TRY(create(handle, "cudnnCreate"));
  (*handle)->device = device;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) { return destroy(handle, "cudnnDestroy"); }

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
  EMU_TRY(usableHandle(handle, "cudnnSetStream"));
  if (stream) {
    int device = emu::streamDevice(stream);
    if (device < 0)
      return fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetStream", "not a stream");
    if (device != handle->device)
      return fail(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH, "cudnnSetStream",
                  "the stream is on device " + std::to_string(device) + ", the handle on " +
                      std::to_string(handle->device));
  }
  handle->stream = stream;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d) {
  return create(d, "cudnnCreateTensorDescriptor");
}
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) {
  return destroy(d, "cudnnDestroyTensorDescriptor");
}

cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t d, cudnnDataType_t type, int rank,
                                         const int dims[], const int strides[]) {
  const char *call = "cudnnSetTensorNdDescriptor";
  if (!live(d) || !dims || !strides)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "null or dead descriptor, or null arrays");
  if (type < CUDNN_DATA_FLOAT || type > CUDNN_DATA_UINT32)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "invalid data type");
  if (rank < 3 || rank > CUDNN_DIM_MAX)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, call,
                "rank " + std::to_string(rank) + " outside [3, CUDNN_DIM_MAX]");
  int64_t elements = 1;
  for (int i = 0; i < rank; ++i) {
    if (dims[i] <= 0)
      return fail(CUDNN_STATUS_BAD_PARAM, call,
                  "dimension " + std::to_string(i) + " is " + std::to_string(dims[i]));
    elements *= dims[i];
  }
  if (elements > std::numeric_limits<int32_t>::max())
    return fail(CUDNN_STATUS_NOT_SUPPORTED, call, "more than 2^31 elements");
  d->type = type, d->rank = rank, d->set = true;
  std::copy(dims, dims + rank, d->dims);
  std::copy(strides, strides + rank, d->strides);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *d) {
  return create(d, "cudnnCreateFilterDescriptor");
}
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) {
  return destroy(d, "cudnnDestroyFilterDescriptor");
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t type,
                                         cudnnTensorFormat_t format, int k, int c, int h, int w) {
  const char *call = "cudnnSetFilter4dDescriptor";
  if (!live(d))
    return fail(CUDNN_STATUS_BAD_PARAM, call, "null or dead descriptor");
  if (type < CUDNN_DATA_FLOAT || type > CUDNN_DATA_UINT32 || k <= 0 || c <= 0 || h <= 0 || w <= 0)
    return fail(CUDNN_STATUS_BAD_PARAM, call, "invalid data type or a dimension not positive");
  if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC)
    return fail(format == CUDNN_TENSOR_NCHW_VECT_C ? CUDNN_STATUS_NOT_SUPPORTED
                                                   : CUDNN_STATUS_BAD_PARAM,
                call, "format must be CUDNN_TENSOR_NCHW or CUDNN_TENSOR_NHWC (emulated)");
  *d = cudnnFilterStruct{true, type, format, k, c, h, w};
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d) {
  return create(d, "cudnnCreateConvolutionDescriptor");
}
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) {
  return destroy(d, "cudnnDestroyConvolutionDescriptor");
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int padH, int padW,
                                              int u, int v, int dilationH, int dilationW,
                                              cudnnConvolutionMode_t mode,
                                              cudnnDataType_t compute) {
  const char *call = "cudnnSetConvolution2dDescriptor";
  if (!live(d))
    return fail(CUDNN_STATUS_BAD_PARAM, call, "null or dead descriptor");
  if (padH < 0 || padW < 0 || u <= 0 || v <= 0 || dilationH <= 0 || dilationW <= 0 ||
      (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION))
    return fail(CUDNN_STATUS_BAD_PARAM, call,
                "negative padding, a stride or dilation not positive, or an invalid mode");
  d->pad[0] = padH, d->pad[1] = padW, d->stride[0] = u, d->stride[1] = v;
  d->dilation[0] = dilationH, d->dilation[1] = dilationW;
  d->mode = mode, d->compute = compute, d->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t math) {
  if (!live(d) || math < CUDNN_DEFAULT_MATH || math > CUDNN_FMA_MATH)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolutionMathType",
                "null or dead descriptor, or an invalid math type");
  d->math = math;
  return CUDNN_STATUS_SUCCESS;
}

// The Legacy API reference documents BAD_PARAM for an invalid descriptor; a count below 1 is
// one no convolution can have, rejected the same way.
cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int groupCount) {
  if (!live(d) || groupCount < 1)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolutionGroupCount",
                "null or dead descriptor, or a group count below 1: " +
                    std::to_string(groupCount));
  d->groups = groupCount;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int *groupCount) {
  if (!live(d) || !groupCount)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetConvolutionGroupCount",
                "null or dead descriptor, or a null groupCount");
  *groupCount = d->groups;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreatePoolingDescriptor(cudnnPoolingDescriptor_t *d) {
  return create(d, "cudnnCreatePoolingDescriptor");
}
cudnnStatus_t cudnnDestroyPoolingDescriptor(cudnnPoolingDescriptor_t d) {
  return destroy(d, "cudnnDestroyPoolingDescriptor");
}

cudnnStatus_t cudnnSetPooling2dDescriptor(cudnnPoolingDescriptor_t d, cudnnPoolingMode_t mode,
                                          cudnnNanPropagation_t nan, int windowH, int windowW,
                                          int padH, int padW, int strideH, int strideW) {
  const char *call = "cudnnSetPooling2dDescriptor";
  if (!live(d))
    return fail(CUDNN_STATUS_BAD_PARAM, call, "null or dead descriptor");
  if (windowH <= 0 || windowW <= 0 || strideH <= 0 || strideW <= 0 || padH < 0 || padW < 0 ||
      mode < CUDNN_POOLING_MAX || mode > CUDNN_POOLING_MAX_DETERMINISTIC ||
      (nan != CUDNN_NOT_PROPAGATE_NAN && nan != CUDNN_PROPAGATE_NAN))
    return fail(CUDNN_STATUS_BAD_PARAM, call,
                "a window or stride not positive, negative padding, or an invalid enumerant");
  *d = cudnnPoolingStruct{true, mode, nan, {windowH, windowW}, {padH, padW}, {strideH, strideW}};
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t y, const int requested,
    int *returned, cudnnConvolutionFwdAlgoPerf_t *perf) {
  return heuristic("cudnnGetConvolutionForwardAlgorithm_v7", handle, Pass::Forward, x, w, conv, y,
                   requested, returned, perf);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t dx, const int requested,
    int *returned, cudnnConvolutionBwdDataAlgoPerf_t *perf) {
  return heuristic("cudnnGetConvolutionBackwardDataAlgorithm_v7", handle, Pass::BackwardData, dx, w,
                   conv, dy, requested, returned, perf);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnFilterDescriptor_t dw, const int requested,
    int *returned, cudnnConvolutionBwdFilterAlgoPerf_t *perf) {
  return heuristic("cudnnGetConvolutionBackwardFilterAlgorithm_v7", handle, Pass::BackwardFilter, x,
                   dw, conv, dy, requested, returned, perf);
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha,
                                      const cudnnTensorDescriptor_t xDesc, const void *x,
                                      const cudnnFilterDescriptor_t wDesc, const void *w,
                                      const cudnnConvolutionDescriptor_t conv,
                                      cudnnConvolutionFwdAlgo_t algo, void *workspace,
                                      size_t workspaceBytes, const void *beta,
                                      const cudnnTensorDescriptor_t yDesc, void *y) {
  const char *call = "cudnnConvolutionForward";
  Conv g;
  size_t needed = 0;
  EMU_TRY(checkConvCall(call, handle, Pass::Forward, g, needed, xDesc, wDesc, conv, yDesc, algo,
                        workspace, workspaceBytes, alpha, beta, {{x, "x"}, {w, "w"}, {y, "y"}}));
  return queueConv(call, handle, Pass::Forward, g, algo, x, w, y, alpha, beta, workspace, needed);
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void *alpha,
                                           const cudnnFilterDescriptor_t wDesc, const void *w,
                                           const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                           const cudnnConvolutionDescriptor_t conv,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *workspace,
                                           size_t workspaceBytes, const void *beta,
                                           const cudnnTensorDescriptor_t dxDesc, void *dx) {
  const char *call = "cudnnConvolutionBackwardData";
  Conv g;
  size_t needed = 0;
  EMU_TRY(checkConvCall(call, handle, Pass::BackwardData, g, needed, dxDesc, wDesc, conv, dyDesc,
                        algo, workspace, workspaceBytes, alpha, beta,
                        {{w, "w"}, {dy, "dy"}, {dx, "dx"}}));
  return queueConv(call, handle, Pass::BackwardData, g, algo, w, dy, dx, alpha, beta, workspace,
                   needed);
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void *alpha,
                                             const cudnnTensorDescriptor_t xDesc, const void *x,
                                             const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                             const cudnnConvolutionDescriptor_t conv,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void *workspace,
                                             size_t workspaceBytes, const void *beta,
                                             const cudnnFilterDescriptor_t dwDesc, void *dw) {
  const char *call = "cudnnConvolutionBackwardFilter";
  Conv g;
  size_t needed = 0;
  EMU_TRY(checkConvCall(call, handle, Pass::BackwardFilter, g, needed, xDesc, dwDesc, conv, dyDesc,
                        algo, workspace, workspaceBytes, alpha, beta,
                        {{x, "x"}, {dy, "dy"}, {dw, "dw"}}));
  return queueConv(call, handle, Pass::BackwardFilter, g, algo, x, dy, dw, alpha, beta, workspace,
                   needed);
}

cudnnStatus_t cudnnPoolingForward(cudnnHandle_t handle, const cudnnPoolingDescriptor_t desc,
                                  const void *alpha, const cudnnTensorDescriptor_t xDesc,
                                  const void *x, const void *beta,
                                  const cudnnTensorDescriptor_t yDesc, void *y) {
  const char *call = "cudnnPoolingForward";
  Pool p;
  EMU_TRY(usableHandle(handle, call));
  EMU_TRY(checkPool(call, desc, xDesc, yDesc, p));
  if (p.y.overlaps())
    return fail(CUDNN_STATUS_BAD_PARAM, call, "y's elements overlap");
  EMU_TRY(scalars(alpha, beta, call));
  EMU_TRY(devicePointer(x, call, "x"));
  EMU_TRY(devicePointer(y, call, "y"));
  return queuePool(call, handle, p, false, x, nullptr, nullptr, y, alpha, beta);
}

cudnnStatus_t cudnnPoolingBackward(cudnnHandle_t handle, const cudnnPoolingDescriptor_t desc,
                                   const void *alpha, const cudnnTensorDescriptor_t yDesc,
                                   const void *y, const cudnnTensorDescriptor_t dyDesc,
                                   const void *dy, const cudnnTensorDescriptor_t xDesc,
                                   const void *x, const void *beta,
                                   const cudnnTensorDescriptor_t dxDesc, void *dx) {
  const char *call = "cudnnPoolingBackward";
  Pool p;
  EMU_TRY(usableHandle(handle, call));
  EMU_TRY(usable(dyDesc, call, "dy descriptor"));
  EMU_TRY(usable(dxDesc, call, "dx descriptor"));
  EMU_TRY(checkPool(call, desc, xDesc, yDesc, p));
  // Documented: y and dy, x and dx must agree in dims and strides, all four in data type.
  auto same = [](const cudnnTensorStruct *a, const cudnnTensorStruct *b) {
    return a->rank == b->rank && a->type == b->type &&
           std::equal(a->dims, a->dims + a->rank, b->dims) &&
           std::equal(a->strides, a->strides + a->rank, b->strides);
  };
  if (!same(yDesc, dyDesc) || !same(xDesc, dxDesc))
    return fail(CUDNN_STATUS_BAD_PARAM, call,
                "y and dy, or x and dx, differ in dims, strides or data type");
  if (p.x.overlaps())
    return fail(CUDNN_STATUS_BAD_PARAM, call, "dx's elements overlap");
  EMU_TRY(scalars(alpha, beta, call));
  EMU_TRY(devicePointer(dy, call, "dy"));
  EMU_TRY(devicePointer(dx, call, "dx"));
  if (p.isMax()) { // the averages read neither x nor y
    EMU_TRY(devicePointer(x, call, "x"));
    EMU_TRY(devicePointer(y, call, "y"));
  }
  return queuePool(call, handle, p, true, x, y, dy, dx, alpha, beta);
}

cudnnStatus_t cudnnTransformTensor(cudnnHandle_t handle, const void *alpha,
                                   const cudnnTensorDescriptor_t xDesc, const void *x,
                                   const void *beta, const cudnnTensorDescriptor_t yDesc, void *y) {
  const char *call = "cudnnTransformTensor";
  EMU_TRY(usableHandle(handle, call));
  EMU_TRY(usable(xDesc, call, "x descriptor"));
  EMU_TRY(usable(yDesc, call, "y descriptor"));
  View xv = view(*xDesc), yv = view(*yDesc);
  if (xv.rank != yv.rank || !std::equal(xv.dims, xv.dims + xv.rank, yv.dims) || xv.type != yv.type)
    return fail(CUDNN_STATUS_BAD_PARAM, call,
                "x " + xv.str() + " and y " + yv.str() + " differ in dims or data type");
  if (!elementBytes(xv.type) || xv.negativeStride() || yv.negativeStride())
    return fail(CUDNN_STATUS_NOT_SUPPORTED, call, "data type or negative strides");
  if (yv.overlaps())
    return fail(CUDNN_STATUS_BAD_PARAM, call, "y's elements overlap");
  EMU_TRY(scalars(alpha, beta, call));
  EMU_TRY(devicePointer(x, call, "x"));
  EMU_TRY(devicePointer(y, call, "y"));
  std::string what = std::string(call) + " " + xv.str();
  double al = scalar(alpha, xv.type), be = scalar(beta, xv.type);
  return queue(handle, call, what, [=] {
    emu::countLayoutCopy();
    auto run = [&](auto acc) {
      using Acc = decltype(acc);
      // All of x is read before y is written, so overlapping x and y behave as copies.
      auto values = gather<Acc>(xv, emu::hostView(x, xv.extentBytes(), what + " x"), kIdentity);
      scatter(yv, emu::hostView(y, yv.extentBytes(), what + " y"), kIdentity, values, Acc(al),
              Acc(be));
    };
    if (xv.type == CUDNN_DATA_DOUBLE)
      run(double{});
    else
      run(float{});
  });
}

} // extern "C"
