// Known-answer tests of the emulated cuDNN (Cudnn.cpp), from the cuDNN API reference rather
// than from Smelt's calls: convolutions (grouped and depthwise too) against hand-computed
// numbers and a float64 reference written here, layouts through strides, alpha/beta, pooling
// both ways, TransformTensor, the NHWC support limits, and each invalid argument's documented
// status. Inputs are random with a seed printed once; SMELT_TEST_SEED replays it.
#include "EmuCuda.h"

#include <gtest/gtest.h>

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudnn.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace {

uint64_t testSeed() {
  static const uint64_t seed = [] {
    const char *env = std::getenv("SMELT_TEST_SEED");
    uint64_t s = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    std::printf("CudnnEmu: SMELT_TEST_SEED=%llu\n", (unsigned long long)s);
    return s;
  }();
  return seed;
}

std::vector<double> randoms(size_t count, std::mt19937_64 &rng) {
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<double> v(count);
  for (double &x : v)
    x = d(rng);
  return v;
}

// Element conversions for the four data types the tests use.
template <typename T> T to(double v) {
  if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(float(v));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(float(v));
  else
    return T(v);
}
template <typename T> double from(T v) {
  if constexpr (std::is_same_v<T, __half>)
    return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __bfloat162float(v);
  else
    return double(v);
}
template <typename T> cudnnDataType_t typeOf() {
  if constexpr (std::is_same_v<T, __half>)
    return CUDNN_DATA_HALF;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return CUDNN_DATA_BFLOAT16;
  else if constexpr (std::is_same_v<T, double>)
    return CUDNN_DATA_DOUBLE;
  else
    return CUDNN_DATA_FLOAT;
}

/// Values rounded through T, so a float64 reference sees what the device sees.
template <typename T> std::vector<double> rounded(std::vector<double> v) {
  for (double &x : v)
    x = from(to<T>(x));
  return v;
}

using Dims = std::array<int, 4>; // n, c, h, w (cuDNN's order)
Dims nchwStrides(Dims d) { return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}; }
Dims nhwcStrides(Dims d) { return {d[2] * d[3] * d[1], 1, d[3] * d[1], d[1]}; }
size_t count(Dims d) { return size_t(d[0]) * d[1] * d[2] * d[3]; }

/// A logical [n][c][h][w] array placed in memory by `strides` (dense ones here).
template <typename T> std::vector<T> place(const std::vector<double> &v, Dims d, Dims s) {
  size_t extent = 1;
  for (int i = 0; i < 4; ++i)
    extent += size_t(d[i] - 1) * s[i];
  std::vector<T> out(extent);
  size_t i = 0;
  for (int n = 0; n < d[0]; ++n)
    for (int c = 0; c < d[1]; ++c)
      for (int h = 0; h < d[2]; ++h)
        for (int w = 0; w < d[3]; ++w)
          out[size_t(n) * s[0] + c * s[1] + h * s[2] + w * s[3]] = to<T>(v[i++]);
  return out;
}
template <typename T> std::vector<double> unplace(const std::vector<T> &m, Dims d, Dims s) {
  std::vector<double> out;
  for (int n = 0; n < d[0]; ++n)
    for (int c = 0; c < d[1]; ++c)
      for (int h = 0; h < d[2]; ++h)
        for (int w = 0; w < d[3]; ++w)
          out.push_back(from(m[size_t(n) * s[0] + c * s[1] + h * s[2] + w * s[3]]));
  return out;
}

// ---------------------------------------------------------------------------------------------
// The float64 reference: the convolution formulas of the cuDNN developer guide
// ---------------------------------------------------------------------------------------------

struct Geometry {
  int n, c, h, w, k, r, s, padH = 0, padW = 0, u = 1, v = 1, dh = 1, dw = 1;
  bool convolution = false; // CUDNN_CONVOLUTION flips the filter; cross-correlation does not
  /// The group count: filters [k, c/groups, r, s]; group g maps x's channels g*c/groups ..
  /// (g+1)*c/groups - 1 to y's channels g*k/groups .. (g+1)*k/groups - 1 (the developer guide's
  /// "Grouped Convolutions").
  int groups = 1;
  int oh() const { return (h + 2 * padH - (dh * (r - 1) + 1)) / u + 1; }
  int ow() const { return (w + 2 * padW - (dw * (s - 1) + 1)) / v + 1; }
  Dims x() const { return {n, c, h, w}; }
  Dims f() const { return {k, c / groups, r, s}; }
  Dims y() const { return {n, k, oh(), ow()}; }
  /// Calls f(xIndex, wIndex, yIndex) for every product the convolution sums.
  template <typename F> void products(F &&f) const {
    const int cg = c / groups, kg = k / groups;
    for (int in = 0; in < n; ++in)
      for (int ik = 0; ik < k; ++ik)
        for (int p = 0; p < oh(); ++p)
          for (int q = 0; q < ow(); ++q)
            for (int fc = 0; fc < cg; ++fc)
              for (int ir = 0; ir < r; ++ir)
                for (int is = 0; is < s; ++is) {
                  int ih = p * u - padH + ir * dh, iw = q * v - padW + is * dw;
                  if (ih < 0 || ih >= h || iw < 0 || iw >= w)
                    continue;
                  int ic = ik / kg * cg + fc; // x's channel: filter channel fc of ik's group
                  int fr = convolution ? r - 1 - ir : ir, fs = convolution ? s - 1 - is : is;
                  f(((size_t(in) * c + ic) * h + ih) * w + iw,
                    ((size_t(ik) * cg + fc) * r + fr) * s + fs,
                    ((size_t(in) * k + ik) * oh() + p) * ow() + q);
                }
  }
  std::vector<double> forward(const std::vector<double> &x, const std::vector<double> &wt) const {
    std::vector<double> y(count(this->y()));
    products([&](size_t xi, size_t wi, size_t yi) { y[yi] += x[xi] * wt[wi]; });
    return y;
  }
  std::vector<double> backwardData(const std::vector<double> &wt,
                                   const std::vector<double> &dy) const {
    std::vector<double> dx(count(x()));
    products([&](size_t xi, size_t wi, size_t yi) { dx[xi] += dy[yi] * wt[wi]; });
    return dx;
  }
  std::vector<double> backwardFilter(const std::vector<double> &x,
                                     const std::vector<double> &dy) const {
    std::vector<double> dw(count(f()));
    products([&](size_t xi, size_t wi, size_t yi) { dw[wi] += dy[yi] * x[xi]; });
    return dw;
  }
};

void expectNear(const std::vector<double> &got, const std::vector<double> &want, double tolerance,
                const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tolerance * (1 + std::abs(want[i])))
        << what << " element " << i << " (seed " << testSeed() << ")";
}

// ---------------------------------------------------------------------------------------------
// The fixture: a context, a non-blocking stream, a handle, and everything made freed after
// ---------------------------------------------------------------------------------------------

