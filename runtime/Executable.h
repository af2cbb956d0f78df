// The Executable: what codegen produces and the runtime runs. Plain C++ data with no MLIR types,
// so a later AOT artifact can serialize it and the runtime alone can load it.
//
// An Executable is a list of buffers (each a static TensorType) and a list of steps. Each step is
// of a closed set of kinds (a fused kernel, a library call, a copy, a collective) with typed
// parameters; it reads operand buffers and writes result buffers. Inputs are filled by the
// caller, constants from `constants`, every other buffer by exactly one step.
#pragma once

#include "runtime/DType.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace smelt::rt {

using BufferId = int32_t;

/// The all_reduce op's `kind`: mean is the sum divided by the number of replicas.
enum class ReduceKind : uint8_t { sum, mean };

/// What a matmul or conv2d applies to its result after the bias, inside the library call
/// (smelt-fuse folds it there): the relu, tanh and logistic ops' functions. The numbers are the
/// AOT format's.
enum class Activation : uint8_t {
  none = 0,
  relu = 1,
  tanh = 2,
  logistic = 3,
  relu6 = 4,     // min(max(x, 0), 6)
  hardswish = 5, // x * min(max(x / 6 + 0.5, 0), 1)
  swish = 6,     // x * logistic(x)
};
inline constexpr uint8_t kNumActivations = 7;
/// "none", "relu", "tanh", "logistic".
const char *activationName(Activation activation);

/// What the runtime does for a step: a closed set it dispatches on.
enum class StepKind : uint8_t {
  Kernel,     // a fused kernel codegen compiled (every elementwise, shape and reduce op)
  Library,    // oneDNN or cuBLASLt/cuDNN, or a data-movement routine: typed parameters
  Copy,       // moves its operand onto the step's device
  Collective, // all_reduce across replicas, or this replica's number
};

/// The operation of a step, each of one kind. The AOT format names it (stepOpName), so the
/// numbers are free to change.
enum class StepOp : uint8_t {
  Fusion = 0,
  Matmul = 1,
  Conv2D = 2,
  Conv2DBackwardInput = 3,
  Conv2DBackwardFilter = 4,
  MaxPool2D = 5,
  AvgPool2D = 6,
  MaxPool2DBackward = 7,
  AvgPool2DBackward = 8,
  Argmax = 9,
  Slice = 10,
  Concat = 11,
  Pad = 12,
  Copy = 13,
  AllReduce = 14,
  ReplicaId = 15,
  ScatterAdd = 16,
};
inline constexpr uint8_t kNumStepOps = 17;

StepKind stepKind(StepOp op);
/// The dialect op's name without its prefix: "matmul", "conv2d_backward_input", "fusion".
const char *stepOpName(StepOp op);

// Typed parameters, one struct per family of ops. Each lists its fields once, by name, in
// `fields`, which the AOT format, the listing and the loader's checks walk.

/// A fusion: which entry of Executable::kernels it runs, and per result (or empty: none) the
/// operand it may be written in place of, or -1 (smelt-donate-in-place): the kernel reads that
/// operand only where it writes the result, before it writes it, so an executor may give the
/// result the operand's block when the operand dies at this step (Step::frees lists it).
struct KernelParams {
  int64_t kernel = 0;
  std::vector<int64_t> inPlace;
  template <typename F> void fields(F &&f) {
    f("kernel", kernel);
    f("in_place", inPlace);
  }
};
/// The epilogue of a matmul or conv2d: with `bias`, a third operand of one value per element of
/// the result's last dimension (N, or F) added everywhere, then `activation`; both computed by
/// the library call (oneDNN post-ops, cuBLASLt epilogues) before it stores the result.
struct Epilogue {
  bool bias = false;
  Activation activation = Activation::none;
  bool any() const { return bias || activation != Activation::none; }
};
struct MatmulParams {
  bool transposeLhs = false, transposeRhs = false;
  Epilogue epilogue;
  template <typename F> void fields(F &&f) {
    f("transpose_lhs", transposeLhs);
    f("transpose_rhs", transposeRhs);
    f("bias", epilogue.bias);
    f("activation", epilogue.activation);
  }
};
/// A convolution's filter layout, the dialect's FilterLayout: hwio [KH, KW, C/groups, F], or
/// ohwi [F, KH, KW, C/groups] (cuDNN's KRSC, which smelt-gpu-conv-layouts gives the GPU's).
/// The numbers are the AOT format's.
enum class FilterLayout : uint8_t { hwio = 0, ohwi = 1 };
inline constexpr uint8_t kNumFilterLayouts = 2;

