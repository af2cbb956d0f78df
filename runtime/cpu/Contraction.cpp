// Contractions: matmul and conv2d (forward, backward input, backward filter; grouped and
// depthwise too). f32 runs on oneDNN primitives built once per step (a matmul of a few rows,
// a matrix-vector product, on oneDNN's sgemm), a convolution's filter and a matmul's constant
// weights in the layout the primitive chose (constants reordered once, at preparation);
// f16/bf16 stage through f32; f64, which oneDNN lacks, runs plain loops in double (it serves
// reference and gradient checks, not speed). A matmul's or conv2d's epilogue
// (bias, then activation) is oneDNN's bias argument and an eltwise post-op, applied before the
// primitive stores its result; the f64 loops apply it after.
#include "runtime/DTypeDispatch.h"
#include "runtime/StepOps.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/OneDnn.h"
#include "runtime/cpu/Staging.h"
#include "runtime/cpu/Window.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include <sys/mman.h>
#include <unistd.h>

namespace smelt::rt::cpu {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

/// Asks the kernel to reclaim the pages wholly inside [data, data + size). Constant weights laid
/// out anew are not read again, and their pages (most often mapped from the model's file) would
/// count twice in the process's resident memory. MADV_PAGEOUT never loses data: file pages are
/// read again and anonymous ones swapped in, should anything touch them; a kernel without it
/// (before Linux 5.4) refuses the hint, which changes nothing.
void releaseResidentPages(const void *data, size_t size) {
  uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  uintptr_t begin = (uintptr_t(data) + page - 1) & ~(page - 1);
  uintptr_t end = (uintptr_t(data) + size) & ~(page - 1);
  if (begin < end)
    madvise(reinterpret_cast<void *>(begin), end - begin, MADV_PAGEOUT);
}

/// The fewest rows (batch x m) of a matmul whose constant weights take the layout its primitive
/// chooses (below, they are read in place).
constexpr int64_t kRowsForChosenLayout = 16;

/// The most rows of a matmul that runs as oneDNN's sgemm rather than its matmul primitive.
constexpr int64_t kRowsForSgemm = 8;

/// A 2-D f32 matmul of at most kRowsForSgemm rows without an activation, through oneDNN's
/// BLAS-style sgemm: a matrix-vector product, bound by reading the weights. oneDNN 2.7's sgemm
/// has gemv kernels that its matmul primitive does not use: on this project's 2-core machine,
/// [m, 256] x [256, 1024] took 9 us at m = 1 against the primitive's 27, 29 against 38 at
/// m = 8, and 51 against 48 at m = 16 (an LSTM's step; bench/RESULTS.md, thirty-third
/// session). A bias is copied into each row of the result first, which sgemm then adds to.
Kernel fewRowsMatmul(MatmulShape shape, bool transposeLhs, bool transposeRhs, bool bias) {
  return [=](const void *const *in, void *out) {
    float *result = static_cast<float *>(out);
    if (bias)
      for (int64_t i = 0; i < shape.m; ++i)
        std::copy_n(static_cast<const float *>(in[2]), shape.n, result + i * shape.n);
    // Row-major, as Smelt's tensors; a leading dimension of at least 1 even for empty ones.
    dnnl_sgemm(
        transposeLhs ? 'T' : 'N', transposeRhs ? 'T' : 'N', shape.m, shape.n, shape.k, 1.f,
        static_cast<const float *>(in[0]), std::max<int64_t>(1, transposeLhs ? shape.m : shape.k),
        static_cast<const float *>(in[1]), std::max<int64_t>(1, transposeRhs ? shape.k : shape.n),
        bias ? 1.f : 0.f, result, std::max<int64_t>(1, shape.n));
  };
}

/// A convolution's filter or a matmul's constant weights in the layout the primitive chose.
/// The primitive is made with that layout left to oneDNN (format `any`): its fast kernels,
/// depthwise convolutions' above all, read blocked layouts, and given Smelt's plain HWIO filter
/// oneDNN 2.6 falls back to a gemm convolution several times slower. So the weights are
/// reordered into that layout before the call (convolution forward and backward-input, matmul)
/// or out of it after (the backward-filter writes them). Constant weights are reordered once per
/// primitive, when first needed (the first at preparation), and kept.
class ChosenWeightsLayout {
public:
  /// `plain` describes Smelt's weights, which are the primitive's argument `arg`
  /// (DNNL_ARG_WEIGHTS, read, or DNNL_ARG_DIFF_WEIGHTS, written); `constant` their bytes when
  /// they are a constant.
  ChosenWeightsLayout(memory::desc plain, int arg, const void *constant)
      : state_(std::make_shared<State>()) {
    state_->plain = plain;
    state_->arg = arg;
    state_->constant = constant;
  }

