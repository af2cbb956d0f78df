// Validates convolution and pooling calls, prepares them once and queues them on a device's
// stream through cuDNN's legacy API (Cudnn.h); opens libcudnn with dlopen and resolves its
// table, once per process.
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
#include "runtime/Allocator.h"
#include "runtime/cuda/DynamicLibrary.h"

#include <cudnn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <dlfcn.h>

#include <array>
#include <climits>
#include <optional>

namespace smelt::rt::cuda {
namespace {

// symbol in libcudnn, member in the table; cudnn.h is included for types and signatures only.
#define SMELT_CUDNN_ENTRIES(X)                                                                     \
  X(cudnnGetVersion, getVersion)                                                                   \
  X(cudnnGetErrorString, getErrorString)                                                           \
  X(cudnnCreate, create)                                                                           \
  X(cudnnSetStream, setStream)                                                                     \
  X(cudnnCreateTensorDescriptor, createTensorDescriptor)                                           \
  X(cudnnSetTensorNdDescriptor, setTensorNdDescriptor)                                             \
  X(cudnnDestroyTensorDescriptor, destroyTensorDescriptor)                                         \
  X(cudnnCreateFilterDescriptor, createFilterDescriptor)                                           \
  X(cudnnSetFilter4dDescriptor, setFilter4dDescriptor)                                             \
  X(cudnnDestroyFilterDescriptor, destroyFilterDescriptor)                                         \
  X(cudnnCreateConvolutionDescriptor, createConvolutionDescriptor)                                 \
  X(cudnnSetConvolution2dDescriptor, setConvolution2dDescriptor)                                   \
  X(cudnnSetConvolutionMathType, setConvolutionMathType)                                           \
  X(cudnnSetConvolutionGroupCount, setConvolutionGroupCount)                                       \
  X(cudnnDestroyConvolutionDescriptor, destroyConvolutionDescriptor)                               \
  X(cudnnCreatePoolingDescriptor, createPoolingDescriptor)                                         \
  X(cudnnSetPooling2dDescriptor, setPooling2dDescriptor)                                           \
  X(cudnnDestroyPoolingDescriptor, destroyPoolingDescriptor)                                       \
  X(cudnnGetConvolutionForwardAlgorithm_v7, forwardAlgorithms)                                     \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7, backwardDataAlgorithms)                           \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7, backwardFilterAlgorithms)                       \
  X(cudnnConvolutionForward, convolutionForward)                                                   \
  X(cudnnConvolutionBackwardData, convolutionBackwardData)                                         \
  X(cudnnConvolutionBackwardFilter, convolutionBackwardFilter)                                     \
  X(cudnnPoolingForward, poolingForward)                                                           \
  X(cudnnPoolingBackward, poolingBackward)                                                         \
  X(cudnnTransformTensor, transformTensor)

struct CudnnLibrary {
#define SMELT_CUDNN_MEMBER(symbol, member) decltype(&::symbol) member = nullptr;
  SMELT_CUDNN_ENTRIES(SMELT_CUDNN_MEMBER)
#undef SMELT_CUDNN_MEMBER
  /// Optional: more detail than the status name where the library has it.
  decltype(&::cudnnGetLastErrorString) getLastErrorString = nullptr;

  /// Success, or "<call> failed: CUDNN_STATUS_<NAME> (<cudnnGetLastErrorString>)".
  Status check(cudnnStatus_t status, const char *call) const {
    if (status == CUDNN_STATUS_SUCCESS)
      return {};
    const char *name = getErrorString(status);
    char detail[512] = {};
    if (getLastErrorString)
      getLastErrorString(detail, sizeof detail - 1);
    return Status::error(fmt::format("{} failed: {}{}", call,
                                     name ? name : fmt::format("cuDNN status {}", int(status)),
                                     *detail ? fmt::format(" ({})", detail) : std::string()));
  }
};