/// conv2d and its gradients: NHWC input, filter in `filterLayout`; an epilogue only on conv2d.
/// `groups` is the op's feature_group_count (depthwise: groups == C).
struct ConvParams {
  std::vector<int64_t> strides, padding, dilation; // [h, w], [top, bottom, left, right], [h, w]
  int64_t groups = 1;
  Epilogue epilogue;
  FilterLayout filterLayout = FilterLayout::hwio;
  template <typename F> void fields(F &&f) {
    f("strides", strides);
    f("padding", padding);
    f("dilation", dilation);
    f("groups", groups);
    f("bias", epilogue.bias);
    f("activation", epilogue.activation);
    f("filter_layout", filterLayout);
  }
  /// The filter's [KH, KW, C/groups, F] from its stored shape.
  std::vector<int64_t> hwioDims(const std::vector<int64_t> &filterShape) const {
    if (filterLayout != FilterLayout::ohwi || filterShape.size() != 4)
      return filterShape;
    return {filterShape[1], filterShape[2], filterShape[3], filterShape[0]};
  }
};
/// Pooling and its gradients.
struct PoolParams {
  std::vector<int64_t> window, strides, padding; // [h, w], [h, w], [top, bottom, left, right]
  template <typename F> void fields(F &&f) {
    f("window", window);
    f("strides", strides);
    f("padding", padding);
  }
};
/// concat's joined axis.
struct AxisParams {
  int64_t axis = 0;
  template <typename F> void fields(F &&f) { f("axis", axis); }
};
/// The `kernel` of an argmax or scatter_add step that has none: the CPU runs its own routine
/// (runtime/cpu). Placed on a GPU, codegen gives it a kernel of its own
/// (Executable::kernels[kernel]), which the GPU executor launches as it launches a fusion's.
inline constexpr int64_t kNoKernel = -1;
/// argmax's reduced axis, and its GPU kernel.
struct ArgmaxParams {
  int64_t axis = 0;
  int64_t kernel = kNoKernel;
  template <typename F> void fields(F &&f) {
    f("axis", axis);
    f("kernel", kernel);
  }
};
/// scatter_add's GPU kernel (the result's type says how many rows).
struct ScatterAddParams {
  int64_t kernel = kNoKernel;
  template <typename F> void fields(F &&f) { f("kernel", kernel); }
};
struct SliceParams {
  std::vector<int64_t> start, limit, strides;
  template <typename F> void fields(F &&f) {
    f("start_indices", start);
    f("limit_indices", limit);
    f("strides", strides);
  }
};
struct PadParams {
  std::vector<int64_t> low, high;
  double value = 0;
  template <typename F> void fields(F &&f) {
    f("low", low);
    f("high", high);
    f("value", value);
  }
};
struct AllReduceParams {
  ReduceKind kind = ReduceKind::sum;
  int64_t replicas = 1;
  template <typename F> void fields(F &&f) {
    f("kind", kind);
    f("replicas", replicas);
  }
};
/// Copy and replica_id take none.
struct NoParams {
  template <typename F> void fields(F &&) {}
};

using StepParams =
    std::variant<NoParams, KernelParams, MatmulParams, ConvParams, PoolParams, AxisParams,
                 SliceParams, PadParams, AllReduceParams, ArgmaxParams, ScatterAddParams>;

/// The parameters `op` takes, default-constructed: what the AOT reader fills and the loader
/// checks a step's parameters against.
StepParams paramsFor(StepOp op);

