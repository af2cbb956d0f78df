// The emulated cuBLASLt (libcublasLt.so.13): the calls of cublasLt.h that the GPU runtime
// resolves (runtime/cuda/CublasLt.cpp), written from NVIDIA's documented contract, not from
// Smelt's use of them. Each call checks its arguments at once and answers with the status the
// real library documents (and says why on stderr); a matmul then queues on its stream and runs
// on the CPU when the emulation decides, reading device memory only through hostView(), in the
// precision a GPU uses: f32 accumulation for f32, TF32, f16 and bf16 operands, f64 for f64.
//
// Emulated: column- and row-major layouts with leading dimensions, strided batches (a stride of
// 0 broadcasts A or B; C's leading dimension 0 broadcasts a column), TRANSA/TRANSB, compute types
// 32F (and _PEDANTIC), 32F_FAST_TF32/_FAST_16F/_FAST_16BF (inputs rounded to that format), 64F
// (and _PEDANTIC), host or device alpha/beta, C == D in place, the epilogues DEFAULT, RELU, BIAS,
// RELU_BIAS, GELU, GELU_BIAS, and a heuristic that returns one algorithm. The algorithm records
// the workspace and the pointer alignments it was promised, and a matmul that breaks either
// promise is refused as the real one would be; the workspace it claims is scribbled on.
// Anything else (16F compute, integer and fp8 types, AUX epilogues, scale pointers, vector
// pointer modes, pointer-array batches) answers CUBLAS_STATUS_NOT_SUPPORTED.
#include "EmuCuda.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <vector>

// The handle's opaque type, which cublasLt.h leaves undefined: the device it belongs to.
struct cublasLtContext {
  int device;
};

namespace smelt::emucuda {
namespace {

// ===-------------------------------------------------------------------------------------===//
// Refusals
// ===-------------------------------------------------------------------------------------===//

// Each status's name and description, for cublasLtGetStatusName and cublasLtGetStatusString.
struct StatusText {
  cublasStatus_t status;
  const char *name, *description;
};
constexpr StatusText kStatuses[] = {
    {CUBLAS_STATUS_SUCCESS, "CUBLAS_STATUS_SUCCESS", "success"},
    {CUBLAS_STATUS_NOT_INITIALIZED, "CUBLAS_STATUS_NOT_INITIALIZED",
     "the library was not initialized"},
    {CUBLAS_STATUS_ALLOC_FAILED, "CUBLAS_STATUS_ALLOC_FAILED", "the resource allocation failed"},
    {CUBLAS_STATUS_INVALID_VALUE, "CUBLAS_STATUS_INVALID_VALUE",
     "an invalid numeric value was used as an argument"},
    {CUBLAS_STATUS_ARCH_MISMATCH, "CUBLAS_STATUS_ARCH_MISMATCH",
     "an absent device architectural feature is required"},
    {CUBLAS_STATUS_MAPPING_ERROR, "CUBLAS_STATUS_MAPPING_ERROR",
     "an access to GPU memory space failed"},
    {CUBLAS_STATUS_EXECUTION_FAILED, "CUBLAS_STATUS_EXECUTION_FAILED",
     "the GPU program failed to execute"},
    {CUBLAS_STATUS_INTERNAL_ERROR, "CUBLAS_STATUS_INTERNAL_ERROR", "an internal operation failed"},
    {CUBLAS_STATUS_NOT_SUPPORTED, "CUBLAS_STATUS_NOT_SUPPORTED",
     "the functionality requested is not supported"},
    {CUBLAS_STATUS_LICENSE_ERROR, "CUBLAS_STATUS_LICENSE_ERROR",
     "the functionality requested requires some license"},
};

const StatusText &statusText(cublasStatus_t status) {
  static constexpr StatusText unknown{cublasStatus_t(-1), "CUBLAS_STATUS_UNKNOWN",
                                      "unknown cuBLAS status"};
  for (const StatusText &known : kStatuses)
    if (known.status == status)
      return known;
  return unknown;
}

const char *statusName(cublasStatus_t status) { return statusText(status).name; }

/// A call's answer: success, or the documented status and why (the real library is silent;
/// the emulation says why on stderr, since finding the caller's mistake is what it is for).
struct Verdict {
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  std::string why;
  explicit operator bool() const { return status != CUBLAS_STATUS_SUCCESS; }
};

Verdict refuse(cublasStatus_t status, std::string why) { return {status, std::move(why)}; }
Verdict invalid(std::string why) { return refuse(CUBLAS_STATUS_INVALID_VALUE, std::move(why)); }
/// What the real library has no algorithm for.
Verdict unsupported(std::string why) { return refuse(CUBLAS_STATUS_NOT_SUPPORTED, std::move(why)); }
/// What the real library does but the emulation does not: the same status, said plainly.
Verdict notEmulated(std::string what) {
  return refuse(CUBLAS_STATUS_NOT_SUPPORTED, std::move(what) + " is not emulated");
}

cublasStatus_t answer(const char *call, const Verdict &verdict) {
  if (verdict)
    std::fprintf(stderr, "emucuda: %s: %s: %s\n", call, statusName(verdict.status),
                 verdict.why.c_str());
  return verdict.status;
}

std::string text(uint64_t value) { return std::to_string(value); }

std::string hex(const void *pointer) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%p", pointer);
  return buffer;
}

// ===-------------------------------------------------------------------------------------===//
// Handles and descriptors
// ===-------------------------------------------------------------------------------------===//

/// The live objects of one kind, so a destroyed or made-up handle is refused instead of read.
template <typename Value, typename Opaque> class Registry {
public:
  Opaque create(Value value) {
    auto owned = std::make_unique<Value>(std::move(value));
    Opaque opaque = reinterpret_cast<Opaque>(owned.get());
    std::lock_guard<std::mutex> lock(mutex_);
    live_.emplace(opaque, std::move(owned));
    return opaque;
  }
  bool destroy(Opaque opaque) {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_.erase(opaque) > 0;
  }
  std::optional<Value> get(Opaque opaque) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(opaque);
    return it == live_.end() ? std::nullopt : std::optional<Value>(*it->second);
  }
  /// Runs `change` on the live value under the lock; nullopt when `opaque` is not live.
  template <typename Change> std::optional<Verdict> update(Opaque opaque, Change change) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(opaque);
    if (it == live_.end())
      return std::nullopt;
    return change(*it->second);
  }

private:
  std::mutex mutex_;
  std::unordered_map<Opaque, std::unique_ptr<Value>> live_;
};