  /// The primitive argument the weights are.
  int arg() const { return state_->arg; }
  bool written() const { return state_->arg == DNNL_ARG_DIFF_WEIGHTS; }

  /// The weights' memory for a call of `primitive` on `filter` (Smelt's layout), reordered in
  /// if the primitive reads them. `finish` then reorders written weights back out.
  memory in(const dnnl::primitive &primitive, void *filter) const {
    Entry &e = entry(primitive);
    memory user(state_->plain, oneDnnEngine(), filter);
    if (e.same)
      return user;
    if (!written() && !(state_->constant && e.packed)) {
      // oneDNN's CPU stream runs the reorder before execute() returns.
      dnnl::reorder(user, e.chosen).execute(oneDnnStream(), user, e.chosen);
      e.packed = state_->constant != nullptr;
      if (e.packed)
        releaseResidentPages(state_->constant, state_->plain.get_size());
    }
    return e.chosen;
  }
  void finish(const dnnl::primitive &primitive, void *filter) const {
    Entry &e = entry(primitive);
    if (e.same)
      return;
    memory user(state_->plain, oneDnnEngine(), filter);
    dnnl::reorder(e.chosen, user).execute(oneDnnStream(), e.chosen, user);
  }
  /// Packs the constant weights for `primitive` now, at preparation.
  void prepack(const dnnl::primitive &primitive) const {
    if (state_->constant) {
      in(primitive, const_cast<void *>(state_->constant));
      oneDnnStream().wait();
    }
  }

private:
  struct Entry {
    bool same = true; // the primitive reads Smelt's layout itself
    memory chosen;    // otherwise the filter in its layout
    bool packed = false;
  };
  struct State {
    memory::desc plain;
    int arg = DNNL_ARG_WEIGHTS;
    const void *constant = nullptr;
    std::mutex mutex;
    std::map<dnnl_primitive_t, Entry> byPrimitive; // one primitive per thread count
  };

  Entry &entry(const dnnl::primitive &primitive) const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto [it, added] = state_->byPrimitive.try_emplace(primitive.get());
    if (added) {
      const dnnl_memory_desc_t *chosen = dnnl_primitive_desc_query_md(
          primitive.get_primitive_desc(),
          written() ? dnnl_query_diff_weights_md : dnnl_query_weights_md, 0);
      memory::desc desc(*chosen);
      it->second.same = desc == state_->plain;
      if (!it->second.same)
        it->second.chosen = memory(desc, oneDnnEngine());
    }
    return it->second;
  }

  std::shared_ptr<State> state_;
};

