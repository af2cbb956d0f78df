// ONNX's GridSample (frontend/onnx/GridSampleOp.cpp): one-node models written with ONNX's
// protobuf classes, imported, compiled and run on the CPU, against a float64 reference written
// from the spec (ONNX's op_grid_sample.py: unnormalized coordinates, nearest rounding half to
// even, coordinates outside the borders clamped or reflected, then each tap padded) on fresh
// random inputs, with grid coordinates far enough outside [-1, 1] to bounce off the borders
// several times. Every mode, padding and align_corners in 2-D (opset 16), 1-D and 3-D (opset
// 20), f16 data, integer data (nearest); and the gradients of the data and of the grid,
// imported for training in float64, against central differences. AffineGrid (the grids of
// affine transforms) against its spec too.
#include "OnnxTestGraph.h"
#include "TestUtil.h"

#include "frontend/Ops.h"
#include "frontend/onnx/ImportInto.h"
#include "runtime/CpuExecutor.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <unistd.h>

namespace smelt::test {
namespace {

using Ints = std::vector<int64_t>;
using Values = std::vector<double>;

struct Case {
  std::string mode, padding;
  bool alignCorners = false;
  int64_t opset = 16;
  Ints xShape = {2, 3, 5, 4}, gridShape = {2, 4, 6, 2};
  Values x, grid;

