// The Executable: what codegen produces and the runtime runs. Plain C++ data with no MLIR types,
// so a later AOT artifact can serialize it and the runtime alone can load it.
//
// An Executable is a list of buffers (each a static TensorType) and a list of steps. Each step
// names an op of the smelt dialect ("add", "matmul", ...), reads operand buffers, writes result
// buffers and carries its attributes as plain values. Inputs are filled by the caller, constants
// from `constants`, every other buffer by exactly one step.
#pragma once

#include "runtime/DType.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace smelt::rt {

using BufferId = int32_t;

/// An attribute value: integer, float, string or integer list. Enums (compare direction, reduce
/// kind) travel as their keyword strings.
using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>>;

struct BufferInfo {
  TensorType type;
  /// Where the value came from, for messages: "%arg0", "matmul at model.mlir:4:10".
  std::string name;
};

struct Step {
  /// Op name without the dialect prefix: "add", "broadcast_in_dim", "conv2d" ...
  std::string op;
  std::vector<BufferId> operands;
  std::vector<BufferId> results;
  std::map<std::string, AttrValue> attrs;
  /// Source location of the op, for error messages ("model.mlir:12:5").
  std::string location;
  /// Where it runs, as smelt-place-devices decided: "cpu:0" or "gpu:N". A "copy" step moves its
  /// operand onto this device.
  std::string device = "cpu:0";

  /// Attribute accessors; the caller knows the op's attributes exist (codegen wrote them).
  int64_t intAttr(const std::string &name) const;
  double floatAttr(const std::string &name) const;
  const std::string &stringAttr(const std::string &name) const;
  const std::vector<int64_t> &intsAttr(const std::string &name) const;
  bool hasAttr(const std::string &name) const { return attrs.count(name) != 0; }
};

struct Constant {
  BufferId buffer;
  /// Raw little-endian element bytes, exactly buffers[buffer].type.byteSize() long.
  std::vector<uint8_t> bytes;
};

/// A kernel made from one smelt.fusion. Its step's operands are the fusion's inputs and its
/// results the fusion's results; a kernel reads them through one array of pointers, inputs
/// first, then results.
struct FusedKernel {
  /// The symbol in the CPU code and the CUDA module: "main_fusion3".
  std::string name;
  /// "loop" (one element of every result per iteration) or "reduction" (one element of every
  /// reduce per unit).
  std::string kind;
  /// The independent units a launch is split into: a loop kernel's blocks of elements, a
  /// reduction's result elements. CPU threads take ranges of units; the GPU grid covers them.
  int64_t units = 0;
  /// How many buffers it reads and writes: its step's operand and result counts, which the
  /// executor checks before a kernel reads args it was not given.
  int64_t numInputs = 0;
  int64_t numResults = 0;
  /// The ops it computes, for listings and the profiler: "broadcast_in_dim+add+relu".
  std::string ops;
  /// Suggested CUDA launch: threads per block and blocks (0 when there is no CUDA code).
  int64_t cudaBlock = 0;
  int64_t cudaGrid = 0;
};

/// A CPU kernel entry: computes units [begin, end) of kernel `FusedKernel`, reading and writing
/// the buffers in `args` (inputs, then results).
using CpuKernelFn = void (*)(void *const *args, int64_t begin, int64_t end);

/// The fused kernels compiled for this CPU, in process. `owner` keeps the code alive (the JIT
/// engine); the runtime only calls through `entries`, indexed like Executable::kernels.
struct CpuCode {
  std::shared_ptr<void> owner;
  std::vector<CpuKernelFn> entries;
  /// The optimized LLVM IR of all kernels, for dumps.
  std::string llvmIR;
};

/// The fused kernels as one CUDA module: the source NVRTC compiled, and what it produced.
struct CudaCode {
  std::string arch; // "sm_90"
  std::string source;
  std::string ptx;
  std::vector<uint8_t> cubin;
};

struct Executable {
  /// Name of the entry function it was built from.
  std::string name;
  /// Where its ops run, as smelt-place-devices summed it up ("41 ops on cpu:0 (no GPU: ...)").
  std::string placement;
  std::vector<BufferInfo> buffers;
  /// Buffers the caller provides, in argument order.
  std::vector<BufferId> inputs;
  /// Buffers returned, in result order; one may also be an input or a constant.
  std::vector<BufferId> outputs;
  std::vector<Constant> constants;
  std::vector<Step> steps;
  /// Fused kernels; a step with op "fusion" runs kernels[step.intAttr("kernel")].
  std::vector<FusedKernel> kernels;
  /// Peak bytes each device ("cpu:0") holds during one run, worked out at compile time by
  /// smelt-assign-buffers: constants, the buffers steps take and give back, (on a GPU) the
  /// arguments copied in. An executor's measured peak for a run equals its device's entry.
  std::map<std::string, uint64_t> peakBytes;
  /// Their code for the CPU and for CUDA, when codegen produced it.
  std::shared_ptr<const CpuCode> cpu;
  std::shared_ptr<const CudaCode> cuda;

  /// Human-readable listing, one line per step: for `smelt dump` and debugging.
  std::string str() const;
};

} // namespace smelt::rt