/// Wraps a primitive and its argument slots into a Kernel: `slots[i]` is the DNNL_ARG of
/// operand i; the result goes to `result`. The operand or result that is `layout`'s argument
/// goes through it (ChosenWeightsLayout); the others are read and written in place.
Kernel primitiveKernel(PrimitivePerThreads primitive,
                       std::vector<std::pair<int, memory::desc>> slots,
                       std::pair<int, memory::desc> result,
                       std::optional<ChosenWeightsLayout> layout = std::nullopt) {
  return [=](const void *const *in, void *out) {
    const dnnl::primitive &p = primitive.current();
    auto bind = [&](const std::pair<int, memory::desc> &slot, const void *data) {
      return layout && layout->arg() == slot.first
                 ? layout->in(p, const_cast<void *>(data))
                 : memory(slot.second, oneDnnEngine(), const_cast<void *>(data));
    };
    std::unordered_map<int, memory> args;
    for (size_t i = 0; i < slots.size(); ++i)
      args.emplace(slots[i].first, bind(slots[i], in[i]));
    args.emplace(result.first, bind(result, out));
    p.execute(oneDnnStream(), args);
    if (layout && layout->arg() == result.first)
      layout->finish(p, out);
    oneDnnStream().wait();
  };
}

/// The epilogue as oneDNN primitive attributes: the activation as an eltwise post-op with
/// oneDNN's definitions of relu (alpha 0), tanh, logistic, clip to [0, 6], hardswish
/// (x * relu6(x + 3) / 6) and swish (alpha 1), which are Smelt's.
dnnl::primitive_attr postOps(Activation activation) {
  dnnl::primitive_attr attr;
  if (activation == Activation::none)
    return attr;
  dnnl::post_ops ops;
  ops.append_eltwise(1.f,
                     activation == Activation::relu        ? dnnl::algorithm::eltwise_relu
                     : activation == Activation::tanh      ? dnnl::algorithm::eltwise_tanh
                     : activation == Activation::logistic  ? dnnl::algorithm::eltwise_logistic
                     : activation == Activation::relu6     ? dnnl::algorithm::eltwise_clip
                     : activation == Activation::swish     ? dnnl::algorithm::eltwise_swish
                                                           : dnnl::algorithm::eltwise_hardswish,
                     activation == Activation::swish ? 1.f : 0.f, // swish: x * logistic(1 * x)
                     activation == Activation::relu6 ? 6.f : 0.f);
  attr.set_post_ops(ops);
  return attr;
}

/// The epilogue in double, on `count` results whose last dimension is `n` (the f64 loops).
void applyEpilogue(Epilogue epilogue, const double *bias, double *y, int64_t count, int64_t n) {
  for (int64_t i = 0; i < count; ++i) {
    double v = y[i] + (epilogue.bias ? bias[i % n] : 0.0);
    switch (epilogue.activation) {
    case Activation::none:
      break;
    case Activation::relu:
      v = std::max(v, 0.0);
      break;
    case Activation::tanh:
      v = std::tanh(v);
      break;
    case Activation::logistic:
      v = 1 / (1 + std::exp(-v));
      break;
    case Activation::relu6:
      v = std::min(std::max(v, 0.0), 6.0);
      break;
    case Activation::hardswish:
      v = v * std::min(std::max(v / 6 + 0.5, 0.0), 1.0);
      break;
    case Activation::swish:
      v = v / (1 + std::exp(-v));
      break;
    }
    y[i] = v;
  }
}

