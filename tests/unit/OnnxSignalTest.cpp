// ONNX's DFT and STFT (frontend/onnx/SignalOps.cpp: matmuls by constant cos and sin matrices):
// one-node models written with ONNX's protobuf classes, imported, compiled and run on the CPU,
// against transforms summed term by term in long double on fresh random signals: real and
// complex signals, forward and inverse, one-sided, a dft_length that pads and one that cuts,
// every axis position with opset 17's attribute and opset 20's input, STFT with and without a
// window; and the gradient of a power spectrum through STFT against central differences.
#include "OnnxTestGraph.h"
#include "TestUtil.h"

#include "frontend/Ops.h"
#include "frontend/onnx/ImportInto.h"
#include "runtime/CpuExecutor.h"

#include <fmt/format.h>

#include <cmath>
#include <complex>

namespace smelt::test {
namespace {

using Ints = std::vector<int64_t>;
using Values = std::vector<double>;

Values randomValues(int64_t n) {
  Values v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(double(float(draw(-1, 1, 0))));
  return v;
}

/// The DFT of `x` (row-major, `shape`, the last axis 1 or 2) along `axis`, in long double:
/// [..., bins, ..., 2].
Values referenceDft(const Values &x, const Ints &shape, int64_t axis, int64_t length, int64_t bins,
                    bool inverse) {
  int64_t n = shape[size_t(axis)], parts = shape.back(), outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[size_t(d)];
  for (int64_t d = axis + 1; d + 1 < int64_t(shape.size()); ++d)
    inner *= shape[size_t(d)];
  Values out(size_t(outer * bins * inner * 2));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i)
      for (int64_t k = 0; k < bins; ++k) {
        std::complex<long double> sum = 0;
        for (int64_t t = 0; t < std::min(n, length); ++t) {
          size_t at = size_t(((o * n + t) * inner + i) * parts);
          std::complex<long double> v(x[at], parts == 2 ? x[at + 1] : 0.0L);
          long double angle = (inverse ? 2 : -2) * M_PIl * (long double)(k * t) / length;
          sum += v * std::complex<long double>(std::cos(angle), std::sin(angle));
        }
        if (inverse)
          sum /= (long double)length;
        size_t at = size_t(((o * bins + k) * inner + i) * 2);
        out[at] = double(sum.real());
        out[at + 1] = double(sum.imag());
      }
  return out;
}

/// A one-node model of `op` at `opset`: inputs named in `inputs` (graph inputs of their shape,
/// or int64 scalar initializers where `scalars` gives a value), output "y".
struct SignalModel : TempModelFile {
  SignalModel(const std::string &op, int64_t opset,
              const std::vector<std::pair<std::string, Ints>> &inputs,
              const std::map<std::string, int64_t> &scalars,
              const std::function<void(::onnx::NodeProto &)> &attributes, int elemType)
      : TempModelFile("smelt-signal") {
    ::onnx::ModelProto model;
    ::onnx::GraphProto &graph = startModel(model, opset, "signal");
    std::vector<std::string> names;
    for (const auto &[name, shape] : inputs) {
      names.push_back(name);
      if (name.empty())
        continue;
      if (auto it = scalars.find(name); it != scalars.end()) {
        addInt64Initializer(graph, name, {it->second}, false);
      } else {
        addValueInfo(*graph.mutable_input(), name, shape, elemType);
      }
    }
    graph.add_output()->set_name("y");
    attributes(*addNode(graph, op, names, {"y"}));
    write(model);
  }
};

Values run(const SignalModel &model, const std::vector<rt::HostTensor> &inputs) {
  std::optional<rt::CpuExecutor> cpu = compileOnnxFile(model.path);
  if (!cpu)
    return {};
  std::vector<rt::HostTensor> outputs;
  rt::Status s = cpu->run(inputs, outputs);
  EXPECT_TRUE(s.ok()) << s.message();
  return outputs.empty() ? Values{} : outputs[0].toDoubles();
}

struct DftCase {
  Ints shape;
  int64_t axis;       // as the model states it (negative from opset 20's input)
  int64_t length = 0; // dft_length, none when 0
  bool inverse = false, onesided = false;
  int64_t opset = 17;
};

void expectDft(const DftCase &c) {
  SCOPED_TRACE(fmt::format("DFT-{} of {} along {}, dft_length {}, inverse {}, onesided {} "
                           "(SMELT_TEST_SEED={})",
                           c.opset, shapeString(c.shape), c.axis, c.length, c.inverse, c.onesided,
                           rngSeed()));
  int64_t rank = int64_t(c.shape.size()), axis = c.axis < 0 ? c.axis + rank : c.axis;
  int64_t length = c.length ? c.length : c.shape[size_t(axis)];
  int64_t bins = c.onesided ? length / 2 + 1 : length;
  std::vector<std::pair<std::string, Ints>> inputs = {{"x", c.shape}};
  std::map<std::string, int64_t> scalars;
  inputs.push_back({c.length ? "dft_length" : "", {}});
  if (c.length)
    scalars["dft_length"] = c.length;
  if (c.opset >= 20) {
    inputs.push_back({"axis", {}});
    scalars["axis"] = c.axis;
  }
  while (inputs.back().first.empty())
    inputs.pop_back();
  SignalModel model(
      "DFT", c.opset, inputs, scalars,
      [&](::onnx::NodeProto &node) {
        if (c.opset < 20)
          addInt(node, "axis", c.axis);
        addInt(node, "inverse", c.inverse);
        addInt(node, "onesided", c.onesided);
      },
      ::onnx::TensorProto::FLOAT);
  Values x = randomValues(elementCount(c.shape));
  Values want = referenceDft(x, c.shape, axis, length, bins, c.inverse);
  Values got = run(model, {rt::HostTensor::fromDoubles({DType::f32, c.shape}, x)});
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LE(relError(got, want), 2e-6);
}

TEST(OnnxSignal, DftMatchesTheSumOfItsTerms) {
  expectDft({{3, 16, 1}, 1});                         // real, forward
  expectDft({{3, 16, 2}, 1});                         // complex
  expectDft({{3, 15, 2}, 1, 0, true});                // inverse, odd length
  expectDft({{2, 20, 1}, 1, 0, false, true});         // one-sided
  expectDft({{2, 12, 2}, 1, 18});                     // dft_length pads
  expectDft({{2, 12, 1}, 1, 7, false, true});         // and cuts
  expectDft({{2, 5, 9, 2}, 2, 0, true});              // a middle axis
  expectDft({{4, 3, 1}, 0});                          // the first
  expectDft({{2, 5, 9, 2}, -2, 0, false, false, 20}); // opset 20: the axis as an input
  expectDft({{2, 5, 9, 1}, -3, 8, false, true, 20});
  expectDft({{6, 5, 2}, 0, 0, true, false, 20});
}

struct StftCase {
  Ints signal; // [batch, samples, parts]
  int64_t step, frameLength;
  bool window, onesided;
};

TEST(OnnxSignal, StftMatchesWindowedFrameDfts) {
  for (const StftCase &c :
       {StftCase{{2, 100, 1}, 16, 32, true, true}, StftCase{{1, 64, 1}, 7, 20, false, true},
        StftCase{{2, 50, 2}, 10, 16, true, false}, StftCase{{1, 33, 1}, 33, 33, false, false}}) {
    SCOPED_TRACE(fmt::format("STFT of {}, step {}, frame_length {}, window {}, onesided {} "
                             "(SMELT_TEST_SEED={})",
                             shapeString(c.signal), c.step, c.frameLength, c.window, c.onesided,
                             rngSeed()));
    std::vector<std::pair<std::string, Ints>> inputs = {
        {"signal", c.signal}, {"frame_step", {}}, {c.window ? "window" : "", {c.frameLength}}};
    std::map<std::string, int64_t> scalars = {{"frame_step", c.step}};
    if (!c.window) { // then frame_length says how long the frames are
      inputs.push_back({"frame_length", {}});
      scalars["frame_length"] = c.frameLength;
    }
    SignalModel model(
        "STFT", 17, inputs, scalars,
        [&](::onnx::NodeProto &node) { addInt(node, "onesided", c.onesided); },
        ::onnx::TensorProto::FLOAT);
    Values signal = randomValues(elementCount(c.signal)), window = randomValues(c.frameLength);
    int64_t batch = c.signal[0], samples = c.signal[1], parts = c.signal[2];
    int64_t frames = 1 + (samples - c.frameLength) / c.step;
    // The windowed frames [batch, frames, frame_length, parts], then their DFTs along axis 2.
    Ints framedShape = {batch, frames, c.frameLength, parts};
    Values framed;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t f = 0; f < frames; ++f)
        for (int64_t t = 0; t < c.frameLength; ++t)
          for (int64_t p = 0; p < parts; ++p)
            framed.push_back(signal[size_t((b * samples + f * c.step + t) * parts + p)] *
                             (c.window ? window[size_t(t)] : 1.0));
    Values want = referenceDft(framed, framedShape, 2, c.frameLength,
                               c.onesided ? c.frameLength / 2 + 1 : c.frameLength, false);
    std::vector<rt::HostTensor> args = {
        rt::HostTensor::fromDoubles({DType::f32, c.signal}, signal)};
    if (c.window)
      args.push_back(rt::HostTensor::fromDoubles({DType::f32, {c.frameLength}}, window));
    Values got = run(model, args);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LE(relError(got, want), 2e-6);
  }
}

