// Validates convolution and pooling calls and queues them on a device's stream through cuDNN's
// legacy API (Cudnn.h), with the library CudnnLibrary.h opens.
//
// Why the legacy API and not the graph (backend) API, which takes arbitrary strides for filters
// and pre/post padding: the legacy calls are a handful of checked functions with one heuristic
// call each, and cuDNN 9 still ships them (libcudnn_cnn, libcudnn_ops). What they cannot
// describe the compiler gives them (smelt-gpu-conv-layouts): the filter in KRSC, OHWI
// [F, KH, KW, C/G] (cudnnSetFilter4dDescriptor knows KRSC and KCRS only, without strides;
// grouped convolutions change only C: with the descriptor's group count G, cuDNN's filter is
// [F, C/G, KH, KW] and group k's filters the consecutive K = k*F/G .. (k+1)*F/G - 1, as Smelt's
// groups are), and symmetric padding (the convolution descriptor pads both sides alike; an
// asymmetric one arrives as an explicit pad of the input). NHWC activations need no copy: a 4-D
// tensor descriptor in N, C, H, W order with strides [H*W*C, 1, W*C, C] is NHWC. The one copy
// left is cuDNN's own: f16/bf16 channels cuDNN's NHWC kernels cannot take run on NCHW copies in
// the workspace (mayNeedNchw), made by cudnnTransformTensor.
#include "runtime/cuda/Cudnn.h"
#include "runtime/cuda/CudnnLibrary.h"

#include <fmt/format.h>
#include <fmt/ranges.h>


#include <array>
#include <climits>
#include <optional>

namespace smelt::rt::cuda {
namespace {

#define SMELT_CUDNN_TRY(expr)                                                                      \
  do {                                                                                             \
    if (Status status_ = (expr); !status_.ok())                                                    \
      return status_;                                                                              \
  } while (0)

// ---------------------------------------------------------------------------------------------
// Geometry and validation (no GPU)
// ---------------------------------------------------------------------------------------------

size_t align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

/// One 2-D window problem in NHWC, from a call whose attribute lists have the right lengths.
struct Geometry {
  int64_t n, h, w, c, kh, kw, f, sh, sw, pt, pb, pl, pr, dh = 1, dw = 1;
  int64_t groups = 1;
  /// The filter's input channels: C/G, those of one group.
  int64_t cg() const { return c / groups; }
  int64_t oh() const { return (h + pt + pb - dh * (kh - 1) - 1) / sh + 1; }
  int64_t ow() const { return (w + pl + pr - dw * (kw - 1) - 1) / sw + 1; }
};

Geometry geometry(const TensorType &input, int64_t kh, int64_t kw, int64_t f,
                  const std::vector<int64_t> &strides, const std::vector<int64_t> &padding) {
  Geometry g{};
  g.n = input.shape[0], g.h = input.shape[1], g.w = input.shape[2], g.c = input.shape[3];
  g.kh = kh, g.kw = kw, g.f = f, g.sh = strides[0], g.sw = strides[1];
  g.pt = padding[0], g.pb = padding[1], g.pl = padding[2], g.pr = padding[3];
  return g;
}

/// The filter is OHWI: [F, KH, KW, C/G].
Geometry geometry(const Conv2DCall &call) {
  Geometry g = geometry(call.input, call.filter.shape[1], call.filter.shape[2],
                        call.filter.shape[0], call.strides, call.padding);
  g.dh = call.dilation[0], g.dw = call.dilation[1];
  g.groups = call.groups;
  return g;
}

Geometry geometry(const Pool2DCall &call) {
  return geometry(call.input, call.window[0], call.window[1], call.input.shape[3], call.strides,
                  call.padding);
}

/// "" or why `values` is not `count` integers that are positive (or non-negative).
std::string checkInts(const char *name, const std::vector<int64_t> &values, size_t count,
                      int64_t min) {
  bool ok = values.size() == count;
  for (int64_t v : values)
    ok = ok && v >= min;
  if (ok)
    return "";
  return fmt::format("{} [{}] must be {} {} integers", name, fmt::join(values, ", "), count,
                     min > 0 ? "positive" : "non-negative");
}

/// "" or why `type` is not a rank-4 float tensor of `dtype` without empty dimensions.
std::string checkOperand(const char *name, const char *layout, const TensorType &type,
                         DType dtype) {
  if (type.shape.size() != 4)
    return fmt::format("{} {} must be {} (rank 4)", name, type.str(), layout);
  for (int64_t d : type.shape)
    if (d <= 0)
      return fmt::format("{} {} has an empty dimension", name, type.str());
  if (type.dtype != dtype)
    return fmt::format("{} {} must have the element type of the input, {}", name, type.str(),
                       dtypeName(dtype));
  if (!isFloat(dtype))
    return fmt::format("{} {} must be a float tensor", name, type.str());
  return "";
}

/// "" or why cuDNN does not take the dtype or sizes (its dimensions and strides are ints).
std::string unsupportedCommon(DType dtype, std::initializer_list<int64_t> elementCounts) {
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16)
    return fmt::format("{} on cuDNN: it is used for f32, f16 and bf16 only", dtypeName(dtype));
  for (int64_t count : elementCounts)
    if (count > INT_MAX)
      return fmt::format("a tensor of {} elements: cuDNN's sizes are 32-bit", count);
  return "";
}

Status fail(const std::string &what, const std::string &why) {
  return Status::error(fmt::format("{}: {}", what, why));
}

std::optional<cudnnDataType_t> cudnnType(DType dtype) {
  switch (dtype) {
  case DType::f32:
    return CUDNN_DATA_FLOAT;
  case DType::f16:
    return CUDNN_DATA_HALF;
  case DType::bf16:
    return CUDNN_DATA_BFLOAT16;
  default:
    return std::nullopt;
  }
}

// ---------------------------------------------------------------------------------------------
// Descriptors, destroyed with the scope that made them
// ---------------------------------------------------------------------------------------------

class Descriptors {
public:
  Descriptors(const CudnnLibrary &lib, DType dtype) : lib_(lib), type_(*cudnnType(dtype)) {}
  ~Descriptors() {
    for (auto d : tensors_)
      lib_.destroyTensorDescriptor(d);
    for (auto d : filters_)
      lib_.destroyFilterDescriptor(d);
    for (auto d : convolutions_)
      lib_.destroyConvolutionDescriptor(d);
    for (auto d : poolings_)
      lib_.destroyPoolingDescriptor(d);
  }
  Descriptors(const Descriptors &) = delete;
  Descriptors &operator=(const Descriptors &) = delete;

