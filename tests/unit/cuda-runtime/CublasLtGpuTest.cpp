// cuBLASLt matmuls (runtime/cuda/CublasLt.h) against a float64 reference on the host: the CPU
// executor's matmul on the inputs read back as f64, then the epilogue applied in f64. Every
// dtype, every transpose combination, strided batches, odd sizes, every epilogue, TF32, no
// workspace, unaligned pointers; and the errors, which name the op. Validation needs no GPU,
// so those tests run everywhere; the rest skip, saying why, without one.
#include "GpuTestUtil.h"
#include "RuntimeTestUtil.h"

#include "runtime/cuda/CublasLt.h"

#include <algorithm>
#include <climits>
#include <memory>
#include <stdexcept>

namespace smelt::rt::test {
namespace {

using cuda::CublasLt;
using cuda::MatmulCall;
using cuda::MatmulEpilogue;

const MatmulEpilogue kEpilogues[] = {MatmulEpilogue::None, MatmulEpilogue::Relu,
                                     MatmulEpilogue::Bias, MatmulEpilogue::BiasRelu};

MatmulCall makeCall(DType dtype, int64_t batch, int64_t m, int64_t n, int64_t k,
                    bool transposeLhs = false, bool transposeRhs = false,
                    MatmulEpilogue epilogue = MatmulEpilogue::None) {
  MatmulCall call;
  call.dtype = dtype;
  call.batch = batch;
  call.m = m;
  call.n = n;
  call.k = k;
  call.transposeLhs = transposeLhs;
  call.transposeRhs = transposeRhs;
  call.epilogue = epilogue;
  return call;
}

/// [rows, cols], with a leading batch dim when batch > 1.
std::vector<int64_t> shapeOf(int64_t batch, int64_t rows, int64_t cols) {
  if (batch == 1)
    return {rows, cols};
  return {batch, rows, cols};
}

HostTensor asF64(const HostTensor &t) {
  return HostTensor::fromDoubles({DType::f64, t.type().shape}, t.toDoubles());
}

/// Relative-norm tolerance: TF32 rounds products to a 10-bit mantissa; f16/bf16 round the
/// result; f32 and f64 as the CPU tests (so an f32 matmul quietly using TF32 fails).
double gpuTolerance(const MatmulCall &call) {
  if (call.dtype == DType::f32 && call.allowTf32)
    return 5e-3;
  if (call.dtype == DType::f16 || call.dtype == DType::bf16)
    return 1e-2;
  return tolerance(call.dtype);
}

CublasLt &blas() {
  static Expected<CublasLt *> lt = CublasLt::get(**testGpu());
  if (!lt.ok())
    throw std::runtime_error(lt.message()); // a GPU without cuBLASLt: fail loudly
  return **lt;
}

/// Prepares `call` once and runs it `runs` times, each on fresh random inputs compared with the
/// float64 reference. `offset` bytes are added to every operand pointer (to test alignment
/// below 256: the allocations are 256-byte aligned).
void checkMatmul(MatmulCall call, size_t offset = 0,
                 size_t workspaceBytes = CublasLt::kWorkspaceBytes, int runs = 1) {
  const int64_t b = call.batch, m = call.m, n = call.n, k = call.k;
  bool hasBias = cuda::hasBias(call.epilogue);
  std::string what = "matmul in " + cuda::describe(call);
  unsigned aligned = offset ? unsigned(std::min<size_t>(offset & -offset, 256)) : 256u;
  Expected<std::shared_ptr<const CublasLt::Plan>> plan =
      blas().prepare(call, {aligned, aligned, aligned, aligned}, workspaceBytes, what);
  ASSERT_TRUE(plan.ok()) << plan.message();
  for (int run = 0; run < runs; ++run) {
    HostTensor lhs =
        randomTensor(call.dtype, call.transposeLhs ? shapeOf(b, k, m) : shapeOf(b, m, k));
    HostTensor rhs =
        randomTensor(call.dtype, call.transposeRhs ? shapeOf(b, n, k) : shapeOf(b, k, n));
    HostTensor bias = randomTensor(call.dtype, {n});
    std::vector<double> ref =
        runOp("matmul", {asF64(lhs), asF64(rhs)}, {DType::f64, shapeOf(b, m, n)},
              {{"transpose_lhs", int64_t(call.transposeLhs)},
               {"transpose_rhs", int64_t(call.transposeRhs)}})
            .toDoubles();
    std::vector<double> biasValues = bias.toDoubles();
    for (size_t i = 0; i < ref.size(); ++i) {
      double x = ref[i] + (hasBias ? biasValues[i % size_t(n)] : 0.0);
      if (call.epilogue == MatmulEpilogue::Relu || call.epilogue == MatmulEpilogue::BiasRelu)
        x = std::max(x, 0.0);
      ref[i] = x;
    }

    // Device copies at `offset` into allocations of the size plus the offset.
    const cuda::CudaDevice &gpu = **testGpu();
    auto upload = [&](const HostTensor &t) {
      auto memory = std::make_unique<DeviceMemory>(t.byteSize() + offset);
      if (Status s = uploadAndWait(memory->ptr() + offset, t.raw(), t.byteSize()); !s.ok())
        throw std::runtime_error(s.message());
      return memory;
    };
    auto dLhs = upload(lhs), dRhs = upload(rhs), dBias = upload(bias);
    TensorType resultType{call.dtype, shapeOf(b, m, n)};
    DeviceMemory dResult(resultType.byteSize() + offset);
    DeviceMemory workspace(workspaceBytes);
    auto at = [&](const DeviceMemory &memory) {
      return static_cast<char *>(memory.pointer()) + offset;
    };
    SMELT_ASSERT_OK((*plan)->run(at(*dLhs), at(*dRhs), hasBias ? at(*dBias) : nullptr, at(dResult),
                                 workspaceBytes ? workspace.pointer() : nullptr));
    SMELT_ASSERT_OK(gpu.synchronize(what));
    HostTensor got = HostTensor::zeros(resultType);
    SMELT_ASSERT_OK(
        gpu.check(gpu.driver().memcpyDtoH(got.raw(), dResult.ptr() + offset, got.byteSize()),
                  "cuMemcpyDtoH"));
    expectClose(got, ref, what, gpuTolerance(call));
  }
}

TEST(CublasLt, EachDTypeMatchesFloat64) {
  SMELT_REQUIRE_GPU();
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16})
    checkMatmul(makeCall(dtype, 1, 37, 20, 51));
}