// A power spectrum's loss sum(r * |STFT(x)|^2), imported for training in float64: its gradient
// with respect to the signal and to the window against central differences.
TEST(OnnxSignal, StftGradientsMatchCentralDifferences) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  Ints signalShape = {2, 40, 1}, windowShape = {12};
  SignalModel model(
      "STFT", 17, {{"signal", signalShape}, {"frame_step", {}}, {"window", windowShape}},
      {{"frame_step", 5}}, [](::onnx::NodeProto &) {}, ::onnx::TensorProto::DOUBLE);
  mlir::MLIRContext context;
  Graph g(context, "f");
  Tensor x = g.input("x", signalShape, DType::f64), w = g.input("w", windowShape, DType::f64);
  Ints spectrum = {2, 6, 7, 2}; // 1 + (40 - 12) / 5 frames, 12 / 2 + 1 bins
  Tensor r = g.input("r", {2, 6, 7}, DType::f64);
  onnx::GraphBinding binding{{{"signal", x}, {"window", w}}, true};
  Tensor y = onnx::importInto(g, model.path, binding).output("y");
  Tensor power = reduceSum(mul(y, y), {3});
  Tensor loss = reduceSum(mul(power, r), {0, 1, 2});
  std::vector<rt::HostTensor> args = {
      rt::HostTensor::fromVector<double>(signalShape, randomValues(elementCount(signalShape))),
      rt::HostTensor::fromVector<double>(windowShape, randomValues(12)),
      randomTensor({2, 6, 7}, DType::f64)};
  std::optional<rt::CpuExecutor> cpu = compileLossAndGradients(g, loss, {x, w});
  ASSERT_TRUE(cpu);
  expectGradientsMatchDifferences(*cpu, args, {0, 1}, 1e-6, {"signal", "window"});
}