  /// A 4-D tensor of dims [N, C, H, W] (cuDNN's order) laid out by `strides` (in elements).
  Expected<cudnnTensorDescriptor_t> tensor(std::array<int64_t, 4> dims,
                                           std::array<int64_t, 4> strides) {
    cudnnTensorDescriptor_t d = nullptr;
    SMELT_CUDNN_TRY(lib_.check(lib_.createTensorDescriptor(&d), "cudnnCreateTensorDescriptor"));
    tensors_.push_back(d);
    std::array<int, 4> dimA, strideA;
    for (size_t i = 0; i < 4; ++i)
      dimA[i] = int(dims[i]), strideA[i] = int(strides[i]);
    SMELT_CUDNN_TRY(
        lib_.check(lib_.setTensorNdDescriptor(d, type_, 4, dimA.data(), strideA.data()),
                   "cudnnSetTensorNdDescriptor"));
    return d;
  }
  /// Dense NHWC [n, h, w, c].
  Expected<cudnnTensorDescriptor_t> nhwc(int64_t n, int64_t h, int64_t w, int64_t c) {
    return tensor({n, c, h, w}, {h * w * c, 1, w * c, c});
  }
  /// Dense NCHW [n, c, h, w].
  Expected<cudnnTensorDescriptor_t> nchw(int64_t n, int64_t h, int64_t w, int64_t c) {
    return tensor({n, c, h, w}, {c * h * w, h * w, w, 1});
  }
  /// The filter as cuDNN convolves it: KRSC (NHWC-format [F, KH, KW, C/G]), or KCRS for NCHW.
  Expected<cudnnFilterDescriptor_t> filter(const Geometry &g, bool nchw) {
    cudnnFilterDescriptor_t d = nullptr;
    SMELT_CUDNN_TRY(lib_.check(lib_.createFilterDescriptor(&d), "cudnnCreateFilterDescriptor"));
    filters_.push_back(d);
    SMELT_CUDNN_TRY(lib_.check(
        lib_.setFilter4dDescriptor(d, type_, nchw ? CUDNN_TENSOR_NCHW : CUDNN_TENSOR_NHWC,
                                   int(g.f), int(g.cg()), int(g.kh), int(g.kw)),
        "cudnnSetFilter4dDescriptor"));
    return d;
  }
  Expected<cudnnConvolutionDescriptor_t> convolution(const Geometry &g) {
    cudnnConvolutionDescriptor_t d = nullptr;
    SMELT_CUDNN_TRY(
        lib_.check(lib_.createConvolutionDescriptor(&d), "cudnnCreateConvolutionDescriptor"));
    convolutions_.push_back(d);
    // f16/bf16 data accumulates in f32 (cuDNN's "pseudo half" configuration).
    SMELT_CUDNN_TRY(lib_.check(
        lib_.setConvolution2dDescriptor(d, int(g.pt), int(g.pl), int(g.sh), int(g.sw), int(g.dh),
                                        int(g.dw), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        "cudnnSetConvolution2dDescriptor"));
    // Set for 1 too: the descriptor then says what it computes whatever cuDNN's default.
    SMELT_CUDNN_TRY(lib_.check(lib_.setConvolutionGroupCount(d, int(g.groups)),
                               "cudnnSetConvolutionGroupCount"));
    return d;
  }
  Expected<cudnnPoolingDescriptor_t> pooling(const Geometry &g, PoolKind kind) {
    cudnnPoolingDescriptor_t d = nullptr;
    SMELT_CUDNN_TRY(lib_.check(lib_.createPoolingDescriptor(&d), "cudnnCreatePoolingDescriptor"));
    poolings_.push_back(d);
    // Max: padding never wins (cuDNN ignores padded positions), NaN propagates as on the CPU.
    // Avg: padded positions are not counted.
    cudnnPoolingMode_t mode = kind == PoolKind::Max ? CUDNN_POOLING_MAX_DETERMINISTIC
                                                    : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    SMELT_CUDNN_TRY(lib_.check(lib_.setPooling2dDescriptor(d, mode, CUDNN_PROPAGATE_NAN,
                                                           int(g.kh), int(g.kw), int(g.pt),
                                                           int(g.pl), int(g.sh), int(g.sw)),
                               "cudnnSetPooling2dDescriptor"));
    return d;
  }

private:
  const CudnnLibrary &lib_;
  cudnnDataType_t type_;
  std::vector<cudnnTensorDescriptor_t> tensors_;
  std::vector<cudnnFilterDescriptor_t> filters_;
  std::vector<cudnnConvolutionDescriptor_t> convolutions_;
  std::vector<cudnnPoolingDescriptor_t> poolings_;
};

/// Unwraps an Expected descriptor into `var`, or returns its error.
#define SMELT_CUDNN_ASSIGN(var, expr)                                                              \
  auto var##_ = (expr);                                                                            \
  if (!var##_.ok())                                                                                \
    return var##_.status();                                                                        \
  auto var = *var##_

const float kOne = 1.0f, kZero = 0.0f; // alpha and beta: float for every non-double tensor

char *at(void *base, size_t offset) { return static_cast<char *>(base) + offset; }

} // namespace

// ---------------------------------------------------------------------------------------------
// Without a GPU
// ---------------------------------------------------------------------------------------------

std::string describe(const Conv2DCall &call) {
  return fmt::format("{} input {} filter {} output {} strides [{}] padding [{}] dilation [{}]{}",
                     dtypeName(call.input.dtype), call.input.str(), call.filter.str(),
                     call.output.str(), fmt::join(call.strides, ", "),
                     fmt::join(call.padding, ", "), fmt::join(call.dilation, ", "),
                     call.groups == 1 ? "" : fmt::format(" groups {}", call.groups));
}

std::string describe(const Pool2DCall &call) {
  return fmt::format("{} {} input {} output {} window [{}] strides [{}] padding [{}]",
                     call.kind == PoolKind::Max ? "max" : "avg", dtypeName(call.input.dtype),
                     call.input.str(), call.output.str(), fmt::join(call.window, ", "),
                     fmt::join(call.strides, ", "), fmt::join(call.padding, ", "));
}

/// Shape errors of a conv call, "" when consistent (unsupported is checked apart).
static std::string convShapeError(const Conv2DCall &call) {
  for (std::string why :
       {checkInts("strides", call.strides, 2, 1), checkInts("padding", call.padding, 4, 0),
        checkInts("dilation", call.dilation, 2, 1),
        checkOperand("input", "NHWC", call.input, call.input.dtype),
        checkOperand("filter", "OHWI", call.filter, call.input.dtype),
        checkOperand("output", "NHWC", call.output, call.input.dtype)})
    if (!why.empty())
      return why;
  int64_t groups = call.groups, c = call.input.shape[3], f = call.filter.shape[0],
          cg = call.filter.shape[3];
  if (groups < 1 || c % groups != 0 || f % groups != 0)
    return fmt::format("feature_group_count {} must be positive and divide the {} channels of "
                       "input {} (NHWC) and the {} output channels of filter {} (OHWI)",
                       groups, c, call.input.str(), f, call.filter.str());
  if (groups == 1 && cg != c)
    return fmt::format("filter {} (OHWI) has {} input channels but input {} (NHWC) has {}",
                       call.filter.str(), cg, call.input.str(), c);
  if (cg * groups != c)
    return fmt::format("filter {} (OHWI) has {} input channels per group but input {} (NHWC) "
                       "has {} in {} groups, {} per group",
                       call.filter.str(), cg, call.input.str(), c, groups, c / groups);
  Geometry g = geometry(call);
  if (g.h + g.pt + g.pb < g.dh * (g.kh - 1) + 1 || g.w + g.pl + g.pr < g.dw * (g.kw - 1) + 1)
    return fmt::format("the dilated filter window of filter {} does not fit in input {} padded "
                       "by [{}]",
                       call.filter.str(), call.input.str(), fmt::join(call.padding, ", "));
  TensorType expected{call.input.dtype, {g.n, g.oh(), g.ow(), g.f}};
  if (call.output != expected)
    return fmt::format("output {} should be {} for input {} and filter {}", call.output.str(),
                       expected.str(), call.input.str(), call.filter.str());
  return "";
}

static std::string poolShapeError(const Pool2DCall &call) {
  for (std::string why : {checkInts("window", call.window, 2, 1),
                          checkInts("strides", call.strides, 2, 1),
                          checkInts("padding", call.padding, 4, 0),
                          checkOperand("input", "NHWC", call.input, call.input.dtype),
                          checkOperand("output", "NHWC", call.output, call.input.dtype)})
    if (!why.empty())
      return why;
  Geometry g = geometry(call);
  if (g.h + g.pt + g.pb < g.kh || g.w + g.pl + g.pr < g.kw)
    return fmt::format("window [{}] does not fit in input {} padded by [{}]",
                       fmt::join(call.window, ", "), call.input.str(),
                       fmt::join(call.padding, ", "));
  TensorType expected{call.input.dtype, {g.n, g.oh(), g.ow(), g.c}};
  if (call.output != expected)
    return fmt::format("output {} should be {} for input {}", call.output.str(), expected.str(),
                       call.input.str());
  return "";
}

/// "asymmetric padding [..]: <why>" when `padding` differs between the two sides of a
/// dimension, else "".
static std::string asymmetric(const std::vector<int64_t> &padding, const char *why) {
  if (padding[0] == padding[1] && padding[2] == padding[3])
    return "";
  return fmt::format("asymmetric padding [{}]: {}", fmt::join(padding, ", "), why);
}

std::string cudnnUnsupported(const Conv2DCall &call) {
  if (!convShapeError(call).empty())
    return ""; // invalid, not unsupported: validate() says why
  if (std::string why =
          unsupportedCommon(call.input.dtype, {call.input.numElements(), call.filter.numElements(),
                                               call.output.numElements()});
      !why.empty())
    return why;
  return asymmetric(call.padding, "the convolution descriptor pads both sides alike "
                                  "(smelt-gpu-conv-layouts pads the input explicitly)");
}

std::string cudnnUnsupported(const Pool2DCall &call) {
  if (!poolShapeError(call).empty())
    return "";
  if (std::string why = unsupportedCommon(call.input.dtype, {call.input.numElements(),
                                                             call.output.numElements()});
      !why.empty())
    return why;
  const std::vector<int64_t> &p = call.padding;
  if (std::string why = asymmetric(p, "cuDNN's pooling pads both sides alike, and padding "
                                      "copied into the input would count in averages");
      !why.empty())
    return why;
  if (p[0] >= call.window[0] || p[2] >= call.window[1])
    return fmt::format("padding [{}] not smaller than the window [{}]: a window could lie wholly "
                       "in the padding",
                       fmt::join(p, ", "), fmt::join(call.window, ", "));
  return "";
}

/// validate()'s answer from the shape error and the reason cuDNN does not run the call.
static Status verdict(const std::string &what, const std::string &invalid,
                      const std::string &unsupported) {
  if (!invalid.empty())
    return fail(what, invalid);
  if (!unsupported.empty())
    return fail(what, "not supported by cuDNN: " + unsupported);
  return {};
}

Status Cudnn::validate(const Conv2DCall &call, const std::string &what) {
  return verdict(what, convShapeError(call), cudnnUnsupported(call));
}

Status Cudnn::validate(const Pool2DCall &call, const std::string &what) {
  return verdict(what, poolShapeError(call), cudnnUnsupported(call));
}

/// Whether cuDNN may offer no NHWC algorithm for `call`, which then runs on NCHW copies: f16
/// and bf16 with channels (C or F) that are not a multiple of 8. The legacy API's NHWC
/// half-precision kernels are tensor-core kernels, which need that alignment; its NCHW ones pad
/// channels themselves (cuDNN's "Data and Filter Formats"). The CNN's first convolution (C = 1)
/// in mixed precision is one. A grouped convolution's kernels work a group at a time, so the
/// channels of one group (C/G and F/G) are what must align: a depthwise one (C/G = 1) may run
/// in NCHW. Saying yes costs only workspace: NCHW is tried when NHWC has no algorithm.
static bool mayNeedNchw(const Conv2DCall &call) {
  DType dtype = call.input.dtype;
  int64_t groups = call.groups;
  return (dtype == DType::f16 || dtype == DType::bf16) &&
         ((call.input.shape[3] / groups) % 8 != 0 || (call.filter.shape[0] / groups) % 8 != 0);
}

/// The NCHW copies at the start of a convolution's workspace, where NCHW may be needed: the
/// filter (KCRS), the input and the output; none otherwise.
static size_t convScratchBytes(const Conv2DCall &call) {
  if (!mayNeedNchw(call))
    return 0;
  return align256(call.filter.byteSize()) + align256(call.input.byteSize()) +
         align256(call.output.byteSize());
}

size_t Cudnn::workspaceBytes(const Conv2DCall &call) {
  return convScratchBytes(call) + kAlgorithmWorkspaceBytes;
}

size_t Cudnn::workspaceBytes(const Pool2DCall &call) {
  return call.kind == PoolKind::Max ? align256(call.output.byteSize()) : 0;
}

// ---------------------------------------------------------------------------------------------
// On the GPU
// ---------------------------------------------------------------------------------------------

Expected<Cudnn *> Cudnn::get(const CudaDevice &device) {
  static std::mutex mutex;
  static std::map<int, Expected<Cudnn *>> opened;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = opened.find(device.ordinal()); it != opened.end())
    return it->second;
  auto attempt = [&]() -> Expected<Cudnn *> {
    const Expected<const CudnnLibrary *> &lib = cudnnLibrary();
    if (!lib.ok())
      return lib.status();
    SMELT_CUDNN_TRY(device.makeCurrent());
    cudnnHandle_t handle = nullptr;
    for (Status status : {(*lib)->check((*lib)->create(&handle), "cudnnCreate"),
                          (*lib)->check((*lib)->setStream(handle, device.stream()),
                                        "cudnnSetStream")})
      if (!status.ok())
        return Status::error(fmt::format("gpu:{}: {}", device.ordinal(), status.message()));
    // Never destroyed: it lives as long as the device, which lives as long as the process.
    Cudnn *cudnn = new Cudnn(device);
    cudnn->handle_ = handle;
    return cudnn;
  };
  return opened.emplace(device.ordinal(), attempt()).first->second;
}

size_t Cudnn::version() const { return (*cudnnLibrary())->version; }

/// The descriptors of one convolution: x is the (possibly explicitly padded) input.
struct Cudnn::ConvDescriptors {
  cudnnTensorDescriptor_t x, y;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
};

namespace {
/// The first usable result of a heuristic, deterministic ones first: it succeeded, fits in
/// `limit`, and for strict f32 does not rely on tensor cores (TF32).
template <typename Perf>
std::optional<std::array<size_t, 3>> pick(const Perf *perf, int count, size_t limit,
                                          bool strictF32) {
  for (bool deterministicOnly : {true, false})
    for (int i = 0; i < count; ++i) {
      const Perf &p = perf[i];
      if (p.status != CUDNN_STATUS_SUCCESS || p.memory > limit ||
          (deterministicOnly && p.determinism != CUDNN_DETERMINISTIC) ||
          (strictF32 && (p.mathType == CUDNN_TENSOR_OP_MATH ||
                         p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)))
        continue;
      return std::array<size_t, 3>{size_t(p.algo), size_t(p.mathType), p.memory};
    }
  return std::nullopt;
}
} // namespace

Expected<Cudnn::Algorithm> Cudnn::algorithm(ConvPass pass, const Conv2DCall &call,
                                            ConvDescriptors &d, size_t limit) {
  const CudnnLibrary &lib = **cudnnLibrary();
  bool strictF32 = call.input.dtype == DType::f32 && !call.allowTf32;
  // The heuristic answers for the math type on the descriptor: FMA keeps f32 exact, tensor ops
  // let f16/bf16 (and TF32 when allowed) use tensor cores.
  SMELT_CUDNN_TRY(lib.check(lib.setConvolutionMathType(d.conv, strictF32 ? CUDNN_FMA_MATH
                                                                         : CUDNN_TENSOR_OP_MATH),
                            "cudnnSetConvolutionMathType"));
  auto handle = static_cast<cudnnHandle_t>(handle_);
  constexpr int kMax = 16; // more than any of the three algorithm enums holds
  int count = 0;
  std::optional<std::array<size_t, 3>> chosen;
  if (pass == ConvPass::Forward) {
    cudnnConvolutionFwdAlgoPerf_t perf[kMax];
    SMELT_CUDNN_TRY(lib.check(lib.forwardAlgorithms(handle, d.x, d.w, d.conv, d.y, kMax, &count,
                                                    perf),
                              "cudnnGetConvolutionForwardAlgorithm_v7"));
    chosen = pick(perf, count, limit, strictF32);
  } else if (pass == ConvPass::BackwardInput) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[kMax];
    SMELT_CUDNN_TRY(lib.check(lib.backwardDataAlgorithms(handle, d.w, d.y, d.conv, d.x, kMax,
                                                         &count, perf),
                              "cudnnGetConvolutionBackwardDataAlgorithm_v7"));
    chosen = pick(perf, count, limit, strictF32);
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[kMax];
    SMELT_CUDNN_TRY(lib.check(lib.backwardFilterAlgorithms(handle, d.x, d.y, d.conv, d.w, kMax,
                                                           &count, perf),
                              "cudnnGetConvolutionBackwardFilterAlgorithm_v7"));
    chosen = pick(perf, count, limit, strictF32);
  }
  if (!chosen)
    return Status::error(fmt::format("cuDNN's heuristic offers no algorithm (of {}) for {} "
                                     "within {} bytes of workspace",
                                     count, describe(call), limit));
  // Strict f32 runs with FMA math whatever the heuristic's entry says.
  return Algorithm{int((*chosen)[0]), strictF32 ? int(CUDNN_FMA_MATH) : int((*chosen)[1]),
                   (*chosen)[2]};
}

