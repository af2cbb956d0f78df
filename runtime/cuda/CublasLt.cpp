// Opens libcublasLt with dlopen and resolves its table, once per process, and implements
// CublasLt (CublasLt.h): row-major matmuls mapped onto cuBLASLt's column-major ones, with the
// algorithm chosen by its heuristic once per shape and kept.
#include "runtime/cuda/CublasLt.h"
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
  X(cublasLtDestroy, destroy)                                                                      \
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

Expected<const Library *> openLibrary() {
  // Never closed, like the driver. Searched as DynamicLibrary.h says: SMELT_CUDA_LIBRARY_PATH,
  // a pip wheel's nvidia/cu13/lib, the CUDA toolkit, then the loader's path.
  Expected<void *> opened = openCudaLibrary("cuBLASLt", "libcublasLt.so.13");
  if (!opened)
    return opened.status();
  void *library = *opened;
  static Library lt;
#define SMELT_CUBLASLT_RESOLVE(symbol, member)                                                     \
  if (Status s = resolveSymbol(library, lt.member, #symbol, "libcublasLt.so.13",                  \
                               "it is older than this program needs");                             \
      !s.ok())                                                                                     \
    return s;
  SMELT_CUBLASLT_ENTRIES(SMELT_CUBLASLT_RESOLVE)
#undef SMELT_CUBLASLT_RESOLVE
  return &lt;
}

Expected<const Library *> library() {
  static const Expected<const Library *> lt = openLibrary(); // thread-safe, tried once
  return lt;
}

/// The largest power of two dividing the address, at most 256 (cuBLASLt's default assumption).
unsigned alignmentOf(const void *pointer) {
  uintptr_t address = reinterpret_cast<uintptr_t>(pointer);
  return address ? unsigned(std::min<uintptr_t>(address & -address, 256)) : 256;
}

std::string bytesText(size_t bytes) {
  if (bytes % (1 << 20) == 0)
    return fmt::format("{} MiB", bytes >> 20);
  if (bytes % (1 << 10) == 0)
    return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} bytes", bytes);
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
  case MatmulEpilogue::Gelu:
    return CUBLASLT_EPILOGUE_GELU;
  case MatmulEpilogue::Bias:
    return CUBLASLT_EPILOGUE_BIAS;
  case MatmulEpilogue::BiasRelu:
    return CUBLASLT_EPILOGUE_RELU_BIAS;
  case MatmulEpilogue::BiasGelu:
    return CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

/// "<what> (<call>) on gpu:N: <cuBLASLt's complaint>".
Status failure(const std::string &what, const MatmulCall &call, const CudaDevice &device,
               const Status &status) {
  return Status::error(fmt::format("{} ({}) on gpu:{}: {}", what, describe(call), device.ordinal(),
                                   status.message()));
}

/// The first failure of several calls made one after another, named.
Status firstFailure(const Library &lt,
                    std::initializer_list<std::pair<cublasStatus_t, const char *>> results) {
  for (auto [result, call] : results)
    if (Status status = lt.check(result, call); !status.ok())
      return status;
  return {};
}

} // namespace

const char *epilogueName(MatmulEpilogue epilogue) {
  switch (epilogue) {
  case MatmulEpilogue::None:
    break;
  case MatmulEpilogue::Relu:
    return "relu";
  case MatmulEpilogue::Gelu:
    return "gelu";
  case MatmulEpilogue::Bias:
    return "bias";
  case MatmulEpilogue::BiasRelu:
    return "bias+relu";
  case MatmulEpilogue::BiasGelu:
    return "bias+gelu";
  }
  return "none";
}

bool hasBias(MatmulEpilogue epilogue) {
  return epilogue == MatmulEpilogue::Bias || epilogue == MatmulEpilogue::BiasRelu ||
         epilogue == MatmulEpilogue::BiasGelu;
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

// Descriptors of one problem and the algorithm the heuristic chose for it. The bias pointer is
// the one attribute that changes between calls; matmul() sets it under the lock.
struct CublasLt::Plan {
  const Library *lt = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t rhs = nullptr, lhs = nullptr, result = nullptr;
  cublasLtMatmulAlgo_t algo{};

  ~Plan() {
    for (cublasLtMatrixLayout_t layout : {rhs, lhs, result})
      if (layout)
        lt->layoutDestroy(layout);
    if (desc)
      lt->descDestroy(desc);
  }
};

Expected<CublasLt *> CublasLt::get(const CudaDevice &device) {
  static std::mutex mutex;
  static std::map<int, Expected<CublasLt *>> opened;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = opened.find(device.ordinal()); it != opened.end())
    return it->second;
  auto attempt = [&]() -> Expected<CublasLt *> {
    Expected<const Library *> lt = library();
    if (!lt.ok())
      return lt.status();
    if (Status status = device.makeCurrent(); !status.ok())
      return status;
    cublasLtHandle_t handle = nullptr;
    // The handle belongs to the context current now: the device's primary context.
    if (Status status = (*lt)->check((*lt)->create(&handle), "cublasLtCreate"); !status.ok())
      return Status::error(fmt::format("gpu:{}: {}", device.ordinal(), status.message()));
    // Kept for the life of the process, like the device: never destroyed.
    CublasLt *blas = new CublasLt(device);
    blas->handle_ = handle;
    return blas;
  };
  return opened.emplace(device.ordinal(), attempt()).first->second;
}

