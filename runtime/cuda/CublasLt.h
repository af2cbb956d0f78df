// Matmuls on the GPU through cuBLASLt, reached through dlopen("libcublasLt.so.13") and a table of
// symbols like the CUDA driver's (CudaDriver.h): binaries start without cuBLAS, and a missing
// library or symbol is an error that names it (or a test's reason to skip).
//
// What callers must provide:
// - operands, result and bias in `device`'s primary context, row-major and contiguous. Any
//   alignment to the element size works (the heuristic is told each pointer's alignment, up to
//   256 bytes), but most fast kernels need 16 bytes; the executor's allocator gives 256. A bias
//   must be 16-byte aligned: matmul() refuses less (bias epilogues are reported to fail below).
// - a workspace of kWorkspaceBytes (NVIDIA's recommendation for Hopper; 4 MiB for older GPUs),
//   256-byte aligned, not used by anything else queued on the stream at the same time. Less (or
//   none) works too, with fewer algorithms to choose from.
// Work is queued on device.stream(); nothing synchronizes. One CublasLt per device, shared by
// every thread: matmul() holds a lock while it picks an algorithm and queues.
#pragma once

#include "runtime/DType.h"
#include "runtime/Status.h"
#include "runtime/cuda/CudaDevice.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

namespace smelt::rt::cuda {

/// What cuBLASLt applies to the product before storing it. Bias adds a vector of N (the
/// result's dtype) to every row; GELU is the tanh approximation
/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), which is what cuBLASLt computes.
enum class MatmulEpilogue { None, Relu, Gelu, Bias, BiasRelu, BiasGelu };

/// "none", "relu", "gelu", "bias", "bias+relu", "bias+gelu".
const char *epilogueName(MatmulEpilogue epilogue);
bool hasBias(MatmulEpilogue epilogue);

/// result[b] = epilogue(op(lhs[b]) @ op(rhs[b]) [+ bias]) for b < batch, every matrix row-major.
struct MatmulCall {
  DType dtype = DType::f32; ///< f32, f64, f16 or bf16: operands, result and bias alike
  int64_t batch = 1, m = 0, n = 0, k = 0;
  /// lhs is stored [batch, K, M] instead of [batch, M, K]; rhs [batch, N, K] instead of
  /// [batch, K, N]. The result is always [batch, M, N].
  bool transposeLhs = false, transposeRhs = false;
  MatmulEpilogue epilogue = MatmulEpilogue::None;
  const void *bias = nullptr; ///< [N], the same for every batch; given iff the epilogue has Bias
  /// f32 only (ignored otherwise): TF32 tensor cores (10-bit mantissa products) when asked.
  /// f16/bf16 always accumulate in f32, f64 in f64.
  bool allowTf32 = false;
};

/// "f16 [8x3]x[3x5] with bias+gelu", batch and transposes shown when present.
std::string describe(const MatmulCall &call);

class CublasLt {
public:
  /// cuBLASLt for `device` (its handle created on the device's context), opened once per
  /// device and kept for the life of the process. The error names the library or symbol that
  /// is missing, or what cublasLtCreate said.
  static Expected<CublasLt *> get(const CudaDevice &device);

  /// Checks what can be checked without a GPU: dtype, positive sizes within cuBLASLt's
  /// limits, a bias iff the epilogue adds one. The error begins with `what` ("matmul at
  /// model.mlir:12:5"). matmul() checks the same first; an executor can call it at creation.
  static Status validate(const MatmulCall &call, const std::string &what);

  /// Queues result = epilogue(lhs @ rhs [+ bias]) on device.stream(). The algorithm comes from
  /// cuBLASLt's heuristic, cached per shape, dtype, epilogue, alignments and workspace size;
  /// every error begins with `what`.
  Status matmul(const MatmulCall &call, const void *lhs, const void *rhs, void *result,
                void *workspace, size_t workspaceBytes, const std::string &what);

  static constexpr size_t kWorkspaceBytes = size_t(32) << 20; ///< what callers should provide

  /// The library's version (130100 for 13.1.0).
  size_t version() const;
  ~CublasLt();

private:
  struct Plan; // descriptors and the algorithm for one key; defined in CublasLt.cpp
  /// dtype, batch, m, n, k, transposes, epilogue, tf32, alignments of lhs/rhs/result/bias,
  /// workspace bytes: everything cuBLASLt's choice depends on.
  using PlanKey = std::tuple<DType, int64_t, int64_t, int64_t, int64_t, bool, bool, MatmulEpilogue,
                             bool, unsigned, unsigned, unsigned, unsigned, size_t>;

  explicit CublasLt(const CudaDevice &device);
  Expected<Plan *> plan(const PlanKey &key, const MatmulCall &call, const std::string &what);

  const CudaDevice &device_;
  void *handle_ = nullptr; // cublasLtHandle_t
  std::mutex mutex_;
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
};

} // namespace smelt::rt::cuda