Status Cudnn::locked(const std::string &what, const std::string &call,
                     const std::function<Status()> &work) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (Status status = device_.makeCurrent(); !status.ok())
    return fail(what, status.message());
  if (Status status = work(); !status.ok())
    return fail(what, fmt::format("{} (gpu:{}, {})", status.message(), device_.ordinal(), call));
  return {};
}

namespace {
/// The tensors of one convolution in one layout: NHWC, the operands as they are (the filter is
/// KRSC); NCHW, copies of all three in the workspace (the filter as KCRS).
struct ConvViews {
  cudnnTensorDescriptor_t x, y;
  cudnnFilterDescriptor_t w;
};

Expected<ConvViews> convViews(Descriptors &make, const Geometry &g, bool nchw) {
  SMELT_CUDNN_ASSIGN(x, nchw ? make.nchw(g.n, g.h, g.w, g.c) : make.nhwc(g.n, g.h, g.w, g.c));
  SMELT_CUDNN_ASSIGN(y, nchw ? make.nchw(g.n, g.oh(), g.ow(), g.f)
                             : make.nhwc(g.n, g.oh(), g.ow(), g.f));
  SMELT_CUDNN_ASSIGN(w, make.filter(g, nchw));
  return ConvViews{x, y, w};
}
} // namespace