CublasLt::CublasLt(const CudaDevice &device) : device_(device) {}

CublasLt::~CublasLt() {
  plans_.clear();
  if (handle_)
    (*library())->destroy(static_cast<cublasLtHandle_t>(handle_));
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
    return Status::error(fmt::format("{}: batch {} is more than cuBLASLt takes ({})", what,
                                     call.batch, INT_MAX));
  if (hasBias(call.epilogue) != (call.bias != nullptr))
    return Status::error(
        call.bias ? fmt::format("{}: a bias was given but the epilogue ({}) adds none", what,
                                epilogueName(call.epilogue))
                  : fmt::format("{}: the epilogue {} adds a bias, but none was given", what,
                                epilogueName(call.epilogue)));
  return {};
}

Expected<CublasLt::Plan *> CublasLt::plan(const PlanKey &key, const MatmulCall &call,
                                          const std::string &what) {
  if (auto it = plans_.find(key); it != plans_.end())
    return it->second.get();
  auto [dtype, batch, m, n, k, transposeLhs, transposeRhs, epilogue, tf32, lhsAlign, rhsAlign,
        resultAlign, biasAlign, workspaceBytes] = key;
  const Library &lt = **library();
  auto plan = std::make_unique<Plan>();
  plan->lt = &lt;
  auto fail = [&](const Status &status) { return failure(what, call, device_, status); };

  // Row-major through column-major: a row-major [R, C] matrix is, byte for byte, a
  // column-major [C, R] one, its transpose. So C = A B (row-major) is computed as
  // C^T = B^T A^T in column-major: cuBLASLt's "A" is our rhs, its "B" our lhs, and its
  // column-major N x M result is our row-major M x N. Chosen over CUBLASLT_ORDER_ROW layouts
  // because every algorithm supports the default order, and because cuBLASLt's bias is one
  // value per row of its result: here a row is one of our N columns, exactly the bias we want.
  cudaDataType_t type = dataType(dtype);
  cublasComputeType_t compute = dtype == DType::f64 ? CUBLAS_COMPUTE_64F
                                : tf32 && dtype == DType::f32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                              : CUBLAS_COMPUTE_32F;
  // f16 and bf16 accumulate (and scale) in f32.
  cudaDataType_t scale = dtype == DType::f64 ? CUDA_R_64F : CUDA_R_32F;
  int32_t opRhs = transposeRhs ? CUBLAS_OP_T : CUBLAS_OP_N;
  int32_t opLhs = transposeLhs ? CUBLAS_OP_T : CUBLAS_OP_N;
  uint32_t epi = epilogueOf(epilogue);
  // Stored (column-major) rows and columns: rhs [K, N] row-major is N x K, [N, K] is K x N.
  uint64_t rhsRows = transposeRhs ? k : n, rhsCols = transposeRhs ? n : k;
  uint64_t lhsRows = transposeLhs ? m : k, lhsCols = transposeLhs ? k : m;
  if (Status status = firstFailure(
          lt, {{lt.descCreate(&plan->desc, compute, scale), "cublasLtMatmulDescCreate"},
               {lt.layoutCreate(&plan->rhs, type, rhsRows, rhsCols, int64_t(rhsRows)),
                "cublasLtMatrixLayoutCreate (rhs)"},
               {lt.layoutCreate(&plan->lhs, type, lhsRows, lhsCols, int64_t(lhsRows)),
                "cublasLtMatrixLayoutCreate (lhs)"},
               {lt.layoutCreate(&plan->result, type, uint64_t(n), uint64_t(m), n),
                "cublasLtMatrixLayoutCreate (result)"}});
      !status.ok())
    return fail(status);
  if (Status status = firstFailure(
          lt, {{lt.descSet(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opRhs, sizeof opRhs),
                "cublasLtMatmulDescSetAttribute(TRANSA)"},
               {lt.descSet(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opLhs, sizeof opLhs),
                "cublasLtMatmulDescSetAttribute(TRANSB)"},
               {lt.descSet(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi),
                "cublasLtMatmulDescSetAttribute(EPILOGUE)"}});
      !status.ok())
    return fail(status);
  if (call.bias) {
    // The bias has the result's dtype (f16/bf16 too, as the default would also say); its
    // batch stride stays 0: one bias for every batch. The heuristic reads the pointer's
    // alignment, so it is set before asking.
    int32_t biasType = type;
    if (Status status = firstFailure(
            lt, {{lt.descSet(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType,
                             sizeof biasType),
                  "cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)"},
                 {lt.descSet(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &call.bias,
                             sizeof call.bias),
                  "cublasLtMatmulDescSetAttribute(BIAS_POINTER)"}});
        !status.ok())
      return fail(status);
  }
  if (batch > 1) {
    int32_t count = int32_t(batch);
    for (auto [layout, stride, name] :
         {std::tuple{plan->rhs, int64_t(k * n), "rhs"}, {plan->lhs, int64_t(m * k), "lhs"},
          {plan->result, int64_t(m * n), "result"}})
      if (Status status = firstFailure(
              lt, {{lt.layoutSet(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
                    "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)"},
                   {lt.layoutSet(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                 sizeof stride),
                    "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)"}});
          !status.ok())
        return fail(Status::error(fmt::format("{} of {}", status.message(), name)));
  }

  // The preference: at most the caller's workspace, and only algorithms that work with the
  // pointers' actual alignment (cuBLASLt assumes 256 bytes unless told).
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
  for (auto [attribute, alignment] :
       {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, uint32_t(rhsAlign)},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, uint32_t(lhsAlign)},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, uint32_t(resultAlign)},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, uint32_t(resultAlign)}})
    if (prefStatus.ok())
      prefStatus = lt.check(lt.preferenceSet(preference, attribute, &alignment, sizeof alignment),
                            "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_*_BYTES)");
  cublasLtMatmulHeuristicResult_t results[8] = {};
  int found = 0;
  cublasStatus_t heuristic = CUBLAS_STATUS_NOT_INITIALIZED;
  if (prefStatus.ok())
    heuristic = lt.algoGetHeuristic(static_cast<cublasLtHandle_t>(handle_), plan->desc,
                                    plan->rhs, plan->lhs, plan->result, plan->result, preference,
                                    int(std::size(results)), results, &found);
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
    unsigned alignment = std::min({lhsAlign, rhsAlign, resultAlign, biasAlign});
    if (alignment < 16)
      why += fmt::format("; a pointer is only {}-byte aligned, and most algorithms need 16",
                         alignment);
    return Status::error(fmt::format("{}: cuBLASLt has no algorithm for {} within {} of "
                                     "workspace on gpu:{}{}",
                                     what, describe(call), bytesText(workspaceBytes),
                                     device_.ordinal(), why));
  }
  plan->algo = chosen->algo;
  return plans_.emplace(key, std::move(plan)).first->second.get();
}

