// Convolutions and pooling on the GPU through cuDNN 9's legacy API (cudnnConvolutionForward ...),
// reached through dlopen("libcudnn.so.9") and a table of symbols like the CUDA driver's
// (CudaDriver.h): binaries start without cuDNN, and a missing library or symbol is an error that
// names it (or a test's reason to skip). cudnn.h stays inside Cudnn.cpp.
//
// Smelt's layouts, and how they reach cuDNN (details in Cudnn.cpp):
// - activations are NHWC: described to cuDNN by explicit strides, no copy.
// - filters are OHWI [F, KH, KW, C/G], cuDNN's KRSC: smelt-gpu-conv-layouts transposes Smelt's
//   HWIO filters at compile time (a fused kernel, or a folded constant), so no call copies one.
// - grouped convolutions (G = feature_group_count > 1, depthwise when G == C): the convolution
//   descriptor carries G (cudnnSetConvolutionGroupCount) and the filter descriptor is cuDNN's
//   grouped one, [K = F, C/G, KH, KW]. Both Smelt and cuDNN keep each group's output channels
//   consecutive.
// - f16/bf16 with channels that are not a multiple of 8: cuDNN may have no NHWC algorithm; the
//   call then runs on NCHW copies of its tensors in the workspace (prepare() finds out when an
//   executor is created).
// - padding is symmetric: the legacy convolution descriptor pads both sides alike, and
//   smelt-gpu-conv-layouts pads the input explicitly where a convolution's is not;
//   cudnnUnsupported() refuses asymmetric padding. Pooling cannot be padded so (padding must
//   not count in an average), so asymmetric pooling is unsupported, and placement keeps such
//   ops on the CPU.
//
// What callers must provide:
// - tensors in `device`'s primary context, dense row-major in the layouts above, aligned to
//   their element size (16 bytes reaches the tensor-core kernels; the executor's allocator gives
//   256);
// - a workspace of workspaceBytes(call) bytes, 256-byte aligned, not used by anything else
//   queued on the stream at the same time. Its first part holds the NCHW copies, when the call
//   needs them; convolution algorithms get the rest (they are chosen to fit in it).
// Work is queued on device.stream(); nothing synchronizes. One Cudnn per device, shared by every
// thread: preparing a call and queuing one hold its lock.
#pragma once

#include "runtime/DType.h"
#include "runtime/Status.h"
#include "runtime/cuda/CudaDevice.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace smelt::rt::cuda {

/// The geometry of conv2d (docs/ops.md); its two gradients take the same call. The shapes are
/// the forward op's: for conv2d_backward_input `output` is grad_output's shape and `input` the
/// result's; for conv2d_backward_filter `filter` is the result's.
struct Conv2DCall {
  TensorType input;  ///< NHWC [N, H, W, C]; f32, f16 or bf16, the same for all three
  TensorType filter; ///< OHWI [F, KH, KW, C/groups]: cuDNN's KRSC (smelt-gpu-conv-layouts)
  TensorType output; ///< NHWC [N, OH, OW, F]
  std::vector<int64_t> strides{1, 1};        ///< [sh, sw]
  std::vector<int64_t> padding{0, 0, 0, 0};  ///< [top, bottom, left, right]
  std::vector<int64_t> dilation{1, 1};       ///< [dh, dw]
  /// feature_group_count: group k convolves input channels [k*C/G, (k+1)*C/G) into output
  /// channels [k*F/G, (k+1)*F/G). It divides C and F; G == C is a depthwise convolution.
  int64_t groups = 1;
  /// f32 only: let cuDNN use TF32 tensor cores (10-bit mantissa products). Off: FMA kernels,
  /// full f32 products. f16/bf16 always accumulate in f32.
  bool allowTf32 = false;
};

enum class PoolKind { Max, Avg };

/// max_pool2d / avg_pool2d and their gradients (docs/ops.md): padding never wins a max and is
/// not counted in an average. `output` is the forward result's shape (grad_output's).
struct Pool2DCall {
  PoolKind kind = PoolKind::Max;
  TensorType input;  ///< NHWC [N, H, W, C]
  TensorType output; ///< NHWC [N, OH, OW, C]
  std::vector<int64_t> window{1, 1};        ///< [kh, kw]
  std::vector<int64_t> strides{1, 1};       ///< [sh, sw]
  std::vector<int64_t> padding{0, 0, 0, 0}; ///< [top, bottom, left, right]
};