Expected<Cudnn::Choice> Cudnn::choose(ConvPass pass, const Conv2DCall &call, size_t limit) {
  std::string key = fmt::format("{} pass {} tf32 {} limit {}", describe(call), int(pass),
                                call.allowTf32, limit);
  if (auto it = choices_.find(key); it != choices_.end())
    return it->second;
  const CudnnLibrary &lib = **cudnnLibrary();
  Geometry g = geometry(call);
  Status nhwcError;
  for (bool nchw : {false, true}) {
    if (nchw && !mayNeedNchw(call))
      break;
    Descriptors make(lib, call.input.dtype);
    SMELT_CUDNN_ASSIGN(views, convViews(make, g, nchw));
    SMELT_CUDNN_ASSIGN(conv, make.convolution(g));
    ConvDescriptors d{views.x, views.y, views.w, conv};
    Expected<Algorithm> algo = algorithm(pass, call, d, limit);
    if (algo)
      return choices_.emplace(key, Choice{*algo, nchw}).first->second;
    if (!nchw)
      nhwcError = algo.status();
    else
      return Status::error(nhwcError.message() + "; in NCHW copies: " + algo.message());
  }
  return nhwcError;
}

/// validate(), then that `workspaceBytes` hold the call's NCHW copies.
static Status checkConvCall(const Conv2DCall &call, size_t workspaceBytes,
                            const std::string &what) {
  SMELT_CUDNN_TRY(Cudnn::validate(call, what));
  size_t scratch = convScratchBytes(call);
  if (workspaceBytes < scratch)
    return fail(what, fmt::format("the workspace ({} bytes) is smaller than the {} bytes of "
                                  "NCHW copies (Cudnn::workspaceBytes)",
                                  workspaceBytes, scratch));
  return {};
}

