// Opens libcublasLt with dlopen and resolves its table, once per process, and implements
// CublasLt (CublasLt.h): row-major matmuls mapped onto cuBLASLt's column-major ones, each
// prepared once with the algorithm its heuristic chose.
#include "runtime/cuda/CublasLt.h"

#include "runtime/Allocator.h"
#include "runtime/cuda/DynamicLibrary.h"

#include <cublasLt.h>
#include <fmt/format.h>

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <initializer_list>
#include <utility>

namespace smelt::rt::cuda {

namespace {

// symbol in libcublasLt, member in the table.
#define SMELT_CUBLASLT_ENTRIES(X)                                                                  \
  X(cublasLtGetVersion, getVersion)                                                                \
  X(cublasLtGetStatusName, getStatusName)                                                          \
  X(cublasLtGetStatusString, getStatusString)                                                      \
  X(cublasLtCreate, create)                                                                        \
  X(cublasLtMatmulDescCreate, descCreate)                                                          \
  X(cublasLtMatmulDescDestroy, descDestroy)                                                        \
  X(cublasLtMatmulDescSetAttribute, descSet)                                                       \
  X(cublasLtMatrixLayoutCreate, layoutCreate)                                                      \
  X(cublasLtMatrixLayoutDestroy, layoutDestroy)                                                    \
  X(cublasLtMatrixLayoutSetAttribute, layoutSet)                                                   \
  X(cublasLtMatmulPreferenceCreate, preferenceCreate)                                              \
  X(cublasLtMatmulPreferenceDestroy, preferenceDestroy)                                            \
  X(cublasLtMatmulPreferenceSetAttribute, preferenceSet)                                           \
  X(cublasLtMatmulAlgoGetHeuristic, algoGetHeuristic)                                              \
  X(cublasLtMatmul, matmul)

struct Library {
#define SMELT_CUBLASLT_MEMBER(symbol, member) decltype(&::symbol) member = nullptr;
  SMELT_CUBLASLT_ENTRIES(SMELT_CUBLASLT_MEMBER)
#undef SMELT_CUBLASLT_MEMBER

