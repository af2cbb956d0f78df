// oneDNN's f32 convolutions on the shapes of Smelt's ResNet and CNN training steps: forward,
// backward-data and backward-weights, made and called as runtime/cpu/Contraction.cpp makes and
// calls them, and beside that the layout and reorder choices Smelt did not make. Standalone (no
// Smelt code): it builds against Debian's oneDNN 2.x and a oneDNN 3.x alike, so that run.sh can
// time one library against the other on the same cases (README.md).
//   smelt-onednn-conv-bench [--threads LABEL] [--budget SECONDS] [--only TEXT] [--cnn-batch N]
// prints one tab-separated line per case, mode and variant; run.sh makes the tables.
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Clock = std::chrono::steady_clock;
constexpr auto kF32 = memory::data_type::f32;
constexpr auto kDirect = dnnl::algorithm::convolution_direct;

/// One convolution shape of a training step (NHWC input, HWIO filter, square kernel; the
/// padding is TF "same", the extra row and column at the end, as Smelt's windowPadding gives).
struct Shape {
  const char *model, *name;
  int count;                                       // convolutions of this shape per step
  int64_t n, c, h, f, k, stride, padBegin, padEnd; // square image and window
  bool biasRelu;     // the forward folds bias and relu (the CNN's conv2dLayer), as Smelt's
                     // fused pipeline does; the ResNet's convolutions feed batch norm
  bool backwardData; // the step needs the input's gradient (not the images')
  int64_t out() const { return (h + padBegin + padEnd - k) / stride + 1; }
};

/// The convolutions of `smelt train --model=resnet --batch=64` and `--model=cnn` (batch 256),
/// as the executables dumped by --dump-dir list them.
std::vector<Shape> shapes(int64_t cnnBatch) {
  return {
      {"resnet", "stem 28x28 1->16 3x3", 1, 64, 1, 28, 16, 3, 1, 1, 1, false, false},
      {"resnet", "28x28 16->16 3x3", 4, 64, 16, 28, 16, 3, 1, 1, 1, false, true},
      {"resnet", "28->14 16->32 3x3 s2", 1, 64, 16, 28, 32, 3, 2, 0, 1, false, true},
      {"resnet", "28->14 16->32 1x1 s2", 1, 64, 16, 28, 32, 1, 2, 0, 0, false, true},
      {"resnet", "14x14 32->32 3x3", 3, 64, 32, 14, 32, 3, 1, 1, 1, false, true},
      {"resnet", "14->7 32->64 3x3 s2", 1, 64, 32, 14, 64, 3, 2, 0, 1, false, true},
      {"resnet", "14->7 32->64 1x1 s2", 1, 64, 32, 14, 64, 1, 2, 0, 0, false, true},
      {"resnet", "7x7 64->64 3x3", 3, 64, 64, 7, 64, 3, 1, 1, 1, false, true},
      {"cnn", "conv1 28x28 1->32 3x3", 1, cnnBatch, 1, 28, 32, 3, 1, 1, 1, true, false},
      {"cnn", "conv2 14x14 32->64 3x3", 1, cnnBatch, 32, 14, 64, 3, 1, 1, 1, true, true},
  };
}

enum class Mode { Forward, BackwardData, BackwardWeights };
const char *modeName(Mode mode) {
  return mode == Mode::Forward ? "fwd" : mode == Mode::BackwardData ? "bwd_data" : "bwd_weights";
}

dnnl::engine &engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}
dnnl::stream &stream() {
  static dnnl::stream s(engine());
  return s;
}

// The API changed in 3.0: operation descriptors (convolution_forward::desc and the like) are
// gone, primitive descriptors take the engine first, and eltwise post-ops lost their scale.
dnnl::primitive_attr reluAttr() {
  dnnl::post_ops ops;
#if DNNL_VERSION_MAJOR >= 3
  ops.append_eltwise(dnnl::algorithm::eltwise_relu, 0.f, 0.f);
#else
  ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
#endif
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  return attr;
}