Status Cudnn::prepare(ConvPass pass, const Conv2DCall &call, size_t workspaceBytes,
                      const std::string &what) {
  SMELT_CUDNN_TRY(checkConvCall(call, workspaceBytes, what));
  size_t scratch = convScratchBytes(call);
  return locked(what, describe(call),
                [&]() { return choose(pass, call, workspaceBytes - scratch).status(); });
}

Status Cudnn::convolve(ConvPass pass, const Conv2DCall &call, const void *a, const void *b,
                       void *out, void *workspace, size_t workspaceBytes,
                       const std::string &what) {
  SMELT_CUDNN_TRY(checkConvCall(call, workspace ? workspaceBytes : 0, what));
  size_t scratch = convScratchBytes(call);
  if (!a || !b || !out)
    return fail(what, "null device pointer");
  auto inner = [&]() -> Status {
    const CudnnLibrary &lib = **cudnnLibrary();
    auto handle = static_cast<cudnnHandle_t>(handle_);
    Geometry g = geometry(call);
    DType dtype = call.input.dtype;
    SMELT_CUDNN_ASSIGN(choice, choose(pass, call, workspaceBytes - scratch));
    bool nchw = choice.nchw;
    Descriptors make(lib, dtype);
    SMELT_CUDNN_ASSIGN(views, convViews(make, g, nchw));
    SMELT_CUDNN_ASSIGN(conv, make.convolution(g));
    const Algorithm &algo = choice.algorithm;
    SMELT_CUDNN_TRY(lib.check(lib.setConvolutionMathType(conv, cudnnMathType_t(algo.mathType)),
                              "cudnnSetConvolutionMathType"));
    void *algoSpace = at(workspace, scratch);

    // x, w and y as stored (NHWC, OHWI, NHWC), and which of them the pass writes.
    auto *in0 = const_cast<void *>(a), *in1 = const_cast<void *>(b);
    void *stored[3] = {in0, in1, out};
    int result = 2;
    if (pass == ConvPass::BackwardInput)
      stored[0] = out, stored[2] = in0, result = 0;
    else if (pass == ConvPass::BackwardFilter)
      stored[1] = out, stored[2] = in1, result = 1;
    // Where cuDNN finds them: as stored in NHWC; in NCHW, copies at the start of the workspace
    // ([filter][input][output], convScratchBytes), in and out through cudnnTransformTensor
    // between the stored and the NCHW views of one shape.
    void *where[3] = {stored[0], stored[1], stored[2]};
    cudnnTensorDescriptor_t storedViews[3] = {}, copyViews[3] = {};
    if (nchw) {
      int64_t cg = g.cg();
      SMELT_CUDNN_ASSIGN(input, make.nhwc(g.n, g.h, g.w, g.c));
      SMELT_CUDNN_ASSIGN(filter,
                         make.tensor({g.f, cg, g.kh, g.kw}, {g.kh * g.kw * cg, 1, g.kw * cg, cg}));
      SMELT_CUDNN_ASSIGN(output, make.nhwc(g.n, g.oh(), g.ow(), g.f));
      SMELT_CUDNN_ASSIGN(
          kcrs, make.tensor({g.f, cg, g.kh, g.kw}, {cg * g.kh * g.kw, g.kh * g.kw, g.kw, 1}));
      storedViews[0] = input, storedViews[1] = filter, storedViews[2] = output;
      copyViews[0] = views.x, copyViews[1] = kcrs, copyViews[2] = views.y;
      where[1] = workspace;
      where[0] = at(where[1], align256(call.filter.byteSize()));
      where[2] = at(where[0], align256(call.input.byteSize()));
      for (int i = 0; i < 3; ++i)
        if (i != result)
          SMELT_CUDNN_TRY(lib.check(lib.transformTensor(handle, &kOne, storedViews[i], stored[i],
                                                        &kZero, copyViews[i], where[i]),
                                    "cudnnTransformTensor (to NCHW)"));
    }
    switch (pass) {
    case ConvPass::Forward:
      SMELT_CUDNN_TRY(
          lib.check(lib.convolutionForward(handle, &kOne, views.x, where[0], views.w, where[1],
                                           conv, cudnnConvolutionFwdAlgo_t(algo.algo), algoSpace,
                                           algo.memory, &kZero, views.y, where[2]),
                    "cudnnConvolutionForward"));
      break;
    case ConvPass::BackwardInput:
      SMELT_CUDNN_TRY(
          lib.check(lib.convolutionBackwardData(handle, &kOne, views.w, where[1], views.y, where[2],
                                                conv, cudnnConvolutionBwdDataAlgo_t(algo.algo),
                                                algoSpace, algo.memory, &kZero, views.x, where[0]),
                    "cudnnConvolutionBackwardData"));
      break;
    case ConvPass::BackwardFilter:
      SMELT_CUDNN_TRY(lib.check(
          lib.convolutionBackwardFilter(handle, &kOne, views.x, where[0], views.y, where[2], conv,
                                        cudnnConvolutionBwdFilterAlgo_t(algo.algo), algoSpace,
                                        algo.memory, &kZero, views.w, where[1]),
          "cudnnConvolutionBackwardFilter"));
      break;
    }
    if (!nchw)
      return {};
    return lib.check(lib.transformTensor(handle, &kOne, copyViews[result], where[result], &kZero,
                                         storedViews[result], stored[result]),
                     "cudnnTransformTensor (from NCHW)");
  };
  return locked(what, describe(call), inner);
}