Status CublasLt::matmul(const MatmulCall &call, const void *lhs, const void *rhs, void *result,
                        void *workspace, size_t workspaceBytes, const std::string &what) {
  if (Status status = validate(call, what); !status.ok())
    return status;
  unsigned element = unsigned(byteWidth(call.dtype));
  for (auto [pointer, name] :
       {std::pair{lhs, "lhs"}, {rhs, "rhs"}, {static_cast<const void *>(result), "result"}})
    if (!pointer || alignmentOf(pointer) < element)
      return Status::error(fmt::format("{}: the {} pointer {} is {}", what, name, pointer,
                                       pointer ? "not aligned to its element size" : "null"));
  if (call.bias && alignmentOf(call.bias) < 16)
    return Status::error(fmt::format("{}: the bias pointer {} is not 16-byte aligned, as "
                                     "cuBLASLt's bias epilogues need",
                                     what, call.bias));
  if (workspaceBytes > 0 && (!workspace || alignmentOf(workspace) < 256))
    return Status::error(fmt::format("{}: the workspace ({}) must be a 256-byte aligned device "
                                     "pointer, not {}",
                                     what, bytesText(workspaceBytes), workspace));

  PlanKey key{call.dtype,        call.batch,   call.m,
              call.n,            call.k,       call.transposeLhs,
              call.transposeRhs, call.epilogue, call.allowTf32 && call.dtype == DType::f32,
              alignmentOf(lhs),  alignmentOf(rhs), alignmentOf(result),
              call.bias ? alignmentOf(call.bias) : 256u, workspaceBytes};
  std::lock_guard<std::mutex> lock(mutex_);
  if (Status status = device_.makeCurrent(); !status.ok())
    return Status::error(fmt::format("{}: {}", what, status.message()));
  Expected<Plan *> found = plan(key, call, what);
  if (!found.ok())
    return found.status();
  Plan &p = **found;
  const Library &lt = *p.lt;
  auto fail = [&](const Status &status) { return failure(what, call, device_, status); };
  if (call.bias)
    if (Status status = lt.check(lt.descSet(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &call.bias,
                                             sizeof call.bias),
                                 "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
        !status.ok())
      return fail(status);
  // alpha = 1, beta = 0 in the scale type; with beta 0, C (the result itself) is not read.
  const float one32 = 1, zero32 = 0;
  const double one64 = 1, zero64 = 0;
  bool f64 = call.dtype == DType::f64;
  const void *alpha = f64 ? static_cast<const void *>(&one64) : &one32;
  const void *beta = f64 ? static_cast<const void *>(&zero64) : &zero32;
  // CUstream and cudaStream_t are the same type.
  if (Status status = lt.check(lt.matmul(static_cast<cublasLtHandle_t>(handle_), p.desc, alpha,
                                         rhs, p.rhs, lhs, p.lhs, beta, result, p.result, result,
                                         p.result, &p.algo, workspace, workspaceBytes,
                                         device_.stream()),
                               "cublasLtMatmul");
      !status.ok())
    return fail(status);
  return {};
}

} // namespace smelt::rt::cuda