struct MatmulDesc {
  int32_t compute, scale;
  int32_t pointerMode = CUBLASLT_POINTER_MODE_HOST;
  int32_t transA = CUBLAS_OP_N, transB = CUBLAS_OP_N, transC = CUBLAS_OP_N;
  int32_t fillMode = CUBLAS_FILL_MODE_FULL;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  int64_t biasBatchStride = 0;
  int32_t biasType = -1; // -1: D's type
  /// The first attribute set to a value the emulation does not implement, "" when none.
  std::string notEmulated;
};

struct Layout {
  uint32_t type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t order = CUBLASLT_ORDER_COL;
  int32_t batch = 1;
  int64_t batchStride = 0;
  int64_t planeOffset = 0;
  uint32_t batchMode = CUBLASLT_BATCH_MODE_STRIDED;
};

struct Preference {
  uint32_t searchMode = CUBLASLT_SEARCH_BEST_FIT;
  uint64_t maxWorkspace = 0;
  uint32_t reductionMask = CUBLASLT_REDUCTION_SCHEME_MASK;
  uint32_t alignment[4] = {256, 256, 256, 256}; // A, B, C, D
  float maxWaves = 0;
  uint64_t implMask = ~uint64_t(0);
};

// Never destroyed, so a handle released by another library's static destructor still finds them.
Registry<cublasLtContext, cublasLtHandle_t> &handles =
    *new Registry<cublasLtContext, cublasLtHandle_t>;
Registry<MatmulDesc, cublasLtMatmulDesc_t> &descs = *new Registry<MatmulDesc, cublasLtMatmulDesc_t>;
Registry<Layout, cublasLtMatrixLayout_t> &layouts = *new Registry<Layout, cublasLtMatrixLayout_t>;
Registry<Preference, cublasLtMatmulPreference_t> &preferences =
    *new Registry<Preference, cublasLtMatmulPreference_t>;

/// Copies the attribute in `buf` into `field` when its size is the documented one.
template <typename T> Verdict assign(T &field, const void *buf, size_t size, const char *name) {
  if (size != sizeof(T))
    return invalid(std::string(name) + " takes " + text(sizeof(T)) + " bytes, not " + text(size));
  std::memcpy(&field, buf, sizeof(T));
  return {};
}

// ===-------------------------------------------------------------------------------------===//
// Element types and the problem a matmul describes
// ===-------------------------------------------------------------------------------------===//

size_t elementBytes(uint32_t type) {
  switch (type) {
  case CUDA_R_16F:
  case CUDA_R_16BF:
    return 2;
  case CUDA_R_32F:
    return 4;
  case CUDA_R_64F:
    return 8;
  }
  return 0;
}

const char *typeName(uint32_t type) {
  switch (type) {
  case CUDA_R_16F:
    return "f16";
  case CUDA_R_16BF:
    return "bf16";
  case CUDA_R_32F:
    return "f32";
  case CUDA_R_64F:
    return "f64";
  }
  return "an unemulated type";
}

/// How inputs are rounded before the multiply: FAST_* compute types may down-convert f32.
enum class InputRounding { None, Tf32, Half, Bfloat16 };

/// One matrix as the work reads it: element (i, j) of batch b is at
/// b * batchStride + i * rowStride + j * colStride elements from the base.
struct Operand {
  uint32_t type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t rowStride = 0, colStride = 0, batchStride = 0;
  size_t spanBytes = 0; // every batch's elements, from the base to the last one
};

/// Everything a matmul computes, checked, as the queued work copies it.
struct Problem {
  bool f64 = false;
  InputRounding rounding = InputRounding::None;
  int32_t compute = 0;
  uint64_t m = 0, n = 0, k = 0;
  int32_t batch = 1;
  Operand a, b, c, d; // a and b as op(A) [m, k] and op(B) [k, n]
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  uint32_t biasType = 0;
  int64_t biasBatchStride = 0;
  bool hasBias() const { return epilogue & CUBLASLT_EPILOGUE_BIAS; }
  bool relu() const { return epilogue & CUBLASLT_EPILOGUE_RELU; }
  bool gelu() const { return epilogue & CUBLASLT_EPILOGUE_GELU; }
};

/// The bytes from the base to the last element of every batch; nullopt on overflow.
std::optional<size_t> span(const Operand &o, int32_t batch) {
  if (o.rows == 0 || o.cols == 0)
    return size_t(0);
  unsigned __int128 last = (unsigned __int128)(o.rows - 1) * uint64_t(o.rowStride) +
                           (unsigned __int128)(o.cols - 1) * uint64_t(o.colStride) +
                           (unsigned __int128)(batch - 1) * uint64_t(o.batchStride);
  unsigned __int128 bytes = (last + 1) * elementBytes(o.type);
  if (bytes > (unsigned __int128)(SIZE_MAX / 2))
    return std::nullopt;
  return size_t(bytes);
}

/// Checks one layout on its own and turns it into an Operand (strides of the stored matrix).
Verdict operandOf(const Layout &l, const char *name, bool mayBroadcastColumns, Operand &out) {
  std::string who = std::string("matrix ") + name;
  if (!elementBytes(l.type))
    return notEmulated(who + "'s cudaDataType " + text(l.type));
  if (l.rows > uint64_t(INT32_MAX) || l.cols > uint64_t(INT32_MAX))
    return unsupported(who + " is " + text(l.rows) + "x" + text(l.cols) +
                       ", beyond the int32 sizes cuBLASLt supports");
  if (l.order != CUBLASLT_ORDER_COL && l.order != CUBLASLT_ORDER_ROW)
    return notEmulated(who + "'s order " + text(l.order) + " (only COL and ROW are)");
  if (l.planeOffset != 0)
    return notEmulated(who + " as planar complex");
  if (l.batchMode != CUBLASLT_BATCH_MODE_STRIDED)
    return notEmulated(who + " with pointer-array batches");
  if (l.batch < 1)
    return invalid(who + " has batch count " + std::to_string(l.batch));
  if (l.batchStride < 0)
    return notEmulated(who + " with a negative batch stride");
  bool col = l.order == CUBLASLT_ORDER_COL;
  uint64_t minor = col ? l.rows : l.cols; // the contiguous extent the leading dimension spans
  // C alone may have leading dimension 0, to broadcast one column (or row) to all of them.
  if (!(mayBroadcastColumns && l.ld == 0) &&
      (l.ld < 0 || uint64_t(l.ld) < std::max<uint64_t>(minor, 1)))
    return invalid(who + " has leading dimension " + std::to_string(l.ld) + " < " +
                   (col ? "rows " : "cols ") + text(minor) + " (" + (col ? "column" : "row") +
                   "-major)");
  out.type = l.type;
  out.rows = l.rows;
  out.cols = l.cols;
  out.rowStride = col ? 1 : l.ld;
  out.colStride = col ? l.ld : 1;
  out.batchStride = l.batchStride;
  std::optional<size_t> bytes = span(out, l.batch);
  if (!bytes)
    return invalid(who + "'s extent overflows");
  out.spanBytes = *bytes;
  return {};
}