struct Step;

struct Executable;
/// Per buffer, the buffer whose value it holds: its own, or for a copy's result its operand's
/// (followed through chains of copies), since a copy only moves a value between devices.
/// Steps must be in dataflow order (validateDataflow).
std::vector<BufferId> copiedValues(const Executable &exe);
/// Whether `step` is a copy (one operand, one result): a move between segments.
bool isCopyStep(const Step &step);

struct BufferInfo {
  TensorType type;
  /// Where the value came from, for messages: "%arg0", "matmul at model.mlir:4:10".
  std::string name;
  /// Where a step's result lives in its device's arena, the one block a run takes there
  /// (smelt-assign-buffers placed it so no buffer live at the same time overlaps it); -1 for
  /// inputs and constants, and where nothing assigned offsets (each buffer is then allocated
  /// on its own).
  int64_t offset = -1;
};

struct Step {
  StepOp op = StepOp::Copy;
  StepParams params;
  std::vector<BufferId> operands;
  std::vector<BufferId> results;
  /// Source location of the op, for error messages ("model.mlir:12:5").
  std::string location;
  /// Where it runs, as smelt-place-devices decided: "cpu:0" or "gpu:N". A copy step moves its
  /// operand onto this device.
  std::string device = "cpu:0";
  /// The buffers that no later step of its segment uses, as the compiler's schedule says
  /// (codegen/PlanSchedule): an executor gives back, once the step ran, those it took for the
  /// run. Empty in a hand-built Executable, whose buffers then live to the end of the run.
  std::vector<BufferId> frees;

  StepKind kind() const { return stepKind(op); }
  const char *name() const { return stepOpName(op); }
  /// The parameters as `P`; null when they are of another family (a hand-built or damaged
  /// step: validateDataflow rejects those before anything runs).
  template <typename P> const P *paramsAs() const { return std::get_if<P>(&params); }
  /// The entry of Executable::kernels the step runs: a fusion's, or the GPU kernel of an argmax
  /// or scatter_add (kNoKernel when it has none, and for every other step).
  int64_t kernel() const;
  /// A matmul's or conv2d's (or its gradients') epilogue; none for other steps.
  Epilogue epilogue() const {
    if (const MatmulParams *matmul = paramsAs<MatmulParams>())
      return matmul->epilogue;
    if (const ConvParams *conv = paramsAs<ConvParams>())
      return conv->epilogue;
    return {};
  }
};

/// Immutable bytes that the copies of what holds them share: a model's constants are most of
/// its Executable, which the executor, each segment and each runner hold a copy of. The bytes
/// are a vector of their own, or memory an owner keeps alive: the compiler hands over a
/// constant it made (a folded weight) or a model's memory-mapped weights without a copy.
class SharedBytes {
public:
  SharedBytes() : SharedBytes(std::vector<uint8_t>()) {}
  SharedBytes(std::vector<uint8_t> bytes) {
    auto owned = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
    data_ = owned->data();
    size_ = owned->size();
    owner_ = std::move(owned);
  }
  /// `size` bytes at `data`, which `owner` keeps alive and unchanged.
  SharedBytes(std::shared_ptr<const void> owner, const uint8_t *data, size_t size)
      : owner_(std::move(owner)), data_(data), size_(size) {}
  const uint8_t *data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const uint8_t *begin() const { return data_; }
  const uint8_t *end() const { return data_ + size_; }
  bool operator==(const SharedBytes &other) const {
    return size_ == other.size_ && std::equal(begin(), end(), other.begin());
  }

private:
  std::shared_ptr<const void> owner_;
  const uint8_t *data_ = nullptr;
  size_t size_ = 0;
};

struct Constant {
  BufferId buffer;
  /// Raw little-endian element bytes, exactly buffers[buffer].type.byteSize() long.
  SharedBytes bytes;
};

