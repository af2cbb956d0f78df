// Pooling: max and avg forward on oneDNN for f32 (f16/bf16 staged through f32), plain loops in
// double for f64; both gradients are plain loops in double, staged for every other dtype.
#include "runtime/Parallel.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/OneDnn.h"
#include "runtime/cpu/Staging.h"
#include "runtime/cpu/Window.h"

#include <fmt/format.h>

namespace smelt::rt::cpu {

namespace {

using dnnl::memory;

Expected<Window2D> poolGeometry(const Step &step, const TensorType &input,
                                const TensorType &output) {
  const PoolParams &params = std::get<PoolParams>(step.params); // lengths checked on load
  const std::vector<int64_t> &window = params.window, &strides = params.strides,
                             &padding = params.padding;
  auto bad = [&](const char *why) {
    return Status::error(fmt::format("{}: input {} and output {}: {}", describe(step),
                                     input.str(), output.str(), why));
  };
  if (input.shape.size() != 4 || output.shape.size() != 4 || !isFloat(input.dtype) ||
      input.dtype != output.dtype)
    return bad("pooling needs rank-4 NHWC tensors of one float dtype");
  Window2D g{input.shape[0], input.shape[1], input.shape[2], input.shape[3], window[0],
             window[1], input.shape[3], output.shape[1], output.shape[2], strides[0],
             strides[1], padding[0], padding[1], padding[2], padding[3]};
  if (g.kh < 1 || g.kw < 1 || g.sh < 1 || g.sw < 1 || g.pt < 0 || g.pb < 0 || g.pl < 0 ||
      g.pr < 0)
    return bad("window and strides must be >= 1 and padding >= 0");
  // A window lying wholly in the padding would have no max and nothing to average.
  if (g.pt >= g.kh || g.pb >= g.kh || g.pl >= g.kw || g.pr >= g.kw)
    return bad("padding must be smaller than the window");
  if (g.h + g.pt + g.pb < g.kh || g.w + g.pl + g.pr < g.kw ||
      output.shape[0] != g.n || output.shape[3] != g.c ||
      g.oh != (g.h + g.pt + g.pb - g.kh) / g.sh + 1 || g.ow != (g.w + g.pl + g.pr - g.kw) / g.sw + 1)
    return bad("the output size does not follow from the window");
  return g;
}

Expected<Kernel> forward(const Step &step, const StepTypes &types, bool isMax) {
  SMELT_ASSIGN_OR_RETURN(Window2D g, poolGeometry(step, types.operands[0], types.result));
  if (types.result.dtype == DType::f64)
    return Kernel([g, isMax](const void *const *in, void *out) {
      poolForward(isMax, g, static_cast<const double *>(in[0]), static_cast<double *>(out));
    });
  memory::desc src({g.n, g.c, g.h, g.w}, memory::data_type::f32, memory::format_tag::nhwc);
  memory::desc dst({g.n, g.c, g.oh, g.ow}, memory::data_type::f32, memory::format_tag::nhwc);
  SMELT_ASSIGN_OR_RETURN(
      PrimitivePerThreads primitive,
      PrimitivePerThreads::create(describe(step), [=]() -> dnnl::primitive {
        return dnnl::pooling_forward(dnnl::pooling_forward::primitive_desc(
            dnnl::pooling_forward::desc(dnnl::prop_kind::forward_inference,
                                        isMax ? dnnl::algorithm::pooling_max
                                              : dnnl::algorithm::pooling_avg_exclude_padding,
                                        src, dst, {g.sh, g.sw}, {g.kh, g.kw}, {g.pt, g.pl},
                                        {g.pb, g.pr}),
            oneDnnEngine()));
      }));
  Kernel kernel = [primitive, src, dst](const void *const *in, void *out) {
    memory x(src, oneDnnEngine(), const_cast<void *>(in[0])), y(dst, oneDnnEngine(), out);
    primitive.current().execute(oneDnnStream(), {{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, y}});
    oneDnnStream().wait();
  };
  return stagedThrough(DType::f32, kernel, types);
}

Expected<Kernel> backward(const Step &step, const StepTypes &types, bool isMax) {
  // max: (input, grad_output) -> grad_input; avg: (grad_output) -> grad_input (counts and the
  // gradient's type checked by the family, StepOps.cpp).
  const TensorType &gradOutput = types.operands[isMax ? 1 : 0];
  SMELT_ASSIGN_OR_RETURN(Window2D g, poolGeometry(step, types.result, gradOutput));
  // Natively in f32 (a copy to f64 and back cost more than the loops), otherwise in f64;
  // parallel over the batch, whose entries write disjoint parts of the gradient.
  auto inType = [&](auto zero) {
    using T = decltype(zero);
    return Kernel([g, isMax](const void *const *in, void *out) {
      const T *x = isMax ? static_cast<const T *>(in[0]) : nullptr;
      const T *dy = static_cast<const T *>(in[isMax ? 1 : 0]);
      parallelFor(g.n, [&](int64_t b0, int64_t b1) {
        poolBackward<T>(isMax, g, x, dy, static_cast<T *>(out), b0, b1);
      });
    });
  };
  if (types.result.dtype == DType::f32)
    return inType(0.0f);
  return stagedThrough(DType::f64, inType(0.0), types);
}

} // namespace

Expected<Kernel> preparePooling(const Step &step, const StepTypes &types) {
  if (step.op == StepOp::MaxPool2D || step.op == StepOp::AvgPool2D)
    return forward(step, types, step.op == StepOp::MaxPool2D);
  return backward(step, types, step.op == StepOp::MaxPool2DBackward);
}

} // namespace smelt::rt::cpu