/// "f16 input tensor<3x9x7x5xf16> filter tensor<3x3x5x7xf16> output tensor<...> strides [2, 1]
/// padding [1, 2, 0, 1] dilation [2, 1]" (then "groups 5" when not 1) and "max f32 input ...
/// window [3, 2] ...": for messages.
std::string describe(const Conv2DCall &call);
std::string describe(const Pool2DCall &call);

/// Why cuDNN does not run a call that is otherwise valid (an f64 dtype, asymmetric pooling
/// padding, padding as large as the pooling window, more than 2^31 - 1 elements), or "" when
/// it does. No GPU needed: the placement pass keeps such ops on the CPU and says why.
std::string cudnnUnsupported(const Conv2DCall &call);
std::string cudnnUnsupported(const Pool2DCall &call);

class Cudnn {
public:
  /// cuDNN for `device`: its handle created on the device's context and bound to its stream,
  /// once per device, kept for the life of the process. The error names the library or symbol
  /// that is missing, or what cudnnCreate said.
  static Expected<Cudnn *> get(const CudaDevice &device);

  /// What can be checked without a GPU: ranks, attribute lengths and signs, a group count that
  /// divides both channel counts, one float dtype, shapes that agree with each other and with
  /// the attributes (naming the operand and its shape), then cudnnUnsupported(). Errors begin
  /// with `what` ("conv2d at model.mlir:12:5"). prepare() checks the same first; an executor
  /// can call it when it plans its steps.
  static Status validate(const Conv2DCall &call, const std::string &what);
  static Status validate(const Pool2DCall &call, const std::string &what);

  /// Workspace a call needs: its NCHW copies plus kAlgorithmWorkspaceBytes for convolutions;
  /// for pooling, max's forward result (the gradient recomputes it: cuDNN wants it). Valid
  /// calls only.
  static size_t workspaceBytes(const Conv2DCall &call);
  static size_t workspaceBytes(const Pool2DCall &call);
  /// What convolution algorithms may use beyond the NCHW copies.
  static constexpr size_t kAlgorithmWorkspaceBytes = size_t(32) << 20;

  /// One call prepared for its device: its descriptors, and a convolution's algorithm and
  /// layout, made once. run() queues it on the device's stream, with the device's context
  /// current (an executor's run makes it so), given the call's buffers in its op's order,
  /// operands then result: conv2d (input, filter, output); conv2d_backward_input (grad_output,
  /// filter, grad_input); conv2d_backward_filter (input, grad_output, grad_filter); pooling
  /// (input, output); max_pool2d_backward (input, grad_output, grad_input);
  /// avg_pool2d_backward (grad_output, grad_input). The workspace is prepare()'s size. Errors
  /// begin with the call's `what` and end with the device and the call (describe()).
  class Plan {
  public:
    virtual ~Plan() = default;
    virtual Status run(void *const *buffers, void *workspace) const = 0;
  };

  enum class ConvPass { Forward, BackwardInput, BackwardFilter };
  /// validate(), then the call's descriptors and the algorithm of `pass`, chosen now with no
  /// memory touched for `workspaceBytes` of workspace (cuDNN's heuristic, deterministic ones
  /// first): an executor prepares its steps at creation, so that a convolution cuDNN cannot
  /// run fails there, naming the step, instead of in the middle of a run. Where cuDNN offers no
  /// NHWC algorithm (unaligned f16/bf16 channels: mayNeedNchw in Cudnn.cpp), the call runs on
  /// NCHW copies in the workspace, which workspaceBytes() leaves room for.
  Expected<std::shared_ptr<const Plan>> prepare(ConvPass pass, const Conv2DCall &call,
                                                size_t workspaceBytes, const std::string &what);
  /// The same for pooling, forward or its gradient. Max sends each output gradient to the
  /// window's maximum; where a window holds equal maxima, which one gets it is cuDNN's choice.
  Expected<std::shared_ptr<const Plan>> prepare(bool backward, const Pool2DCall &call,
                                                size_t workspaceBytes, const std::string &what);

private:
  template <typename Call> class CallPlan; // defined in Cudnn.cpp
  class ConvPlan;
  class PoolPlan;

  explicit Cudnn(const CudaDevice &device) : device_(device) {}

  const CudaDevice &device_;
  void *handle_ = nullptr; // cudnnHandle_t
  /// Held while a plan is made or queued: the handle is shared by every thread on the device.
  std::mutex mutex_;
};

} // namespace smelt::rt::cuda