/// The library, opened once per process: libcudnn.so.9, found as cudaLibraryCandidates
/// (DynamicLibrary.h) says. The error names the library or the symbol that is missing, or a
/// version other than 9.
const Expected<const CudnnLibrary *> &cudnnLibrary() {
  // Thread-safe, tried once.
  static const Expected<const CudnnLibrary *> lib = []() -> Expected<const CudnnLibrary *> {
    // Never closed, like the driver. Searched as DynamicLibrary.h says: SMELT_CUDA_LIBRARY_PATH,
    // a pip wheel's nvidia/cudnn/lib, the CUDA toolkit, then the loader's path.
    static CudnnLibrary table;
    SMELT_ASSIGN_OR_RETURN(void *opened,
                           openCudaTable("cuDNN", "libcudnn.so.9",
                                         {SMELT_CUDNN_ENTRIES(SMELT_CUDA_TABLE_ENTRY)},
                                         "it is not the cuDNN 9 this program needs"));
    table.getLastErrorString = reinterpret_cast<decltype(table.getLastErrorString)>(
        dlsym(opened, "cudnnGetLastErrorString"));
    if (size_t version = table.getVersion(); version / 10000 != 9)
      return Status::error(
          fmt::format("libcudnn.so.9 reports version {}; this program needs 9.x", version));
    return &table;
  }();
  return lib;
}

