// cuDNN convolutions and pooling (runtime/cuda/Cudnn.h) against the CPU executor's kernels run
// in f64 on the same inputs (their HWIO filters transposed from cuDNN's OHWI here): conv2d and
// both gradients with stride 2, padding, dilation 2, channel counts that are not multiples of 8 and
// a batch of 3, grouped and depthwise; max and avg pooling and their gradients with padding; every
// dtype. Validation needs no GPU, so those tests run everywhere; the rest skip, saying why, without
// one.
#include "GpuTestUtil.h"
#include "RuntimeTestUtil.h"

#include "runtime/cuda/Cudnn.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <numeric>

namespace smelt::rt::test {
namespace {

using cuda::Conv2DCall;
using cuda::Cudnn;
using cuda::Pool2DCall;
using cuda::PoolKind;
using Ints = std::vector<int64_t>;

const DType kDTypes[] = {DType::f32, DType::f16, DType::bf16};

/// The device's cuDNN, or a failed test: a GPU machine is expected to have cuDNN 9.
#define SMELT_REQUIRE_CUDNN(var)                                                                   \
  SMELT_REQUIRE_GPU();                                                                             \
  Expected<Cudnn *> var##_ = Cudnn::get(**testGpu());                                              \
  ASSERT_TRUE(var##_.ok()) << var##_.message();                                                    \
  Cudnn &var = **var##_

/// Prepares `kind` of `call` for `wsBytes` of workspace and runs it once on `buffers`
/// (operands, then result).
template <typename Kind, typename Call>
Status prepareAndRun(Cudnn &cudnn, Kind kind, const Call &call, std::vector<void *> buffers,
                     const DeviceMemory &workspace, size_t wsBytes, const std::string &what) {
  Expected<std::shared_ptr<const Cudnn::Plan>> plan = cudnn.prepare(kind, call, wsBytes, what);
  if (!plan)
    return plan.status();
  return (*plan)->run(buffers.data(), workspace.pointer());
}

HostTensor asF64(const HostTensor &t) {
  return HostTensor::fromDoubles({DType::f64, t.type().shape}, t.toDoubles());
}

/// A rank-4 tensor in f64 with its dimensions permuted: result dimension i is `t`'s
/// `permutation[i]` (OHWI from HWIO is [3, 0, 1, 2], HWIO from OHWI [1, 2, 3, 0]).
HostTensor permuted(const HostTensor &t, std::array<int, 4> permutation) {
  const std::vector<int64_t> &in = t.type().shape;
  std::vector<int64_t> out(4), inStrides(4, 1);
  for (int d = 2; d >= 0; --d)
    inStrides[d] = inStrides[d + 1] * in[d + 1];
  for (int d = 0; d < 4; ++d)
    out[d] = in[permutation[d]];
  std::vector<double> from = t.toDoubles(), to;
  for (int64_t a = 0; a < out[0]; ++a)
    for (int64_t b = 0; b < out[1]; ++b)
      for (int64_t c = 0; c < out[2]; ++c)
        for (int64_t d = 0; d < out[3]; ++d) {
          int64_t index[4] = {a, b, c, d}, at = 0;
          for (int k = 0; k < 4; ++k)
            at += index[k] * inStrides[permutation[k]];
          to.push_back(from[size_t(at)]);
        }
  return HostTensor::fromDoubles({DType::f64, out}, to);
}
constexpr std::array<int, 4> kToOhwi = {3, 0, 1, 2}, kToHwio = {1, 2, 3, 0};

struct ConvCase {
  int64_t n, h, w, c, kh, kw, f;
  Ints strides, padding, dilation;
  int64_t groups = 1; // the filter is OHWI [f, kh, kw, c / groups]

  Conv2DCall call(DType dtype) const {
    Conv2DCall call;
    int64_t oh = (h + padding[0] + padding[1] - dilation[0] * (kh - 1) - 1) / strides[0] + 1;
    int64_t ow = (w + padding[2] + padding[3] - dilation[1] * (kw - 1) - 1) / strides[1] + 1;
    call.input = {dtype, {n, h, w, c}};
    call.filter = {dtype, {f, kh, kw, c / groups}};
    call.output = {dtype, {n, oh, ow, f}};
    call.strides = strides, call.padding = padding, call.dilation = dilation;
    call.groups = groups;
    return call;
  }
  Attrs attrs() const {
    return {{"strides", strides}, {"padding", padding}, {"dilation", dilation},
            {"groups", groups}};
  }
};

const ConvCase kConvCases[] = {
    // stride 2, symmetric padding (cuDNN pads by itself)
    {3, 9, 8, 5, 3, 3, 7, {2, 2}, {1, 1, 1, 1}, {1, 1}},
    // non-square filter, padding in one dimension only
    {3, 8, 7, 3, 3, 2, 6, {2, 2}, {0, 0, 1, 1}, {1, 1}},
    // dilation 2 with different padding in each dimension, non-square stride
    {3, 10, 9, 5, 3, 3, 7, {1, 2}, {2, 2, 1, 1}, {2, 2}},
    // 1x1 filter, no padding
    {3, 6, 5, 6, 1, 1, 10, {1, 1}, {0, 0, 0, 0}, {1, 1}},
};

// feature_group_count > 1: f16/bf16 with 8 channels per group may take cuDNN's NHWC kernels,
// fewer (depthwise above all) may fall back to NCHW copies (mayNeedNchw in Cudnn.cpp).
const ConvCase kGroupedConvCases[] = {
    // 3 groups of 2 input channels into 3, stride 2
    {3, 9, 8, 6, 3, 3, 9, {2, 2}, {1, 1, 1, 1}, {1, 1}, 3},
    // depthwise with 2 filters per channel, dilation 2
    {2, 10, 7, 5, 3, 2, 10, {2, 1}, {2, 2, 1, 1}, {2, 2}, 5},
    // depthwise with channels a multiple of 8 but one per group
    {2, 6, 6, 16, 3, 3, 16, {1, 1}, {1, 1, 1, 1}, {1, 1}, 16},
    // 2 groups of 8 channels into 8
    {2, 6, 5, 16, 3, 3, 16, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2},
};

/// conv2d and both gradients of `g` on the GPU against the CPU executor in f64, every dtype.
void expectConvMatchesTheCpu(Cudnn &cudnn, const ConvCase &g) {
  for (DType dtype : kDTypes) {
    Conv2DCall call = g.call(dtype);
    std::string what = fmt::format("conv2d {}", cuda::describe(call));
    HostTensor x = randomTensor(dtype, call.input.shape),
               w = randomTensor(dtype, call.filter.shape),
               dy = randomTensor(dtype, call.output.shape);
    // The CPU reference reads the filter as HWIO, and gives its gradient so.
    auto f64 = [](TensorType t) { return TensorType{DType::f64, t.shape}; };
    HostTensor hwio = permuted(w, kToHwio);
    HostTensor y64 = runOp("conv2d", {asF64(x), hwio}, f64(call.output), g.attrs());
    HostTensor dx64 = runOp("conv2d_backward_input", {asF64(dy), hwio}, f64(call.input), g.attrs());
    HostTensor dw64 = permuted(
        runOp("conv2d_backward_filter", {asF64(x), asF64(dy)}, hwio.type(), g.attrs()), kToOhwi);

    size_t wsBytes = Cudnn::workspaceBytes(call);
    DeviceMemory xs(x), ws(w), dys(dy), workspace(wsBytes), y(call.output.byteSize()),
        dx(call.input.byteSize()), dw(call.filter.byteSize());
    SMELT_ASSERT_OK(prepareAndRun(cudnn, Cudnn::ConvPass::Forward, call,
                                  {xs.pointer(), ws.pointer(), y.pointer()}, workspace, wsBytes,
                                  what));
    SMELT_ASSERT_OK(prepareAndRun(cudnn, Cudnn::ConvPass::BackwardInput, call,
                                  {dys.pointer(), ws.pointer(), dx.pointer()}, workspace, wsBytes,
                                  what));
    SMELT_ASSERT_OK(prepareAndRun(cudnn, Cudnn::ConvPass::BackwardFilter, call,
                                  {xs.pointer(), dys.pointer(), dw.pointer()}, workspace, wsBytes,
                                  what));
    // f32 must be full f32 (no TF32): the f32 tolerance, 1e-5, catches 10-bit products.
    expectClose(y.download(call.output), y64.toDoubles(), "forward " + what);
    expectClose(dx.download(call.input), dx64.toDoubles(), "input gradient " + what);
    expectClose(dw.download(call.filter), dw64.toDoubles(), "filter gradient " + what);
  }
}

TEST(CudnnGpu, ConvolutionAndBothGradientsMatchTheCpu) {
  SMELT_REQUIRE_CUDNN(cudnn);
  for (const ConvCase &g : kConvCases)
    expectConvMatchesTheCpu(cudnn, g);
}

TEST(CudnnGpu, GroupedAndDepthwiseConvolutionsAndGradientsMatchTheCpu) {
  SMELT_REQUIRE_CUDNN(cudnn);
  for (const ConvCase &g : kGroupedConvCases)
    expectConvMatchesTheCpu(cudnn, g);
}

TEST(CudnnGpu, ConvolutionWithTf32IsCloseToF32) {
  SMELT_REQUIRE_CUDNN(cudnn);
  Conv2DCall call = kConvCases[0].call(DType::f32);
  call.allowTf32 = true;
  HostTensor x = randomTensor(DType::f32, call.input.shape),
             w = randomTensor(DType::f32, call.filter.shape);
  HostTensor y64 = runOp("conv2d", {asF64(x), permuted(w, kToHwio)},
                         {DType::f64, call.output.shape}, kConvCases[0].attrs());
  size_t wsBytes = Cudnn::workspaceBytes(call);
  DeviceMemory xs(x), ws(w), workspace(wsBytes), y(call.output.byteSize());
  SMELT_ASSERT_OK(prepareAndRun(cudnn, Cudnn::ConvPass::Forward, call,
                                {xs.pointer(), ws.pointer(), y.pointer()}, workspace, wsBytes,
                                "conv2d tf32"));
  expectClose(y.download(call.output), y64.toDoubles(), "conv2d tf32", 5e-3);
}

TEST(CudnnGpu, ConvolutionRejectsASmallWorkspaceNamingTheOp) {
  SMELT_REQUIRE_CUDNN(cudnn);
  // f16 with 3 channels: room for NCHW copies is part of the workspace.
  Conv2DCall call = kConvCases[1].call(DType::f16);
  Status status =
      cudnn.prepare(Cudnn::ConvPass::Forward, call, 64, "conv2d at model.mlir:3:7").status();
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message().rfind("conv2d at model.mlir:3:7: the workspace (64 bytes)", 0), 0u)
      << status.message();
}

struct PoolCase {
  int64_t n, h, w, c;
  Ints window, strides, padding;