class CudnnEmu : public ::testing::Test {
protected:
  void SetUp() override {
    rng_.seed(testSeed());
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    ASSERT_EQ(cuDeviceGet(&device_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&context_, device_), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(context_), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ASSERT_EQ(cudnnCreate(&handle_), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnSetStream(handle_, stream_), CUDNN_STATUS_SUCCESS);
  }
  void TearDown() override {
    EXPECT_EQ(cuStreamSynchronize(stream_), CUDA_SUCCESS) << smelt::emucuda::lastFault();
    for (auto d : tensors_)
      cudnnDestroyTensorDescriptor(d);
    for (auto d : filters_)
      cudnnDestroyFilterDescriptor(d);
    for (auto d : convs_)
      cudnnDestroyConvolutionDescriptor(d);
    for (auto d : pools_)
      cudnnDestroyPoolingDescriptor(d);
    for (CUdeviceptr p : allocations_)
      cuMemFree(p);
    cudnnDestroy(handle_);
    cuStreamDestroy(stream_);
    smelt::emucuda::clearFault();
    cuDevicePrimaryCtxRelease(device_);
  }

  /// A pageable cuMemcpyHtoD may still be landing when it returns, on the legacy stream, which
  /// a non-blocking stream does not wait for: synchronize before queueing work that reads it.
  template <typename T> void *upload(const std::vector<T> &host) {
    void *p = allocate(host.size() * sizeof(T));
    EXPECT_EQ(cuMemcpyHtoD(CUdeviceptr(p), host.data(), host.size() * sizeof(T)), CUDA_SUCCESS);
    EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    return p;
  }
  void *allocate(size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_EQ(cuMemAlloc(&p, std::max<size_t>(bytes, 1)), CUDA_SUCCESS);
    allocations_.push_back(p);
    return reinterpret_cast<void *>(p);
  }
  /// The stream is synchronized first: the emulation runs queued work as late as it may.
  template <typename T> std::vector<T> download(const void *p, size_t n) {
    EXPECT_EQ(cuStreamSynchronize(stream_), CUDA_SUCCESS) << smelt::emucuda::lastFault();
    std::vector<T> host(n);
    EXPECT_EQ(cuMemcpyDtoH(host.data(), CUdeviceptr(p), n * sizeof(T)), CUDA_SUCCESS);
    return host;
  }

  cudnnTensorDescriptor_t tensor(cudnnDataType_t t, Dims d, Dims s) {
    cudnnTensorDescriptor_t desc;
    EXPECT_EQ(cudnnCreateTensorDescriptor(&desc), CUDNN_STATUS_SUCCESS);
    tensors_.push_back(desc);
    EXPECT_EQ(cudnnSetTensorNdDescriptor(desc, t, 4, d.data(), s.data()), CUDNN_STATUS_SUCCESS);
    return desc;
  }
  cudnnTensorDescriptor_t tensor(cudnnDataType_t t, Dims d, bool nhwc) {
    return tensor(t, d, nhwc ? nhwcStrides(d) : nchwStrides(d));
  }
  cudnnFilterDescriptor_t filter(cudnnDataType_t t, Dims d, bool nhwc) {
    cudnnFilterDescriptor_t desc;
    EXPECT_EQ(cudnnCreateFilterDescriptor(&desc), CUDNN_STATUS_SUCCESS);
    filters_.push_back(desc);
    EXPECT_EQ(cudnnSetFilter4dDescriptor(desc, t, nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                         d[0], d[1], d[2], d[3]),
              CUDNN_STATUS_SUCCESS);
    return desc;
  }
  cudnnConvolutionDescriptor_t conv(const Geometry &g, cudnnDataType_t compute) {
    cudnnConvolutionDescriptor_t desc;
    EXPECT_EQ(cudnnCreateConvolutionDescriptor(&desc), CUDNN_STATUS_SUCCESS);
    convs_.push_back(desc);
    EXPECT_EQ(cudnnSetConvolution2dDescriptor(
                  desc, g.padH, g.padW, g.u, g.v, g.dh, g.dw,
                  g.convolution ? CUDNN_CONVOLUTION : CUDNN_CROSS_CORRELATION, compute),
              CUDNN_STATUS_SUCCESS);
    if (g.groups != 1) { // a new descriptor's count is 1
      EXPECT_EQ(cudnnSetConvolutionGroupCount(desc, g.groups), CUDNN_STATUS_SUCCESS);
    }
    return desc;
  }
  cudnnPoolingDescriptor_t pooling(cudnnPoolingMode_t mode, int window, int pad, int stride) {
    cudnnPoolingDescriptor_t desc;
    EXPECT_EQ(cudnnCreatePoolingDescriptor(&desc), CUDNN_STATUS_SUCCESS);
    pools_.push_back(desc);
    EXPECT_EQ(cudnnSetPooling2dDescriptor(desc, mode, CUDNN_PROPAGATE_NAN, window, window, pad, pad,
                                          stride, stride),
              CUDNN_STATUS_SUCCESS);
    return desc;
  }

  /// The three passes of one convolution in type T and layout, against the reference.
  template <typename T> void checkPasses(const Geometry &g, bool nhwc, double tolerance) {
    cudnnDataType_t t = typeOf<T>();
    cudnnDataType_t compute = t == CUDNN_DATA_DOUBLE ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    auto x = rounded<T>(randoms(count(g.x()), rng_));
    auto w = rounded<T>(randoms(count(g.f()), rng_));
    auto dy = rounded<T>(randoms(count(g.y()), rng_));
    auto strides = [&](Dims d) { return nhwc ? nhwcStrides(d) : nchwStrides(d); };
    auto xd = tensor(t, g.x(), nhwc), yd = tensor(t, g.y(), nhwc);
    auto wd = filter(t, g.f(), nhwc);
    auto cd = conv(g, compute);
    void *xp = upload(place<T>(x, g.x(), strides(g.x())));
    void *wp = upload(place<T>(w, g.f(), strides(g.f())));
    void *dyp = upload(place<T>(dy, g.y(), strides(g.y())));
    void *yp = allocate(count(g.y()) * sizeof(T)), *dxp = allocate(count(g.x()) * sizeof(T));
    void *dwp = allocate(count(g.f()) * sizeof(T)), *work = allocate(1 << 20);
    auto one = [&]() -> const void * {
      return t == CUDNN_DATA_DOUBLE ? static_cast<const void *>(&oneD_) : &oneF_;
    };
    auto zero = [&]() -> const void * {
      return t == CUDNN_DATA_DOUBLE ? static_cast<const void *>(&zeroD_) : &zeroF_;
    };
    ASSERT_EQ(cudnnConvolutionForward(handle_, one(), xd, xp, wd, wp, cd,
                                      CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, work,
                                      1 << 20, zero(), yd, yp),
              CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnConvolutionBackwardData(handle_, one(), wd, wp, yd, dyp, cd,
                                           CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, work, 1 << 20, zero(),
                                           xd, dxp),
              CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnConvolutionBackwardFilter(handle_, one(), xd, xp, yd, dyp, cd,
                                             CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, work, 1 << 20,
                                             zero(), wd, dwp),
              CUDNN_STATUS_SUCCESS);
    expectNear(unplace(download<T>(yp, count(g.y())), g.y(), strides(g.y())), g.forward(x, w),
               tolerance, "forward");
    expectNear(unplace(download<T>(dxp, count(g.x())), g.x(), strides(g.x())),
               g.backwardData(w, dy), tolerance, "backward data");
    expectNear(unplace(download<T>(dwp, count(g.f())), g.f(), strides(g.f())),
               g.backwardFilter(x, dy), tolerance, "backward filter");
  }

  std::mt19937_64 rng_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  cudnnHandle_t handle_ = nullptr;
  std::vector<CUdeviceptr> allocations_;
  std::vector<cudnnTensorDescriptor_t> tensors_;
  std::vector<cudnnFilterDescriptor_t> filters_;
  std::vector<cudnnConvolutionDescriptor_t> convs_;
  std::vector<cudnnPoolingDescriptor_t> pools_;
  const float oneF_ = 1, zeroF_ = 0;
  const double oneD_ = 1, zeroD_ = 0;
};

TEST_F(CudnnEmu, ReportsVersion9AndNamesStatuses) {
  EXPECT_EQ(cudnnGetVersion() / 10000, 9u);
  EXPECT_STREQ(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "CUDNN_STATUS_BAD_PARAM");
  EXPECT_STREQ(cudnnGetErrorString(CUDNN_STATUS_NOT_SUPPORTED), "CUDNN_STATUS_NOT_SUPPORTED");
}

// x = 1..9 as 3x3, w = [[1, 2], [3, 4]]: cross-correlation and (flipped) convolution by hand.
TEST_F(CudnnEmu, TinyConvolutionMatchesHandComputedNumbers) {
  for (bool flip : {false, true}) {
    Geometry g{1, 1, 3, 3, 1, 2, 2};
    g.convolution = flip;
    auto xd = tensor(CUDNN_DATA_FLOAT, g.x(), false), yd = tensor(CUDNN_DATA_FLOAT, g.y(), false);
    auto wd = filter(CUDNN_DATA_FLOAT, g.f(), false);
    auto cd = conv(g, CUDNN_DATA_FLOAT);
    void *x = upload(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9});
    void *w = upload(std::vector<float>{1, 2, 3, 4});
    void *y = allocate(4 * sizeof(float));
    ASSERT_EQ(cudnnConvolutionForward(handle_, &oneF_, xd, x, wd, w, cd,
                                      CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &zeroF_,
                                      yd, y),
              CUDNN_STATUS_SUCCESS);
    std::vector<float> want =
        flip ? std::vector<float>{23, 33, 53, 63} : std::vector<float>{37, 47, 67, 77};
    EXPECT_EQ(download<float>(y, 4), want) << (flip ? "CUDNN_CONVOLUTION" : "cross-correlation");
  }
}

