// Known-answer tests of the emulated cuBLASLt (CublasLt.cpp), written from NVIDIA's cuBLASLt
// documentation rather than from Smelt's calls: column-major (and row-major) layouts with
// leading dimensions, transposes, strided batches, C and beta, each epilogue, f16/bf16/f64/TF32
// precision, the heuristic's promises, and the statuses the documented contract gives for bad
// arguments. Inputs are random (the seed is printed; SMELT_TEST_SEED replays it) and compared
// with a float64 reference computed here, within the error the emulated precision allows.
// Work is deferred, so every read-back synchronizes the stream first.
#include "EmuCuda.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

uint64_t testSeed() {
  static const uint64_t seed = [] {
    const char *given = std::getenv("SMELT_TEST_SEED");
    uint64_t value = given && *given
                         ? std::strtoull(given, nullptr, 0)
                         : (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
    std::fprintf(stderr, "CublasLtEmu: seed %llu (SMELT_TEST_SEED=%llu replays it)\n",
                 (unsigned long long)value, (unsigned long long)value);
    return value;
  }();
  return seed;
}

size_t bytesOf(cudaDataType type) { return type == CUDA_R_64F ? 8 : type == CUDA_R_32F ? 4 : 2; }

/// `x` as the storage type holds it.
double roundTo(cudaDataType type, double x) {
  switch (type) {
  case CUDA_R_16F:
    return __half2float(__float2half_rn(float(x)));
  case CUDA_R_16BF:
    return __bfloat162float(__float2bfloat16_rn(float(x)));
  case CUDA_R_32F:
    return float(x);
  default:
    return x;
  }
}

/// The unit roundoff of a type: half the distance from 1 to the next value.
double roundoff(cudaDataType type) {
  switch (type) {
  case CUDA_R_16F:
    return std::ldexp(1.0, -11);
  case CUDA_R_16BF:
    return std::ldexp(1.0, -8);
  case CUDA_R_32F:
    return std::ldexp(1.0, -24);
  default:
    return std::ldexp(1.0, -53);
  }
}

std::vector<unsigned char> encode(cudaDataType type, const std::vector<double> &values) {
  std::vector<unsigned char> bytes(values.size() * bytesOf(type));
  for (size_t i = 0; i < values.size(); ++i) {
    void *at = bytes.data() + i * bytesOf(type);
    if (type == CUDA_R_16F) {
      __half h = __float2half_rn(float(values[i]));
      std::memcpy(at, &h, 2);
    } else if (type == CUDA_R_16BF) {
      __nv_bfloat16 h = __float2bfloat16_rn(float(values[i]));
      std::memcpy(at, &h, 2);
    } else if (type == CUDA_R_32F) {
      float f = float(values[i]);
      std::memcpy(at, &f, 4);
    } else {
      std::memcpy(at, &values[i], 8);
    }
  }
  return bytes;
}

std::vector<double> decode(cudaDataType type, const std::vector<unsigned char> &bytes) {
  std::vector<double> values(bytes.size() / bytesOf(type));
  for (size_t i = 0; i < values.size(); ++i) {
    const void *at = bytes.data() + i * bytesOf(type);
    if (type == CUDA_R_16F) {
      __half h;
      std::memcpy(&h, at, 2);
      values[i] = __half2float(h);
    } else if (type == CUDA_R_16BF) {
      __nv_bfloat16 h;
      std::memcpy(&h, at, 2);
      values[i] = __bfloat162float(h);
    } else if (type == CUDA_R_32F) {
      float f;
      std::memcpy(&f, at, 4);
      values[i] = f;
    } else {
      std::memcpy(&values[i], at, 8);
    }
  }
  return values;
}

/// A matrix as cuBLASLt's layout describes it, its device copy, and every stored element
/// (padding between columns and batches included) as the test knows it.
struct Matrix {
  cudaDataType type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batch = 1;
  int64_t stride = 0;
  int32_t order = CUBLASLT_ORDER_COL;
  std::vector<double> values;
  CUdeviceptr device = 0;

  size_t offset(int32_t b, uint64_t i, uint64_t j) const {
    return b * stride + (order == CUBLASLT_ORDER_COL ? i + j * ld : i * ld + j);
  }
  double at(int32_t b, uint64_t i, uint64_t j) const { return values[offset(b, i, j)]; }
  size_t elements() const {
    uint64_t extent = order == CUBLASLT_ORDER_COL ? ld * cols : ld * rows;
    return std::max<size_t>(1, (batch - 1) * stride + extent);
  }
  void *pointer() const { return reinterpret_cast<void *>(uintptr_t(device)); }
};

/// What a matmul asks for besides its matrices.
struct Gemm {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType scale = CUDA_R_32F;
  int32_t transA = CUBLAS_OP_N, transB = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  double alpha = 1, beta = 0;
  const Matrix *bias = nullptr; // a column vector of D's rows
  int32_t biasType = -1;        // -1 leaves BIAS_DATA_TYPE unset
  bool inPlace = false;         // C is D
  uint64_t maxWorkspace = 0;
  size_t workspaceBytes = 0;  // given to the matmul; SIZE_MAX: what the heuristic said
  bool heuristicAlgo = true;  // false: algo = NULL, the library chooses
  bool deviceScalars = false; // alpha and beta in device memory (POINTER_MODE_DEVICE)
};

struct Outcome {
  cublasStatus_t heuristic = CUBLAS_STATUS_SUCCESS, matmul = CUBLAS_STATUS_NOT_INITIALIZED;
  size_t promisedWorkspace = 0;
};

double gelu(double x) {
  return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

class CublasLtEmu : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    ASSERT_EQ(cuDeviceGet(&device_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&context_, device_), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(context_), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ASSERT_EQ(cublasLtCreate(&handle_), CUBLAS_STATUS_SUCCESS);
    const char *name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    rng_.seed(testSeed() ^ std::hash<std::string>{}(name));
  }

  void TearDown() override {
    if (stream_)
      cuStreamSynchronize(stream_);
    for (CUdeviceptr pointer : allocations_)
      cuMemFree(pointer);
    for (cublasLtMatrixLayout_t layout : layouts_)
      cublasLtMatrixLayoutDestroy(layout);
    if (handle_)
      cublasLtDestroy(handle_);
    if (stream_)
      cuStreamDestroy(stream_);
    cuDevicePrimaryCtxRelease(device_);
  }

  CUdeviceptr allocate(size_t bytes) {
    CUdeviceptr pointer = 0;
    EXPECT_EQ(cuMemAlloc(&pointer, bytes), CUDA_SUCCESS);
    allocations_.push_back(pointer);
    return pointer;
  }

  /// A matrix of random values in [-1, 1) stored as `type`, copied to the device.
  Matrix matrix(cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld, int32_t batch = 1,
                int64_t stride = 0, int32_t order = CUBLASLT_ORDER_COL) {
    Matrix m;
    m.type = type;
    m.rows = rows;
    m.cols = cols;
    m.ld = ld;
    m.batch = batch;
    m.stride = stride;
    m.order = order;
    std::uniform_real_distribution<double> uniform(-1, 1);
    m.values.resize(m.elements());
    for (double &value : m.values)
      value = roundTo(type, uniform(rng_));
    upload(m);
    return m;
  }

  /// A single matrix holding `values` (by columns), copied to the device.
  Matrix known(cudaDataType type, uint64_t rows, uint64_t cols, std::vector<double> values) {
    Matrix m = matrix(type, rows, cols, int64_t(rows));
    m.values = std::move(values);
    upload(m);
    return m;
  }

  void upload(Matrix &m) {
    std::vector<unsigned char> bytes = encode(m.type, m.values);
    if (!m.device)
      m.device = allocate(bytes.size());
    ASSERT_EQ(cuMemcpyHtoD(m.device, bytes.data(), bytes.size()), CUDA_SUCCESS);
    // From pageable memory the copy may land after it returns, on the legacy stream, which a
    // non-blocking stream does not wait for.
    ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  }

  std::vector<double> download(const Matrix &m) {
    EXPECT_EQ(cuStreamSynchronize(stream_), CUDA_SUCCESS);
    std::vector<unsigned char> bytes(m.elements() * bytesOf(m.type));
    EXPECT_EQ(cuMemcpyDtoH(bytes.data(), m.device, bytes.size()), CUDA_SUCCESS);
    return decode(m.type, bytes);
  }

  cublasLtMatrixLayout_t layout(const Matrix &m) {
    cublasLtMatrixLayout_t layout = nullptr;
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&layout, m.type, m.rows, m.cols, m.ld),
              CUBLAS_STATUS_SUCCESS);
    layouts_.push_back(layout);
    EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_ORDER, &m.order,
                                               sizeof m.order),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &m.batch,
                                               sizeof m.batch),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                               &m.stride, sizeof m.stride),
              CUBLAS_STATUS_SUCCESS);
    return layout;
  }

  /// Describes, asks the heuristic, and queues D = epilogue(alpha op(A) op(B) + beta C + bias).
  Outcome matmul(const Gemm &g, const Matrix &a, const Matrix &b, const Matrix &c, Matrix &d,
                 const void *aPointer = nullptr) {
    Outcome out;
    cublasLtMatmulDesc_t desc = nullptr;
    EXPECT_EQ(cublasLtMatmulDescCreate(&desc, g.compute, g.scale), CUBLAS_STATUS_SUCCESS);
    auto set = [&](cublasLtMatmulDescAttributes_t attribute, const auto &value) {
      EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof value),
                CUBLAS_STATUS_SUCCESS);
    };
    set(CUBLASLT_MATMUL_DESC_TRANSA, g.transA);
    set(CUBLASLT_MATMUL_DESC_TRANSB, g.transB);
    set(CUBLASLT_MATMUL_DESC_EPILOGUE, g.epilogue);
    if (g.bias)
      set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias->pointer());
    if (g.biasType != -1)
      set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, g.biasType);
    cublasLtMatrixLayout_t la = layout(a), lb = layout(b), ld = layout(d);
    cublasLtMatrixLayout_t lc = g.inPlace ? ld : layout(c);
    cublasLtMatmulPreference_t preference = nullptr;
    EXPECT_EQ(cublasLtMatmulPreferenceCreate(&preference), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(preference,
                                                   CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                   &g.maxWorkspace, sizeof g.maxWorkspace),
              CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    out.heuristic = cublasLtMatmulAlgoGetHeuristic(handle_, desc, la, lb, lc, ld, preference, 1,
                                                   &result, &found);
    cublasLtMatmulPreferenceDestroy(preference);
    if (out.heuristic == CUBLAS_STATUS_SUCCESS) {
      EXPECT_EQ(found, 1);
      EXPECT_EQ(result.state, CUBLAS_STATUS_SUCCESS);
      EXPECT_LE(result.workspaceSize, g.maxWorkspace);
      out.promisedWorkspace = result.workspaceSize;
    }
    if (out.heuristic == CUBLAS_STATUS_SUCCESS || !g.heuristicAlgo) {
      size_t workspaceBytes =
          g.workspaceBytes == SIZE_MAX ? result.workspaceSize : g.workspaceBytes;
      void *workspace =
          workspaceBytes ? reinterpret_cast<void *>(uintptr_t(allocate(workspaceBytes))) : nullptr;
      float alpha32 = float(g.alpha), beta32 = float(g.beta);
      bool f64 = g.scale == CUDA_R_64F;
      const void *alpha = f64 ? static_cast<const void *>(&g.alpha) : &alpha32;
      const void *beta = f64 ? static_cast<const void *>(&g.beta) : &beta32;
      if (g.deviceScalars) {
        Matrix scalars = known(g.scale, 2, 1, {g.alpha, g.beta});
        alpha = scalars.pointer();
        beta = static_cast<const char *>(alpha) + bytesOf(g.scale);
        int32_t mode = CUBLASLT_POINTER_MODE_DEVICE;
        set(CUBLASLT_MATMUL_DESC_POINTER_MODE, mode);
      }
      const void *cPointer = g.inPlace ? d.pointer() : c.pointer();
      out.matmul = cublasLtMatmul(handle_, desc, alpha, aPointer ? aPointer : a.pointer(), la,
                                  b.pointer(), lb, beta, cPointer, lc, d.pointer(), ld,
                                  g.heuristicAlgo ? &result.algo : nullptr, workspace,
                                  workspaceBytes, stream_);
    }
    cublasLtMatmulDescDestroy(desc);
    return out;
  }

  /// Checks D after the matmul against a float64 reference: inside the matrix within the error
  /// of `g`'s precision, and the padding between columns and batches untouched.
  void expectResult(const Gemm &g, const Matrix &a, const Matrix &b, const Matrix &c,
                    const Matrix &dBefore, const Matrix &d) {
    std::vector<double> got = download(d);
    std::vector<double> expected = dBefore.values, bound(expected.size(), 0.0);
    const Matrix &cUsed = g.inPlace ? dBefore : c;
    bool tA = g.transA != CUBLAS_OP_N, tB = g.transB != CUBLAS_OP_N;
    uint64_t k = tA ? a.rows : a.cols;
    double uAcc = g.compute == CUBLAS_COMPUTE_64F ? roundoff(CUDA_R_64F) : roundoff(CUDA_R_32F);
    // TF32 rounds both factors to 10 mantissa bits: each product is off by up to 2 * 2^-11.
    double uInput = g.compute == CUBLAS_COMPUTE_32F_FAST_TF32 ? 2 * std::ldexp(1.0, -11) : 0;
    for (int32_t batch = 0; batch < d.batch; ++batch)
      for (uint64_t i = 0; i < d.rows; ++i)
        for (uint64_t j = 0; j < d.cols; ++j) {
          double sum = 0, magnitude = 0;
          for (uint64_t t = 0; t < k; ++t) {
            double x = tA ? a.at(batch, t, i) : a.at(batch, i, t);
            double y = tB ? b.at(batch, j, t) : b.at(batch, t, j);
            sum += x * y;
            magnitude += std::fabs(x * y);
          }
          double value = g.alpha * sum, scale = std::fabs(g.alpha) * magnitude;
          if (g.beta != 0) {
            value += g.beta * cUsed.at(batch, i, j);
            scale += std::fabs(g.beta * cUsed.at(batch, i, j));
          }
          if (g.bias) {
            value += g.bias->values[i];
            scale += std::fabs(g.bias->values[i]);
          }
          if (g.epilogue & CUBLASLT_EPILOGUE_RELU)
            value = std::max(value, 0.0);
          if (g.epilogue & CUBLASLT_EPILOGUE_GELU)
            value = gelu(value);
          size_t at = d.offset(batch, i, j);
          expected[at] = value;
          // Accumulation error grows with k; GELU's slope is at most 1.13; then D's rounding.
          bound[at] = 1.2 * (scale * ((k + 3) * uAcc + uInput)) +
                      2 * std::fabs(value) * roundoff(d.type) + 1e-30;
        }
    for (size_t at = 0; at < got.size(); ++at) {
      if (bound[at] == 0)
        EXPECT_EQ(got[at], expected[at]) << "padding element " << at << " was written";
      else
        EXPECT_NEAR(got[at], expected[at], bound[at]) << "element " << at;
    }
  }

  /// A matmul that should succeed, checked.
  void check(const Gemm &g, const Matrix &a, const Matrix &b, const Matrix &c, Matrix &d) {
    Matrix before = d;
    Outcome out = matmul(g, a, b, c, d);
    ASSERT_EQ(out.heuristic, CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(out.matmul, CUBLAS_STATUS_SUCCESS);
    expectResult(g, a, b, c, before, d);
    d.values = download(d); // what the next matmul on d starts from
  }

  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  cublasLtHandle_t handle_ = nullptr;
  std::mt19937_64 rng_;
  std::vector<CUdeviceptr> allocations_;
  std::vector<cublasLtMatrixLayout_t> layouts_;
};