/// op(X): the transpose swaps what rows and columns mean.
Operand transposed(Operand o) {
  std::swap(o.rows, o.cols);
  std::swap(o.rowStride, o.colStride);
  return o;
}

bool sameShape(const Layout &x, const Layout &y) {
  return x.type == y.type && x.rows == y.rows && x.cols == y.cols && x.order == y.order &&
         x.batch == y.batch;
}

/// The checks cublasLtMatmulAlgoGetHeuristic and cublasLtMatmul share: the descriptors alone.
Verdict describe(const MatmulDesc &desc, const Layout &la, const Layout &lb, const Layout &lc,
                 const Layout &ld, Problem &p) {
  if (!desc.notEmulated.empty())
    return notEmulated("the matmul descriptor's " + desc.notEmulated);
  for (auto [op, name] : {std::pair{desc.transA, "TRANSA"}, {desc.transB, "TRANSB"}})
    if (op != CUBLAS_OP_N && op != CUBLAS_OP_T && op != CUBLAS_OP_C)
      return invalid(std::string(name) + " is " + std::to_string(op) + ", not a cublasOperation_t");
  if (desc.transC != CUBLAS_OP_N)
    return unsupported("TRANSC other than CUBLAS_OP_N is not supported");
  if (desc.fillMode != CUBLAS_FILL_MODE_FULL)
    return notEmulated("FILL_MODE other than CUBLAS_FILL_MODE_FULL");
  if (desc.pointerMode != CUBLASLT_POINTER_MODE_HOST &&
      desc.pointerMode != CUBLASLT_POINTER_MODE_DEVICE)
    return notEmulated("POINTER_MODE " + std::to_string(desc.pointerMode));

  // Types: cublasLtMatmul's table of supported combinations, the floating-point rows.
  uint32_t ab = la.type, cd = ld.type;
  if (lb.type != ab)
    return unsupported(std::string("A is ") + typeName(ab) + " but B is " + typeName(lb.type) +
                       ": no algorithm mixes them");
  if (lc.type != cd)
    return invalid(std::string("C is ") + typeName(lc.type) + " but D is " + typeName(cd));
  int32_t c = desc.compute;
  // Combinations outside the table are refused, as the real library does; 16F compute and the
  // integer, fp8 and complex rows it has are not emulated.
  std::string combination = std::string("compute type ") + std::to_string(c) + ", scale type " +
                            std::to_string(desc.scale) + ", A/B " + typeName(ab) + ", C/D " +
                            typeName(cd) + " is not a combination the emulation implements";
  switch (c) {
  case CUBLAS_COMPUTE_32F:
  case CUBLAS_COMPUTE_32F_PEDANTIC:
    if (desc.scale != CUDA_R_32F ||
        !((ab == CUDA_R_32F && cd == CUDA_R_32F) ||
          ((ab == CUDA_R_16F || ab == CUDA_R_16BF) && (cd == ab || cd == CUDA_R_32F))))
      return unsupported(combination);
    break;
  case CUBLAS_COMPUTE_32F_FAST_TF32:
  case CUBLAS_COMPUTE_32F_FAST_16F:
  case CUBLAS_COMPUTE_32F_FAST_16BF:
    if (desc.scale != CUDA_R_32F || ab != CUDA_R_32F || cd != CUDA_R_32F)
      return unsupported(combination);
    p.rounding = c == CUBLAS_COMPUTE_32F_FAST_TF32  ? InputRounding::Tf32
                 : c == CUBLAS_COMPUTE_32F_FAST_16F ? InputRounding::Half
                                                    : InputRounding::Bfloat16;
    break;
  case CUBLAS_COMPUTE_64F:
  case CUBLAS_COMPUTE_64F_PEDANTIC:
    if (desc.scale != CUDA_R_64F || ab != CUDA_R_64F || cd != CUDA_R_64F)
      return unsupported(combination);
    p.f64 = true;
    break;
  default:
    return unsupported(combination);
  }
  p.compute = c;

  // Shapes: op(A) is m x k, op(B) k x n, C and D m x n.
  Operand a, b;
  if (Verdict v = operandOf(la, "A", false, a); v)
    return v;
  if (Verdict v = operandOf(lb, "B", false, b); v)
    return v;
  if (Verdict v = operandOf(lc, "C", true, p.c); v)
    return v;
  if (Verdict v = operandOf(ld, "D", false, p.d); v)
    return v;
  p.a = desc.transA == CUBLAS_OP_N ? a : transposed(a);
  p.b = desc.transB == CUBLAS_OP_N ? b : transposed(b);
  p.m = ld.rows;
  p.n = ld.cols;
  p.k = p.a.cols;
  auto dims = [](const Operand &o) { return text(o.rows) + "x" + text(o.cols); };
  if (p.a.rows != p.m || p.b.cols != p.n || p.b.rows != p.k)
    return invalid("op(A) is " + dims(p.a) + " and op(B) " + dims(p.b) + ", which do not make D " +
                   dims(p.d));
  if (!sameShape(lc, ld))
    return invalid("C and D differ in type, rows, columns, order or batch count");
  if (la.batch != ld.batch || lb.batch != ld.batch)
    return invalid("the batch counts of A (" + std::to_string(la.batch) + "), B (" +
                   std::to_string(lb.batch) + ") and D (" + std::to_string(ld.batch) + ") differ");
  p.batch = ld.batch;
  // Batches of D that overlap would be written by concurrent kernels: undefined on a GPU.
  if (p.batch > 1 && p.m > 0 && p.n > 0 &&
      uint64_t(ld.batchStride) * elementBytes(cd) < *span(p.d, 1))
    return invalid("D's batch stride " + std::to_string(ld.batchStride) +
                   " makes its batches overlap");

  // The epilogue.
  switch (desc.epilogue) {
  case CUBLASLT_EPILOGUE_DEFAULT:
  case CUBLASLT_EPILOGUE_RELU:
  case CUBLASLT_EPILOGUE_BIAS:
  case CUBLASLT_EPILOGUE_RELU_BIAS:
  case CUBLASLT_EPILOGUE_GELU:
  case CUBLASLT_EPILOGUE_GELU_BIAS:
    break;
  case CUBLASLT_EPILOGUE_RELU_AUX:
  case CUBLASLT_EPILOGUE_RELU_AUX_BIAS:
  case CUBLASLT_EPILOGUE_DRELU:
  case CUBLASLT_EPILOGUE_DRELU_BGRAD:
  case CUBLASLT_EPILOGUE_GELU_AUX:
  case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
  case CUBLASLT_EPILOGUE_DGELU:
  case CUBLASLT_EPILOGUE_DGELU_BGRAD:
  case CUBLASLT_EPILOGUE_BGRADA:
  case CUBLASLT_EPILOGUE_BGRADB:
    return notEmulated("epilogue " + text(desc.epilogue));
  default:
    return invalid("epilogue " + text(desc.epilogue) + " is not a cublasLtEpilogue_t");
  }
  p.epilogue = desc.epilogue;
  // "ReLU, dReLu, GELU, dGELU and Bias epilogue modes are not supported when D matrix memory
  // order is defined as CUBLASLT_ORDER_ROW."
  if (p.epilogue != CUBLASLT_EPILOGUE_DEFAULT && ld.order == CUBLASLT_ORDER_ROW)
    return unsupported("an epilogue is not supported with D in row-major order");
  // The bias has D's type unless BIAS_DATA_TYPE says otherwise; 16-bit outputs may take f32.
  p.biasType = desc.biasType == -1 ? cd : uint32_t(desc.biasType);
  if (p.hasBias() && p.biasType != cd &&
      !(p.biasType == CUDA_R_32F && (cd == CUDA_R_16F || cd == CUDA_R_16BF)))
    return invalid(std::string("a ") + typeName(p.biasType) + " bias for a " + typeName(cd) + " D");
  if (desc.biasBatchStride < 0)
    return notEmulated("a negative BIAS_BATCH_STRIDE");
  p.biasBatchStride = desc.biasBatchStride;
  return {};
}