  Pool2DCall call(PoolKind kind, DType dtype) const {
    Pool2DCall call;
    call.kind = kind;
    call.input = {dtype, {n, h, w, c}};
    call.output = {dtype,
                   {n, (h + padding[0] + padding[1] - window[0]) / strides[0] + 1,
                    (w + padding[2] + padding[3] - window[1]) / strides[1] + 1, c}};
    call.window = window, call.strides = strides, call.padding = padding;
    return call;
  }
  Attrs attrs() const { return {{"window", window}, {"strides", strides}, {"padding", padding}}; }
};

// At most 512 elements each: see tieFree().
const PoolCase kPoolCases[] = {
    {3, 7, 6, 4, {3, 3}, {2, 2}, {1, 1, 1, 1}}, // overlapping windows, padding all round
    {3, 8, 5, 3, {2, 3}, {2, 1}, {1, 1, 0, 0}}, // non-square window and strides
    {2, 6, 6, 5, {2, 2}, {2, 2}, {0, 0, 0, 0}}, // no padding
};

/// Random values without ties, so that "the first maximum" and cuDNN's choice agree: a shuffle
/// of +-1/64 .. +-256/64, exact in f16 and bf16 alike (integers up to 256 are).
HostTensor tieFree(DType dtype, const Ints &shape) {
  std::vector<double> values;
  for (int i = 1; i <= 256; ++i)
    values.insert(values.end(), {i / 64.0, -i / 64.0});
  std::shuffle(values.begin(), values.end(), rng());
  size_t next = 0;
  return randomTensor(dtype, shape, [&] { return values.at(next++); });
}

TEST(CudnnGpu, PoolingAndGradientsMatchTheCpu) {
  SMELT_REQUIRE_CUDNN(cudnn);
  for (const PoolCase &g : kPoolCases)
    for (PoolKind kind : {PoolKind::Max, PoolKind::Avg})
      for (DType dtype : kDTypes) {
        Pool2DCall call = g.call(kind, dtype);
        std::string what = cuda::describe(call);
        std::string op = kind == PoolKind::Max ? "max_pool2d" : "avg_pool2d";
        HostTensor x = tieFree(dtype, call.input.shape),
                   dy = randomTensor(dtype, call.output.shape);
        HostTensor y64 = runOp(op, {asF64(x)}, {DType::f64, call.output.shape}, g.attrs());
        std::vector<HostTensor> backwardInputs = {asF64(dy)};
        if (kind == PoolKind::Max)
          backwardInputs.insert(backwardInputs.begin(), asF64(x));
        HostTensor dx64 =
            runOp(op + "_backward", backwardInputs, {DType::f64, call.input.shape}, g.attrs());

        size_t wsBytes = Cudnn::workspaceBytes(call);
        DeviceMemory xs(x), dys(dy), workspace(wsBytes), y(call.output.byteSize()),
            dx(call.input.byteSize());
        SMELT_ASSERT_OK(prepareAndRun(cudnn, /*backward=*/false, call, {xs.pointer(), y.pointer()},
                                      workspace, wsBytes, what));
        // Avg's gradient takes no input.
        std::vector<void *> backward = {dys.pointer(), dx.pointer()};
        if (kind == PoolKind::Max)
          backward.insert(backward.begin(), xs.pointer());
        SMELT_ASSERT_OK(
            prepareAndRun(cudnn, /*backward=*/true, call, backward, workspace, wsBytes, what));
        // A max is one of the inputs: exact in every dtype.
        expectClose(y.download(call.output), y64.toDoubles(), "forward " + what,
                    kind == PoolKind::Max ? 0 : -1);
        expectClose(dx.download(call.input), dx64.toDoubles(), "gradient " + what);
      }
}

// ---------------------------------------------------------------------------------------------
// Without a GPU
// ---------------------------------------------------------------------------------------------

/// The message of validate(), "" when it passes.
template <typename Call> std::string validateError(const Call &call) {
  Status status = Cudnn::validate(call, "op at model.mlir:1:2");
  return status.ok() ? "" : status.message();
}

TEST(CudnnValidation, AcceptsTheTestedCalls) {
  for (DType dtype : kDTypes) {
    for (const ConvCase &g : kConvCases)
      EXPECT_EQ(validateError(g.call(dtype)), "");
    for (const ConvCase &g : kGroupedConvCases)
      EXPECT_EQ(validateError(g.call(dtype)), "");
    for (const PoolCase &g : kPoolCases)
      for (PoolKind kind : {PoolKind::Max, PoolKind::Avg})
        EXPECT_EQ(validateError(g.call(kind, dtype)), "");
  }
}

TEST(CudnnValidation, ConvShapeErrorsNameTheOperandAndShape) {
  Conv2DCall good = kConvCases[0].call(DType::f32);

  Conv2DCall channels = good;
  channels.filter.shape[3] = 4;
  EXPECT_EQ(validateError(channels),
            "op at model.mlir:1:2: filter tensor<7x3x3x4xf32> (OHWI) has 4 input channels but "
            "input tensor<3x9x8x5xf32> (NHWC) has 5");

  Conv2DCall output = good;
  output.output.shape[1] += 1;
  EXPECT_EQ(validateError(output), "op at model.mlir:1:2: output tensor<3x6x4x7xf32> should be "
                                   "tensor<3x5x4x7xf32> for input tensor<3x9x8x5xf32> and filter "
                                   "tensor<7x3x3x5xf32>");

  Conv2DCall dtype = good;
  dtype.filter.dtype = DType::f16;
  EXPECT_NE(validateError(dtype).find("filter tensor<7x3x3x5xf16> must have the element type of "
                                      "the input, f32"),
            std::string::npos)
      << validateError(dtype);

  Conv2DCall rank = good;
  rank.input.shape = {9, 8, 5};
  EXPECT_NE(validateError(rank).find("input tensor<9x8x5xf32> must be NHWC (rank 4)"),
            std::string::npos)
      << validateError(rank);

  Conv2DCall dilation = good;
  dilation.dilation = {2};
  EXPECT_NE(validateError(dilation).find("dilation [2] must be 2 positive integers"),
            std::string::npos)
      << validateError(dilation);

  Conv2DCall tooBig = good;
  tooBig.filter.shape[1] = 12;
  EXPECT_NE(validateError(tooBig).find("does not fit in input tensor<3x9x8x5xf32>"),
            std::string::npos)
      << validateError(tooBig);

  Conv2DCall ints = good;
  ints.input.dtype = ints.filter.dtype = ints.output.dtype = DType::i32;
  EXPECT_NE(validateError(ints).find("must be a float tensor"), std::string::npos)
      << validateError(ints);
}

// The convolution descriptor pads both sides alike: an asymmetric padding is the compiler's to
// make explicit (smelt-gpu-conv-layouts), and a call that still has one is refused.
TEST(CudnnValidation, AsymmetricConvolutionPaddingIsRefused) {
  Conv2DCall call = kConvCases[0].call(DType::f32);
  call.padding = {0, 2, 1, 1};
  EXPECT_EQ(validateError(call),
            "op at model.mlir:1:2: not supported by cuDNN: asymmetric padding [0, 2, 1, 1]: the "
            "convolution descriptor pads both sides alike (smelt-gpu-conv-layouts pads the input "
            "explicitly)");
}

TEST(CudnnValidation, GroupCountErrorsNameTheCountAndTheChannels) {
  Conv2DCall good = kGroupedConvCases[0].call(DType::f32); // 6 channels into 9 in 3 groups
  EXPECT_NE(cuda::describe(good).find("dilation [1, 1] groups 3"), std::string::npos)
      << cuda::describe(good);

  Conv2DCall four = good;
  four.groups = 4;
  four.filter.shape[3] = 1;
  EXPECT_EQ(validateError(four),
            "op at model.mlir:1:2: feature_group_count 4 must be positive and divide the 6 "
            "channels of input tensor<3x9x8x6xf32> (NHWC) and the 9 output channels of filter "
            "tensor<9x3x3x1xf32> (OHWI)");
  Conv2DCall zero = good;
  zero.groups = 0;
  EXPECT_NE(validateError(zero).find("feature_group_count 0 must be positive"),
            std::string::npos)
      << validateError(zero);

  // The filter of the ungrouped convolution, given with 3 groups.
  Conv2DCall ungroupedFilter = good;
  ungroupedFilter.filter.shape[3] = 6;
  EXPECT_EQ(validateError(ungroupedFilter),
            "op at model.mlir:1:2: filter tensor<9x3x3x6xf32> (OHWI) has 6 input channels per "
            "group but input tensor<3x9x8x6xf32> (NHWC) has 6 in 3 groups, 2 per group");
}

TEST(CudnnValidation, PoolShapeErrorsNameTheOperandAndShape) {
  Pool2DCall good = kPoolCases[0].call(PoolKind::Max, DType::bf16);
  Pool2DCall output = good;
  output.output.shape[3] = 5;
  EXPECT_EQ(validateError(output), "op at model.mlir:1:2: output tensor<3x4x3x5xbf16> should be "
                                   "tensor<3x4x3x4xbf16> for input tensor<3x7x6x4xbf16>");
  Pool2DCall window = good;
  window.window = {3, 0};
  EXPECT_NE(validateError(window).find("window [3, 0] must be 2 positive integers"),
            std::string::npos)
      << validateError(window);
  Pool2DCall padding = good;
  padding.padding = {1, 1, -1, 1};
  EXPECT_NE(validateError(padding).find("padding [1, 1, -1, 1] must be 4 non-negative"),
            std::string::npos)
      << validateError(padding);
}

TEST(CudnnValidation, UnsupportedCallsSayWhySoPlacementCanFallBack) {
  // Asymmetric convolution padding is supported (a padded copy); f64 is not.
  EXPECT_EQ(cuda::cudnnUnsupported(kConvCases[1].call(DType::f32)), "");
  std::string f64 = cuda::cudnnUnsupported(kConvCases[0].call(DType::f64));
  EXPECT_NE(f64.find("f64 on cuDNN"), std::string::npos) << f64;
  EXPECT_NE(validateError(kConvCases[0].call(DType::f64)).find("not supported by cuDNN: f64"),
            std::string::npos);

  PoolCase asymmetric{1, 6, 6, 2, {2, 2}, {2, 2}, {0, 1, 0, 1}};
  std::string pool = cuda::cudnnUnsupported(asymmetric.call(PoolKind::Avg, DType::f32));
  EXPECT_NE(pool.find("asymmetric padding [0, 1, 0, 1]"), std::string::npos) << pool;
  PoolCase wide{1, 6, 6, 2, {2, 2}, {1, 1}, {2, 2, 0, 0}};
  EXPECT_NE(cuda::cudnnUnsupported(wide.call(PoolKind::Max, DType::f16)).find("window"),
            std::string::npos);
  // Invalid is not unsupported: validate() explains those.
  Conv2DCall invalid = kConvCases[0].call(DType::f64);
  invalid.output.shape[0] = 1;
  EXPECT_EQ(cuda::cudnnUnsupported(invalid), "");
}

// A call in NHWC copies nothing: its workspace is the algorithm's. f16/bf16 channels cuDNN's
// NHWC kernels may not take (5 into 7 here) add room for NCHW copies of all three tensors.
TEST(CudnnValidation, WorkspaceCoversTheNchwCopies) {
  Conv2DCall f32 = kConvCases[0].call(DType::f32);
  EXPECT_EQ(Cudnn::workspaceBytes(f32), Cudnn::kAlgorithmWorkspaceBytes);
  Conv2DCall f16 = kConvCases[0].call(DType::f16);
  EXPECT_GE(Cudnn::workspaceBytes(f16), Cudnn::kAlgorithmWorkspaceBytes + f16.filter.byteSize() +
                                            f16.input.byteSize() + f16.output.byteSize());
  Pool2DCall max = kPoolCases[0].call(PoolKind::Max, DType::f32);
  EXPECT_GE(Cudnn::workspaceBytes(max), max.output.byteSize());
  EXPECT_EQ(Cudnn::workspaceBytes(kPoolCases[0].call(PoolKind::Avg, DType::f32)), 0u);
}

} // namespace
} // namespace smelt::rt::test