struct Geometry {
  memory::dims strides, dilates, padL, padR;
};

dnnl::convolution_forward::primitive_desc forwardPd(dnnl::prop_kind prop, const memory::desc &src,
                                                    const memory::desc &weights,
                                                    const memory::desc *bias,
                                                    const memory::desc &dst, const Geometry &g,
                                                    const dnnl::primitive_attr &attr) {
#if DNNL_VERSION_MAJOR >= 3
  if (bias)
    return {engine(), prop,      kDirect,   src,    weights, *bias,
            dst,      g.strides, g.dilates, g.padL, g.padR,  attr};
  return {engine(), prop, kDirect, src, weights, dst, g.strides, g.dilates, g.padL, g.padR, attr};
#else
  auto desc = bias ? dnnl::convolution_forward::desc(prop, kDirect, src, weights, *bias, dst,
                                                     g.strides, g.dilates, g.padL, g.padR)
                   : dnnl::convolution_forward::desc(prop, kDirect, src, weights, dst, g.strides,
                                                     g.dilates, g.padL, g.padR);
  return {desc, attr, engine()};
#endif
}

dnnl::convolution_backward_data::primitive_desc
backwardDataPd(const memory::desc &diffSrc, const memory::desc &weights,
               const memory::desc &diffDst, const Geometry &g,
               const dnnl::convolution_forward::primitive_desc &hint) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine(), kDirect, diffSrc, weights, diffDst, g.strides, g.dilates, g.padL, g.padR, hint};
#else
  return {dnnl::convolution_backward_data::desc(kDirect, diffSrc, weights, diffDst, g.strides,
                                                g.dilates, g.padL, g.padR),
          engine(), hint};
#endif
}

dnnl::convolution_backward_weights::primitive_desc
backwardWeightsPd(const memory::desc &src, const memory::desc &diffWeights,
                  const memory::desc &diffDst, const Geometry &g,
                  const dnnl::convolution_forward::primitive_desc &hint) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine(), kDirect, src, diffWeights, diffDst, g.strides, g.dilates, g.padL, g.padR, hint};
#else
  return {dnnl::convolution_backward_weights::desc(kDirect, src, diffWeights, diffDst, g.strides,
                                                   g.dilates, g.padL, g.padR),
          engine(), hint};
#endif
}

/// A primitive and the layouts it chose for its three tensors (the diff_ ones for backward).
struct Made {
  dnnl::primitive primitive;
  memory::desc src, weights, dst;
  std::string impl;
};

/// Makes the primitive as Contraction.cpp's conv() does: the forward_training primitive
/// descriptor is the backward ones' hint; a forward with an epilogue is forward_inference with
/// the bias argument and a relu post-op. `activations` is Smelt's nhwc or `any`; `weights` is
/// `any` (Smelt's) or Smelt's own hwio.
Made make(const Shape &s, Mode mode, Tag activations, Tag weightsTag) {
  int64_t o = s.out();
  Geometry g{{s.stride, s.stride}, {0, 0}, {s.padBegin, s.padBegin}, {s.padEnd, s.padEnd}};
  memory::desc src({s.n, s.c, s.h, s.h}, kF32, activations);
  memory::desc weights({s.f, s.c, s.k, s.k}, kF32, weightsTag);
  memory::desc dst({s.n, s.f, o, o}, kF32, activations);
  memory::desc bias({s.f}, kF32, Tag::x);
  auto training = forwardPd(dnnl::prop_kind::forward_training, src, weights, nullptr, dst, g, {});
  if (mode == Mode::Forward) {
    auto pd = s.biasRelu ? forwardPd(dnnl::prop_kind::forward_inference, src, weights, &bias, dst,
                                     g, reluAttr())
                         : training;
    return {dnnl::convolution_forward(pd), pd.src_desc(), pd.weights_desc(), pd.dst_desc(),
            pd.impl_info_str()};
  }
  if (mode == Mode::BackwardData) {
    auto pd = backwardDataPd(src, weights, dst, g, training);
    return {dnnl::convolution_backward_data(pd), pd.diff_src_desc(), pd.weights_desc(),
            pd.diff_dst_desc(), pd.impl_info_str()};
  }
  auto pd = backwardWeightsPd(src, weights, dst, g, training);
  return {dnnl::convolution_backward_weights(pd), pd.src_desc(), pd.diff_weights_desc(),
          pd.diff_dst_desc(), pd.impl_info_str()};
}