Expected<Kernel> matmul(const Step &step, const StepTypes &types) {
  const MatmulParams &params = std::get<MatmulParams>(step.params);
  Epilogue epilogue = params.epilogue;
  bool tl = params.transposeLhs, tr = params.transposeRhs;
  const TensorType &a = types.operands[0];
  SMELT_ASSIGN_OR_RETURN(MatmulShape shape, matmulShape(step, types.operands, types.result));
  if (!isFloat(a.dtype))
    return Status::error(
        fmt::format("{}: oneDNN matmuls take floats, not {}", describe(step), dtypeName(a.dtype)));
  int64_t batch = shape.batch, m = shape.m, k = shape.k, n = shape.n;
  if (a.dtype == DType::f64) {
    return Kernel([=](const void *const *in, void *out) {
      const double *x = static_cast<const double *>(in[0]), *y = static_cast<const double *>(in[1]);
      double *z = static_cast<double *>(out);
      for (int64_t p = 0; p < batch; ++p)
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double s = 0;
            for (int64_t q = 0; q < k; ++q)
              s += x[p * m * k + (tl ? q * m + i : i * k + q)] *
                   y[p * k * n + (tr ? j * k + q : q * n + j)];
            z[p * m * n + i * n + j] = s;
          }
      applyEpilogue(epilogue, epilogue.bias ? static_cast<const double *>(in[2]) : nullptr, z,
                    batch * m * n, n);
    });
  }
  if (batch == 1 && m <= kRowsForSgemm && epilogue.activation == Activation::none)
    return stagedThrough(DType::f32, fewRowsMatmul(shape, tl, tr, epilogue.bias), types);
  // Transposes are strides, not copies.
  memory::desc lhs({batch, m, k}, memory::data_type::f32,
                   tl ? memory::dims{m * k, 1, m} : memory::dims{m * k, k, 1});
  memory::desc rhs({batch, k, n}, memory::data_type::f32,
                   tr ? memory::dims{k * n, 1, k} : memory::dims{k * n, n, 1});
  memory::desc dst({batch, m, n}, memory::data_type::f32, memory::dims{m * n, n, 1});
  memory::desc bias({1, 1, n}, memory::data_type::f32, memory::dims{n, n, 1});
  // Constant weights (a model's layers) are laid out once in the format the primitive
  // chooses, as a convolution's filter is (ChosenWeightsLayout); others are read in place. Not
  // for a matmul of a few rows: an unrolled LSTM's steps ([1, 256] x [256, 1024] each, 512 of
  // them over four weight matrices) took 110 us each over the chosen layout, 55 over the plain
  // one; alone, and from 16 rows on, both take the same time.
  const void *constantRhs =
      a.dtype == DType::f32 && batch * m >= kRowsForChosenLayout ? types.constant(1) : nullptr;
  memory::desc rhsRead =
      constantRhs ? memory::desc({batch, k, n}, memory::data_type::f32, Tag::any) : rhs;
  SMELT_ASSIGN_OR_RETURN(
      PrimitivePerThreads primitive,
      PrimitivePerThreads::create(describe(step), [=]() -> dnnl::primitive {
        return dnnl::matmul(dnnl::matmul::primitive_desc(
            epilogue.bias ? dnnl::matmul::desc(lhs, rhsRead, bias, dst)
                          : dnnl::matmul::desc(lhs, rhsRead, dst),
            postOps(epilogue.activation), oneDnnEngine()));
      }));
  std::optional<ChosenWeightsLayout> weights;
  if (constantRhs) {
    weights.emplace(rhs, DNNL_ARG_WEIGHTS, constantRhs);
    SMELT_RETURN_IF_ERROR(
        oneDnnChecked(describe(step), [&] { weights->prepack(primitive.current()); }));
  }
  std::vector<std::pair<int, memory::desc>> slots{{DNNL_ARG_SRC, lhs}, {DNNL_ARG_WEIGHTS, rhs}};
  if (epilogue.bias)
    slots.push_back({DNNL_ARG_BIAS, bias});
  return stagedThrough(DType::f32, primitiveKernel(primitive, slots, {DNNL_ARG_DST, dst}, weights),
                       types);
}