// ===-------------------------------------------------------------------------------------===//
// The algorithm the heuristic returns
// ===-------------------------------------------------------------------------------------===//

// cublasLtMatmulAlgo_t's words: a mark, the workspace it needs, the types it was chosen for,
// and the alignment it assumes for A, B, C, D (16 bits each) and the bias.
constexpr uint64_t kAlgoMark = 0x656d75426c61734cull; // "emuBlasL"
constexpr size_t kWorkspaceWanted = 1 << 20;

uint64_t signature(const Problem &p, const Layout &la, const Layout &ld) {
  return uint64_t(uint32_t(p.compute)) | uint64_t(la.type) << 16 | uint64_t(ld.type) << 32;
}

/// The largest power of two dividing the address, at most 256.
uint32_t alignmentOf(const void *pointer) {
  uintptr_t address = reinterpret_cast<uintptr_t>(pointer);
  return address ? uint32_t(std::min<uintptr_t>(address & -address, 256)) : 256;
}

/// The algorithm for `p` within what `pref` allows, or the reason there is none.
Verdict chooseAlgo(const Problem &p, const Layout &la, const Layout &ld, const MatmulDesc &desc,
                   const Preference &pref, cublasLtMatmulAlgo_t &algo, size_t &workspace) {
  if (pref.searchMode != CUBLASLT_SEARCH_BEST_FIT)
    return notEmulated("search mode " + text(pref.searchMode));
  // Vectorized kernels want 16 bytes; none reads an operand less aligned than its element.
  uint64_t align[5];
  const uint32_t types[4] = {uint32_t(la.type), uint32_t(la.type), uint32_t(ld.type),
                             uint32_t(ld.type)};
  const char *names[4] = {"A", "B", "C", "D"};
  for (int i = 0; i < 4; ++i) {
    if (pref.alignment[i] < elementBytes(types[i]))
      return unsupported(std::string("MIN_ALIGNMENT_") + names[i] + "_BYTES " +
                         text(pref.alignment[i]) + " is below the element size: no algorithm");
    align[i] = std::min<uint64_t>(pref.alignment[i], 16);
  }
  align[4] = p.hasBias() && desc.bias ? std::min<uint32_t>(alignmentOf(desc.bias), 16) : 1;
  if (p.hasBias() && desc.bias && align[4] < elementBytes(p.biasType))
    return unsupported("the bias pointer is misaligned for its type: no algorithm");
  workspace = std::min<uint64_t>(pref.maxWorkspace, kWorkspaceWanted) & ~uint64_t(255);
  std::memset(&algo, 0, sizeof algo);
  algo.data[0] = kAlgoMark;
  algo.data[1] = workspace;
  algo.data[2] = signature(p, la, ld);
  algo.data[3] = align[0] | align[1] << 16 | align[2] << 32 | align[3] << 48;
  algo.data[4] = align[4];
  return {};
}

// ===-------------------------------------------------------------------------------------===//
// The compute
// ===-------------------------------------------------------------------------------------===//

float roundInput(float x, InputRounding rounding) {
  switch (rounding) {
  case InputRounding::None:
    break;
  case InputRounding::Tf32: {
    // TF32 keeps 10 mantissa bits; round to nearest, ties away from zero (cvt.rna.tf32.f32).
    if (!std::isfinite(x))
      return x;
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    bits = (bits + 0x1000u) & 0xffffe000u;
    std::memcpy(&x, &bits, 4);
    return x;
  }
  case InputRounding::Half:
    return __half2float(__float2half_rn(x));
  case InputRounding::Bfloat16:
    return __bfloat162float(__float2bfloat16_rn(x));
  }
  return x;
}

double load(const void *base, uint32_t type, int64_t index) {
  switch (type) {
  case CUDA_R_16F:
    return __half2float(static_cast<const __half *>(base)[index]);
  case CUDA_R_16BF:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(base)[index]);
  case CUDA_R_32F:
    return static_cast<const float *>(base)[index];
  default:
    return static_cast<const double *>(base)[index];
  }
}