Status Cudnn::conv2dForward(const Conv2DCall &call, const void *input, const void *filter,
                            void *output, void *workspace, size_t workspaceBytes,
                            const std::string &what) {
  return convolve(ConvPass::Forward, call, input, filter, output, workspace, workspaceBytes,
                  what);
}

Status Cudnn::conv2dBackwardInput(const Conv2DCall &call, const void *gradOutput,
                                  const void *filter, void *gradInput, void *workspace,
                                  size_t workspaceBytes, const std::string &what) {
  return convolve(ConvPass::BackwardInput, call, gradOutput, filter, gradInput, workspace,
                  workspaceBytes, what);
}

Status Cudnn::conv2dBackwardFilter(const Conv2DCall &call, const void *input,
                                   const void *gradOutput, void *gradFilter, void *workspace,
                                   size_t workspaceBytes, const std::string &what) {
  return convolve(ConvPass::BackwardFilter, call, input, gradOutput, gradFilter, workspace,
                  workspaceBytes, what);
}

Status Cudnn::pool(bool backward, const Pool2DCall &call, const void *input,
                   const void *gradOutput, void *result, void *workspace, size_t workspaceBytes,
                   const std::string &what) {
  SMELT_CUDNN_TRY(validate(call, what));
  bool needsInput = !backward || call.kind == PoolKind::Max;
  if ((needsInput && !input) || (backward && !gradOutput) || !result)
    return fail(what, "null device pointer");
  bool recompute = backward && call.kind == PoolKind::Max;
  size_t scratch = recompute ? this->workspaceBytes(call) : 0;
  if (recompute && (workspaceBytes < scratch || !workspace))
    return fail(what, fmt::format("the workspace ({} bytes) is smaller than the {} bytes of the "
                                  "recomputed forward result (Cudnn::workspaceBytes)",
                                  workspace ? workspaceBytes : 0, scratch));
  auto inner = [&]() -> Status {
    const CudnnLibrary &lib = **cudnnLibrary();
    auto handle = static_cast<cudnnHandle_t>(handle_);
    Geometry g = geometry(call);
    Descriptors make(lib, call.input.dtype);
    SMELT_CUDNN_ASSIGN(x, make.nhwc(g.n, g.h, g.w, g.c));
    SMELT_CUDNN_ASSIGN(y, make.nhwc(g.n, g.oh(), g.ow(), g.c));
    SMELT_CUDNN_ASSIGN(desc, make.pooling(g, call.kind));
    if (!backward)
      return lib.check(lib.poolingForward(handle, desc, &kOne, x, input, &kZero, y, result),
                       "cudnnPoolingForward");
    // cuDNN's max gradient finds each window's maximum by comparing the input with the forward
    // result, which the op does not have: recompute it. Average reads neither; it is given
    // valid pointers of the right shapes all the same.
    const void *forward = gradOutput;
    const void *source = input ? input : result;
    if (recompute) {
      SMELT_CUDNN_TRY(lib.check(lib.poolingForward(handle, desc, &kOne, x, input, &kZero, y,
                                                   workspace),
                                "cudnnPoolingForward (recomputed for the gradient)"));
      forward = workspace;
    }
    return lib.check(lib.poolingBackward(handle, desc, &kOne, y, forward, y, gradOutput, x,
                                         source, &kZero, x, result),
                     "cudnnPoolingBackward");
  };
  return locked(what, describe(call), inner);
}

Status Cudnn::pool2dForward(const Pool2DCall &call, const void *input, void *output,
                            void *workspace, size_t workspaceBytes, const std::string &what) {
  return pool(false, call, input, nullptr, output, workspace, workspaceBytes, what);
}

Status Cudnn::pool2dBackward(const Pool2DCall &call, const void *input, const void *gradOutput,
                             void *gradInput, void *workspace, size_t workspaceBytes,
                             const std::string &what) {
  return pool(true, call, input, gradOutput, gradInput, workspace, workspaceBytes, what);
}

} // namespace smelt::rt::cuda