TEST_F(CudnnEmu, NhwcAndNchwStridesGiveTheSameResult) {
  Geometry g{2, 3, 5, 6, 4, 3, 3, 1, 1};
  checkPasses<float>(g, false, 1e-5);
  checkPasses<float>(g, true, 1e-5);
}

TEST_F(CudnnEmu, PaddingStrideDilationAndModeMatchTheFloat64Reference) {
  std::vector<Geometry> cases = {
      {2, 3, 7, 6, 5, 3, 2, 1, 0, 2, 1, 1, 1},       // stride 2 in h, no w padding
      {1, 4, 9, 9, 3, 3, 3, 2, 2, 1, 1, 2, 2},       // dilation 2 with padding 2
      {3, 2, 8, 5, 4, 2, 3, 0, 1, 3, 2, 1, 2, true}, // strides 3x2, dilation 1x2, flipped
      {2, 5, 6, 6, 2, 1, 1, 0, 0, 2, 2},             // 1x1, strided
  };
  for (const Geometry &g : cases)
    for (bool nhwc : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << "geometry " << g.n << "x" << g.c << "x" << g.h << "x" << g.w << " filter "
                   << g.k << "x" << g.r << "x" << g.s << (nhwc ? " NHWC" : " NCHW"));
      checkPasses<float>(g, nhwc, 1e-5);
    }
}

TEST_F(CudnnEmu, Float64HalfAndBfloat16ConvolutionsMatchTheReference) {
  Geometry g{2, 8, 5, 5, 8, 3, 3, 1, 1};
  checkPasses<double>(g, false, 1e-12);
  checkPasses<__half>(g, true, 2e-2); // NHWC with C and K multiples of 8
  checkPasses<__half>(g, false, 2e-2);
  checkPasses<__nv_bfloat16>(g, true, 5e-2);
}

// Grouped convolutions as the developer guide's "Grouped Convolutions" describes them:
// descriptors of the whole convolution, the filter [K, C/G, R, S], each group of channels a
// convolution of its own. Depthwise is G == C, with K = C or a multiple of it.
TEST_F(CudnnEmu, GroupedAndDepthwiseConvolutionsMatchTheFloat64Reference) {
  // n, c, h, w, k, r, s, padH, padW, u, v, dh, dw, convolution, groups
  std::vector<Geometry> cases = {
      {2, 6, 7, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, false, 2}, // 2 groups of 3 channels into 2
      {2, 6, 8, 7, 9, 3, 2, 1, 0, 2, 1, 1, 2, true, 3},  // 3 groups, strided, dilated, flipped
      {3, 5, 6, 6, 5, 3, 3, 1, 1, 1, 1, 1, 1, false, 5}, // depthwise
      {2, 4, 6, 5, 8, 3, 3, 2, 1, 1, 2, 2, 1, false, 4}, // depthwise, 2 filters per channel
  };
  for (const Geometry &g : cases)
    for (bool nhwc : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << "geometry " << g.n << "x" << g.c << "x" << g.h << "x" << g.w << " filter "
                   << g.k << "x" << g.c / g.groups << "x" << g.r << "x" << g.s << " groups "
                   << g.groups << (nhwc ? " NHWC" : " NCHW"));
      checkPasses<float>(g, nhwc, 1e-5);
    }
  checkPasses<double>(cases[1], false, 1e-12);
  // Half precision: NHWC with 8 channels per group, NCHW depthwise.
  Geometry half{2, 16, 5, 5, 16, 3, 3, 1, 1, 1, 1, 1, 1, false, 2};
  checkPasses<__half>(half, true, 2e-2);
  checkPasses<__half>(half, false, 2e-2);
  Geometry depthwise{2, 8, 5, 5, 8, 3, 3, 1, 1, 1, 1, 1, 1, false, 8};
  checkPasses<__nv_bfloat16>(depthwise, false, 5e-2);
}

