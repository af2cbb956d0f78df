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
// thread: each call holds a lock while it picks an algorithm and queues.
#pragma once

#include "runtime/DType.h"
#include "runtime/Status.h"
#include "runtime/cuda/CudaDevice.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
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
/// window [3, 2] ...": for messages and algorithm cache keys.
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
  /// with `what` ("conv2d at model.mlir:12:5"). Every call below checks the same first; an
  /// executor can call it at creation.
  static Status validate(const Conv2DCall &call, const std::string &what);
  static Status validate(const Pool2DCall &call, const std::string &what);

  /// Workspace a call needs: its NCHW copies plus kAlgorithmWorkspaceBytes for convolutions;
  /// for pooling, max's forward result (the gradient recomputes it: cuDNN wants it). Valid
  /// calls only.
  static size_t workspaceBytes(const Conv2DCall &call);
  static size_t workspaceBytes(const Pool2DCall &call);
  /// What convolution algorithms may use beyond the NCHW copies.
  static constexpr size_t kAlgorithmWorkspaceBytes = size_t(32) << 20;

  /// Queue output = conv2d(input, filter) on the device's stream. Algorithms come from cuDNN's
  /// heuristic (deterministic ones first, fitting the workspace), cached per call. Every error
  /// begins with `what`.
  Status conv2dForward(const Conv2DCall &call, const void *input, const void *filter,
                       void *output, void *workspace, size_t workspaceBytes,
                       const std::string &what);
  Status conv2dBackwardInput(const Conv2DCall &call, const void *gradOutput, const void *filter,
                             void *gradInput, void *workspace, size_t workspaceBytes,
                             const std::string &what);
  Status conv2dBackwardFilter(const Conv2DCall &call, const void *input, const void *gradOutput,
                              void *gradFilter, void *workspace, size_t workspaceBytes,
                              const std::string &what);
  Status pool2dForward(const Pool2DCall &call, const void *input, void *output, void *workspace,
                       size_t workspaceBytes, const std::string &what);
  /// `input` is read for max only (avg may pass null). Max sends each output gradient to the
  /// window's maximum; where a window holds equal maxima, which one gets it is cuDNN's choice.
  Status pool2dBackward(const Pool2DCall &call, const void *input, const void *gradOutput,
                        void *gradInput, void *workspace, size_t workspaceBytes,
                        const std::string &what);

  enum class ConvPass { Forward, BackwardInput, BackwardFilter };
  /// Chooses the algorithm of `pass` now, with no memory touched, for a call given
  /// `workspaceBytes` of workspace: an executor calls it at creation, so that a convolution
  /// cuDNN cannot run fails there, naming the step, instead of in the middle of a run. Where
  /// cuDNN offers no NHWC algorithm (unaligned f16/bf16 channels: mayNeedNchw in Cudnn.cpp),
  /// the call runs on NCHW copies in the workspace, which workspaceBytes() leaves room for.
  Status prepare(ConvPass pass, const Conv2DCall &call, size_t workspaceBytes,
                 const std::string &what);

  /// The library's version (91900 for 9.19.0).
  size_t version() const;

private:
  struct Algorithm {
    int algo = 0;     // cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
    int mathType = 0; // cudnnMathType_t
    size_t memory = 0;
  };
  /// An algorithm and the layout it runs in.
  struct Choice {
    Algorithm algorithm;
    bool nchw = false;
  };
  struct ConvDescriptors; // defined in Cudnn.cpp

  explicit Cudnn(const CudaDevice &device) : device_(device) {}
  Status convolve(ConvPass pass, const Conv2DCall &call, const void *a, const void *b, void *out,
                  void *workspace, size_t workspaceBytes, const std::string &what);
  /// cuDNN's heuristic for `pass` on the descriptors `d` (NHWC, or NCHW copies).
  Expected<Algorithm> algorithm(ConvPass pass, const Conv2DCall &call, ConvDescriptors &d,
                                size_t limit);
  /// NHWC's algorithm, else NCHW's where that may help, cached per call; the error says what
  /// each layout offered.
  Expected<Choice> choose(ConvPass pass, const Conv2DCall &call, size_t limit);
  /// Runs `work` holding the lock with the device's context current; its error begins with
  /// `what` and ends with the device and `call` (describe()).
  Status locked(const std::string &what, const std::string &call,
                const std::function<Status()> &work);
  Status pool(bool backward, const Pool2DCall &call, const void *input, const void *gradOutput,
              void *result, void *workspace, size_t workspaceBytes, const std::string &what);

  const CudaDevice &device_;
  void *handle_ = nullptr; // cudnnHandle_t
  std::mutex mutex_;
  /// describe(call), pass, tf32 and the algorithms' workspace limit -> the heuristic's choice.
  std::map<std::string, Choice> choices_;
};

} // namespace smelt::rt::cuda