/// A kernel made from one smelt.fusion, or from an argmax or scatter_add op placed on a GPU.
/// Its step's operands are the fusion's inputs (the op's operands) and its results the
/// fusion's results; a kernel reads them through one array of pointers, inputs first, then
/// results.
struct FusedKernel {
  /// The symbol in the CPU code and the CUDA module: "main_fusion3".
  std::string name;
  /// "loop" (one element of every result per iteration), "reduction" (one element of every
  /// reduce per unit), or the op of a kernel of its own: "argmax", "scatter_add".
  std::string kind;
  /// The independent units a launch is split into: a loop kernel's blocks of elements, a
  /// reduction's result elements. CPU threads take ranges of units; the GPU grid covers them.
  int64_t units = 0;
  /// The types it was compiled for, of the buffers it reads and of those it writes. Its code
  /// indexes its arguments by these shapes, so a step's operands and results must have exactly
  /// these types: validateDataflow checks it before anything runs, and so before a damaged
  /// artifact could make a kernel read or write past a buffer.
  std::vector<TensorType> inputs;
  std::vector<TensorType> results;
  /// The ops it computes, for listings and the profiler: "broadcast_in_dim+add+relu".
  std::string ops;
  /// How many of them compute (not broadcasts, reshapes, converts ...): the profiler's FLOPs
  /// estimate counts one per element touched for each.
  int64_t computeOps = 0;
  /// Suggested CUDA launch: threads per block and blocks (0 when there is no CUDA code).
  int64_t cudaBlock = 0;
  int64_t cudaGrid = 0;
  /// The bytes of the largest value its body computes, stored or not. A fused value is never
  /// a buffer, so no buffer check sees it, but one larger than the device's memory could not
  /// run unfused and runs for minutes fused (an rng of 1e11 elements summed to a scalar):
  /// checkBufferSizes refuses it as it refuses such a buffer.
  uint64_t largestValueBytes = 0;
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

/// A segment of the compiler's schedule (codegen/PlanSchedule): consecutive steps on one
/// device, which that device's executor runs as an Executable of its own
/// (segmentExecutable). The segments of an Executable split [0, steps.size()) in run order;
/// the copy steps among a segment's steps are not its own but the moves between segments.
struct Segment {
  std::string device;
  uint32_t begin = 0, end = 0;
  /// Values (buffers with copies followed to the one they move, copiedValues) that its steps
  /// read and do not compute: inputs and what earlier segments wrote (the constants it reads
  /// are its own), in the order its Executable takes them; and those it computes that a later
  /// segment or the caller reads, in the order it returns them.
  std::vector<BufferId> reads, writes;
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
  /// The function's argument and result names (their smelt.name, else argN and resultN): what
  /// `smelt run` matches --input flags against and names its output files after. A result
  /// has its own name even when its buffer is an argument or returned twice. Empty in a
  /// hand-built Executable; inputName/outputName then fall back to the buffers' names.
  std::vector<std::string> inputNames, outputNames;
  std::vector<Constant> constants;
  std::vector<Step> steps;
  /// Kernels: a Fusion step runs kernels[its KernelParams::kernel]; after the fusions' come the
  /// GPU kernels of argmax and scatter_add steps (Step::kernel).
  std::vector<FusedKernel> kernels;
  /// Peak bytes each device ("cpu:0") holds during one run, worked out at compile time by
  /// smelt-assign-buffers: constants, the buffers steps take and give back, (on a GPU) the
  /// arguments copied in. An executor's measured peak for a run equals its device's entry.
  std::map<std::string, uint64_t> peakBytes;
  /// The schedule the compiler fixed: the device segments in run order (one for an Executable
  /// on one device). Empty in a hand-built Executable, which runs as one segment and must then
  /// have its steps on one device and no copies.
  std::vector<Segment> segments;
  /// Their code for the CPU and for CUDA, when codegen produced it.
  std::shared_ptr<const CpuCode> cpu;
  std::shared_ptr<const CudaCode> cuda;

  std::string inputName(size_t i) const;
  std::string outputName(size_t i) const;

  /// Human-readable listing, one line per step: for `smelt dump` and debugging.
  std::string str() const;
};

} // namespace smelt::rt