TEST_F(CudnnEmu, GroupCountIsSetReadAndChecked) {
  const cudnnDataType_t f = CUDNN_DATA_FLOAT;
  // A new descriptor's group count is 1.
  cudnnConvolutionDescriptor_t fresh;
  ASSERT_EQ(cudnnCreateConvolutionDescriptor(&fresh), CUDNN_STATUS_SUCCESS);
  convs_.push_back(fresh);
  int groups = 0;
  ASSERT_EQ(cudnnGetConvolutionGroupCount(fresh, &groups), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(groups, 1);

  Geometry g{2, 6, 6, 6, 4, 3, 3, 1, 1};
  g.groups = 2;
  auto cd = conv(g, f);
  ASSERT_EQ(cudnnGetConvolutionGroupCount(cd, &groups), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(groups, 2);
  EXPECT_EQ(cudnnSetConvolutionGroupCount(cd, 0), CUDNN_STATUS_BAD_PARAM);
  EXPECT_EQ(cudnnSetConvolutionGroupCount(nullptr, 2), CUDNN_STATUS_BAD_PARAM);
  EXPECT_EQ(cudnnGetConvolutionGroupCount(cd, nullptr), CUDNN_STATUS_BAD_PARAM);
  ASSERT_EQ(cudnnGetConvolutionGroupCount(cd, &groups), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(groups, 2) << "a rejected count leaves the old one";

  // x's C is the filter's C times the count; K divides into the groups.
  auto xd = tensor(f, g.x(), false), yd = tensor(f, g.y(), false);
  void *x = allocate(count(g.x()) * 4), *w = allocate(4 * 6 * 3 * 3 * 4); // the largest filter
  void *y = allocate(count(g.y()) * 4);
  auto forward = [&](cudnnFilterDescriptor_t wd, cudnnTensorDescriptor_t yd) {
    return cudnnConvolutionForward(handle_, &oneF_, xd, x, wd, w, cd,
                                   CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &zeroF_,
                                   yd, y);
  };
  EXPECT_EQ(forward(filter(f, {4, 3, 3, 3}, false), yd), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(forward(filter(f, {4, 6, 3, 3}, false), yd), CUDNN_STATUS_BAD_PARAM)
      << "the ungrouped filter's C";
  EXPECT_EQ(forward(filter(f, {5, 3, 3, 3}, false), tensor(f, {2, 5, 6, 6}, false)),
            CUDNN_STATUS_BAD_PARAM)
      << "K = 5 in 2 groups";
  cudnnConvolutionFwdAlgoPerf_t perf[16];
  int n = 0;
  EXPECT_EQ(cudnnGetConvolutionForwardAlgorithm_v7(handle_, xd, filter(f, {4, 6, 3, 3}, false), cd,
                                                   yd, 16, &n, perf),
            CUDNN_STATUS_BAD_PARAM)
      << "getter with the ungrouped filter's C";

  // NHWC half needs 8 channels in each group: 16 in 2 groups runs, 16 in 4 groups does not.
  for (int groupCount : {2, 4}) {
    Geometry h{2, 16, 6, 6, 16, 3, 3, 1, 1};
    h.groups = groupCount;
    auto hd = conv(h, CUDNN_DATA_FLOAT);
    ASSERT_EQ(cudnnGetConvolutionForwardAlgorithm_v7(
                  handle_, tensor(CUDNN_DATA_HALF, h.x(), true),
                  filter(CUDNN_DATA_HALF, h.f(), true), hd, tensor(CUDNN_DATA_HALF, h.y(), true),
                  16, &n, perf),
              CUDNN_STATUS_SUCCESS);
    EXPECT_EQ(perf[0].status,
              groupCount == 2 ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_NOT_SUPPORTED)
        << groupCount << " groups";
  }
}

// y = alpha * result + beta * y; with beta 0 the old y is not read (NaN stays out).
TEST_F(CudnnEmu, AlphaAndBetaScaleAndAccumulate) {
  Geometry g{1, 2, 4, 4, 3, 3, 3, 1, 1};
  auto x = randoms(count(g.x()), rng_), w = randoms(count(g.f()), rng_);
  auto y0 = randoms(count(g.y()), rng_);
  auto xd = tensor(CUDNN_DATA_FLOAT, g.x(), false), yd = tensor(CUDNN_DATA_FLOAT, g.y(), false);
  auto wd = filter(CUDNN_DATA_FLOAT, g.f(), false);
  auto cd = conv(g, CUDNN_DATA_FLOAT);
  x = rounded<float>(x), w = rounded<float>(w), y0 = rounded<float>(y0);
  void *xp = upload(place<float>(x, g.x(), nchwStrides(g.x())));
  void *wp = upload(place<float>(w, g.f(), nchwStrides(g.f())));
  void *yp = upload(place<float>(y0, g.y(), nchwStrides(g.y())));
  const float alpha = 2, beta = 0.5f;
  ASSERT_EQ(cudnnConvolutionForward(handle_, &alpha, xd, xp, wd, wp, cd,
                                    CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &beta, yd,
                                    yp),
            CUDNN_STATUS_SUCCESS);
  auto want = g.forward(x, w);
  for (size_t i = 0; i < want.size(); ++i)
    want[i] = alpha * want[i] + beta * y0[i];
  expectNear(unplace(download<float>(yp, count(g.y())), g.y(), nchwStrides(g.y())), want, 1e-5,
             "alpha 2, beta 0.5");

  void *nan = upload(std::vector<float>(count(g.y()), NAN));
  ASSERT_EQ(cudnnConvolutionForward(handle_, &oneF_, xd, xp, wd, wp, cd,
                                    CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &zeroF_,
                                    yd, nan),
            CUDNN_STATUS_SUCCESS);
  expectNear(unplace(download<float>(nan, count(g.y())), g.y(), nchwStrides(g.y())),
             g.forward(x, w), 1e-5, "beta 0 over NaN");
}

TEST_F(CudnnEmu, GettersReportSortedPerfResultsAndWorkspaceIsChecked) {
  Geometry g{2, 4, 6, 6, 8, 3, 3, 1, 1};
  auto xd = tensor(CUDNN_DATA_FLOAT, g.x(), false), yd = tensor(CUDNN_DATA_FLOAT, g.y(), false);
  auto wd = filter(CUDNN_DATA_FLOAT, g.f(), false);
  auto cd = conv(g, CUDNN_DATA_FLOAT);
  cudnnConvolutionFwdAlgoPerf_t perf[16];
  int n = 0;
  ASSERT_EQ(cudnnGetConvolutionForwardAlgorithm_v7(handle_, xd, wd, cd, yd, 16, &n, perf),
            CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(n, int(CUDNN_CONVOLUTION_FWD_ALGO_COUNT));
  int ok = 0;
  for (int i = 0; i < n; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS)
      continue;
    EXPECT_EQ(i, ok++) << "successful algorithms come first";
    if (i > 0) {
      EXPECT_LE(perf[i - 1].time, perf[i].time) << "sorted by time";
    }
  }
  EXPECT_GE(ok, 1);
  int one = 0;
  ASSERT_EQ(cudnnGetConvolutionForwardAlgorithm_v7(handle_, xd, wd, cd, yd, 1, &one, perf),
            CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(one, 1);

  // An algorithm that needs workspace refuses one byte less.
  ASSERT_EQ(cudnnGetConvolutionForwardAlgorithm_v7(handle_, xd, wd, cd, yd, 16, &n, perf),
            CUDNN_STATUS_SUCCESS);
  const cudnnConvolutionFwdAlgoPerf_t *needy = nullptr;
  for (int i = 0; i < n; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory > 0)
      needy = &perf[i];
  ASSERT_NE(needy, nullptr);
  void *x = allocate(count(g.x()) * 4), *w = allocate(count(g.f()) * 4);
  void *y = allocate(count(g.y()) * 4), *work = allocate(needy->memory);
  EXPECT_EQ(cudnnConvolutionForward(handle_, &oneF_, xd, x, wd, w, cd, needy->algo, work,
                                    needy->memory - 1, &zeroF_, yd, y),
            CUDNN_STATUS_BAD_PARAM);
  EXPECT_EQ(cudnnConvolutionForward(handle_, &oneF_, xd, x, wd, w, cd, needy->algo, nullptr,
                                    needy->memory, &zeroF_, yd, y),
            CUDNN_STATUS_BAD_PARAM);
  EXPECT_EQ(cudnnConvolutionForward(handle_, &oneF_, xd, x, wd, w, cd, needy->algo, work,
                                    needy->memory, &zeroF_, yd, y),
            CUDNN_STATUS_SUCCESS);

  cudnnConvolutionBwdDataAlgoPerf_t data[16];
  ASSERT_EQ(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle_, wd, yd, cd, xd, 16, &n, data),
            CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(n, int(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT));
  EXPECT_EQ(data[0].status, CUDNN_STATUS_SUCCESS);
  cudnnConvolutionBwdFilterAlgoPerf_t filt[16];
  ASSERT_EQ(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle_, xd, yd, cd, wd, 16, &n, filt),
            CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(n, int(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT));
  bool deterministic = false;
  for (int i = 0; i < n; ++i)
    deterministic |=
        filt[i].status == CUDNN_STATUS_SUCCESS && filt[i].determinism == CUDNN_DETERMINISTIC;
  EXPECT_TRUE(deterministic);
}

// The work reads device memory when it runs, as a GPU does: a workspace pointer that was
// freed before the call (a stale pointer) is a fault naming the call when the work runs.
TEST_F(CudnnEmu, WorkspaceFreedBeforeTheWorkRunsFaults) {
  Geometry g{1, 4, 5, 5, 8, 3, 3, 1, 1};
  auto xd = tensor(CUDNN_DATA_FLOAT, g.x(), false), yd = tensor(CUDNN_DATA_FLOAT, g.y(), false);
  auto wd = filter(CUDNN_DATA_FLOAT, g.f(), false);
  auto cd = conv(g, CUDNN_DATA_FLOAT);
  void *x = allocate(count(g.x()) * 4), *w = allocate(count(g.f()) * 4);
  void *y = allocate(count(g.y()) * 4);
  CUdeviceptr work = 0;
  ASSERT_EQ(cuMemAlloc(&work, 1 << 16), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree(work), CUDA_SUCCESS);
  ASSERT_EQ(cudnnConvolutionForward(handle_, &oneF_, xd, x, wd, w, cd,
                                    CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                    reinterpret_cast<void *>(work), 1 << 16, &zeroF_, yd, y),
            CUDNN_STATUS_SUCCESS);
  EXPECT_NE(cuStreamSynchronize(stream_), CUDA_SUCCESS);
  std::string fault = smelt::emucuda::lastFault();
  EXPECT_NE(fault.find("cudnnConvolutionForward"), std::string::npos) << fault;
  EXPECT_NE(fault.find("workspace"), std::string::npos) << fault;
  smelt::emucuda::clearFault();
}

// NHWC half convolutions need C and K multiples of 8 (the Legacy API guide's Tensor Core
// conditions); NHWC doubles have no algorithm. NCHW takes any channel count.
TEST_F(CudnnEmu, UnalignedNhwcHalfAndNhwcDoubleAreNotSupported) {
  struct Case {
    cudnnDataType_t type;
    int c, k;
    bool nhwc, supported;
  };
  std::vector<Case> cases = {
      {CUDNN_DATA_HALF, 3, 8, true, false},      {CUDNN_DATA_HALF, 8, 4, true, false},
      {CUDNN_DATA_BFLOAT16, 1, 32, true, false}, {CUDNN_DATA_HALF, 16, 8, true, true},
      {CUDNN_DATA_HALF, 3, 4, false, true},      {CUDNN_DATA_BFLOAT16, 1, 32, false, true},
      {CUDNN_DATA_DOUBLE, 8, 8, true, false},    {CUDNN_DATA_DOUBLE, 3, 4, false, true}};
  for (const Case &c : cases) {
    SCOPED_TRACE(::testing::Message() << "type " << c.type << " C " << c.c << " K " << c.k
                                      << (c.nhwc ? " NHWC" : " NCHW"));
    Geometry g{2, c.c, 6, 6, c.k, 3, 3, 1, 1};
    auto xd = tensor(c.type, g.x(), c.nhwc), yd = tensor(c.type, g.y(), c.nhwc);
    auto wd = filter(c.type, g.f(), c.nhwc);
    auto cd = conv(g, c.type == CUDNN_DATA_DOUBLE ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT);
    ASSERT_EQ(cudnnSetConvolutionMathType(cd, CUDNN_TENSOR_OP_MATH), CUDNN_STATUS_SUCCESS);
    cudnnConvolutionFwdAlgoPerf_t fwd[16];
    cudnnConvolutionBwdDataAlgoPerf_t data[16];
    cudnnConvolutionBwdFilterAlgoPerf_t filt[16];
    int nf = 0, nd = 0, nw = 0;
    ASSERT_EQ(cudnnGetConvolutionForwardAlgorithm_v7(handle_, xd, wd, cd, yd, 16, &nf, fwd),
              CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle_, wd, yd, cd, xd, 16, &nd, data),
              CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle_, xd, yd, cd, wd, 16, &nw, filt),
              CUDNN_STATUS_SUCCESS);
    EXPECT_GT(nf * nd * nw, 0);
    EXPECT_EQ(fwd[0].status == CUDNN_STATUS_SUCCESS, c.supported);
    EXPECT_EQ(data[0].status == CUDNN_STATUS_SUCCESS, c.supported);
    EXPECT_EQ(filt[0].status == CUDNN_STATUS_SUCCESS, c.supported);
    size_t bytes = c.type == CUDNN_DATA_DOUBLE ? 8 : 2;
    void *x = allocate(count(g.x()) * bytes), *w = allocate(count(g.f()) * bytes);
    void *y = allocate(count(g.y()) * bytes), *work = allocate(1 << 20);
    const void *one = c.type == CUDNN_DATA_DOUBLE ? (const void *)&oneD_ : &oneF_;
    const void *zero = c.type == CUDNN_DATA_DOUBLE ? (const void *)&zeroD_ : &zeroF_;
    cudnnStatus_t want = c.supported ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_NOT_SUPPORTED;
    EXPECT_EQ(cudnnConvolutionForward(handle_, one, xd, x, wd, w, cd,
                                      CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, work, 1 << 20, zero,
                                      yd, y),
              want);
    EXPECT_EQ(cudnnConvolutionBackwardData(handle_, one, wd, w, yd, y, cd,
                                           CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, work, 1 << 20, zero,
                                           xd, x),
              want);
    EXPECT_EQ(cudnnConvolutionBackwardFilter(handle_, one, xd, x, yd, y, cd,
                                             CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, work, 1 << 20,
                                             zero, wd, w),
              want);
  }
}

// ---------------------------------------------------------------------------------------------
// Pooling
// ---------------------------------------------------------------------------------------------

/// The float64 pooling reference: y for each window and dx for dy, from the mode's definition
/// (max ignores padding; averages divide by the window or by its positions inside x).
struct PoolReference {
  Dims x;
  int window, pad, stride;
  cudnnPoolingMode_t mode;
  int out(int in) const { return 1 + (in + 2 * pad - window) / stride; }
  Dims y() const { return {x[0], x[1], out(x[2]), out(x[3])}; }
  template <typename F> void windows(F &&f) const {
    for (int n = 0; n < x[0]; ++n)
      for (int c = 0; c < x[1]; ++c)
        for (int p = 0; p < out(x[2]); ++p)
          for (int q = 0; q < out(x[3]); ++q) {
            std::vector<size_t> inside;
            for (int i = p * stride - pad; i < p * stride - pad + window; ++i)
              for (int j = q * stride - pad; j < q * stride - pad + window; ++j)
                if (i >= 0 && i < x[2] && j >= 0 && j < x[3])
                  inside.push_back(((size_t(n) * x[1] + c) * x[2] + i) * x[3] + j);
            f(((size_t(n) * x[1] + c) * out(x[2]) + p) * out(x[3]) + q, inside);
          }
  }
  double divisor(size_t inside) const {
    return mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING ? window * window : double(inside);
  }
  std::vector<double> forward(const std::vector<double> &in) const {
    std::vector<double> y(count(this->y()));
    windows([&](size_t yi, const std::vector<size_t> &inside) {
      double acc = mode == CUDNN_POOLING_MAX_DETERMINISTIC ? -INFINITY : 0;
      for (size_t i : inside)
        acc = mode == CUDNN_POOLING_MAX_DETERMINISTIC ? std::max(acc, in[i]) : acc + in[i];
      y[yi] = mode == CUDNN_POOLING_MAX_DETERMINISTIC ? acc : acc / divisor(inside.size());
    });
    return y;
  }
  /// Max: each window's gradient to its first maximum in row-major order.
  std::vector<double> backward(const std::vector<double> &in, const std::vector<double> &dy) const {
    std::vector<double> dx(count(x));
    windows([&](size_t yi, const std::vector<size_t> &inside) {
      if (mode != CUDNN_POOLING_MAX_DETERMINISTIC) {
        for (size_t i : inside)
          dx[i] += dy[yi] / divisor(inside.size());
        return;
      }
      size_t best = inside[0];
      for (size_t i : inside)
        best = in[i] > in[best] ? i : best;
      dx[best] += dy[yi];
    });
    return dx;
  }
};

TEST_F(CudnnEmu, PoolingForwardAndBackwardMatchTheReference) {
  for (auto mode : {CUDNN_POOLING_MAX_DETERMINISTIC, CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
                    CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING})
    for (bool nhwc : {false, true})
      for (auto [window, pad, stride] : {std::array<int, 3>{2, 0, 2}, {3, 1, 1}, {3, 1, 2}}) {
        SCOPED_TRACE(::testing::Message() << "mode " << mode << " window " << window << " pad "
                                          << pad << " stride " << stride << (nhwc ? " NHWC" : ""));
        PoolReference ref{{2, 3, 7, 6}, window, pad, stride, mode};
        auto x = rounded<float>(randoms(count(ref.x), rng_));
        auto dy = rounded<float>(randoms(count(ref.y()), rng_));
        auto strides = [&](Dims d) { return nhwc ? nhwcStrides(d) : nchwStrides(d); };
        auto xd = tensor(CUDNN_DATA_FLOAT, ref.x, nhwc);
        auto yd = tensor(CUDNN_DATA_FLOAT, ref.y(), nhwc);
        auto pd = pooling(mode, window, pad, stride);
        void *xp = upload(place<float>(x, ref.x, strides(ref.x)));
        void *dyp = upload(place<float>(dy, ref.y(), strides(ref.y())));
        void *yp = allocate(count(ref.y()) * 4), *dxp = allocate(count(ref.x) * 4);
        ASSERT_EQ(cudnnPoolingForward(handle_, pd, &oneF_, xd, xp, &zeroF_, yd, yp),
                  CUDNN_STATUS_SUCCESS);
        ASSERT_EQ(
            cudnnPoolingBackward(handle_, pd, &oneF_, yd, yp, yd, dyp, xd, xp, &zeroF_, xd, dxp),
            CUDNN_STATUS_SUCCESS);
        expectNear(unplace(download<float>(yp, count(ref.y())), ref.y(), strides(ref.y())),
                   ref.forward(x), 1e-6, "forward");
        expectNear(unplace(download<float>(dxp, count(ref.x)), ref.x, strides(ref.x)),
                   ref.backward(x, dy), 1e-6, "backward");
      }
}

// A 3x3 window with padding 1 over a 3x3 input of ones: the corner window holds 4 of the 9.
TEST_F(CudnnEmu, AveragePoolingIncludesOrExcludesPadding) {
  Dims d{1, 1, 3, 3};
  auto xd = tensor(CUDNN_DATA_FLOAT, d, false);
  void *x = upload(std::vector<float>(9, 1.0f)), *y = allocate(9 * 4);
  auto include = pooling(CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, 3, 1, 1);
  ASSERT_EQ(cudnnPoolingForward(handle_, include, &oneF_, xd, x, &zeroF_, xd, y),
            CUDNN_STATUS_SUCCESS);
  auto got = download<float>(y, 9);
  EXPECT_FLOAT_EQ(got[0], 4.0f / 9);
  EXPECT_FLOAT_EQ(got[1], 6.0f / 9);
  EXPECT_FLOAT_EQ(got[4], 1.0f);
  auto exclude = pooling(CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING, 3, 1, 1);
  ASSERT_EQ(cudnnPoolingForward(handle_, exclude, &oneF_, xd, x, &zeroF_, xd, y),
            CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(download<float>(y, 9), std::vector<float>(9, 1.0f));
}

// Ties: the gradient goes to the first maximum of each window in row-major order (the
// emulation's documented choice; cuDNN does not document one). NaN propagates when asked.
TEST_F(CudnnEmu, MaxPoolingTiesAndNan) {
  Dims d{1, 1, 4, 4}, o{1, 1, 2, 2};
  auto xd = tensor(CUDNN_DATA_FLOAT, d, false), yd = tensor(CUDNN_DATA_FLOAT, o, false);
  auto pd = pooling(CUDNN_POOLING_MAX, 2, 0, 2);
  std::vector<float> ties(16, 5.0f);
  ties[10] = NAN;
  void *x = upload(ties), *y = allocate(16), *dx = allocate(64);
  void *dy = upload(std::vector<float>{1, 2, 3, 4});
  ASSERT_EQ(cudnnPoolingForward(handle_, pd, &oneF_, xd, x, &zeroF_, yd, y), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(cudnnPoolingBackward(handle_, pd, &oneF_, yd, y, yd, dy, xd, x, &zeroF_, xd, dx),
            CUDNN_STATUS_SUCCESS);
  auto yv = download<float>(y, 4);
  EXPECT_EQ(yv[0], 5.0f);
  EXPECT_TRUE(std::isnan(yv[3])) << "CUDNN_PROPAGATE_NAN";
  auto g = download<float>(dx, 16);
  std::vector<float> want(16, 0.0f);
  want[0] = 1, want[2] = 2, want[8] = 3, want[10] = 4; // the NaN is its window's maximum
  EXPECT_EQ(g, want);
}

TEST_F(CudnnEmu, TransformTensorCopiesBetweenLayoutsWithAlphaAndBeta) {
  Dims d{2, 3, 4, 5};
  auto x = rounded<float>(randoms(count(d), rng_)), y0 = rounded<float>(randoms(count(d), rng_));
  auto xd = tensor(CUDNN_DATA_FLOAT, d, false), yd = tensor(CUDNN_DATA_FLOAT, d, true);
  void *xp = upload(place<float>(x, d, nchwStrides(d)));
  void *yp = upload(place<float>(y0, d, nhwcStrides(d)));
  const float alpha = 3, beta = -1;
  ASSERT_EQ(cudnnTransformTensor(handle_, &alpha, xd, xp, &beta, yd, yp), CUDNN_STATUS_SUCCESS);
  std::vector<double> want(count(d));
  for (size_t i = 0; i < want.size(); ++i)
    want[i] = alpha * x[i] + beta * y0[i];
  expectNear(unplace(download<float>(yp, count(d)), d, nhwcStrides(d)), want, 1e-6, "NCHW->NHWC");
  // f16 in a padded row pitch (strides wider than the dims) back to dense NCHW.
  Dims wide{120, 40, 8, 1};
  auto hd = tensor(CUDNN_DATA_HALF, d, wide), dd = tensor(CUDNN_DATA_HALF, d, false);
  void *hp = upload(place<__half>(x, d, wide)), *dp = allocate(count(d) * 2);
  ASSERT_EQ(cudnnTransformTensor(handle_, &oneF_, hd, hp, &zeroF_, dd, dp), CUDNN_STATUS_SUCCESS);
  expectNear(unplace(download<__half>(dp, count(d)), d, nchwStrides(d)), rounded<__half>(x), 0,
             "strided f16");
}

TEST_F(CudnnEmu, InvalidArgumentsAreRejectedWithTheDocumentedStatus) {
  Geometry g{2, 4, 6, 6, 8, 3, 3, 1, 1};
  const cudnnDataType_t f = CUDNN_DATA_FLOAT;
  auto xd = tensor(f, g.x(), false), yd = tensor(f, g.y(), false);
  auto wd = filter(f, g.f(), false);
  auto cd = conv(g, f);
  void *x = allocate(count(g.x()) * 4), *w = allocate(count(g.f()) * 4);
  void *y = allocate(count(g.y()) * 4);
  auto forward = [&](cudnnTensorDescriptor_t xd, cudnnFilterDescriptor_t wd,
                     cudnnConvolutionDescriptor_t cd, cudnnTensorDescriptor_t yd,
                     const void *xp = nullptr, int algo = 0, const void *alpha = nullptr) {
    return cudnnConvolutionForward(handle_, alpha ? alpha : &oneF_, xd, xp ? xp : x, wd, w, cd,
                                   cudnnConvolutionFwdAlgo_t(algo), nullptr, 0, &zeroF_, yd, y);
  };
  ASSERT_EQ(forward(xd, wd, cd, yd), CUDNN_STATUS_SUCCESS);

  EXPECT_EQ(forward(xd, filter(f, {8, 3, 3, 3}, false), cd, yd), CUDNN_STATUS_BAD_PARAM)
      << "x and w disagree on C";
  EXPECT_EQ(forward(xd, wd, cd, tensor(f, {2, 7, 6, 6}, false)), CUDNN_STATUS_BAD_PARAM)
      << "y's channels are not K";
  EXPECT_EQ(forward(xd, wd, cd, tensor(f, {1, 8, 6, 6}, false)), CUDNN_STATUS_BAD_PARAM)
      << "y's batch is not x's";
  EXPECT_EQ(forward(xd, wd, cd, tensor(f, {2, 8, 5, 6}, false)), CUDNN_STATUS_NOT_SUPPORTED)
      << "y's spatial size is not the output dim";
  EXPECT_EQ(forward(xd, filter(CUDNN_DATA_HALF, g.f(), false), cd, yd), CUDNN_STATUS_BAD_PARAM)
      << "mixed data types";
  EXPECT_EQ(forward(xd, filter(f, {8, 4, 9, 9}, false), cd, yd), CUDNN_STATUS_BAD_PARAM)
      << "filter larger than the padded input";
  std::vector<float> host(count(g.x()));
  EXPECT_EQ(forward(xd, wd, cd, yd, host.data()), CUDNN_STATUS_BAD_PARAM) << "host pointer";
  EXPECT_EQ(cudnnConvolutionForward(handle_, nullptr, xd, x, wd, w, cd,
                                    CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &zeroF_,
                                    yd, y),
            CUDNN_STATUS_BAD_PARAM)
      << "null alpha";
  EXPECT_EQ(forward(xd, wd, cd, yd, nullptr, 42), CUDNN_STATUS_BAD_PARAM) << "invalid algo";
  EXPECT_EQ(forward(xd, wd, cd, yd, nullptr, CUDNN_CONVOLUTION_FWD_ALGO_DIRECT),
            CUDNN_STATUS_NOT_SUPPORTED)
      << "DIRECT is not implemented";
  EXPECT_EQ(forward(xd, wd, conv(g, CUDNN_DATA_HALF), yd), CUDNN_STATUS_NOT_SUPPORTED)
      << "f32 data with f16 compute";
  {
    auto hx = tensor(CUDNN_DATA_HALF, g.x(), false), hy = tensor(CUDNN_DATA_HALF, g.y(), false);
    EXPECT_EQ(forward(hx, filter(CUDNN_DATA_HALF, g.f(), false), conv(g, CUDNN_DATA_DOUBLE), hy),
              CUDNN_STATUS_NOT_SUPPORTED)
        << "f16 data with f64 compute";
  }
  cudnnConvolutionFwdAlgoPerf_t perf[8];
  int n = 0;
  EXPECT_EQ(cudnnGetConvolutionForwardAlgorithm_v7(handle_, xd, wd, cd, yd, 0, &n, perf),
            CUDNN_STATUS_BAD_PARAM)
      << "requestedAlgoCount 0";
  EXPECT_EQ(cudnnGetConvolutionForwardAlgorithm_v7(handle_, xd, filter(f, {8, 3, 3, 3}, false), cd,
                                                   yd, 8, &n, perf),
            CUDNN_STATUS_BAD_PARAM)
      << "getter with mismatched channels";

  // Descriptors.
  cudnnTensorDescriptor_t t;
  ASSERT_EQ(cudnnCreateTensorDescriptor(&t), CUDNN_STATUS_SUCCESS);
  tensors_.push_back(t);
  Dims zero{2, 0, 3, 3}, ones{1, 1, 1, 1};
  EXPECT_EQ(cudnnSetTensorNdDescriptor(t, f, 4, zero.data(), ones.data()), CUDNN_STATUS_BAD_PARAM);
  EXPECT_EQ(cudnnSetTensorNdDescriptor(t, f, 2, ones.data(), ones.data()),
            CUDNN_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(forward(t, wd, cd, yd), CUDNN_STATUS_BAD_PARAM) << "a descriptor never set";
  cudnnConvolutionDescriptor_t c;
  ASSERT_EQ(cudnnCreateConvolutionDescriptor(&c), CUDNN_STATUS_SUCCESS);
  convs_.push_back(c);
  EXPECT_EQ(cudnnSetConvolution2dDescriptor(c, -1, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, f),
            CUDNN_STATUS_BAD_PARAM);
  EXPECT_EQ(cudnnSetConvolution2dDescriptor(c, 0, 0, 0, 1, 1, 1, CUDNN_CROSS_CORRELATION, f),
            CUDNN_STATUS_BAD_PARAM);
  EXPECT_EQ(cudnnSetConvolution2dDescriptor(c, 0, 0, 1, 1, 0, 1, CUDNN_CROSS_CORRELATION, f),
            CUDNN_STATUS_BAD_PARAM);
  cudnnFilterDescriptor_t fd;
  ASSERT_EQ(cudnnCreateFilterDescriptor(&fd), CUDNN_STATUS_SUCCESS);
  filters_.push_back(fd);
  EXPECT_EQ(cudnnSetFilter4dDescriptor(fd, f, CUDNN_TENSOR_NCHW, 0, 1, 1, 1),
            CUDNN_STATUS_BAD_PARAM);
  cudnnPoolingDescriptor_t p;
  ASSERT_EQ(cudnnCreatePoolingDescriptor(&p), CUDNN_STATUS_SUCCESS);
  pools_.push_back(p);
  EXPECT_EQ(
      cudnnSetPooling2dDescriptor(p, CUDNN_POOLING_MAX, CUDNN_PROPAGATE_NAN, 0, 2, 0, 0, 1, 1),
      CUDNN_STATUS_BAD_PARAM);
  EXPECT_EQ(
      cudnnSetPooling2dDescriptor(p, CUDNN_POOLING_MAX, CUDNN_PROPAGATE_NAN, 2, 2, -1, 0, 1, 1),
      CUDNN_STATUS_BAD_PARAM);
  cudnnTensorDescriptor_t dead;
  ASSERT_EQ(cudnnCreateTensorDescriptor(&dead), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(cudnnDestroyTensorDescriptor(dead), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(forward(dead, wd, cd, yd), CUDNN_STATUS_BAD_PARAM) << "a destroyed descriptor";

  // Pooling and TransformTensor.
  auto pd = pooling(CUDNN_POOLING_MAX, 2, 0, 2);
  Dims pooled{2, 4, 3, 3};
  auto pyd = tensor(f, pooled, false);
  void *py = allocate(count(pooled) * 4);
  EXPECT_EQ(cudnnPoolingForward(handle_, pd, &oneF_, xd, x, &zeroF_, pyd, py),
            CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(
      cudnnPoolingForward(handle_, pd, &oneF_, xd, x, &zeroF_, tensor(f, {2, 4, 2, 3}, false), py),
      CUDNN_STATUS_BAD_PARAM)
      << "pooled output of the wrong size";
  EXPECT_EQ(
      cudnnPoolingForward(handle_, pd, &oneF_, xd, x, &zeroF_, tensor(f, {2, 5, 3, 3}, false), py),
      CUDNN_STATUS_BAD_PARAM)
      << "pooled output with other channels";
  EXPECT_EQ(cudnnPoolingBackward(handle_, pd, &oneF_, pyd, py, pyd, py, xd, x, &zeroF_,
                                 tensor(f, g.x(), true), x),
            CUDNN_STATUS_BAD_PARAM)
      << "x and dx with different strides";
  EXPECT_EQ(cudnnTransformTensor(handle_, &oneF_, xd, x, &zeroF_, yd, y), CUDNN_STATUS_BAD_PARAM)
      << "transform between different dims";
  EXPECT_EQ(cudnnTransformTensor(handle_, &oneF_, xd, x, &zeroF_,
                                 tensor(CUDNN_DATA_HALF, g.x(), false), y),
            CUDNN_STATUS_BAD_PARAM)
      << "transform between data types";
  EXPECT_EQ(
      cudnnTransformTensor(handle_, &oneF_, xd, x, &zeroF_, tensor(f, g.x(), {0, 0, 0, 1}), y),
      CUDNN_STATUS_BAD_PARAM)
      << "an overlapping output";

  EXPECT_EQ(cudnnSetStream(handle_, reinterpret_cast<CUstream>(uintptr_t(0x1234))),
            CUDNN_STATUS_BAD_PARAM);
  char message[256] = {};
  cudnnGetLastErrorString(message, sizeof message);
  EXPECT_NE(std::string(message), "") << "the last error says why";
}

// Batch 128 of 28x28x1 into 32 channels, 3x3: each pass well under a second on two cores.
TEST_F(CudnnEmu, Batch128ConvolutionPassesAreFast) {
  Geometry g{128, 1, 28, 28, 32, 3, 3, 1, 1};
  for (bool nhwc : {false, true}) {
    auto xd = tensor(CUDNN_DATA_FLOAT, g.x(), nhwc), yd = tensor(CUDNN_DATA_FLOAT, g.y(), nhwc);
    auto wd = filter(CUDNN_DATA_FLOAT, g.f(), nhwc);
    auto cd = conv(g, CUDNN_DATA_FLOAT);
    void *x = upload(std::vector<float>(count(g.x()), 0.5f));
    void *w = upload(std::vector<float>(count(g.f()), 0.25f));
    void *y = allocate(count(g.y()) * 4), *work = allocate(1 << 20);
    auto timed = [&](const char *what, auto &&call) {
      ASSERT_EQ(cuStreamSynchronize(stream_), CUDA_SUCCESS);
      auto start = std::chrono::steady_clock::now();
      ASSERT_EQ(call(), CUDNN_STATUS_SUCCESS) << what;
      ASSERT_EQ(cuStreamSynchronize(stream_), CUDA_SUCCESS) << smelt::emucuda::lastFault();
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("CudnnEmu: %s %s %.3f s\n", what, nhwc ? "NHWC" : "NCHW", s);
      EXPECT_LT(s, 1.0) << what;
    };
    timed("forward", [&] {
      return cudnnConvolutionForward(handle_, &oneF_, xd, x, wd, w, cd,
                                     CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, work, 1 << 20,
                                     &zeroF_, yd, y);
    });
    timed("backward data", [&] {
      return cudnnConvolutionBackwardData(handle_, &oneF_, wd, w, yd, y, cd,
                                          CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, work, 1 << 20, &zeroF_,
                                          xd, x);
    });
    timed("backward filter", [&] {
      return cudnnConvolutionBackwardFilter(handle_, &oneF_, xd, x, yd, y, cd,
                                            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, work, 1 << 20,
                                            &zeroF_, wd, w);
    });
  }
}

} // namespace
