// Converter of ONNX's Resize (and the older Upsample): with the scales or sizes known at import
// time, every output position of an axis reads a fixed set of input positions with fixed
// weights (ONNX's reference: nearest, linear or cubic coefficients at the transformed
// coordinate, neighbours clamped to the edge). So each resized axis is a weighted sum of a few
// picks along it: separable, static, and built from slices, concats and multiplies.
#include "frontend/onnx/NodeImporter.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace smelt::onnx {
namespace {

struct Resampling {
  std::string mode;           // nearest, linear, cubic
  std::string transform;      // coordinate_transformation_mode
  std::string nearestMode;
  double cubicA;
  bool excludeOutside;
};

/// The interpolation coefficients of ONNX's reference for `ratio` in (0, 1].
std::vector<double> coefficients(const Resampling &r, double ratio, bool integral) {
  if (r.mode == "nearest") {
    if (integral)
      return {0, 1};
    if (r.nearestMode == "round_prefer_ceil")
      return {double(ratio < 0.5), double(ratio >= 0.5)};
    if (r.nearestMode == "floor")
      return {1, 0};
    if (r.nearestMode == "ceil")
      return {0, 1};
    return {double(ratio <= 0.5), double(ratio > 0.5)}; // round_prefer_floor
  }
  if (r.mode == "linear")
    return {1 - ratio, ratio};
  double a = r.cubicA, s = ratio + 1, t = 1 - ratio, u = 2 - ratio;
  return {((a * s - 5 * a) * s + 8 * a) * s - 4 * a, ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1,
          ((a + 2) * t - (a + 3)) * t * t + 1, ((a * u - 5 * a) * u + 8 * a) * u - 4 * a};
}

/// For each output position: the input positions it reads and their weights.
struct AxisPlan {
  std::vector<std::vector<int64_t>> index; // [tap][output position]
  std::vector<std::vector<double>> weight; // [tap][output position]
};

AxisPlan planAxis(const NodeImporter &n, const Resampling &r, int64_t in, int64_t out,
                  double scale) {
  AxisPlan plan;
  double outWidth = scale * double(in);
  for (int64_t x = 0; x < out; ++x) {
    double xo;
    if (r.transform == "align_corners")
      xo = outWidth == 1 ? 0 : double(x) * double(in - 1) / (outWidth - 1);
    else if (r.transform == "asymmetric")
      xo = double(x) / scale;
    else if (r.transform == "pytorch_half_pixel")
      xo = outWidth == 1 ? -0.5 : (double(x) + 0.5) / scale - 0.5;
    else if (r.transform == "half_pixel")
      xo = (double(x) + 0.5) / scale - 0.5;
    else if (r.transform == "tf_half_pixel_for_nn")
      xo = (double(x) + 0.5) / scale;
    else
      n.unsupported("coordinate_transformation_mode '" + r.transform + "'");
    double floor = std::floor(xo);
    bool integral = xo == floor;
    std::vector<double> c = coefficients(r, integral ? 1.0 : xo - floor, integral);
    // The taps: the len(c) positions nearest to xo, ties to the smaller, in order.
    int64_t taps = int64_t(c.size());
    int64_t first = integral ? int64_t(floor) - taps / 2 : int64_t(floor) - (taps / 2 - 1);
    std::vector<int64_t> idx(static_cast<size_t>(taps));
    std::iota(idx.begin(), idx.end(), first);
    if (r.excludeOutside) {
      double sum = 0;
      for (int64_t k = 0; k < taps; ++k)
        sum += (idx[size_t(k)] < 0 || idx[size_t(k)] >= in) ? (c[size_t(k)] = 0) : c[size_t(k)];
      for (double &w : c)
        w /= sum;
    }
    plan.index.resize(size_t(taps));
    plan.weight.resize(size_t(taps));
    for (int64_t k = 0; k < taps; ++k) {
      plan.index[size_t(k)].push_back(std::clamp<int64_t>(idx[size_t(k)], 0, in - 1));
      plan.weight[size_t(k)].push_back(c[size_t(k)]);
    }
  }
  return plan;
}

Tensor resizeAxis(const NodeImporter &n, Tensor x, int64_t axis, const AxisPlan &plan) {
  std::vector<int64_t> weightShape(size_t(x.rank()), 1);
  weightShape[size_t(axis)] = int64_t(plan.index[0].size());
  Tensor sum;
  for (size_t k = 0; k < plan.index.size(); ++k) {
    const std::vector<double> &w = plan.weight[k];
    if (std::all_of(w.begin(), w.end(), [](double v) { return v == 0; }))
      continue;
    Tensor picked = pickAlong(x, axis, plan.index[k]);
    if (std::any_of(w.begin(), w.end(), [](double v) { return v != 1; }))
      picked = mul(picked, constant(n.g, w, weightShape, x.dtype()));
    sum = sum ? add(sum, picked) : picked;
  }
  return sum ? sum : mul(pickAlong(x, axis, plan.index[0]), scalarLike(x, 0));
}

void resizeWith(NodeImporter &n, Tensor x, std::vector<double> scales, std::vector<int64_t> sizes,
                const Resampling &r) {
  if (r.mode != "nearest" && r.mode != "linear" && r.mode != "cubic")
    n.unsupported("mode '" + r.mode + "'");
  if (r.mode != "nearest") {
    DType d = x.dtype();
    if (!isFloatType(d))
      fail(ImportErrorKind::UnsupportedDtype, "linear and cubic resizing of integers");
  }
  std::vector<int64_t> shape = x.shape();
  if (!sizes.empty()) {
    if (sizes.size() != shape.size())
      fail(ImportErrorKind::BadFile, "sizes needs one entry per dimension");
    scales.clear();
    for (size_t i = 0; i < shape.size(); ++i)
      scales.push_back(double(sizes[i]) / double(shape[i]));
  } else {
    if (scales.size() != shape.size())
      fail(ImportErrorKind::BadFile, "scales needs one entry per dimension");
    for (size_t i = 0; i < shape.size(); ++i)
      sizes.push_back(int64_t(double(shape[i]) * scales[i]));
  }
  for (int64_t a = 0; a < x.rank(); ++a) {
    if (sizes[size_t(a)] < 1 || scales[size_t(a)] <= 0)
      n.unsupported("an empty or negative resize");
    if (sizes[size_t(a)] == shape[size_t(a)] && scales[size_t(a)] == 1)
      continue;
    x = resizeAxis(n, x, a, planAxis(n, r, shape[size_t(a)], sizes[size_t(a)], scales[size_t(a)]));
  }
  n.setOutput(0, x);
}

void resize(NodeImporter &n) {
  Resampling r{n.attrString("mode", "nearest"),
               n.attrString("coordinate_transformation_mode", n.opset >= 11 ? "half_pixel" : "asymmetric"),
               n.attrString("nearest_mode", "round_prefer_floor"), n.attrFloat("cubic_coeff_a", -0.75),
               n.attrInt("exclude_outside", 0) != 0};
  if (r.transform == "tf_crop_and_resize")
    n.unsupported("coordinate_transformation_mode 'tf_crop_and_resize' (a region of interest)");
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  if (n.opset < 11) {
    r.nearestMode = "floor"; // opset 10: asymmetric and floor, scales as input 1
    scales = n.constantInput(1, "the scales").values;
  } else {
    if (n.hasInput(2))
      scales = n.constantInput(2, "the scales").values;
    if (n.hasInput(3))
      sizes = n.intsInput(3, "the sizes");
  }
  resizeWith(n, n.input(0), scales, sizes, r);
}

/// Upsample (deprecated since opset 10): Resize with asymmetric coordinates and floor.
void upsample(NodeImporter &n) {
  Resampling r{n.attrString("mode", "nearest"), "asymmetric", "floor", -0.75, false};
  std::vector<double> scales = n.opset >= 9 ? n.constantInput(1, "the scales").values
                                            : std::vector<double>{};
  if (n.opset < 9)
    for (double s : n.attribute("scales") ? std::vector<double>(n.attribute("scales")->floats().begin(),
                                                               n.attribute("scales")->floats().end())
                                          : std::vector<double>{})
      scales.push_back(s);
  resizeWith(n, n.input(0), scales, {}, r);
}

} // namespace

void addResizeOps(ConverterTable &t) {
  t["Resize"] = resize;
  t["Upsample"] = upsample;
}

} // namespace smelt::onnx
