// Matmuls on the GPU through cuBLASLt, reached through dlopen("libcublasLt.so.13") and a table of
// symbols like the CUDA driver's (CudaDriver.h): binaries start without cuBLAS, and a missing
// library or symbol is an error that names it (or a test's reason to skip).
//
// What callers must provide:
// - operands, result and bias in `device`'s primary context, row-major and contiguous, with
//   the alignment the call was prepared for (MatmulAlignment). Any alignment to the element
//   size works (the heuristic is told it, up to 256 bytes), but most fast kernels need 16
//   bytes; the executor's allocator gives 256, its arena offsets 64. A bias must be 16-byte
//   aligned: prepare() refuses less (bias epilogues are reported to fail below).
// - a workspace of kWorkspaceBytes (NVIDIA's recommendation for Hopper; 4 MiB for older GPUs),
//   256-byte aligned, not used by anything else queued on the stream at the same time. Less (or
//   none) works too, with fewer algorithms to choose from.
// Work is queued on device.stream(); nothing synchronizes. One CublasLt per device, shared by
// every thread: preparing a call and queuing one hold its lock.
#pragma once

#include "runtime/DType.h"
#include "runtime/Status.h"
#include "runtime/cuda/CudaDevice.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace smelt::rt::cuda {

/// What cuBLASLt applies to the product before storing it: the epilogues smelt-fuse folds into
/// a matmul on the GPU. Bias adds a vector of N (the result's dtype) to every row.
enum class MatmulEpilogue { None, Relu, Bias, BiasRelu };

bool hasBias(MatmulEpilogue epilogue);

/// result[b] = epilogue(op(lhs[b]) @ op(rhs[b]) [+ bias]) for b < batch, every matrix row-major.
struct MatmulCall {
  DType dtype = DType::f32; ///< f32, f64, f16 or bf16: operands, result and bias alike
  int64_t batch = 1, m = 0, n = 0, k = 0;
  /// lhs is stored [batch, K, M] instead of [batch, M, K]; rhs [batch, N, K] instead of
  /// [batch, K, N]. The result is always [batch, M, N].
  bool transposeLhs = false, transposeRhs = false;
  /// A bias ([N], the same for every batch) is given to the run iff the epilogue has one.
  MatmulEpilogue epilogue = MatmulEpilogue::None;
  /// f32 only (ignored otherwise): TF32 tensor cores (10-bit mantissa products) when asked.
  /// f16/bf16 always accumulate in f32, f64 in f64.
  bool allowTf32 = false;
};

/// "f16 [8x3]x[3x5] with bias+relu", batch and transposes shown when present.
std::string describe(const MatmulCall &call);

/// The alignment in bytes (a power of two, at most 256) a call's pointers are known to have,
/// which cuBLASLt's heuristic is told: an executor knows it from its buffers' arena offsets.
struct MatmulAlignment {
  unsigned lhs = 256, rhs = 256, result = 256, bias = 256;
};

class CublasLt {
public:
  /// cuBLASLt for `device` (its handle created on the device's context), opened once per
  /// device and kept for the life of the process. The error names the library or symbol that
  /// is missing, or what cublasLtCreate said.
  static Expected<CublasLt *> get(const CudaDevice &device);

  /// Checks what can be checked without a GPU: dtype, positive sizes within cuBLASLt's
  /// limits. The error begins with `what` ("matmul at model.mlir:12:5"). prepare() checks the
  /// same first; an executor can call it when it plans its steps.
  static Status validate(const MatmulCall &call, const std::string &what);

  /// One matmul prepared for its device: its descriptors and the algorithm cuBLASLt's
  /// heuristic chose for it, made once. run() queues result = epilogue(lhs @ rhs [+ bias]) on
  /// the device's stream, with the device's context current (an executor's run makes it so),
  /// given pointers with prepare()'s alignment, a bias iff the epilogue adds one, and
  /// prepare()'s workspace. Errors begin with the call's `what`.
  class Plan {
  public:
    virtual ~Plan() = default;
    virtual Status run(const void *lhs, const void *rhs, const void *bias, void *result,
                       void *workspace) const = 0;
  };

  /// validate(), then that `alignment` suits the call (each pointer its element size, a bias
  /// 16 bytes), then the plan for pointers so aligned and `workspaceBytes` of workspace; every
  /// error begins with `what`.
  Expected<std::shared_ptr<const Plan>> prepare(const MatmulCall &call,
                                                const MatmulAlignment &alignment,
                                                size_t workspaceBytes, const std::string &what);

  static constexpr size_t kWorkspaceBytes = size_t(32) << 20; ///< what callers should provide

  /// The library's version (130100 for 13.1.0).
  size_t version() const;

private:
  class MatmulPlan; // defined in CublasLt.cpp

  explicit CublasLt(const CudaDevice &device) : device_(device) {}

  const CudaDevice &device_;
  void *handle_ = nullptr; // cublasLtHandle_t
  /// Held while a plan is made or queued: the handle is shared by every thread on the device.
  std::mutex mutex_;
};

} // namespace smelt::rt::cuda