std::vector<float> randomValues(size_t count, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(count);
  for (float &x : v)
    x = dist(gen);
  return v;
}

/// A copy of `user` (Smelt's layout) in `desc`'s layout, made once, off the clock.
memory laidOut(const memory::desc &desc, memory user) {
  if (desc == user.get_desc())
    return user;
  memory m(desc, engine());
  dnnl::reorder(user, m).execute(stream(), user, m);
  stream().wait();
  return m;
}

/// The median milliseconds of `call` over at least `minRuns` runs and about `budget` seconds,
/// after warming up (the first runs page in buffers and JIT-compile the kernels).
double medianMs(const std::function<void()> &call, double budget) {
  const int minRuns = 5, maxRuns = 200;
  Clock::time_point warm = Clock::now();
  for (int i = 0; i < 2 || (i < 20 && Clock::now() - warm < std::chrono::milliseconds(30)); ++i)
    call();
  std::vector<double> ms;
  Clock::time_point start = Clock::now();
  while (int(ms.size()) < minRuns ||
         (int(ms.size()) < maxRuns &&
          std::chrono::duration<double>(Clock::now() - start).count() < budget)) {
    Clock::time_point t0 = Clock::now();
    call();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

/// The largest difference between two results, relative to the largest magnitude.
double relativeDifference(const std::vector<float> &a, const std::vector<float> &b) {
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, double(std::fabs(a[i] - b[i])));
    scale = std::max(scale, double(std::fabs(b[i])));
  }
  return diff / scale;
}

struct Options {
  std::string threads = "?", only;
  double budget = 0.15;
  int64_t cnnBatch = 256;
};

void printLine(const Options &opt, const Shape &s, const char *mode, const char *variant, double ms,
               const std::string &extra) {
  std::printf("%d.%d.%d\t%s\t%s\t%s\t%s\t%s\t%d\t%.4f\t%s\n", DNNL_VERSION_MAJOR,
              DNNL_VERSION_MINOR, DNNL_VERSION_PATCH, opt.threads.c_str(), s.model, s.name, mode,
              variant, s.count, ms, extra.c_str());
  std::fflush(stdout);
}