TEST(CublasLt, EveryTransposeCombinationWithAndWithoutBatch) {
  SMELT_REQUIRE_GPU();
  for (DType dtype : {DType::f32, DType::f16})
    for (int64_t batch : {1, 3})
      for (int flags = 0; flags < 4; ++flags)
        checkMatmul(makeCall(dtype, batch, 24, 40, 16, flags & 1, flags & 2));
}

TEST(CublasLt, StridedBatchOfEachDType) {
  SMELT_REQUIRE_GPU();
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16})
    checkMatmul(makeCall(dtype, 5, 32, 24, 40, true, false));
}

TEST(CublasLt, OddSizes) {
  SMELT_REQUIRE_GPU();
  struct Size {
    int64_t batch, m, n, k;
  };
  for (DType dtype : {DType::f32, DType::bf16})
    for (Size s : {Size{1, 7, 13, 5}, Size{1, 1, 1, 1}, Size{2, 1, 9, 3}, Size{3, 33, 1, 17},
                   Size{1, 5, 7, 1}, Size{2, 129, 65, 255}})
      for (int flags = 0; flags < 4; ++flags)
        checkMatmul(makeCall(dtype, s.batch, s.m, s.n, s.k, flags & 1, flags & 2));
}

// The bias is the same for every batch.
TEST(CublasLt, EachEpilogue) {
  SMELT_REQUIRE_GPU();
  for (DType dtype : {DType::f32, DType::f16, DType::bf16})
    for (MatmulEpilogue epilogue : kEpilogues) {
      checkMatmul(makeCall(dtype, 1, 48, 40, 24, false, false, epilogue));
      checkMatmul(makeCall(dtype, 2, 9, 13, 7, true, true, epilogue));
    }
}

TEST(CublasLt, Tf32OnlyWhenAsked) {
  SMELT_REQUIRE_GPU();
  MatmulCall call = makeCall(DType::f32, 2, 256, 192, 512);
  checkMatmul(call); // plain f32: within f32's tolerance, so no TF32 was used
  call.allowTf32 = true;
  checkMatmul(call);
  call.epilogue = MatmulEpilogue::BiasRelu;
  checkMatmul(call);
}