  int64_t spatial() const { return int64_t(xShape.size()) - 2; }
};

/// Fresh inputs: data in [-1, 1], as f32 holds them; grid coordinates mostly in [-1.3, 1.3],
/// a quarter of them in [-4, 4] (several lengths outside for the small axes).
Case withInputs(Case c) {
  c.x.clear();
  c.grid.clear();
  for (int64_t i = 0; i < elementCount(c.xShape); ++i)
    c.x.push_back(double(float(draw(-1, 1))));
  for (int64_t i = 0; i < elementCount(c.gridShape); ++i)
    c.grid.push_back(double(float(draw(0, 1, 0) < 0.25 ? draw(-4, 4, 0) : draw(-1.3, 1.3, 0))));
  return c;
}

/// The spec's reflection of `x` into [lo, hi] (op_grid_sample.py's _gs_reflect).
double reflect(double x, double lo, double hi) {
  double range = hi - lo;
  if (range <= 0)
    return lo;
  if (x < lo) {
    double dx = lo - x, n = std::floor(dx / range), r = dx - n * range;
    return std::fmod(n, 2) == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    double dx = x - hi, n = std::floor(dx / range), r = dx - n * range;
    return std::fmod(n, 2) == 0 ? hi - r : lo + r;
  }
  return x;
}

std::vector<double> cubic(double t) {
  const double a = -0.75;
  auto outer = [&](double s) { return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a; };
  auto inner = [&](double s) { return ((a + 2) * s - (a + 3)) * s * s + 1; };
  return {outer(t + 1), inner(t), inner(1 - t), outer(2 - t)};
}

/// Y [N, C, O...] in float64, a loop per output element.
Values reference(const Case &c) {
  int64_t r = c.spatial(), n = c.xShape[0], channels = c.xShape[1];
  Ints outSpatial(c.gridShape.begin() + 1, c.gridShape.end() - 1);
  int64_t outCount = elementCount(outSpatial),
          inCount = elementCount(Ints(c.xShape.begin() + 2, c.xShape.end()));
  Values y;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < channels; ++ch)
      for (int64_t o = 0; o < outCount; ++o) {
        const double *at = &c.grid[size_t((b * outCount + o) * r)];
        std::vector<std::vector<std::pair<int64_t, double>>> taps(static_cast<size_t>(r));
        std::vector<double> lo(static_cast<size_t>(r)), hi(static_cast<size_t>(r));
        for (int64_t i = 0; i < r; ++i) {
          double length = double(c.xShape[size_t(i + 2)]), g = at[r - 1 - i];
          double x = c.alignCorners ? (g + 1) / 2 * (length - 1) : ((g + 1) * length - 1) / 2;
          lo[size_t(i)] = c.alignCorners ? 0 : -0.5;
          hi[size_t(i)] = c.alignCorners ? length - 1 : length - 0.5;
          if (c.mode == "nearest")
            x = std::nearbyint(x);
          if (x < lo[size_t(i)] || x > hi[size_t(i)]) {
            if (c.padding == "border")
              x = std::clamp(x, 0.0, length - 1);
            else if (c.padding == "reflection")
              x = reflect(x, lo[size_t(i)], hi[size_t(i)]);
          }
          double f = std::floor(x), t = x - f;
          if (c.mode == "nearest")
            taps[size_t(i)] = {{int64_t(x), 1.0}};
          else if (c.mode == "cubic" || c.mode == "bicubic")
            for (int k = 0; k < 4; ++k)
              taps[size_t(i)].push_back({int64_t(f) + k - 1, cubic(t)[size_t(k)]});
          else
            taps[size_t(i)] = {{int64_t(f), 1 - t}, {int64_t(f) + 1, t}};
        }
        // The sum over every combination of one tap per axis, each padded as the spec pads.
        double sum = 0;
        std::function<void(int64_t, int64_t, double)> walk = [&](int64_t i, int64_t offset,
                                                                 double weight) {
          if (i == r) {
            sum += weight * c.x[size_t((b * channels + ch) * inCount + offset)];
            return;
          }
          int64_t length = c.xShape[size_t(i + 2)];
          for (auto [index, w] : taps[size_t(i)]) {
            if (index < 0 || index >= length) {
              if (c.padding == "zeros")
                continue;
              index = c.padding == "border"
                          ? std::clamp<int64_t>(index, 0, length - 1)
                          : int64_t(reflect(double(index), lo[size_t(i)], hi[size_t(i)]));
            }
            walk(i + 1, offset * length + index, weight * w);
          }
        };
        walk(0, 0, 1.0);
        y.push_back(sum);
      }
  return y;
}

/// The case's node as a model file, data of `dataType` and grid of `gridType`, removed with
/// the object.
struct ModelFile : TempModelFile {
  ModelFile(const Case &c, int dataType, int gridType) : TempModelFile("smelt-grid-sample") {
    ::onnx::ModelProto model;
    ::onnx::GraphProto &graph = startModel(model, c.opset, "grid_sample");
    addValueInfo(*graph.mutable_input(), "X", c.xShape, dataType);
    addValueInfo(*graph.mutable_input(), "grid", c.gridShape, gridType);
    graph.add_output()->set_name("Y");
    ::onnx::NodeProto *node = addNode(graph, "GridSample", {"X", "grid"}, {"Y"});
    addString(*node, "mode", c.mode);
    addString(*node, "padding_mode", c.padding);
    addInt(*node, "align_corners", c.alignCorners);
    write(model);
  }
};

/// Y of the case imported, compiled and run: data as `dataType` (FLOAT, FLOAT16 or INT32),
/// grid as FLOAT.
Values runImported(const Case &c, int dataType) {
  ModelFile file(c, dataType, ::onnx::TensorProto::FLOAT);
  std::optional<rt::CpuExecutor> cpu = compileOnnxFile(file.path);
  if (!cpu)
    return {};
  DType dtype = dataType == ::onnx::TensorProto::FLOAT16 ? DType::f16
                : dataType == ::onnx::TensorProto::INT32 ? DType::i32
                                                         : DType::f32;
  std::vector<rt::HostTensor> inputs = {rt::HostTensor::fromDoubles({dtype, c.xShape}, c.x),
                                        rt::HostTensor::fromDoubles({DType::f32, c.gridShape},
                                                                    c.grid)},
                              outputs;
  rt::Status s = cpu->run(inputs, outputs);
  EXPECT_TRUE(s.ok()) << s.message();
  return outputs.empty() ? Values{} : outputs[0].toDoubles();
}

void expectMatches(Case c, int dataType = ::onnx::TensorProto::FLOAT, double tolerance = 2e-6) {
  SCOPED_TRACE(fmt::format("opset {} mode {} padding {} align_corners {} X {} (SMELT_TEST_SEED={})",
                           c.opset, c.mode, c.padding, c.alignCorners, shapeString(c.xShape),
                           rngSeed()));
  c = withInputs(c);
  if (dataType == ::onnx::TensorProto::FLOAT16)
    for (double &v : c.x)
      v = double(float(rt::Half(float(v))));
  if (dataType == ::onnx::TensorProto::INT32)
    for (double &v : c.x)
      v = std::round(v * 100);
  Values want = reference(c), got = runImported(c, dataType);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LE(relError(got, want), tolerance);
}

TEST(OnnxGridSample, EveryModeAndPaddingIn2D) {
  for (const char *mode : {"bilinear", "nearest", "bicubic"})
    for (const char *padding : {"zeros", "border", "reflection"})
      for (bool align : {false, true})
        expectMatches({mode, padding, align});
}

// Opset 20 names the modes linear and cubic and samples any count of spatial axes. Axes of
// length 1 and 2 make the cubic taps and reflections bounce more than once.
TEST(OnnxGridSample, Opset20In1DAnd3D) {
  for (const char *mode : {"linear", "nearest", "cubic"})
    for (const char *padding : {"zeros", "border", "reflection"})
      for (bool align : {false, true}) {
        expectMatches({mode, padding, align, 20, {2, 3, 7}, {2, 5, 1}});
        expectMatches({mode, padding, align, 20, {1, 2, 3, 1, 2}, {1, 2, 3, 2, 3}});
      }
}

// f16 data is gathered as f16 and weighted in f32 (the result rounded once to f16); integer
// data takes nearest sampling, exactly.
TEST(OnnxGridSample, HalfAndIntegerData) {
  for (const char *padding : {"zeros", "border", "reflection"}) {
    expectMatches({"bilinear", padding, false}, ::onnx::TensorProto::FLOAT16, 1e-3);
    expectMatches({"bicubic", padding, true}, ::onnx::TensorProto::FLOAT16, 1e-3);
    expectMatches({"nearest", padding, false}, ::onnx::TensorProto::INT32, 0);
  }
}

TEST(OnnxGridSample, RefusesWhatItCannotSample) {
  auto importError = [](const Case &c, int dataType) {
    ModelFile file(c, dataType, ::onnx::TensorProto::FLOAT);
    return importErrorOf(file.path);
  };
  EXPECT_NE(importError({"bilinear", "zeros", false, 16, {2, 3, 5, 4}, {2, 4, 6, 3}},
                        ::onnx::TensorProto::FLOAT)
                .find("grid is [2, 4, 6, 3], expected [2, output sizes (2 of them), 2]"),
            std::string::npos);
  EXPECT_NE(importError({"bilinear", "zeros", false, 16, {2, 3, 5}, {2, 4, 1}},
                        ::onnx::TensorProto::FLOAT)
                .find("X is [2, 3, 5], expected [N, C, H, W]"),
            std::string::npos);
  EXPECT_NE(importError({"linear", "zeros", false, 16}, ::onnx::TensorProto::FLOAT)
                .find("mode 'linear' is not one of GridSample-16's"),
            std::string::npos);
  EXPECT_NE(importError({"bilinear", "wrap", false, 16}, ::onnx::TensorProto::FLOAT)
                .find("padding_mode 'wrap' is not one of zeros, border, reflection"),
            std::string::npos);
  EXPECT_NE(importError({"bilinear", "zeros", false, 16}, ::onnx::TensorProto::INT32)
                .find("linear and cubic sampling of i32 data"),
            std::string::npos);
}

// Imported for training in float64: the gradients of the data (through the gathers' scatter_adds)
// and of the grid (through the weights) against central differences of sum(Y * r).
TEST(OnnxGridSample, GradientsMatchCentralDifferences) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  std::vector<Case> cases = {{"bilinear", "zeros", false},
                             {"bicubic", "reflection", true},
                             {"bilinear", "border", false},
                             {"nearest", "zeros", true},
                             {"cubic", "border", false, 20, {1, 2, 3, 2, 4}, {1, 2, 2, 3, 3}}};
  for (const Case &spec : cases) {
    SCOPED_TRACE(spec.mode + " " + spec.padding);
    Case c = withInputs(spec);
    ModelFile file(c, ::onnx::TensorProto::DOUBLE, ::onnx::TensorProto::DOUBLE);
    mlir::MLIRContext context;
    Graph g(context, "f");
    Tensor x = g.input("x", c.xShape, DType::f64), grid = g.input("grid", c.gridShape, DType::f64);
    Ints yShape = {c.xShape[0], c.xShape[1]};
    yShape.insert(yShape.end(), c.gridShape.begin() + 1, c.gridShape.end() - 1);
    Tensor weights = g.input("r", yShape, DType::f64);
    onnx::GraphBinding binding{{{"X", x}, {"grid", grid}}, true};
    onnx::ImportedGraph model = onnx::importInto(g, file.path, binding, {});
    Ints all;
    for (int64_t d = 0; d < int64_t(yShape.size()); ++d)
      all.push_back(d);
    Tensor loss = reduceSum(mul(model.output("Y"), weights), all);
    std::vector<rt::HostTensor> args = {rt::HostTensor::fromVector<double>(c.xShape, c.x),
                                        rt::HostTensor::fromVector<double>(c.gridShape, c.grid),
                                        randomTensor(yShape, DType::f64)};
    std::optional<rt::CpuExecutor> cpu = compileLossAndGradients(g, loss, {x, grid});
    ASSERT_TRUE(cpu);
    expectGradientsMatchDifferences(*cpu, args, {0, 1}, 1e-6, {"X", "grid"});
  }
}