/// The convolution geometry of a step, whichever of the three tensors is its result.
Expected<Window2D> convGeometry(const Step &step, const StepTypes &types, ConvMode mode) {
  const ConvParams &params = std::get<ConvParams>(step.params); // lengths checked on load
  const std::vector<int64_t> &strides = params.strides, &padding = params.padding,
                             &dilation = params.dilation;
  const TensorType &input = mode == ConvMode::BackwardInput ? types.result : types.operands[0];
  const TensorType &filter = mode == ConvMode::Forward         ? types.operands[1]
                             : mode == ConvMode::BackwardInput ? types.operands[1]
                                                               : types.result;
  const TensorType &output = mode == ConvMode::Forward         ? types.result
                             : mode == ConvMode::BackwardInput ? types.operands[0]
                                                               : types.operands[1];
  auto bad = [&](const std::string &why) {
    return Status::error(fmt::format("{}: input {}, filter {}, output {}: {}", describe(step),
                                     input.str(), filter.str(), output.str(), why));
  };
  if (input.shape.size() != 4 || filter.shape.size() != 4 || output.shape.size() != 4)
    return bad("NHWC input and output and HWIO or OHWI filter must be rank 4");
  std::vector<int64_t> k = params.hwioDims(filter.shape);
  Window2D g{input.shape[0],
             input.shape[1],
             input.shape[2],
             input.shape[3],
             k[0],
             k[1],
             k[3],
             output.shape[1],
             output.shape[2],
             strides[0],
             strides[1],
             padding[0],
             padding[1],
             padding[2],
             padding[3],
             dilation[0],
             dilation[1],
             params.groups,
             params.filterLayout == FilterLayout::ohwi};
  if (g.groups < 1 || g.c % g.groups != 0 || g.f % g.groups != 0)
    return bad(fmt::format("{} feature groups do not divide {} channels into {} filters",
                           g.groups, g.c, g.f));
  if (k[2] * g.groups != g.c || output.shape[0] != g.n || output.shape[3] != g.f || g.sh < 1 ||
      g.sw < 1 || g.dh < 1 || g.dw < 1 || g.pt < 0 || g.pb < 0 || g.pl < 0 || g.pr < 0)
    return bad("shapes or window attributes do not agree");
  int64_t eh = g.dh * (g.kh - 1) + 1, ew = g.dw * (g.kw - 1) + 1;
  if (g.h + g.pt + g.pb < eh || g.w + g.pl + g.pr < ew ||
      g.oh != (g.h + g.pt + g.pb - eh) / g.sh + 1 || g.ow != (g.w + g.pl + g.pr - ew) / g.sw + 1)
    return bad("the output size does not follow from the window");
  for (const TensorType &t : types.operands)
    if (t.dtype != types.result.dtype || !isFloat(t.dtype))
      return bad("operands and result need one float dtype");
  return g;
}