TEST(CublasLt, OnePlanRunsOnOtherBuffersEachTime) {
  SMELT_REQUIRE_GPU();
  checkMatmul(makeCall(DType::f16, 2, 64, 64, 64, false, true, MatmulEpilogue::BiasRelu), 0,
              CublasLt::kWorkspaceBytes, 3);
}

TEST(CublasLt, WithoutWorkspace) {
  SMELT_REQUIRE_GPU();
  checkMatmul(makeCall(DType::f32, 1, 64, 48, 96), 0, 0);
  checkMatmul(makeCall(DType::bf16, 2, 17, 9, 33, true, false, MatmulEpilogue::Bias), 0, 0);
}

// Pointers 4 bytes past 256-byte alignment: the heuristic is told, and picks an algorithm that
// copes (or the error says why).
TEST(CublasLt, F32PointersAlignedToTheirElementOnly) {
  SMELT_REQUIRE_GPU();
  checkMatmul(makeCall(DType::f32, 2, 20, 12, 28), 4);
}

// ---- errors ---------------------------------------------------------------------------------

const std::string kWhat = "matmul at model.mlir:12:5";

std::string validationError(const MatmulCall &call) {
  Status status = CublasLt::validate(call, kWhat);
  return status.ok() ? "" : status.message();
}

TEST(CublasLtErrors, DescribeNamesShapesAndEpilogue) {
  EXPECT_EQ(
      cuda::describe(makeCall(DType::f16, 1, 8, 5, 3, false, false, MatmulEpilogue::BiasRelu)),
      "f16 [8x3]x[3x5] with bias+relu");
  MatmulCall call = makeCall(DType::f32, 4, 8, 5, 3, true, false);
  call.allowTf32 = true;
  EXPECT_EQ(cuda::describe(call), "f32 [4x8x3]x[4x3x5] (lhs stored transposed) in TF32");
}

TEST(CublasLtErrors, ValidationNeedsNoGpu) {
  EXPECT_EQ(validationError(makeCall(DType::bf16, 2, 8, 5, 3, true, true, MatmulEpilogue::Relu)),
            "");

  std::string error = validationError(makeCall(DType::i32, 1, 8, 5, 3));
  EXPECT_NE(error.find(kWhat + ": cuBLASLt matmuls take f32, f64, f16 or bf16, not i32"),
            std::string::npos)
      << error;

  error = validationError(makeCall(DType::f32, 1, 0, 5, 3));
  EXPECT_NE(error.find(kWhat + ": matmul sizes must be positive, not batch 1, M 0, N 5, K 3"),
            std::string::npos)
      << error;
  EXPECT_NE(validationError(makeCall(DType::f32, -1, 8, 5, 3)), "");
  EXPECT_NE(validationError(makeCall(DType::f32, 1, 8, 5, -3)), "");

  error = validationError(makeCall(DType::f32, int64_t(INT_MAX) + 1, 8, 5, 3));
  EXPECT_NE(error.find(kWhat + ": batch 2147483648 is more than cuBLASLt takes"), std::string::npos)
      << error;
}

// prepare() refuses the same calls before touching the device, and alignments that do not
// suit them too.
TEST(CublasLtErrors, PrepareRefusesBadCallsNamingTheOp) {
  SMELT_REQUIRE_GPU();
  auto prepare = [&](const MatmulCall &call, cuda::MatmulAlignment alignment = {}) {
    Status status = blas().prepare(call, alignment, CublasLt::kWorkspaceBytes, kWhat).status();
    return status.ok() ? std::string() : status.message();
  };
  MatmulCall good = makeCall(DType::f32, 1, 8, 5, 3);
  EXPECT_EQ(prepare(good), "");

  std::string error = prepare(makeCall(DType::i64, 1, 8, 5, 3));
  EXPECT_EQ(error.rfind(kWhat + ": ", 0), 0u) << error;

  error = prepare(good, {.lhs = 2});
  EXPECT_NE(error.find(kWhat + ": the lhs pointer is not aligned to its element size"),
            std::string::npos)
      << error;

  MatmulCall biased = makeCall(DType::f32, 1, 8, 5, 3, false, false, MatmulEpilogue::Bias);
  error = prepare(biased, {.bias = 4});
  EXPECT_NE(error.find(kWhat + ": the bias pointer"), std::string::npos) << error;
  EXPECT_NE(error.find("is not 16-byte aligned"), std::string::npos) << error;
}

} // namespace
} // namespace smelt::rt::test