TEST_F(CublasLtEmu, VersionAndStatusStrings) {
  EXPECT_EQ(cublasLtGetVersion(), size_t(CUBLAS_VERSION));
  EXPECT_EQ(cublasLtGetVersion() / 10000, size_t(CUBLAS_VER_MAJOR));
  EXPECT_STREQ(cublasLtGetStatusName(CUBLAS_STATUS_SUCCESS), "CUBLAS_STATUS_SUCCESS");
  EXPECT_STREQ(cublasLtGetStatusName(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE");
  EXPECT_STREQ(cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED");
  ASSERT_NE(cublasLtGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED), nullptr);
  EXPECT_GT(std::strlen(cublasLtGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED)), 0u);
  EXPECT_NE(cublasLtGetStatusName(cublasStatus_t(12345)), nullptr);
}

// [1 2 3; 4 5 6] [7 8; 9 10; 11 12] = [58 64; 139 154], every matrix stored by columns.
TEST_F(CublasLtEmu, HandComputedColumnMajor) {
  Matrix a = known(CUDA_R_32F, 2, 3, {1, 4, 2, 5, 3, 6});
  Matrix b = known(CUDA_R_32F, 3, 2, {7, 9, 11, 8, 10, 12});
  Matrix d = known(CUDA_R_32F, 2, 2, {0, 0, 0, 0});
  Outcome out = matmul(Gemm{}, a, b, d, d);
  ASSERT_EQ(out.matmul, CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(download(d), (std::vector<double>{58, 139, 64, 154}));
}

TEST_F(CublasLtEmu, LeadingDimensionsLargerThanRows) {
  Matrix a = matrix(CUDA_R_32F, 5, 3, 8), b = matrix(CUDA_R_32F, 3, 7, 6);
  Matrix c = matrix(CUDA_R_32F, 5, 7, 5), d = matrix(CUDA_R_32F, 5, 7, 9);
  check(Gemm{}, a, b, c, d);
}

TEST_F(CublasLtEmu, Transposes) {
  const uint64_t m = 6, n = 5, k = 4;
  for (int32_t transA : {CUBLAS_OP_N, CUBLAS_OP_T})
    for (int32_t transB : {CUBLAS_OP_N, CUBLAS_OP_T}) {
      SCOPED_TRACE("TRANSA " + std::to_string(transA) + " TRANSB " + std::to_string(transB));
      // Stored transposed: op(A) = A^T is m x k, so A is k x m.
      Matrix a =
          transA == CUBLAS_OP_N ? matrix(CUDA_R_32F, m, k, m + 1) : matrix(CUDA_R_32F, k, m, k + 2);
      Matrix b =
          transB == CUBLAS_OP_N ? matrix(CUDA_R_32F, k, n, k) : matrix(CUDA_R_32F, n, k, n + 3);
      Matrix c = matrix(CUDA_R_32F, m, n, m), d = matrix(CUDA_R_32F, m, n, m);
      Gemm g;
      g.transA = transA;
      g.transB = transB;
      check(g, a, b, c, d);
    }
}

TEST_F(CublasLtEmu, StridedBatches) {
  // Strides leave gaps between batches, which must stay untouched.
  Matrix a = matrix(CUDA_R_32F, 4, 3, 4, 3, 4 * 3 + 5), b = matrix(CUDA_R_32F, 3, 6, 3, 3, 20);
  Matrix c = matrix(CUDA_R_32F, 4, 6, 4, 3, 24), d = matrix(CUDA_R_32F, 4, 6, 5, 3, 31);
  check(Gemm{}, a, b, c, d);
  // Batch stride 0 uses one B for every batch.
  Matrix shared = matrix(CUDA_R_32F, 3, 6, 3, 3, 0);
  check(Gemm{}, a, shared, c, d);
}

TEST_F(CublasLtEmu, BetaScalesCOutOfPlaceAndInPlace) {
  Matrix a = matrix(CUDA_R_32F, 7, 5, 7), b = matrix(CUDA_R_32F, 5, 4, 5);
  Matrix c = matrix(CUDA_R_32F, 7, 4, 10), d = matrix(CUDA_R_32F, 7, 4, 8);
  Gemm g;
  g.alpha = 0.5;
  g.beta = -2;
  check(g, a, b, c, d); // C and D differ, and so do their leading dimensions
  g.inPlace = true;
  check(g, a, b, c, d); // C == D
}

// POINTER_MODE_DEVICE: alpha and beta are read from device memory when the work runs.
TEST_F(CublasLtEmu, DeviceScalars) {
  Matrix a = matrix(CUDA_R_32F, 6, 5, 6), b = matrix(CUDA_R_32F, 5, 3, 5);
  Matrix c = matrix(CUDA_R_32F, 6, 3, 6), d = matrix(CUDA_R_32F, 6, 3, 6);
  Gemm g;
  g.alpha = -1.25;
  g.beta = 3;
  g.deviceScalars = true;
  check(g, a, b, c, d);
}

TEST_F(CublasLtEmu, ZeroBetaIgnoresNanInC) {
  Matrix a = matrix(CUDA_R_32F, 3, 2, 3), b = matrix(CUDA_R_32F, 2, 3, 2);
  Matrix c = matrix(CUDA_R_32F, 3, 3, 3), d = matrix(CUDA_R_32F, 3, 3, 3);
  for (double &value : c.values)
    value = NAN;
  upload(c);
  check(Gemm{}, a, b, c, d);
}

TEST_F(CublasLtEmu, Epilogues) {
  const uint32_t epilogues[] = {CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_RELU,
                                CUBLASLT_EPILOGUE_BIAS,    CUBLASLT_EPILOGUE_RELU_BIAS,
                                CUBLASLT_EPILOGUE_GELU,    CUBLASLT_EPILOGUE_GELU_BIAS};
  Matrix a = matrix(CUDA_R_32F, 9, 6, 9, 2, 60), b = matrix(CUDA_R_32F, 6, 5, 6, 2, 30);
  Matrix c = matrix(CUDA_R_32F, 9, 5, 9, 2, 45), bias = matrix(CUDA_R_32F, 9, 1, 9);
  for (uint32_t epilogue : epilogues) {
    SCOPED_TRACE("epilogue " + std::to_string(epilogue));
    Matrix d = matrix(CUDA_R_32F, 9, 5, 11, 2, 60);
    Gemm g;
    g.epilogue = epilogue;
    g.beta = 0.25;
    g.bias = epilogue & CUBLASLT_EPILOGUE_BIAS ? &bias : nullptr;
    check(g, a, b, c, d);
  }
}

// GELU is the tanh approximation: gelu(1) = 0.841192 where the erf form gives 0.841345.
TEST_F(CublasLtEmu, GeluIsTheTanhApproximation) {
  Matrix a = known(CUDA_R_32F, 3, 1, {1, -0.5, 1.5}), b = known(CUDA_R_32F, 1, 1, {1});
  Matrix d = known(CUDA_R_32F, 3, 1, {0, 0, 0}), bias = known(CUDA_R_32F, 3, 1, {0, 0, 0.5});
  Gemm g;
  g.epilogue = CUBLASLT_EPILOGUE_GELU_BIAS;
  g.bias = &bias;
  ASSERT_EQ(matmul(g, a, b, d, d).matmul, CUBLAS_STATUS_SUCCESS);
  std::vector<double> got = download(d);
  EXPECT_NEAR(got[0], 0.8411919906082768, 1e-6);
  EXPECT_NEAR(got[1], -0.15428599017485606, 1e-6);
  EXPECT_NEAR(got[2], 1.954597694087775, 1e-6); // bias first, then GELU
}

TEST_F(CublasLtEmu, HalfAndBfloat16AccumulateInFloat) {
  for (auto [in, out] : {std::pair{CUDA_R_16F, CUDA_R_16F},
                         {CUDA_R_16BF, CUDA_R_16BF},
                         {CUDA_R_16F, CUDA_R_32F},
                         {CUDA_R_16BF, CUDA_R_32F}}) {
    SCOPED_TRACE(std::to_string(in) + " -> " + std::to_string(out));
    Matrix a = matrix(in, 12, 40, 12), b = matrix(in, 40, 9, 40);
    Matrix c = matrix(out, 12, 9, 12), d = matrix(out, 12, 9, 12), bias = matrix(out, 12, 1, 12);
    Gemm g;
    g.beta = 1;
    g.epilogue = CUBLASLT_EPILOGUE_RELU_BIAS;
    g.bias = &bias;
    check(g, a, b, c, d);
  }
  // A sum that f16 accumulation would lose: 2048 + 1 + 1 is 2050 in f32, 2048 in f16.
  Matrix a = known(CUDA_R_16F, 1, 3, {2048, 1, 1}), b = known(CUDA_R_16F, 3, 1, {1, 1, 1});
  Matrix d = known(CUDA_R_32F, 1, 1, {0});
  ASSERT_EQ(matmul(Gemm{}, a, b, d, d).matmul, CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(download(d)[0], 2050);
}

TEST_F(CublasLtEmu, Float64) {
  Gemm g;
  g.compute = CUBLAS_COMPUTE_64F;
  g.scale = CUDA_R_64F;
  g.alpha = 1.5;
  g.beta = -0.75;
  Matrix a = matrix(CUDA_R_64F, 8, 30, 8), b = matrix(CUDA_R_64F, 8, 30, 8);
  Matrix c = matrix(CUDA_R_64F, 8, 8, 8), d = matrix(CUDA_R_64F, 8, 8, 8);
  g.transB = CUBLAS_OP_T;
  check(g, a, b, c, d);
  // 1 + 2^-40 survives in f64, not in f32.
  Matrix x = known(CUDA_R_64F, 1, 1, {1 + std::ldexp(1.0, -40)});
  Matrix y = known(CUDA_R_64F, 1, 1, {1}), z = known(CUDA_R_64F, 1, 1, {0});
  Gemm plain;
  plain.compute = CUBLAS_COMPUTE_64F;
  plain.scale = CUDA_R_64F;
  ASSERT_EQ(matmul(plain, x, y, z, z).matmul, CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(download(z)[0], 1 + std::ldexp(1.0, -40));
}

// CUBLAS_COMPUTE_32F_FAST_TF32 rounds f32 inputs to TF32's 10 mantissa bits; 32F does not.
TEST_F(CublasLtEmu, Tf32RoundsInputsToTenMantissaBits) {
  Matrix a = known(CUDA_R_32F, 2, 1, {1 + std::ldexp(1.0, -12), 1 + 3 * std::ldexp(1.0, -12)});
  Matrix b = known(CUDA_R_32F, 1, 1, {1}), d = known(CUDA_R_32F, 2, 1, {0, 0});
  Gemm tf32;
  tf32.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  ASSERT_EQ(matmul(tf32, a, b, d, d).matmul, CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(download(d), (std::vector<double>{1, 1 + std::ldexp(1.0, -10)}));
  ASSERT_EQ(matmul(Gemm{}, a, b, d, d).matmul, CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(download(d), a.values);
  // Random inputs, within TF32's error.
  Matrix x = matrix(CUDA_R_32F, 10, 33, 10), y = matrix(CUDA_R_32F, 33, 7, 33);
  Matrix c = matrix(CUDA_R_32F, 10, 7, 10), z = matrix(CUDA_R_32F, 10, 7, 10);
  check(tf32, x, y, c, z);
}

TEST_F(CublasLtEmu, RowMajorLayouts) {
  Matrix a = matrix(CUDA_R_32F, 5, 4, 6, 1, 0, CUBLASLT_ORDER_ROW);
  Matrix b = matrix(CUDA_R_32F, 4, 3, 3, 1, 0, CUBLASLT_ORDER_ROW);
  Matrix c = matrix(CUDA_R_32F, 5, 3, 4, 1, 0, CUBLASLT_ORDER_ROW);
  Matrix d = matrix(CUDA_R_32F, 5, 3, 5, 1, 0, CUBLASLT_ORDER_ROW);
  Gemm g;
  g.beta = 1;
  check(g, a, b, c, d);
}

TEST_F(CublasLtEmu, HeuristicKeepsWithinWorkspaceAndAlignment) {
  Matrix a = matrix(CUDA_R_32F, 8, 8, 8), b = matrix(CUDA_R_32F, 8, 8, 8);
  Matrix d = matrix(CUDA_R_32F, 8, 8, 8);
  for (uint64_t max : {uint64_t(0), uint64_t(4096), uint64_t(64) << 20}) {
    Gemm g;
    g.maxWorkspace = max;
    g.workspaceBytes = SIZE_MAX;
    Outcome out = matmul(g, a, b, d, d);
    EXPECT_EQ(out.heuristic, CUBLAS_STATUS_SUCCESS);
    EXPECT_LE(out.promisedWorkspace, max);
    EXPECT_EQ(out.matmul, CUBLAS_STATUS_SUCCESS);
  }

  cublasLtMatmulDesc_t desc;
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  cublasLtMatrixLayout_t la = layout(a);
  cublasLtMatmulPreference_t preference;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&preference), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t results[4];
  int found = -1;
  EXPECT_EQ(
      cublasLtMatmulAlgoGetHeuristic(handle_, desc, la, la, la, la, preference, 0, results, &found),
      CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(
      cublasLtMatmulAlgoGetHeuristic(handle_, desc, la, la, la, la, preference, 4, results, &found),
      CUBLAS_STATUS_SUCCESS);
  EXPECT_GE(found, 1);
  EXPECT_LE(found, 4);
  // No algorithm reads f32 through a 2-byte-aligned pointer: none is returned.
  uint32_t two = 2;
  ASSERT_EQ(cublasLtMatmulPreferenceSetAttribute(
                preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &two, sizeof two),
            CUBLAS_STATUS_SUCCESS);
  found = -1;
  EXPECT_EQ(
      cublasLtMatmulAlgoGetHeuristic(handle_, desc, la, la, la, la, preference, 4, results, &found),
      CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(found, 0);
  cublasLtMatmulPreferenceDestroy(preference);
  cublasLtMatmulDescDestroy(desc);
}

TEST_F(CublasLtEmu, WorkspaceMustCoverTheHeuristicsPromise) {
  Matrix a = matrix(CUDA_R_32F, 8, 8, 8), b = matrix(CUDA_R_32F, 8, 8, 8);
  Matrix d = matrix(CUDA_R_32F, 8, 8, 8);
  Gemm g;
  g.maxWorkspace = 64 << 20;
  g.workspaceBytes = SIZE_MAX;
  Outcome promised = matmul(g, a, b, d, d);
  ASSERT_EQ(promised.matmul, CUBLAS_STATUS_SUCCESS);
  if (promised.promisedWorkspace > 0) {
    g.workspaceBytes = promised.promisedWorkspace - 1;
    EXPECT_EQ(matmul(g, a, b, d, d).matmul, CUBLAS_STATUS_INVALID_VALUE);
  }
  // With no algorithm given, the library picks one that fits the workspace it is handed.
  g.heuristicAlgo = false;
  g.workspaceBytes = 0;
  Matrix before = d;
  ASSERT_EQ(matmul(g, a, b, d, d).matmul, CUBLAS_STATUS_SUCCESS);
  expectResult(g, a, b, d, before, d);
}

TEST_F(CublasLtEmu, RejectsInvalidArguments) {
  Matrix a = matrix(CUDA_R_32F, 4, 3, 4), b = matrix(CUDA_R_32F, 3, 5, 3);
  Matrix c = matrix(CUDA_R_32F, 4, 5, 4), d = matrix(CUDA_R_32F, 4, 5, 4);
  auto heuristic = [&](const Gemm &g, const Matrix &x, const Matrix &y, const Matrix &z) {
    Matrix out = z;
    return matmul(g, x, y, z, out).heuristic;
  };
  auto run = [&](const Gemm &g, const Matrix &x, const Matrix &y, const Matrix &z) {
    Matrix out = z;
    return matmul(g, x, y, z, out).matmul;
  };

  // Handles.
  EXPECT_EQ(cublasLtCreate(nullptr), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtDestroy(nullptr), CUBLAS_STATUS_INVALID_VALUE);
  cublasLtHandle_t kept = handle_;
  handle_ = nullptr;
  EXPECT_EQ(heuristic(Gemm{}, a, b, d), CUBLAS_STATUS_NOT_INITIALIZED);
  Gemm noHeuristic;
  noHeuristic.heuristicAlgo = false;
  EXPECT_EQ(run(noHeuristic, a, b, d), CUBLAS_STATUS_NOT_INITIALIZED);
  cublasLtHandle_t destroyed;
  ASSERT_EQ(cublasLtCreate(&destroyed), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtDestroy(destroyed), CUBLAS_STATUS_SUCCESS);
  handle_ = destroyed;
  EXPECT_EQ(run(noHeuristic, a, b, d), CUBLAS_STATUS_NOT_INITIALIZED);
  handle_ = kept;

  // Attributes: a null buffer, or a size other than the attribute's.
  cublasLtMatmulDesc_t desc;
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  int64_t wide = CUBLAS_OP_T;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &wide, sizeof wide),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, nullptr, 4),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(nullptr, CUBLASLT_MATMUL_DESC_TRANSA, &wide, 4),
            CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatmulDescDestroy(desc);
  cublasLtMatrixLayout_t la = layout(a);
  int64_t batch64 = 2;
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch64,
                                             sizeof batch64),
            CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatmulPreference_t preference;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&preference), CUBLAS_STATUS_SUCCESS);
  uint32_t narrow = 1024;
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(
                preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &narrow, sizeof narrow),
            CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatmulPreferenceDestroy(preference);

  // Shapes that do not make a product, and leading dimensions below the rows.
  Matrix wrongK = matrix(CUDA_R_32F, 2, 5, 2);
  EXPECT_EQ(heuristic(Gemm{}, a, wrongK, d), CUBLAS_STATUS_INVALID_VALUE);
  Matrix wrongRows = matrix(CUDA_R_32F, 3, 5, 3);
  EXPECT_EQ(heuristic(Gemm{}, a, b, wrongRows), CUBLAS_STATUS_INVALID_VALUE);
  Gemm transposed;
  transposed.transA = CUBLAS_OP_T; // op(A) is 3x4: k no longer matches B's 3 rows
  EXPECT_EQ(heuristic(transposed, a, b, d), CUBLAS_STATUS_INVALID_VALUE);
  Matrix shortLd = a;
  shortLd.ld = 3;
  EXPECT_EQ(heuristic(Gemm{}, shortLd, b, d), CUBLAS_STATUS_INVALID_VALUE);
  Matrix batched = matrix(CUDA_R_32F, 3, 5, 3, 2, 15);
  EXPECT_EQ(heuristic(Gemm{}, a, batched, d), CUBLAS_STATUS_INVALID_VALUE);
  Matrix cShape = matrix(CUDA_R_32F, 4, 4, 4);
  {
    Matrix out = d;
    EXPECT_EQ(matmul(Gemm{}, a, b, cShape, out).heuristic, CUBLAS_STATUS_INVALID_VALUE);
  }

  // Types: mixed A and B, C unlike D, and combinations cublasLtMatmul's table lacks.
  Matrix halfB = matrix(CUDA_R_16F, 3, 5, 3);
  EXPECT_EQ(heuristic(Gemm{}, a, halfB, d), CUBLAS_STATUS_NOT_SUPPORTED);
  Matrix doubleC = matrix(CUDA_R_64F, 4, 5, 4);
  {
    Matrix out = d;
    EXPECT_EQ(matmul(Gemm{}, a, b, doubleC, out).heuristic, CUBLAS_STATUS_INVALID_VALUE);
  }
  Gemm f64OnF32;
  f64OnF32.compute = CUBLAS_COMPUTE_64F;
  f64OnF32.scale = CUDA_R_64F;
  EXPECT_EQ(heuristic(f64OnF32, a, b, d), CUBLAS_STATUS_NOT_SUPPORTED);
  Gemm wrongScale;
  wrongScale.scale = CUDA_R_64F;
  EXPECT_EQ(heuristic(wrongScale, a, b, d), CUBLAS_STATUS_NOT_SUPPORTED);
  Gemm tf32;
  tf32.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  Matrix halfA = matrix(CUDA_R_16F, 4, 3, 4), halfD = matrix(CUDA_R_16F, 4, 5, 4);
  EXPECT_EQ(heuristic(tf32, halfA, halfB, halfD), CUBLAS_STATUS_NOT_SUPPORTED);

  // Epilogues: a bias epilogue needs BIAS_POINTER when it runs; a bias of another type;
  // unemulated or row-major epilogues.
  Gemm biasWithoutPointer;
  biasWithoutPointer.epilogue = CUBLASLT_EPILOGUE_BIAS;
  {
    Matrix out = d;
    Outcome outcome = matmul(biasWithoutPointer, a, b, c, out);
    EXPECT_EQ(outcome.heuristic, CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(outcome.matmul, CUBLAS_STATUS_INVALID_VALUE);
  }
  Matrix bias = matrix(CUDA_R_32F, 4, 1, 4);
  Gemm wrongBiasType = biasWithoutPointer;
  wrongBiasType.bias = &bias;
  wrongBiasType.biasType = CUDA_R_64F;
  EXPECT_EQ(heuristic(wrongBiasType, a, b, d), CUBLAS_STATUS_INVALID_VALUE);
  Gemm aux;
  aux.epilogue = CUBLASLT_EPILOGUE_RELU_AUX;
  EXPECT_EQ(heuristic(aux, a, b, d), CUBLAS_STATUS_NOT_SUPPORTED);
  Gemm reluRow;
  reluRow.epilogue = CUBLASLT_EPILOGUE_RELU;
  Matrix rowA = matrix(CUDA_R_32F, 4, 3, 3, 1, 0, CUBLASLT_ORDER_ROW);
  Matrix rowB = matrix(CUDA_R_32F, 3, 5, 5, 1, 0, CUBLASLT_ORDER_ROW);
  Matrix rowD = matrix(CUDA_R_32F, 4, 5, 5, 1, 0, CUBLASLT_ORDER_ROW);
  EXPECT_EQ(heuristic(reluRow, rowA, rowB, rowD), CUBLAS_STATUS_NOT_SUPPORTED);

  // Pointers: host memory where the kernel reads device memory; null alpha.
  std::vector<float> host(12);
  {
    Matrix out = d;
    EXPECT_EQ(matmul(Gemm{}, a, b, c, out, host.data()).matmul, CUBLAS_STATUS_INVALID_VALUE);
  }
  cublasLtMatmulDesc_t plain;
  ASSERT_EQ(cublasLtMatmulDescCreate(&plain, CUBLAS_COMPUTE_32F, CUDA_R_32F),
            CUBLAS_STATUS_SUCCESS);
  cublasLtMatrixLayout_t lb = layout(b), ld = layout(d);
  float one = 1, zero = 0;
  EXPECT_EQ(cublasLtMatmul(handle_, plain, nullptr, a.pointer(), la, b.pointer(), lb, &zero,
                           d.pointer(), ld, d.pointer(), ld, nullptr, nullptr, 0, stream_),
            CUBLAS_STATUS_INVALID_VALUE);
  // In place (C == D) needs Cdesc to equal Ddesc.
  Matrix widerC = matrix(CUDA_R_32F, 4, 5, 6);
  cublasLtMatrixLayout_t lWide = layout(widerC);
  EXPECT_EQ(cublasLtMatmul(handle_, plain, &one, a.pointer(), la, b.pointer(), lb, &one,
                           d.pointer(), lWide, d.pointer(), ld, nullptr, nullptr, 0, stream_),
            CUBLAS_STATUS_INVALID_VALUE);
  // An algorithm that no heuristic returned.
  cublasLtMatmulAlgo_t madeUp{};
  EXPECT_EQ(cublasLtMatmul(handle_, plain, &one, a.pointer(), la, b.pointer(), lb, &zero,
                           d.pointer(), ld, d.pointer(), ld, &madeUp, nullptr, 0, stream_),
            CUBLAS_STATUS_INVALID_VALUE);
  // A destroyed descriptor.
  cublasLtMatmulDescDestroy(plain);
  EXPECT_EQ(cublasLtMatmul(handle_, plain, &one, a.pointer(), la, b.pointer(), lb, &zero,
                           d.pointer(), ld, d.pointer(), ld, nullptr, nullptr, 0, stream_),
            CUBLAS_STATUS_INVALID_VALUE);
}

// Queued work reads device memory when it runs: D freed before then is a fault the
// synchronize reports, naming the matmul.
TEST_F(CublasLtEmu, FreedMemoryFaultsWhenTheWorkRuns) {
  Matrix a = matrix(CUDA_R_32F, 4, 3, 4), b = matrix(CUDA_R_32F, 3, 5, 3);
  Matrix d = matrix(CUDA_R_32F, 4, 5, 4);
  ASSERT_EQ(cuMemFree(d.device), CUDA_SUCCESS);
  allocations_.erase(std::find(allocations_.begin(), allocations_.end(), d.device));
  Outcome out = matmul(Gemm{}, a, b, d, d);
  ASSERT_EQ(out.matmul, CUBLAS_STATUS_SUCCESS); // a real GPU finds out only when it runs
  EXPECT_NE(cuStreamSynchronize(stream_), CUDA_SUCCESS);
  EXPECT_NE(smelt::emucuda::lastFault().find("cublasLtMatmul"), std::string::npos)
      << smelt::emucuda::lastFault();
  smelt::emucuda::clearFault();
}

// [256x784] x [784x512] in f32 (a batch of 256 MNIST images through a 512-wide layer).
TEST_F(CublasLtEmu, LargeMatmulIsFast) {
  const uint64_t m = 512, n = 256, k = 784;
  Matrix a = matrix(CUDA_R_32F, m, k, m), b = matrix(CUDA_R_32F, k, n, k);
  Matrix d = matrix(CUDA_R_32F, m, n, m);
  auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(matmul(Gemm{}, a, b, d, d).matmul, CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(stream_), CUDA_SUCCESS);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "CublasLtEmu: [%llux%llu]x[%llux%llu] f32 took %.3f s\n",
               (unsigned long long)n, (unsigned long long)k, (unsigned long long)k,
               (unsigned long long)m, seconds);
  EXPECT_LT(seconds, 1.5); // well under 0.5 s unloaded; the margin is for a busy machine
  std::vector<double> got = download(d);
  std::uniform_int_distribution<uint64_t> row(0, m - 1), col(0, n - 1);
  for (int sample = 0; sample < 64; ++sample) {
    uint64_t i = row(rng_), j = col(rng_);
    double sum = 0, magnitude = 0;
    for (uint64_t t = 0; t < k; ++t) {
      sum += a.at(0, i, t) * b.at(0, t, j);
      magnitude += std::fabs(a.at(0, i, t) * b.at(0, t, j));
    }
    EXPECT_NEAR(got[d.offset(0, i, j)], sum, magnitude * (k + 3) * std::ldexp(1.0, -24) + 1e-6);
  }
}

} // namespace