/// An AffineGrid model of opset 20: theta an input of `elemType`, size an int64 initializer.
struct AffineGridFile : TempModelFile {
  AffineGridFile(const Ints &thetaShape, const Ints &size, bool alignCorners, int elemType)
      : TempModelFile("smelt-affine-grid") {
    ::onnx::ModelProto model;
    ::onnx::GraphProto &graph = startModel(model, 20, "affine_grid");
    addValueInfo(*graph.mutable_input(), "theta", thetaShape, elemType);
    addInt64Initializer(graph, "size", size);
    graph.add_output()->set_name("grid");
    addInt(*addNode(graph, "AffineGrid", {"theta", "size"}, {"grid"}), "align_corners",
           alignCorners);
    write(model);
  }
};

// AffineGrid against its spec (op_affine_grid.py): the normalized coordinates of each position,
// x first, made homogeneous and multiplied by theta; 2-D and 3-D, both corner conventions, an
// axis of one entry.
TEST(OnnxGridSample, AffineGridMatchesTheSpec) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  for (Ints size : {Ints{2, 3, 4, 5}, Ints{1, 2, 1, 3}, Ints{2, 1, 3, 2, 4}})
    for (bool align : {false, true}) {
      int64_t r = int64_t(size.size()) - 2;
      Ints thetaShape = {size[0], r, r + 1};
      Values theta;
      for (int64_t i = 0; i < elementCount(thetaShape); ++i)
        theta.push_back(double(float(draw(-1.5, 1.5))));
      Ints spatial(size.begin() + 2, size.end());
      Values want;
      for (int64_t b = 0; b < size[0]; ++b)
        for (int64_t p = 0; p < elementCount(spatial); ++p) {
          Values homogeneous(static_cast<size_t>(r) + 1, 1.0);
          for (int64_t i = r - 1, rest = p; i >= 0; rest /= spatial[size_t(i)], --i) {
            double length = double(spatial[size_t(i)]), index = double(rest % spatial[size_t(i)]);
            homogeneous[size_t(r - 1 - i)] =
                align ? (length == 1 ? -1 : -1 + 2 * index / (length - 1))
                      : (2 * index + 1) / length - 1;
          }
          for (int64_t j = 0; j < r; ++j) {
            double sum = 0;
            for (int64_t k = 0; k <= r; ++k)
              sum += theta[size_t((b * r + j) * (r + 1) + k)] * homogeneous[size_t(k)];
            want.push_back(sum);
          }
        }
      AffineGridFile file(thetaShape, size, align, ::onnx::TensorProto::FLOAT);
      std::optional<rt::CpuExecutor> cpu = compileOnnxFile(file.path);
      ASSERT_TRUE(cpu);
      std::vector<rt::HostTensor> inputs = {rt::HostTensor::fromDoubles({DType::f32, thetaShape},
                                                                        theta)},
                                  outputs;
      rt::Status s = cpu->run(inputs, outputs);
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_LE(relError(outputs[0].toDoubles(), want), 1e-6)
          << "size " << shapeString(size) << " align_corners " << align;
    }
  AffineGridFile bad({2, 2, 3}, {2, 3, 4, 5, 6}, false, ::onnx::TensorProto::FLOAT);
  EXPECT_NE(importErrorOf(bad.path).find(
                "theta is [2, 2, 3] and size [2, 3, 4, 5, 6], expected theta [N, 2, 3]"),
            std::string::npos);
}

} // namespace
} // namespace smelt::test