template <typename Acc> void store(void *base, uint32_t type, int64_t index, Acc value) {
  switch (type) {
  case CUDA_R_16F:
    static_cast<__half *>(base)[index] = __float2half_rn(float(value));
    break;
  case CUDA_R_16BF:
    static_cast<__nv_bfloat16 *>(base)[index] = __float2bfloat16_rn(float(value));
    break;
  case CUDA_R_32F:
    static_cast<float *>(base)[index] = float(value);
    break;
  default:
    static_cast<double *>(base)[index] = double(value);
  }
}

/// The host views of a matmul's memory, taken when the work runs.
struct Views {
  const void *a, *b, *c, *bias;
  void *d;
};

/// D = epilogue(alpha op(A) op(B) + beta C + bias), in the accumulator type Acc (the scale
/// type): each batch packs op(A) and op(B) column by column into Acc, then
/// accumulates four columns of D at a time, each over k in order, as one GPU thread would.
template <typename Acc> void compute(const Problem &p, const Views &v, Acc alpha, Acc beta) {
  const uint64_t m = p.m, n = p.n, k = p.k;
  std::vector<Acc> packedA(m * k), packedB(k * n), sums(4 * m);
  auto input = [&](const void *base, const Operand &o, int64_t index) {
    double x = load(base, o.type, index);
    return p.f64 ? Acc(x) : Acc(roundInput(float(x), p.rounding));
  };
  for (int32_t batch = 0; batch < p.batch; ++batch) {
    const int64_t aBase = batch * p.a.batchStride, bBase = batch * p.b.batchStride;
    for (uint64_t t = 0; t < k; ++t)
      for (uint64_t i = 0; i < m; ++i)
        packedA[t * m + i] = input(v.a, p.a, aBase + i * p.a.rowStride + t * p.a.colStride);
    for (uint64_t j = 0; j < n; ++j)
      for (uint64_t t = 0; t < k; ++t)
        packedB[j * k + t] = input(v.b, p.b, bBase + t * p.b.rowStride + j * p.b.colStride);
    for (uint64_t j0 = 0; j0 < n; j0 += 4) {
      const uint64_t width = std::min<uint64_t>(4, n - j0);
      std::fill(sums.begin(), sums.end(), Acc(0));
      Acc *__restrict s0 = &sums[0], *__restrict s1 = &sums[m], *__restrict s2 = &sums[2 * m],
                      *__restrict s3 = &sums[3 * m];
      for (uint64_t t = 0; t < k; ++t) {
        const Acc *__restrict col = &packedA[t * m];
        auto bAt = [&](uint64_t dj) { return dj < width ? packedB[(j0 + dj) * k + t] : Acc(0); };
        const Acc b0 = bAt(0), b1 = bAt(1), b2 = bAt(2), b3 = bAt(3);
        for (uint64_t i = 0; i < m; ++i) {
          const Acc x = col[i];
          s0[i] += x * b0;
          s1[i] += x * b1;
          s2[i] += x * b2;
          s3[i] += x * b3;
        }
      }
      for (uint64_t dj = 0; dj < width; ++dj) {
        const uint64_t j = j0 + dj;
        const int64_t cBase = batch * p.c.batchStride + j * p.c.colStride;
        const int64_t dBase = batch * p.d.batchStride + j * p.d.colStride;
        for (uint64_t i = 0; i < m; ++i) {
          Acc x = alpha * sums[dj * m + i];
          // beta == 0 reads no C, so C may hold anything, NaN included (the BLAS convention).
          if (beta != Acc(0))
            x += beta * Acc(load(v.c, p.c.type, cBase + i * p.c.rowStride));
          if (p.hasBias())
            x += Acc(load(v.bias, p.biasType, batch * p.biasBatchStride + i));
          if (p.relu())
            x = x > Acc(0) ? x : Acc(0);
          if (p.gelu()) // the tanh approximation
            x = Acc(0.5) * x *
                (Acc(1) + std::tanh(Acc(0.7978845608028654) * (x + Acc(0.044715) * x * x * x)));
          store(v.d, p.d.type, dBase + i * p.d.rowStride, x);
        }
      }
    }
  }
}

/// A scalar alpha or beta in the scale type, as double (exact for f32 too).
double scalar(const void *pointer, bool f64) {
  return f64 ? *static_cast<const double *>(pointer) : *static_cast<const float *>(pointer);
}

/// Whether the GPU could address `pointer`: emulated device memory, or live pinned host memory.
bool deviceReachable(const void *pointer) {
  return isDeviceAddress(pointer) || checkRange(pointer, 1).empty();
}

/// A pointer argument the real library passes to a kernel: refused when it is host memory.
Verdict checkPointer(const void *pointer, const char *name, bool needed) {
  if (!pointer)
    return needed ? invalid(std::string(name) + " is null") : Verdict{};
  if (!deviceReachable(pointer))
    return invalid(std::string(name) + " (" + hex(pointer) + ") is not device memory");
  return {};
}

std::string describeWork(const Problem &p) {
  std::string batch = p.batch == 1 ? "" : std::to_string(p.batch) + "x";
  std::string what = std::string("cublasLtMatmul ") + typeName(p.a.type) + " [" + batch +
                     text(p.m) + "x" + text(p.k) + "]x[" + batch + text(p.k) + "x" + text(p.n) +
                     "]";
  if (p.epilogue != CUBLASLT_EPILOGUE_DEFAULT)
    what += " epilogue " + text(p.epilogue);
  return what;
}

// Looks up the descriptors a matmul or heuristic names; null Cdesc means Ddesc.
Verdict lookUp(cublasLtMatmulDesc_t descHandle, cublasLtMatrixLayout_t aHandle,
               cublasLtMatrixLayout_t bHandle, cublasLtMatrixLayout_t cHandle,
               cublasLtMatrixLayout_t dHandle, MatmulDesc &desc, Layout (&l)[4]) {
  std::optional<MatmulDesc> found = descs.get(descHandle);
  if (!found)
    return invalid("the matmul descriptor is null or destroyed");
  desc = *found;
  cublasLtMatrixLayout_t handles4[4] = {aHandle, bHandle, cHandle ? cHandle : dHandle, dHandle};
  const char *names[4] = {"Adesc", "Bdesc", "Cdesc", "Ddesc"};
  for (int i = 0; i < 4; ++i) {
    std::optional<Layout> layout = layouts.get(handles4[i]);
    if (!layout)
      return invalid(std::string(names[i]) + " is null or destroyed");
    l[i] = *layout;
  }
  return {};
}

} // namespace
} // namespace smelt::emucuda

using namespace smelt::emucuda;