// ---------------------------------------------------------------------------------------------
// Geometry and validation (no GPU)
// ---------------------------------------------------------------------------------------------

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
// Descriptors, destroyed with the plan that made them
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
  const CudnnLibrary &lib() const { return lib_; }

  /// A 4-D tensor of dims [N, C, H, W] (cuDNN's order) laid out by `strides` (in elements).
  Expected<cudnnTensorDescriptor_t> tensor(std::array<int64_t, 4> dims,
                                           std::array<int64_t, 4> strides) {
    cudnnTensorDescriptor_t d = nullptr;
    SMELT_RETURN_IF_ERROR(
        lib_.check(lib_.createTensorDescriptor(&d), "cudnnCreateTensorDescriptor"));
    tensors_.push_back(d);
    std::array<int, 4> dimA, strideA;
    for (size_t i = 0; i < 4; ++i)
      dimA[i] = int(dims[i]), strideA[i] = int(strides[i]);
    SMELT_RETURN_IF_ERROR(
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
    SMELT_RETURN_IF_ERROR(
        lib_.check(lib_.createFilterDescriptor(&d), "cudnnCreateFilterDescriptor"));
    filters_.push_back(d);
    SMELT_RETURN_IF_ERROR(lib_.check(
        lib_.setFilter4dDescriptor(d, type_, nchw ? CUDNN_TENSOR_NCHW : CUDNN_TENSOR_NHWC, int(g.f),
                                   int(g.cg()), int(g.kh), int(g.kw)),
        "cudnnSetFilter4dDescriptor"));
    return d;
  }
  Expected<cudnnConvolutionDescriptor_t> convolution(const Geometry &g) {
    cudnnConvolutionDescriptor_t d = nullptr;
    SMELT_RETURN_IF_ERROR(
        lib_.check(lib_.createConvolutionDescriptor(&d), "cudnnCreateConvolutionDescriptor"));
    convolutions_.push_back(d);
    // f16/bf16 data accumulates in f32 (cuDNN's "pseudo half" configuration).
    SMELT_RETURN_IF_ERROR(lib_.check(
        lib_.setConvolution2dDescriptor(d, int(g.pt), int(g.pl), int(g.sh), int(g.sw), int(g.dh),
                                        int(g.dw), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        "cudnnSetConvolution2dDescriptor"));
    // Set for 1 too: the descriptor then says what it computes whatever cuDNN's default.
    SMELT_RETURN_IF_ERROR(lib_.check(lib_.setConvolutionGroupCount(d, int(g.groups)),
                                     "cudnnSetConvolutionGroupCount"));
    return d;
  }
  Expected<cudnnPoolingDescriptor_t> pooling(const Geometry &g, PoolKind kind) {
    cudnnPoolingDescriptor_t d = nullptr;
    SMELT_RETURN_IF_ERROR(
        lib_.check(lib_.createPoolingDescriptor(&d), "cudnnCreatePoolingDescriptor"));
    poolings_.push_back(d);
    // Max: padding never wins (cuDNN ignores padded positions), NaN propagates as on the CPU.
    // Avg: padded positions are not counted.
    cudnnPoolingMode_t mode = kind == PoolKind::Max ? CUDNN_POOLING_MAX_DETERMINISTIC
                                                    : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    SMELT_RETURN_IF_ERROR(
        lib_.check(lib_.setPooling2dDescriptor(d, mode, CUDNN_PROPAGATE_NAN, int(g.kh), int(g.kw),
                                               int(g.pt), int(g.pl), int(g.sh), int(g.sw)),
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
  return Allocator::alignUp(call.filter.byteSize()) + Allocator::alignUp(call.input.byteSize()) +
         Allocator::alignUp(call.output.byteSize());
}

size_t Cudnn::workspaceBytes(const Conv2DCall &call) {
  return convScratchBytes(call) + kAlgorithmWorkspaceBytes;
}

size_t Cudnn::workspaceBytes(const Pool2DCall &call) {
  return call.kind == PoolKind::Max ? Allocator::alignUp(call.output.byteSize()) : 0;
}

// ---------------------------------------------------------------------------------------------
// On the GPU
// ---------------------------------------------------------------------------------------------

Expected<Cudnn *> Cudnn::get(const CudaDevice &device) {
  return openOncePerDevice<Cudnn *>(device.ordinal(), [&]() -> Expected<Cudnn *> {
    SMELT_ASSIGN_OR_RETURN(const CudnnLibrary *lib, cudnnLibrary());
    SMELT_RETURN_IF_ERROR(device.makeCurrent());
    cudnnHandle_t handle = nullptr;
    if (Status status =
            firstError({lib->check(lib->create(&handle), "cudnnCreate"),
                        lib->check(lib->setStream(handle, device.stream()), "cudnnSetStream")});
        !status.ok())
      return Status::error(fmt::format("gpu:{}: {}", device.ordinal(), status.message()));
    // Never destroyed: it lives as long as the device, which lives as long as the process.
    Cudnn *cudnn = new Cudnn(device);
    cudnn->handle_ = handle;
    return cudnn;
  });
}

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

/// "<what>: <why> (gpu:N, <describe(call)>)": how a prepared call's errors read.
template <typename Call>
Status failOn(const std::string &what, const CudaDevice &device, const Call &call,
              const Status &why) {
  return fail(what,
              fmt::format("{} (gpu:{}, {})", why.message(), device.ordinal(), describe(call)));
}
} // namespace

/// What the plans of convolutions and pooling share: the call, its descriptors, and run(),
/// which queues it holding the lock.
template <typename Call> class Cudnn::CallPlan : public Cudnn::Plan {
public:
  Status run(void *const *buffers, void *workspace) const override {
    std::lock_guard<std::mutex> lock(cudnn_.mutex_);
    if (Status status = queue(buffers, workspace); !status.ok())
      return failOn(what_, cudnn_.device_, call_, status);
    return {};
  }

protected:
  CallPlan(Cudnn &cudnn, const Call &call, std::string what)
      : cudnn_(cudnn), call_(call), what_(std::move(what)),
        make_(**cudnnLibrary(), call.input.dtype) {}
  virtual Status queue(void *const *buffers, void *workspace) const = 0;
  cudnnHandle_t handle() const { return static_cast<cudnnHandle_t>(cudnn_.handle_); }

  Cudnn &cudnn_;
  Call call_;
  std::string what_;
  Descriptors make_;
};

/// One convolution in one layout: NHWC, the operands as they are (the filter is KRSC); NCHW,
/// copies of all three at the start of the workspace (the filter as KCRS), made and read back
/// by cudnnTransformTensor.
class Cudnn::ConvPlan final : public Cudnn::CallPlan<Conv2DCall> {
public:
  ConvPlan(Cudnn &cudnn, ConvPass pass, const Conv2DCall &call, std::string what, bool nchw)
      : CallPlan(cudnn, call, std::move(what)), pass_(pass), nchw_(nchw) {}

  /// The descriptors, and cuDNN's heuristic's algorithm within `limit` bytes (the lock held).
  Status make(size_t limit) {
    const CudnnLibrary &lib = make_.lib();
    Geometry g = geometry(call_);
    SMELT_ASSIGN_OR_RETURN(auto x,
                           nchw_ ? make_.nchw(g.n, g.h, g.w, g.c) : make_.nhwc(g.n, g.h, g.w, g.c));
    SMELT_ASSIGN_OR_RETURN(auto y, nchw_ ? make_.nchw(g.n, g.oh(), g.ow(), g.f)
                                         : make_.nhwc(g.n, g.oh(), g.ow(), g.f));
    SMELT_ASSIGN_OR_RETURN(auto w, make_.filter(g, nchw_));
    SMELT_ASSIGN_OR_RETURN(auto conv, make_.convolution(g));
    x_ = x, y_ = y, w_ = w, conv_ = conv;
    SMELT_RETURN_IF_ERROR(chooseAlgorithm(limit));
    SMELT_RETURN_IF_ERROR(lib.check(lib.setConvolutionMathType(conv_, cudnnMathType_t(mathType_)),
                                    "cudnnSetConvolutionMathType"));
    if (!nchw_)
      return {};
    // The stored tensors (NHWC, OHWI, NHWC) beside their NCHW copies.
    int64_t cg = g.cg();
    SMELT_ASSIGN_OR_RETURN(auto input, make_.nhwc(g.n, g.h, g.w, g.c));
    SMELT_ASSIGN_OR_RETURN(
        auto filter, make_.tensor({g.f, cg, g.kh, g.kw}, {g.kh * g.kw * cg, 1, g.kw * cg, cg}));
    SMELT_ASSIGN_OR_RETURN(auto output, make_.nhwc(g.n, g.oh(), g.ow(), g.f));
    SMELT_ASSIGN_OR_RETURN(
        auto kcrs, make_.tensor({g.f, cg, g.kh, g.kw}, {cg * g.kh * g.kw, g.kh * g.kw, g.kw, 1}));
    storedViews_[0] = input, storedViews_[1] = filter, storedViews_[2] = output;
    copyViews_[0] = x_, copyViews_[1] = kcrs, copyViews_[2] = y_;
    return {};
  }

private:
  Status chooseAlgorithm(size_t limit);
  Status queue(void *const *buffers, void *workspace) const override;

  ConvPass pass_;
  bool nchw_;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  /// NCHW only: x, w and y as stored, and as copied.
  cudnnTensorDescriptor_t storedViews_[3] = {}, copyViews_[3] = {};
  int algo_ = 0;     // cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  int mathType_ = 0; // cudnnMathType_t
  size_t algoMemory_ = 0;
};

Status Cudnn::ConvPlan::chooseAlgorithm(size_t limit) {
  const CudnnLibrary &lib = make_.lib();
  bool strictF32 = call_.input.dtype == DType::f32 && !call_.allowTf32;
  // The heuristic answers for the math type on the descriptor: FMA keeps f32 exact, tensor ops
  // let f16/bf16 (and TF32 when allowed) use tensor cores.
  SMELT_RETURN_IF_ERROR(lib.check(
      lib.setConvolutionMathType(conv_, strictF32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH),
      "cudnnSetConvolutionMathType"));
  cudnnHandle_t handle = this->handle();
  constexpr int kMax = 16; // more than any of the three algorithm enums holds
  int count = 0;
  std::optional<std::array<size_t, 3>> chosen;
  if (pass_ == ConvPass::Forward) {
    cudnnConvolutionFwdAlgoPerf_t perf[kMax];
    SMELT_RETURN_IF_ERROR(
        lib.check(lib.forwardAlgorithms(handle, x_, w_, conv_, y_, kMax, &count, perf),
                  "cudnnGetConvolutionForwardAlgorithm_v7"));
    chosen = pick(perf, count, limit, strictF32);
  } else if (pass_ == ConvPass::BackwardInput) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[kMax];
    SMELT_RETURN_IF_ERROR(
        lib.check(lib.backwardDataAlgorithms(handle, w_, y_, conv_, x_, kMax, &count, perf),
                  "cudnnGetConvolutionBackwardDataAlgorithm_v7"));
    chosen = pick(perf, count, limit, strictF32);
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[kMax];
    SMELT_RETURN_IF_ERROR(
        lib.check(lib.backwardFilterAlgorithms(handle, x_, y_, conv_, w_, kMax, &count, perf),
                  "cudnnGetConvolutionBackwardFilterAlgorithm_v7"));
    chosen = pick(perf, count, limit, strictF32);
  }
  if (!chosen)
    return Status::error(fmt::format("cuDNN's heuristic offers no algorithm (of {}) for {} "
                                     "within {} bytes of workspace",
                                     count, describe(call_), limit));
  // Strict f32 runs with FMA math whatever the heuristic's entry says.
  algo_ = int((*chosen)[0]);
  mathType_ = strictF32 ? int(CUDNN_FMA_MATH) : int((*chosen)[1]);
  algoMemory_ = (*chosen)[2];
  return {};
}

Status Cudnn::ConvPlan::queue(void *const *buffers, void *workspace) const {
  const CudnnLibrary &lib = make_.lib();
  cudnnHandle_t handle = this->handle();
  size_t scratch = convScratchBytes(call_);
  void *algoSpace = at(workspace, scratch);
  // x, w and y as stored (NHWC, OHWI, NHWC), and which of them the pass writes.
  void *stored[3] = {buffers[0], buffers[1], buffers[2]};
  int result = 2;
  if (pass_ == ConvPass::BackwardInput) // (grad_output, filter) -> grad_input
    stored[0] = buffers[2], stored[2] = buffers[0], result = 0;
  else if (pass_ == ConvPass::BackwardFilter) // (input, grad_output) -> grad_filter
    stored[1] = buffers[2], stored[2] = buffers[1], result = 1;
  // Where cuDNN finds them: as stored in NHWC; in NCHW, copies at the start of the workspace
  // ([filter][input][output], convScratchBytes), in and out through cudnnTransformTensor
  // between the stored and the NCHW views of one shape.
  void *where[3] = {stored[0], stored[1], stored[2]};
  if (nchw_) {
    where[1] = workspace;
    where[0] = at(where[1], Allocator::alignUp(call_.filter.byteSize()));
    where[2] = at(where[0], Allocator::alignUp(call_.input.byteSize()));
    for (int i = 0; i < 3; ++i)
      if (i != result)
        SMELT_RETURN_IF_ERROR(
            lib.check(lib.transformTensor(handle, &kOne, storedViews_[i], stored[i], &kZero,
                                          copyViews_[i], where[i]),
                      "cudnnTransformTensor (to NCHW)"));
  }
  switch (pass_) {
  case ConvPass::Forward:
    SMELT_RETURN_IF_ERROR(
        lib.check(lib.convolutionForward(handle, &kOne, x_, where[0], w_, where[1], conv_,
                                         cudnnConvolutionFwdAlgo_t(algo_), algoSpace, algoMemory_,
                                         &kZero, y_, where[2]),
                  "cudnnConvolutionForward"));
    break;
  case ConvPass::BackwardInput:
    SMELT_RETURN_IF_ERROR(
        lib.check(lib.convolutionBackwardData(handle, &kOne, w_, where[1], y_, where[2], conv_,
                                              cudnnConvolutionBwdDataAlgo_t(algo_), algoSpace,
                                              algoMemory_, &kZero, x_, where[0]),
                  "cudnnConvolutionBackwardData"));
    break;
  case ConvPass::BackwardFilter:
    SMELT_RETURN_IF_ERROR(
        lib.check(lib.convolutionBackwardFilter(handle, &kOne, x_, where[0], y_, where[2], conv_,
                                                cudnnConvolutionBwdFilterAlgo_t(algo_), algoSpace,
                                                algoMemory_, &kZero, w_, where[1]),
                  "cudnnConvolutionBackwardFilter"));
    break;
  }
  if (!nchw_)
    return {};
  return lib.check(lib.transformTensor(handle, &kOne, copyViews_[result], where[result], &kZero,
                                       storedViews_[result], stored[result]),
                   "cudnnTransformTensor (from NCHW)");
}

Expected<std::shared_ptr<const Cudnn::Plan>> Cudnn::prepare(ConvPass pass, const Conv2DCall &call,
                                                            size_t workspaceBytes,
                                                            const std::string &what) {
  SMELT_RETURN_IF_ERROR(validate(call, what));
  size_t scratch = convScratchBytes(call);
  if (workspaceBytes < scratch)
    return fail(what, fmt::format("the workspace ({} bytes) is smaller than the {} bytes of "
                                  "NCHW copies (Cudnn::workspaceBytes)",
                                  workspaceBytes, scratch));
  std::lock_guard<std::mutex> lock(mutex_);
  if (Status status = device_.makeCurrent(); !status.ok())
    return fail(what, status.message());
  // NHWC's algorithm, else NCHW's where that may help; the error says what each layout offered.
  Status nhwcError;
  for (bool nchw : {false, true}) {
    if (nchw && !mayNeedNchw(call))
      break;
    auto plan = std::make_shared<ConvPlan>(*this, pass, call, what, nchw);
    Status made = plan->make(workspaceBytes - scratch);
    if (made.ok())
      return std::shared_ptr<const Plan>(std::move(plan));
    if (!nchw)
      nhwcError = made;
    else
      nhwcError = Status::error(nhwcError.message() + "; in NCHW copies: " + made.message());
  }
  return failOn(what, device_, call, nhwcError);
}

/// Pooling or its gradient, on the operands as they are.
class Cudnn::PoolPlan final : public Cudnn::CallPlan<Pool2DCall> {
public:
  PoolPlan(Cudnn &cudnn, bool backward, const Pool2DCall &call, std::string what)
      : CallPlan(cudnn, call, std::move(what)), backward_(backward) {}

  Status make() {
    Geometry g = geometry(call_);
    SMELT_ASSIGN_OR_RETURN(auto x, make_.nhwc(g.n, g.h, g.w, g.c));
    SMELT_ASSIGN_OR_RETURN(auto y, make_.nhwc(g.n, g.oh(), g.ow(), g.c));
    SMELT_ASSIGN_OR_RETURN(auto pooling, make_.pooling(g, call_.kind));
    x_ = x, y_ = y, pooling_ = pooling;
    return {};
  }

private:
  Status queue(void *const *buffers, void *workspace) const override {
    const CudnnLibrary &lib = make_.lib();
    cudnnHandle_t handle = this->handle();
    if (!backward_) // (input) -> output
      return lib.check(
          lib.poolingForward(handle, pooling_, &kOne, x_, buffers[0], &kZero, y_, buffers[1]),
          "cudnnPoolingForward");
    // max: (input, grad_output) -> grad_input; avg: (grad_output) -> grad_input.
    bool isMax = call_.kind == PoolKind::Max;
    const void *input = isMax ? buffers[0] : nullptr, *gradOutput = buffers[isMax ? 1 : 0];
    void *result = buffers[isMax ? 2 : 1];
    // cuDNN's max gradient finds each window's maximum by comparing the input with the forward
    // result, which the op does not have: recompute it. Average reads neither; it is given
    // valid pointers of the right shapes all the same.
    const void *forward = gradOutput;
    const void *source = input ? input : result;
    if (isMax) {
      SMELT_RETURN_IF_ERROR(
          lib.check(lib.poolingForward(handle, pooling_, &kOne, x_, input, &kZero, y_, workspace),
                    "cudnnPoolingForward (recomputed for the gradient)"));
      forward = workspace;
    }
    return lib.check(lib.poolingBackward(handle, pooling_, &kOne, y_, forward, y_, gradOutput, x_,
                                         source, &kZero, x_, result),
                     "cudnnPoolingBackward");
  }

  bool backward_;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnPoolingDescriptor_t pooling_ = nullptr;
};

Expected<std::shared_ptr<const Cudnn::Plan>> Cudnn::prepare(bool backward, const Pool2DCall &call,
                                                            size_t workspaceBytes,
                                                            const std::string &what) {
  SMELT_RETURN_IF_ERROR(validate(call, what));
  size_t scratch = backward && call.kind == PoolKind::Max ? Cudnn::workspaceBytes(call) : 0;
  if (workspaceBytes < scratch)
    return fail(what, fmt::format("the workspace ({} bytes) is smaller than the {} bytes of the "
                                  "recomputed forward result (Cudnn::workspaceBytes)",
                                  workspaceBytes, scratch));
  std::lock_guard<std::mutex> lock(mutex_);
  if (Status status = device_.makeCurrent(); !status.ok())
    return fail(what, status.message());
  auto plan = std::make_shared<PoolPlan>(*this, backward, call, what);
  if (Status made = plan->make(); !made.ok())
    return failOn(what, device_, call, made);
  return std::shared_ptr<const Plan>(std::move(plan));
}

} // namespace smelt::rt::cuda