  /// Success, or "<call> failed: CUBLAS_STATUS_<NAME> (<description>)".
  Status check(cublasStatus_t result, const char *call) const {
    if (result == CUBLAS_STATUS_SUCCESS)
      return {};
    const char *name = getStatusName(result), *description = getStatusString(result);
    return Status::error(fmt::format("{} failed: {} ({})", call,
                                     name ? name : fmt::format("cuBLAS status {}", int(result)),
                                     description ? description : "no description"));
  }
};

Expected<const Library *> library() {
  // Thread-safe, tried once.
  static const Expected<const Library *> lt = []() -> Expected<const Library *> {
    // Never closed, like the driver. Searched as DynamicLibrary.h says: SMELT_CUDA_LIBRARY_PATH,
    // a pip wheel's nvidia/cu13/lib, the CUDA toolkit, then the loader's path.
    static Library table;
    SMELT_RETURN_IF_ERROR(openCudaTable("cuBLASLt", "libcublasLt.so.13",
                                        {SMELT_CUBLASLT_ENTRIES(SMELT_CUDA_TABLE_ENTRY)},
                                        "it is older than this program needs")
                              .status());
    return &table;
  }();
  return lt;
}

cudaDataType_t dataType(DType dtype) {
  switch (dtype) {
  case DType::f64:
    return CUDA_R_64F;
  case DType::f16:
    return CUDA_R_16F;
  case DType::bf16:
    return CUDA_R_16BF;
  default:
    return CUDA_R_32F;
  }
}

cublasLtEpilogue_t epilogueOf(MatmulEpilogue epilogue) {
  switch (epilogue) {
  case MatmulEpilogue::None:
    break;
  case MatmulEpilogue::Relu:
    return CUBLASLT_EPILOGUE_RELU;
  case MatmulEpilogue::Bias:
    return CUBLASLT_EPILOGUE_BIAS;
  case MatmulEpilogue::BiasRelu:
    return CUBLASLT_EPILOGUE_RELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

/// "none", "relu", "bias", "bias+relu".
const char *epilogueName(MatmulEpilogue epilogue) {
  switch (epilogue) {
  case MatmulEpilogue::None:
    break;
  case MatmulEpilogue::Relu:
    return "relu";
  case MatmulEpilogue::Bias:
    return "bias";
  case MatmulEpilogue::BiasRelu:
    return "bias+relu";
  }
  return "none";
}

} // namespace

bool hasBias(MatmulEpilogue epilogue) {
  return epilogue == MatmulEpilogue::Bias || epilogue == MatmulEpilogue::BiasRelu;
}

std::string describe(const MatmulCall &call) {
  std::string batch = call.batch == 1 ? "" : fmt::format("{}x", call.batch);
  std::string text = fmt::format("{} [{}{}x{}]x[{}{}x{}]", dtypeName(call.dtype), batch, call.m,
                                 call.k, batch, call.k, call.n);
  if (call.transposeLhs || call.transposeRhs)
    text += fmt::format(" ({} stored transposed)", call.transposeLhs && call.transposeRhs ? "both"
                                                   : call.transposeLhs                   ? "lhs"
                                                                                         : "rhs");
  if (call.epilogue != MatmulEpilogue::None)
    text += fmt::format(" with {}", epilogueName(call.epilogue));
  if (call.allowTf32 && call.dtype == DType::f32)
    text += " in TF32";
  return text;
}

Expected<CublasLt *> CublasLt::get(const CudaDevice &device) {
  return openOncePerDevice<CublasLt *>(device.ordinal(), [&]() -> Expected<CublasLt *> {
    SMELT_ASSIGN_OR_RETURN(const Library *lt, library());
    SMELT_RETURN_IF_ERROR(device.makeCurrent());
    cublasLtHandle_t handle = nullptr;
    // The handle belongs to the context current now: the device's primary context.
    if (Status status = lt->check(lt->create(&handle), "cublasLtCreate"); !status.ok())
      return Status::error(fmt::format("gpu:{}: {}", device.ordinal(), status.message()));
    // Kept for the life of the process, like the device: never destroyed.
    CublasLt *blas = new CublasLt(device);
    blas->handle_ = handle;
    return blas;
  });
}

size_t CublasLt::version() const { return (*library())->getVersion(); }

Status CublasLt::validate(const MatmulCall &call, const std::string &what) {
  if (call.dtype != DType::f32 && call.dtype != DType::f64 && call.dtype != DType::f16 &&
      call.dtype != DType::bf16)
    return Status::error(fmt::format("{}: cuBLASLt matmuls take f32, f64, f16 or bf16, not {}",
                                     what, dtypeName(call.dtype)));
  if (call.batch < 1 || call.m < 1 || call.n < 1 || call.k < 1)
    return Status::error(fmt::format("{}: matmul sizes must be positive, not batch {}, M {}, "
                                     "N {}, K {} (an empty matmul is the caller's to skip)",
                                     what, call.batch, call.m, call.n, call.k));
  // The batch count is an int32 attribute; rows and columns are 64-bit.
  if (call.batch > INT_MAX)
    return Status::error(
        fmt::format("{}: batch {} is more than cuBLASLt takes ({})", what, call.batch, INT_MAX));
  return {};
}

// Descriptors of one matmul and the algorithm the heuristic chose for it. The bias pointer is
// the one attribute that changes between runs; run() sets it under the lock.
class CublasLt::MatmulPlan final : public CublasLt::Plan {
public:
  MatmulPlan(CublasLt &blas, const MatmulCall &call, std::string what)
      : blas_(blas), lt_(**library()), call_(call), what_(std::move(what)) {}
  ~MatmulPlan() override {
    for (cublasLtMatrixLayout_t layout : {rhs_, lhs_, result_})
      if (layout)
        lt_.layoutDestroy(layout);
    if (desc_)
      lt_.descDestroy(desc_);
  }

  /// The descriptors, and the heuristic's algorithm for pointers with `alignment` and
  /// `workspaceBytes` of workspace (the lock held).
  Status make(const MatmulAlignment &alignment, size_t workspaceBytes);
  Status run(const void *lhs, const void *rhs, const void *bias, void *result,
             void *workspace) const override;

private:
  /// "<what> (<call>) on gpu:N: <cuBLASLt's complaint>".
  Status fail(const Status &status) const {
    return Status::error(fmt::format("{} ({}) on gpu:{}: {}", what_, describe(call_),
                                     blas_.device_.ordinal(), status.message()));
  }

  CublasLt &blas_;
  const Library &lt_;
  MatmulCall call_;
  std::string what_;
  size_t workspaceBytes_ = 0;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t rhs_ = nullptr, lhs_ = nullptr, result_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
};

Status CublasLt::MatmulPlan::make(const MatmulAlignment &alignment, size_t workspaceBytes) {
  const Library &lt = lt_;
  const MatmulCall &call = call_;
  int64_t m = call.m, n = call.n, k = call.k;
  workspaceBytes_ = workspaceBytes;
  // Row-major through column-major: a row-major [R, C] matrix is, byte for byte, a
  // column-major [C, R] one, its transpose. So C = A B (row-major) is computed as
  // C^T = B^T A^T in column-major: cuBLASLt's "A" is our rhs, its "B" our lhs, and its
  // column-major N x M result is our row-major M x N. Chosen over CUBLASLT_ORDER_ROW layouts
  // because every algorithm supports the default order, and because cuBLASLt's bias is one
  // value per row of its result: here a row is one of our N columns, exactly the bias we want.
  cudaDataType_t type = dataType(call.dtype);
  cublasComputeType_t compute = call.dtype == DType::f64 ? CUBLAS_COMPUTE_64F
                                : call.allowTf32 && call.dtype == DType::f32
                                    ? CUBLAS_COMPUTE_32F_FAST_TF32
                                    : CUBLAS_COMPUTE_32F;
  // f16 and bf16 accumulate (and scale) in f32.
  cudaDataType_t scale = call.dtype == DType::f64 ? CUDA_R_64F : CUDA_R_32F;
  int32_t opRhs = call.transposeRhs ? CUBLAS_OP_T : CUBLAS_OP_N;
  int32_t opLhs = call.transposeLhs ? CUBLAS_OP_T : CUBLAS_OP_N;
  uint32_t epi = epilogueOf(call.epilogue);
  // Stored (column-major) rows and columns: rhs [K, N] row-major is N x K, [N, K] is K x N.
  uint64_t rhsRows = call.transposeRhs ? k : n, rhsCols = call.transposeRhs ? n : k;
  uint64_t lhsRows = call.transposeLhs ? m : k, lhsCols = call.transposeLhs ? k : m;
  if (Status status =
          firstError({lt.check(lt.descCreate(&desc_, compute, scale), "cublasLtMatmulDescCreate"),
                      lt.check(lt.layoutCreate(&rhs_, type, rhsRows, rhsCols, int64_t(rhsRows)),
                               "cublasLtMatrixLayoutCreate (rhs)"),
                      lt.check(lt.layoutCreate(&lhs_, type, lhsRows, lhsCols, int64_t(lhsRows)),
                               "cublasLtMatrixLayoutCreate (lhs)"),
                      lt.check(lt.layoutCreate(&result_, type, uint64_t(n), uint64_t(m), n),
                               "cublasLtMatrixLayoutCreate (result)")});
      !status.ok())
    return fail(status);
  if (Status status =
          firstError({lt.check(lt.descSet(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &opRhs, sizeof opRhs),
                               "cublasLtMatmulDescSetAttribute(TRANSA)"),
                      lt.check(lt.descSet(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &opLhs, sizeof opLhs),
                               "cublasLtMatmulDescSetAttribute(TRANSB)"),
                      lt.check(lt.descSet(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi),
                               "cublasLtMatmulDescSetAttribute(EPILOGUE)")});
      !status.ok())
    return fail(status);
  if (hasBias(call.epilogue)) {
    // The bias has the result's dtype (f16/bf16 too, as the default would also say); its
    // batch stride stays 0: one bias for every batch. The heuristic reads the bias pointer's
    // alignment: until a run sets the real one, a stand-in address with the bias's alignment.
    int32_t biasType = type;
    const void *standIn = reinterpret_cast<const void *>(uintptr_t(alignment.bias));
    if (Status status = firstError({lt.check(lt.descSet(desc_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                        &biasType, sizeof biasType),
                                             "cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)"),
                                    lt.check(lt.descSet(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                        &standIn, sizeof standIn),
                                             "cublasLtMatmulDescSetAttribute(BIAS_POINTER)")});
        !status.ok())
      return fail(status);
  }
  if (call.batch > 1) {
    int32_t count = int32_t(call.batch);
    for (auto [layout, stride, name] : {std::tuple{rhs_, int64_t(k * n), "rhs"},
                                        {lhs_, int64_t(m * k), "lhs"},
                                        {result_, int64_t(m * n), "result"}})
      if (Status status =
              firstError({lt.check(lt.layoutSet(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                sizeof count),
                                   "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)"),
                          lt.check(lt.layoutSet(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                &stride, sizeof stride),
                                   "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)")});
          !status.ok())
        return fail(Status::error(fmt::format("{} of {}", status.message(), name)));
  }

  // The preference: at most the caller's workspace, and only algorithms that work with the
  // pointers' alignment (cuBLASLt assumes 256 bytes unless told).
  cublasLtMatmulPreference_t preference = nullptr;
  if (Status status = lt.check(lt.preferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
      !status.ok())
    return fail(status);
  uint64_t maxWorkspace = workspaceBytes;
  Status prefStatus =
      lt.check(lt.preferenceSet(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &maxWorkspace,
                                sizeof maxWorkspace),
               "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
  // cuBLASLt's A is our rhs, its B our lhs, its C and D our result.
  for (auto [attribute, bytes] :
       {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, uint32_t(alignment.rhs)},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, uint32_t(alignment.lhs)},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, uint32_t(alignment.result)},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, uint32_t(alignment.result)}})
    if (prefStatus.ok())
      prefStatus = lt.check(lt.preferenceSet(preference, attribute, &bytes, sizeof bytes),
                            "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_*_BYTES)");
  cublasLtMatmulHeuristicResult_t results[8] = {};
  int found = 0;
  cublasStatus_t heuristic = CUBLAS_STATUS_NOT_INITIALIZED;
  if (prefStatus.ok())
    heuristic =
        lt.algoGetHeuristic(static_cast<cublasLtHandle_t>(blas_.handle_), desc_, rhs_, lhs_,
                            result_, result_, preference, int(std::size(results)), results, &found);
  lt.preferenceDestroy(preference);
  if (!prefStatus.ok())
    return fail(prefStatus);
  // Ordered best first; the first that succeeded and fits the workspace.
  const cublasLtMatmulHeuristicResult_t *chosen = nullptr;
  for (int i = 0; heuristic == CUBLAS_STATUS_SUCCESS && i < found && !chosen; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS && results[i].workspaceSize <= workspaceBytes)
      chosen = &results[i];
  if (!chosen) {
    // NOT_SUPPORTED is the heuristic's way of saying "none"; anything else is worth showing.
    std::string why;
    if (heuristic != CUBLAS_STATUS_SUCCESS && heuristic != CUBLAS_STATUS_NOT_SUPPORTED)
      why = " (" + lt.check(heuristic, "cublasLtMatmulAlgoGetHeuristic").message() + ")";
    unsigned least = std::min({alignment.lhs, alignment.rhs, alignment.result,
                               hasBias(call.epilogue) ? alignment.bias : 256u});
    if (least < 16)
      why += fmt::format("; a pointer is only {}-byte aligned, and most algorithms need 16", least);
    return Status::error(fmt::format("{}: cuBLASLt has no algorithm for {} within {} of "
                                     "workspace on gpu:{}{}",
                                     what_, describe(call), formatBytes(workspaceBytes),
                                     blas_.device_.ordinal(), why));
  }
  algo_ = chosen->algo;
  return {};
}

Status CublasLt::MatmulPlan::run(const void *lhs, const void *rhs, const void *bias, void *result,
                                 void *workspace) const {
  const Library &lt = lt_;
  std::lock_guard<std::mutex> lock(blas_.mutex_);
  if (hasBias(call_.epilogue))
    if (Status status =
            lt.check(lt.descSet(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
                     "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
        !status.ok())
      return fail(status);
  // alpha = 1, beta = 0 in the scale type; with beta 0, C (the result itself) is not read.
  const float one32 = 1, zero32 = 0;
  const double one64 = 1, zero64 = 0;
  bool f64 = call_.dtype == DType::f64;
  const void *alpha = f64 ? static_cast<const void *>(&one64) : &one32;
  const void *beta = f64 ? static_cast<const void *>(&zero64) : &zero32;
  // CUstream and cudaStream_t are the same type.
  if (Status status =
          lt.check(lt.matmul(static_cast<cublasLtHandle_t>(blas_.handle_), desc_, alpha, rhs, rhs_,
                             lhs, lhs_, beta, result, result_, result, result_, &algo_, workspace,
                             workspaceBytes_, blas_.device_.stream()),
                   "cublasLtMatmul");
      !status.ok())
    return fail(status);
  return {};
}

Expected<std::shared_ptr<const CublasLt::Plan>> CublasLt::prepare(const MatmulCall &call,
                                                                  const MatmulAlignment &alignment,
                                                                  size_t workspaceBytes,
                                                                  const std::string &what) {
  SMELT_RETURN_IF_ERROR(validate(call, what));
  unsigned element = unsigned(byteWidth(call.dtype));
  for (auto [bytes, name] :
       {std::pair{alignment.lhs, "lhs"}, {alignment.rhs, "rhs"}, {alignment.result, "result"}})
    if (bytes < element)
      return Status::error(fmt::format("{}: the {} pointer is not aligned to its element size "
                                       "(only to {} bytes)",
                                       what, name, bytes));
  if (hasBias(call.epilogue) && alignment.bias < 16)
    return Status::error(fmt::format("{}: the bias pointer is not 16-byte aligned (only to {} "
                                     "bytes), as cuBLASLt's bias epilogues need",
                                     what, alignment.bias));
  std::lock_guard<std::mutex> lock(mutex_);
  if (Status status = device_.makeCurrent(); !status.ok())
    return Status::error(fmt::format("{}: {}", what, status.message()));
  auto plan = std::make_shared<MatmulPlan>(*this, call, what);
  SMELT_RETURN_IF_ERROR(plan->make(alignment, workspaceBytes));
  return std::shared_ptr<const Plan>(std::move(plan));
}

} // namespace smelt::rt::cuda