// ===-------------------------------------------------------------------------------------===//
// The C API
// ===-------------------------------------------------------------------------------------===//

size_t CUBLASWINAPI cublasLtGetVersion(void) { return CUBLAS_VERSION; }

const char *CUBLASWINAPI cublasLtGetStatusName(cublasStatus_t status) { return statusName(status); }

const char *CUBLASWINAPI cublasLtGetStatusString(cublasStatus_t status) {
  return statusText(status).description;
}

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t *lightHandle) {
  if (!lightHandle)
    return answer("cublasLtCreate", invalid("lightHandle is null"));
  // The handle belongs to the current device; with no context current, the runtime API
  // underneath would make device 0's primary context current.
  int device = currentDevice();
  *lightHandle = handles.create({device < 0 ? 0 : device});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t lightHandle) {
  if (!lightHandle)
    return answer("cublasLtDestroy", invalid("lightHandle is null"));
  if (!handles.destroy(lightHandle))
    return answer("cublasLtDestroy",
                  refuse(CUBLAS_STATUS_NOT_INITIALIZED, "the handle was destroyed or never made"));
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
                                                     cublasComputeType_t computeType,
                                                     cudaDataType_t scaleType) {
  if (!matmulDesc)
    return answer("cublasLtMatmulDescCreate", invalid("matmulDesc is null"));
  MatmulDesc desc;
  desc.compute = computeType;
  desc.scale = scaleType;
  *matmulDesc = descs.create(desc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  // Destroying null is a no-op success, like free().
  if (matmulDesc && !descs.destroy(matmulDesc))
    return answer("cublasLtMatmulDescDestroy", invalid("the descriptor was already destroyed"));
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                           cublasLtMatmulDescAttributes_t attr,
                                                           const void *buf, size_t sizeInBytes) {
  const char *call = "cublasLtMatmulDescSetAttribute";
  if (!buf)
    return answer(call, invalid("buf is null"));
  std::optional<Verdict> verdict = descs.update(matmulDesc, [&](MatmulDesc &d) -> Verdict {
    // Attributes of features the emulation lacks are accepted at their defaults (null, 0)
    // and remembered otherwise, so the matmul answers NOT_SUPPORTED.
    auto pointerNotEmulated = [&](const char *name) -> Verdict {
      const void *pointer = nullptr;
      if (Verdict v = assign(pointer, buf, sizeInBytes, name); v)
        return v;
      if (pointer && d.notEmulated.empty())
        d.notEmulated = name;
      return {};
    };
    auto modeNotEmulated = [&](const char *name) -> Verdict {
      int32_t mode = 0;
      if (Verdict v = assign(mode, buf, sizeInBytes, name); v)
        return v;
      if (mode != 0 && d.notEmulated.empty())
        d.notEmulated = name;
      return {};
    };
    int64_t ignored64 = 0;
    int32_t ignored32 = 0;
    int8_t ignored8 = 0;
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
      return assign(d.compute, buf, sizeInBytes, "COMPUTE_TYPE");
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
      return assign(d.scale, buf, sizeInBytes, "SCALE_TYPE");
    case CUBLASLT_MATMUL_DESC_POINTER_MODE:
      return assign(d.pointerMode, buf, sizeInBytes, "POINTER_MODE");
    case CUBLASLT_MATMUL_DESC_TRANSA:
      return assign(d.transA, buf, sizeInBytes, "TRANSA");
    case CUBLASLT_MATMUL_DESC_TRANSB:
      return assign(d.transB, buf, sizeInBytes, "TRANSB");
    case CUBLASLT_MATMUL_DESC_TRANSC:
      return assign(d.transC, buf, sizeInBytes, "TRANSC");
    case CUBLASLT_MATMUL_DESC_FILL_MODE:
      return assign(d.fillMode, buf, sizeInBytes, "FILL_MODE");
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      return assign(d.epilogue, buf, sizeInBytes, "EPILOGUE");
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      return assign(d.bias, buf, sizeInBytes, "BIAS_POINTER");
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE:
      return assign(d.biasBatchStride, buf, sizeInBytes, "BIAS_BATCH_STRIDE");
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
      return assign(d.biasType, buf, sizeInBytes, "BIAS_DATA_TYPE");
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
      return pointerNotEmulated("EPILOGUE_AUX_POINTER");
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER:
      return pointerNotEmulated("A_SCALE_POINTER");
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER:
      return pointerNotEmulated("B_SCALE_POINTER");
    case CUBLASLT_MATMUL_DESC_C_SCALE_POINTER:
      return pointerNotEmulated("C_SCALE_POINTER");
    case CUBLASLT_MATMUL_DESC_D_SCALE_POINTER:
      return pointerNotEmulated("D_SCALE_POINTER");
    case CUBLASLT_MATMUL_DESC_AMAX_D_POINTER:
      return pointerNotEmulated("AMAX_D_POINTER");
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER:
      return pointerNotEmulated("EPILOGUE_AUX_SCALE_POINTER");
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER:
      return pointerNotEmulated("EPILOGUE_AUX_AMAX_POINTER");
    case CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER:
      return pointerNotEmulated("D_OUT_SCALE_POINTER");
    case CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR:
      return pointerNotEmulated("EMULATION_DESCRIPTOR");
    case CUBLASLT_MATMUL_DESC_A_SCALE_MODE:
      return modeNotEmulated("A_SCALE_MODE");
    case CUBLASLT_MATMUL_DESC_B_SCALE_MODE:
      return modeNotEmulated("B_SCALE_MODE");
    case CUBLASLT_MATMUL_DESC_C_SCALE_MODE:
      return modeNotEmulated("C_SCALE_MODE");
    case CUBLASLT_MATMUL_DESC_D_SCALE_MODE:
      return modeNotEmulated("D_SCALE_MODE");
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE:
      return modeNotEmulated("EPILOGUE_AUX_SCALE_MODE");
    case CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE:
      return modeNotEmulated("D_OUT_SCALE_MODE");
    // Meaningful only with features refused above, or hints: checked and ignored.
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE:
    case CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE:
      return assign(ignored64, buf, sizeInBytes, "the attribute");
    case CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET:
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:
      return assign(ignored32, buf, sizeInBytes, "the attribute");
    case CUBLASLT_MATMUL_DESC_FAST_ACCUM:
      return assign(ignored8, buf, sizeInBytes, "FAST_ACCUM");
    }
    return invalid("attribute " + std::to_string(int(attr)) + " is not a matmul attribute");
  });
  if (!verdict)
    return answer(call, invalid("the descriptor is null or destroyed"));
  return answer(call, *verdict);
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout,
                                                       cudaDataType type, uint64_t rows,
                                                       uint64_t cols, int64_t ld) {
  if (!matLayout)
    return answer("cublasLtMatrixLayoutCreate", invalid("matLayout is null"));
  // Checked by the matmul, as the order and the rest may still change.
  Layout layout;
  layout.type = uint32_t(type);
  layout.rows = rows;
  layout.cols = cols;
  layout.ld = ld;
  *matLayout = layouts.create(layout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  if (matLayout && !layouts.destroy(matLayout))
    return answer("cublasLtMatrixLayoutDestroy", invalid("the layout was already destroyed"));
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                             cublasLtMatrixLayoutAttribute_t attr,
                                                             const void *buf, size_t sizeInBytes) {
  const char *call = "cublasLtMatrixLayoutSetAttribute";
  if (!buf)
    return answer(call, invalid("buf is null"));
  std::optional<Verdict> verdict = layouts.update(matLayout, [&](Layout &l) -> Verdict {
    switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE:
      return assign(l.type, buf, sizeInBytes, "TYPE");
    case CUBLASLT_MATRIX_LAYOUT_ORDER:
      return assign(l.order, buf, sizeInBytes, "ORDER");
    case CUBLASLT_MATRIX_LAYOUT_ROWS:
      return assign(l.rows, buf, sizeInBytes, "ROWS");
    case CUBLASLT_MATRIX_LAYOUT_COLS:
      return assign(l.cols, buf, sizeInBytes, "COLS");
    case CUBLASLT_MATRIX_LAYOUT_LD:
      return assign(l.ld, buf, sizeInBytes, "LD");
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
      return assign(l.batch, buf, sizeInBytes, "BATCH_COUNT");
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
      return assign(l.batchStride, buf, sizeInBytes, "STRIDED_BATCH_OFFSET");
    case CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET:
      return assign(l.planeOffset, buf, sizeInBytes, "PLANE_OFFSET");
    case CUBLASLT_MATRIX_LAYOUT_BATCH_MODE:
      return assign(l.batchMode, buf, sizeInBytes, "BATCH_MODE");
    }
    return invalid("attribute " + std::to_string(int(attr)) + " is not a layout attribute");
  });
  if (!verdict)
    return answer(call, invalid("the layout is null or destroyed"));
  return answer(call, *verdict);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
  if (!pref)
    return answer("cublasLtMatmulPreferenceCreate", invalid("pref is null"));
  *pref = preferences.create({});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  if (pref && !preferences.destroy(pref))
    return answer("cublasLtMatmulPreferenceDestroy",
                  invalid("the preference was already destroyed"));
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
    size_t sizeInBytes) {
  const char *call = "cublasLtMatmulPreferenceSetAttribute";
  if (!buf)
    return answer(call, invalid("buf is null"));
  std::optional<Verdict> verdict = preferences.update(pref, [&](Preference &p) -> Verdict {
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE:
      return assign(p.searchMode, buf, sizeInBytes, "SEARCH_MODE");
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      return assign(p.maxWorkspace, buf, sizeInBytes, "MAX_WORKSPACE_BYTES");
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
      return assign(p.reductionMask, buf, sizeInBytes, "REDUCTION_SCHEME_MASK");
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
      return assign(p.alignment[0], buf, sizeInBytes, "MIN_ALIGNMENT_A_BYTES");
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
      return assign(p.alignment[1], buf, sizeInBytes, "MIN_ALIGNMENT_B_BYTES");
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
      return assign(p.alignment[2], buf, sizeInBytes, "MIN_ALIGNMENT_C_BYTES");
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      return assign(p.alignment[3], buf, sizeInBytes, "MIN_ALIGNMENT_D_BYTES");
    case CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT:
      return assign(p.maxWaves, buf, sizeInBytes, "MAX_WAVES_COUNT");
    case CUBLASLT_MATMUL_PREF_IMPL_MASK:
      return assign(p.implMask, buf, sizeInBytes, "IMPL_MASK");
    }
    return invalid("attribute " + std::to_string(int(attr)) + " is not a preference attribute");
  });
  if (!verdict)
    return answer(call, invalid("the preference is null or destroyed"));
  return answer(call, *verdict);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int *returnAlgoCount) {
  const char *call = "cublasLtMatmulAlgoGetHeuristic";
  if (!handles.get(lightHandle))
    return answer(call, refuse(CUBLAS_STATUS_NOT_INITIALIZED, "the handle is null or destroyed"));
  if (requestedAlgoCount <= 0)
    return answer(call, invalid("requestedAlgoCount is " + std::to_string(requestedAlgoCount)));
  if (!heuristicResultsArray || !returnAlgoCount)
    return answer(call, invalid("heuristicResultsArray or returnAlgoCount is null"));
  *returnAlgoCount = 0;
  std::optional<Preference> pref = preferences.get(preference);
  if (!pref)
    return answer(call, invalid("the preference is null or destroyed"));
  MatmulDesc desc;
  Layout l[4];
  Problem problem;
  if (Verdict v = lookUp(operationDesc, Adesc, Bdesc, Cdesc, Ddesc, desc, l); v)
    return answer(call, v);
  if (Verdict v = describe(desc, l[0], l[1], l[2], l[3], problem); v)
    return answer(call, v); // NOT_SUPPORTED is how the heuristic says "no algorithm"
  cublasLtMatmulHeuristicResult_t &result = heuristicResultsArray[0];
  std::memset(&result, 0, sizeof result);
  if (Verdict v = chooseAlgo(problem, l[0], l[3], desc, *pref, result.algo, result.workspaceSize);
      v)
    return answer(call, v);
  result.state = CUBLAS_STATUS_SUCCESS;
  result.wavesCount = 1.0f;
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmul(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void *alpha,
    const void *A, cublasLtMatrixLayout_t Adesc, const void *B, cublasLtMatrixLayout_t Bdesc,
    const void *beta, const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
    cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo, void *workspace,
    size_t workspaceSizeInBytes, cudaStream_t stream) {
  const char *call = "cublasLtMatmul";
  std::optional<cublasLtContext> handle = handles.get(lightHandle);
  if (!handle)
    return answer(call, refuse(CUBLAS_STATUS_NOT_INITIALIZED, "the handle is null or destroyed"));
  MatmulDesc desc;
  Layout l[4];
  Problem problem;
  if (Verdict v = lookUp(computeDesc, Adesc, Bdesc, Cdesc, Ddesc, desc, l); v)
    return answer(call, v);
  if (Verdict v = describe(desc, l[0], l[1], l[2], l[3], problem); v)
    return answer(call, v);
  // In place needs Cdesc == Ddesc: C's elements are D's.
  if (C == D && C && (l[2].ld != l[3].ld || l[2].batchStride != l[3].batchStride))
    return answer(call, invalid("C == D (in place) but Cdesc and Ddesc differ in leading "
                                "dimension or batch stride"));

  // The scalars: on the host they are read now; on the device, when the work runs.
  bool onDevice = desc.pointerMode == CUBLASLT_POINTER_MODE_DEVICE;
  if (!alpha || !beta)
    return answer(call, invalid("alpha or beta is null"));
  // Pinned host memory is both: the host reads it, and so can a kernel.
  for (auto [pointer, name] : {std::pair{alpha, "alpha"}, {beta, "beta"}})
    if (onDevice ? !deviceReachable(pointer) : isDeviceAddress(pointer))
      return answer(call, invalid(std::string(name) +
                                  (onDevice ? " is host memory but" : " is device memory but") +
                                  " POINTER_MODE is " + (onDevice ? "DEVICE" : "HOST")));
  double alphaValue = onDevice ? 0 : scalar(alpha, problem.f64);
  double betaValue = onDevice ? 1 : scalar(beta, problem.f64);
  bool readsC = onDevice || betaValue != 0;
  bool empty = problem.m == 0 || problem.n == 0;
  bool readsAB = !empty && problem.k > 0;

  // The memory the kernel reads and writes.
  for (auto [pointer, name, needed] : {std::tuple{A, "A", readsAB},
                                       {B, "B", readsAB},
                                       {C, "C", readsC && !empty},
                                       {static_cast<const void *>(D), "D", !empty}})
    if (Verdict v = checkPointer(pointer, name, needed); v)
      return answer(call, v);
  if (problem.hasBias()) {
    if (!desc.bias)
      return answer(call, invalid("the epilogue adds a bias but BIAS_POINTER is null"));
    if (Verdict v = checkPointer(desc.bias, "BIAS_POINTER", true); v)
      return answer(call, v);
  }

  // The algorithm: the heuristic's (its promises checked), or one chosen now.
  cublasLtMatmulAlgo_t chosen;
  if (algo) {
    chosen = *algo;
    if (chosen.data[0] != kAlgoMark)
      return answer(call, invalid("algo did not come from cublasLtMatmulAlgoGetHeuristic"));
    if (chosen.data[2] != signature(problem, l[0], l[3]))
      return answer(call, invalid("algo was chosen for other compute or data types"));
  } else {
    Preference pref;
    pref.maxWorkspace = workspaceSizeInBytes;
    const void *pointers[4] = {A, B, C ? C : D, D};
    for (int i = 0; i < 4; ++i)
      pref.alignment[i] = alignmentOf(pointers[i]);
    size_t ignored;
    if (Verdict v = chooseAlgo(problem, l[0], l[3], desc, pref, chosen, ignored); v)
      return answer(call, v);
  }
  const void *pointers[5] = {A, B, C, D, desc.bias};
  const char *names[5] = {"A", "B", "C", "D", "the bias"};
  for (int i = 0; i < 5; ++i) {
    uint64_t wanted = i < 4 ? chosen.data[3] >> (16 * i) & 0xffff : chosen.data[4];
    if (pointers[i] && (i < 4 || problem.hasBias()) && alignmentOf(pointers[i]) < wanted)
      return answer(call, invalid(std::string(names[i]) + " is " + text(alignmentOf(pointers[i])) +
                                  "-byte aligned; the algorithm was chosen for " + text(wanted)));
  }
  size_t scratch = chosen.data[1];
  if (workspaceSizeInBytes < scratch)
    return answer(call,
                  invalid("workspaceSizeInBytes " + text(workspaceSizeInBytes) +
                          " is less than the " + text(scratch) + " bytes the algorithm needs"));
  if (scratch > 0)
    if (Verdict v = checkPointer(workspace, "workspace", true); v)
      return answer(call, v);

  // The kernel's stream must be the handle's device's.
  int streamOwner = streamDevice(stream);
  if (streamOwner >= 0 && streamOwner != handle->device)
    return answer(call, refuse(CUBLAS_STATUS_EXECUTION_FAILED,
                               "the stream is on device " + std::to_string(streamOwner) +
                                   " but the handle on device " + std::to_string(handle->device)));
  if (empty)
    return CUBLAS_STATUS_SUCCESS;

  std::string what = describeWork(problem);
  size_t biasBytes = problem.hasBias()
                         ? ((problem.batch - 1) * problem.biasBatchStride + problem.m) *
                               elementBytes(problem.biasType)
                         : 0;
  const void *bias = desc.bias;
  auto run = [=] {
    Views v{};
    v.a = readsAB ? hostView(A, problem.a.spanBytes, what + ": A") : nullptr;
    v.b = readsAB ? hostView(B, problem.b.spanBytes, what + ": B") : nullptr;
    v.bias = biasBytes ? hostView(bias, biasBytes, what + ": the bias") : nullptr;
    double alphaNow = alphaValue, betaNow = betaValue;
    if (onDevice) {
      size_t bytes = problem.f64 ? 8 : 4;
      alphaNow = scalar(hostView(alpha, bytes, what + ": alpha"), problem.f64);
      betaNow = scalar(hostView(beta, bytes, what + ": beta"), problem.f64);
    }
    v.c = betaNow != 0 ? hostView(C, problem.c.spanBytes, what + ": C") : nullptr;
    v.d = hostView(D, problem.d.spanBytes, what + ": D");
    // Workspace contents are undefined after a matmul: a caller who keeps data there sees it.
    if (scratch)
      std::memset(hostView(workspace, scratch, what + ": the workspace"), 0xff, scratch);
    if (problem.f64)
      compute<double>(problem, v, alphaNow, betaNow);
    else
      compute<float>(problem, v, float(alphaNow), float(betaNow));
  };
  if (CUresult result = enqueue(stream, what, run); result != CUDA_SUCCESS)
    return answer(
        call, refuse(CUBLAS_STATUS_EXECUTION_FAILED,
                     "queueing on the stream failed with CUresult " + std::to_string(int(result))));
  return CUBLAS_STATUS_SUCCESS;
}