/// Times one shape in one mode under each variant:
///   smelt        Smelt's call: NHWC activations, weights `any`, the HWIO filter (a parameter,
///                so not a constant) reordered into the chosen layout before the call, or out of
///                it after a backward-weights, by a reorder primitive made on each call
///                (ChosenWeightsLayout::in/finish), memory objects made on each call.
///   reorder_kept the same, the reorder primitive made once.
///   weights_once the same primitive with the weights already in its layout (a constant's path,
///                or parameters kept in oneDNN's layout across steps).
///   hwio         NHWC activations and Smelt's HWIO filter given to oneDNN as is.
///   blocked      every tensor in the layout oneDNN chooses (nChw16c and the like) and kept
///                there: no reorder of activations or weights on the clock.
void runCase(const Options &opt, const Shape &s, Mode mode) {
  int64_t o = s.out();
  memory::desc userSrc({s.n, s.c, s.h, s.h}, kF32, Tag::nhwc);
  memory::desc userWeights({s.f, s.c, s.k, s.k}, kF32, Tag::hwio);
  memory::desc userDst({s.n, s.f, o, o}, kF32, Tag::nhwc);
  memory::desc userBias({s.f}, kF32, Tag::x);
  std::vector<float> x = randomValues(userSrc.get_size() / 4, 1),
                     w = randomValues(userWeights.get_size() / 4, 2),
                     y = randomValues(userDst.get_size() / 4, 3),
                     b = randomValues(userBias.get_size() / 4, 4);
  bool forward = mode == Mode::Forward, backwardWeights = mode == Mode::BackwardWeights;
  int weightsArg = backwardWeights ? DNNL_ARG_DIFF_WEIGHTS : DNNL_ARG_WEIGHTS;
  int srcArg = mode == Mode::BackwardData ? DNNL_ARG_DIFF_SRC : DNNL_ARG_SRC;
  int dstArg = forward ? DNNL_ARG_DST : DNNL_ARG_DIFF_DST;
  bool bias = forward && s.biasRelu;

  // Primitive creation as a step's preparation pays it: the first is made afresh, the second
  // comes from oneDNN's primitive cache (in 2.x the primitive descriptor is made again).
  Clock::time_point t0 = Clock::now();
  Made smelt = make(s, mode, Tag::nhwc, Tag::any);
  Clock::time_point t1 = Clock::now();
  Made again = make(s, mode, Tag::nhwc, Tag::any);
  Clock::time_point t2 = Clock::now();
  (void)again;
  printLine(opt, s, modeName(mode), "create_cold",
            std::chrono::duration<double, std::milli>(t1 - t0).count(), smelt.impl);
  printLine(opt, s, modeName(mode), "create_cached",
            std::chrono::duration<double, std::milli>(t2 - t1).count(), smelt.impl);

  // The result in Smelt's layout, for checking the variants against each other.
  std::vector<float> result(forward ? y.size() : backwardWeights ? w.size() : x.size());
  float *srcData = mode == Mode::BackwardData ? result.data() : x.data();
  float *weightsData = backwardWeights ? result.data() : w.data();
  float *dstData = forward ? result.data() : y.data();

  // Smelt's call, per ChosenWeightsLayout and primitiveKernel.
  bool same = smelt.weights == userWeights;
  memory chosen = same ? memory() : memory(smelt.weights, engine());
  auto smeltCall = [&](const dnnl::reorder *kept, bool reorder) {
    memory user(userWeights, engine(), weightsData);
    memory weights = same ? user : chosen;
    if (!same && !backwardWeights && reorder) {
      if (kept)
        kept->execute(stream(), user, chosen);
      else
        dnnl::reorder(user, chosen).execute(stream(), user, chosen);
    }
    std::unordered_map<int, memory> args;
    args.emplace(srcArg, memory(userSrc, engine(), srcData));
    args.emplace(weightsArg, weights);
    if (bias)
      args.emplace(DNNL_ARG_BIAS, memory(userBias, engine(), b.data()));
    args.emplace(dstArg, memory(userDst, engine(), dstData));
    smelt.primitive.execute(stream(), args);
    if (!same && backwardWeights && reorder) {
      if (kept)
        kept->execute(stream(), chosen, user);
      else
        dnnl::reorder(chosen, user).execute(stream(), chosen, user);
    }
    stream().wait();
  };
  std::string layouts = smelt.impl + " weights " + (same ? "hwio" : "reordered");
  smeltCall(nullptr, true);
  std::vector<float> reference = result;
  printLine(opt, s, modeName(mode), "smelt",
            medianMs([&] { smeltCall(nullptr, true); }, opt.budget), layouts);

  dnnl::reorder kept;
  if (!same) {
    memory user(userWeights, engine(), weightsData);
    kept = backwardWeights ? dnnl::reorder(chosen, user) : dnnl::reorder(user, chosen);
  }
  printLine(opt, s, modeName(mode), "reorder_kept",
            medianMs([&] { smeltCall(&kept, true); }, opt.budget), "");
  if (!same && !backwardWeights) {
    memory user(userWeights, engine(), weightsData);
    dnnl::reorder(user, chosen).execute(stream(), user, chosen);
    stream().wait();
  }
  printLine(opt, s, modeName(mode), "weights_once",
            medianMs([&] { smeltCall(nullptr, false); }, opt.budget), "");

  // Smelt's HWIO filter as is: oneDNN picks a kernel for that layout (in 2.6 often gemm).
  {
    Made hwio = make(s, mode, Tag::nhwc, Tag::hwio);
    std::unordered_map<int, memory> args;
    args.emplace(srcArg, memory(userSrc, engine(), srcData));
    args.emplace(weightsArg, memory(userWeights, engine(), weightsData));
    if (bias)
      args.emplace(DNNL_ARG_BIAS, memory(userBias, engine(), b.data()));
    args.emplace(dstArg, memory(userDst, engine(), dstData));
    auto call = [&] {
      hwio.primitive.execute(stream(), args);
      stream().wait();
    };
    call();
    double diff = relativeDifference(result, reference);
    if (diff > 1e-4)
      std::fprintf(stderr, "warning: %s %s: hwio and smelt differ by %g\n", s.name, modeName(mode),
                   diff);
    char note[64];
    std::snprintf(note, sizeof note, " differs by %.1e", diff);
    printLine(opt, s, modeName(mode), "hwio", medianMs(call, opt.budget), hwio.impl + note);
  }

  // Every layout oneDNN's choice; the inputs laid out once, off the clock.
  {
    Made blocked = make(s, mode, Tag::any, Tag::any);
    memory userX(userSrc, engine(), x.data()), userW(userWeights, engine(), w.data()),
        userY(userDst, engine(), y.data());
    memory src =
        forward || backwardWeights ? laidOut(blocked.src, userX) : memory(blocked.src, engine());
    memory weights =
        backwardWeights ? memory(blocked.weights, engine()) : laidOut(blocked.weights, userW);
    memory dst = forward ? memory(blocked.dst, engine()) : laidOut(blocked.dst, userY);
    std::unordered_map<int, memory> args{{srcArg, src}, {weightsArg, weights}, {dstArg, dst}};
    if (bias)
      args.emplace(DNNL_ARG_BIAS, memory(userBias, engine(), b.data()));
    auto call = [&] {
      blocked.primitive.execute(stream(), args);
      stream().wait();
    };
    call();
    memory out = forward ? dst : backwardWeights ? weights : src;
    memory::desc outUser = forward ? userDst : backwardWeights ? userWeights : userSrc;
    memory back(outUser, engine(), result.data());
    dnnl::reorder(out, back).execute(stream(), out, back);
    stream().wait();
    double diff = relativeDifference(result, reference);
    if (diff > 1e-4)
      std::fprintf(stderr, "warning: %s %s: blocked and smelt differ by %g\n", s.name,
                   modeName(mode), diff);
    char note[64];
    std::snprintf(note, sizeof note, " differs by %.1e", diff);
    printLine(opt, s, modeName(mode), "blocked", medianMs(call, opt.budget), blocked.impl + note);
  }
}

} // namespace

int main(int argc, char **argv) {
  Options opt;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--threads")
      opt.threads = argv[i + 1];
    else if (flag == "--budget")
      opt.budget = std::atof(argv[i + 1]);
    else if (flag == "--only")
      opt.only = argv[i + 1];
    else if (flag == "--cnn-batch")
      opt.cnnBatch = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  const dnnl_version_t *v = dnnl_version();
  std::fprintf(stderr, "oneDNN %d.%d.%d (%s), threads %s\n", v->major, v->minor, v->patch, v->hash,
               opt.threads.c_str());
  try {
    for (const Shape &s : shapes(opt.cnnBatch)) {
      if (!opt.only.empty() &&
          (std::string(s.model) + " " + s.name).find(opt.only) == std::string::npos)
        continue;
      for (Mode mode : {Mode::Forward, Mode::BackwardData, Mode::BackwardWeights})
        if (mode != Mode::BackwardData || s.backwardData)
          runCase(opt, s, mode);
    }
  } catch (const dnnl::error &e) {
    std::fprintf(stderr, "oneDNN error: %s (status %d)\n", e.what(), int(e.status));
    return 1;
  }
  return 0;
}