TEST(OnnxSignal, RefusesWhatItCannotTransform) {
  auto importError = [](const SignalModel &model) { return importErrorOf(model.path); };
  auto attributes = [](int64_t axis, bool onesided) {
    return [=](::onnx::NodeProto &node) {
      addInt(node, "axis", axis);
      addInt(node, "onesided", onesided);
    };
  };
  EXPECT_NE(importError(SignalModel("DFT", 17, {{"x", {2, 8, 1}}}, {}, attributes(2, false),
                                    ::onnx::TensorProto::FLOAT))
                .find("axis 2 of an input of rank 3 (the last axis holds the real and imaginary"),
            std::string::npos);
  EXPECT_NE(importError(SignalModel("DFT", 17, {{"x", {2, 8, 3}}}, {}, attributes(1, false),
                                    ::onnx::TensorProto::FLOAT))
                .find("DFT's input is [2, 8, 3], expected a last axis of 1 (real) or 2"),
            std::string::npos);
  EXPECT_NE(importError(SignalModel("DFT", 17, {{"x", {2, 8, 2}}}, {}, attributes(1, true),
                                    ::onnx::TensorProto::FLOAT))
                .find("onesided takes a real signal"),
            std::string::npos);
  EXPECT_NE(
      importError(
          SignalModel(
              "STFT", 17,
              {{"signal", {1, 40, 1}}, {"frame_step", {}}, {"window", {8}}, {"frame_length", {}}},
              {{"frame_step", 4}, {"frame_length", 10}}, [](::onnx::NodeProto &) {},
              ::onnx::TensorProto::FLOAT))
          .find("the window is [8], expected [10] (frame_length)"),
      std::string::npos);
}

} // namespace
} // namespace smelt::test