Expected<Kernel> conv(const Step &step, const StepTypes &types, ConvMode mode) {
  SMELT_ASSIGN_OR_RETURN(Window2D g, convGeometry(step, types, mode));
  Epilogue epilogue = step.epilogue(); // only on conv2d (validateDataflow)
  if (types.result.dtype == DType::f64) {
    return Kernel([g, mode, epilogue](const void *const *in, void *out) {
      auto *a = const_cast<double *>(static_cast<const double *>(in[0]));
      auto *b = const_cast<double *>(static_cast<const double *>(in[1]));
      auto *r = static_cast<double *>(out);
      // The loops read two of x, w, y and accumulate into the third (the result).
      if (mode == ConvMode::Forward) {
        convLoops(mode, g, a, b, r);
        applyEpilogue(epilogue, epilogue.bias ? static_cast<const double *>(in[2]) : nullptr, r,
                      g.n * g.oh * g.ow * g.f, g.f);
      } else if (mode == ConvMode::BackwardInput)
        convLoops(mode, g, r, b, a);
      else
        convLoops(mode, g, a, r, b);
    });
  }
  memory::desc src({g.n, g.c, g.h, g.w}, memory::data_type::f32, Tag::nhwc);
  memory::desc dst({g.n, g.f, g.oh, g.ow}, memory::data_type::f32, Tag::nhwc);
  memory::desc bias({g.f}, memory::data_type::f32, Tag::x);
  // Smelt's HWIO filter [KH, KW, C/G, F] is oneDNN's grouped (G, F/G, C/G, KH, KW) in hwigo
  // order, or (F, C, KH, KW) in hwio order for one group; OHWI [F, KH, KW, C/G] is gohwi, or
  // ohwi.
  memory::dims filterDims = g.groups == 1
                                ? memory::dims{g.f, g.c, g.kh, g.kw}
                                : memory::dims{g.groups, g.f / g.groups, g.c / g.groups, g.kh, g.kw};
  Tag filterTag =
      g.groups == 1 ? (g.ohwi ? Tag::ohwi : Tag::hwio) : (g.ohwi ? Tag::gohwi : Tag::hwigo);
  memory::desc weights(filterDims, memory::data_type::f32, filterTag);
  memory::desc anyWeights(filterDims, memory::data_type::f32, Tag::any);
  memory::dims strides{g.sh, g.sw}, dilates{g.dh - 1, g.dw - 1}, padL{g.pt, g.pl},
      padR{g.pb, g.pr};
  SMELT_ASSIGN_OR_RETURN(
      PrimitivePerThreads primitive,
      PrimitivePerThreads::create(describe(step), [=]() -> dnnl::primitive {
        auto algorithm = dnnl::algorithm::convolution_direct;
        dnnl::convolution_forward::primitive_desc forward(
            dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algorithm, src,
                                            anyWeights, dst, strides, dilates, padL, padR),
            oneDnnEngine());
        if (mode == ConvMode::Forward && epilogue.any())
          return dnnl::convolution_forward(dnnl::convolution_forward::primitive_desc(
              epilogue.bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                              algorithm, src, anyWeights, bias, dst,
                                                              strides, dilates, padL, padR)
                            : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                              algorithm, src, anyWeights, dst,
                                                              strides, dilates, padL, padR),
              postOps(epilogue.activation), oneDnnEngine()));
        if (mode == ConvMode::Forward)
          return dnnl::convolution_forward(forward);
        if (mode == ConvMode::BackwardInput)
          return dnnl::convolution_backward_data(dnnl::convolution_backward_data::primitive_desc(
              dnnl::convolution_backward_data::desc(algorithm, src, anyWeights, dst, strides,
                                                    dilates, padL, padR),
              oneDnnEngine(), forward));
        return dnnl::convolution_backward_weights(
            dnnl::convolution_backward_weights::primitive_desc(
                dnnl::convolution_backward_weights::desc(algorithm, src, anyWeights, dst, strides,
                                                         dilates, padL, padR),
                oneDnnEngine(), forward));
      }));
  ChosenWeightsLayout filter(
      weights, mode == ConvMode::BackwardFilter ? DNNL_ARG_DIFF_WEIGHTS : DNNL_ARG_WEIGHTS,
      types.result.dtype == DType::f32 ? types.constant(1) : nullptr);
  SMELT_RETURN_IF_ERROR(
      oneDnnChecked(describe(step), [&] { filter.prepack(primitive.current()); }));
  std::vector<std::pair<int, memory::desc>> forwardSlots{{DNNL_ARG_SRC, src},
                                                          {DNNL_ARG_WEIGHTS, weights}};
  if (epilogue.bias)
    forwardSlots.push_back({DNNL_ARG_BIAS, bias});
  Kernel kernel =
      mode == ConvMode::Forward
          ? primitiveKernel(primitive, forwardSlots, {DNNL_ARG_DST, dst}, filter)
      : mode == ConvMode::BackwardInput
          ? primitiveKernel(primitive, {{DNNL_ARG_DIFF_DST, dst}, {DNNL_ARG_WEIGHTS, weights}},
                            {DNNL_ARG_DIFF_SRC, src}, filter)
          : primitiveKernel(primitive, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, dst}},
                            {DNNL_ARG_DIFF_WEIGHTS, weights}, filter);
  return stagedThrough(DType::f32, kernel, types);
}

} // namespace

Expected<Kernel> prepareContraction(const Step &step, const StepTypes &types) {
  // The operand count and the bias's type are the family's checks (StepOps.cpp), made first.
  if (step.op == StepOp::Matmul)
    return matmul(step, types);
  return conv(step, types, step.op == StepOp::Conv2D                ? ConvMode::Forward
                           : step.op == StepOp::Conv2DBackwardInput ? ConvMode::BackwardInput
                                                                    : ConvMode::BackwardFilter);
}

} // namespace smelt::rt::cpu
