// Converter of ONNX's Resize (and the older Upsample): with the scales or sizes known at import
// time, every output position of an axis reads a fixed set of input positions with fixed
// weights (ONNX's reference: nearest, linear or cubic coefficients at the transformed
// coordinate, neighbours clamped to the edge). So each resized axis is a weighted sum of a few
// picks along it: separable, static, and built from slices, concats and multiplies. Opset 18's
// axes, keep_aspect_ratio_policy and antialias (a wider kernel, more picks) and 19's
// half_pixel_symmetric only change those positions and weights.
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
  bool antialias = false;     // opset 18: linear and cubic filters stretched when downscaling
};

/// Keys' cubic convolution kernel at distance t >= 0.
double cubicKernel(double a, double t) {
  if (t <= 1)
    return ((a + 2) * t - (a + 3)) * t * t + 1;
  return t < 2 ? ((a * t - 5 * a) * t + 8 * a) * t - 4 * a : 0;
}

/// The interpolation coefficients of ONNX's reference for `ratio` in (0, 1], on the taps
/// floor(x) - (count/2 - 1) ... of the transformed coordinate x. Antialiasing (scale < 1)
/// widens a linear or cubic kernel by 1 / scale over more taps, normalized to sum to 1.
std::vector<double> coefficients(const Resampling &r, double ratio, bool integral, double scale) {
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
  bool cubic = r.mode == "cubic";
  if (r.antialias && scale < 1) {
    double reach = cubic ? 2 : 1;
    int64_t start = int64_t(std::floor(-reach / scale)) + 1, taps = 2 - 2 * start;
    std::vector<double> c;
    double sum = 0;
    for (int64_t k = 0; k < taps; ++k) {
      double t = std::abs(scale * (double(start + k) - ratio));
      c.push_back(cubic ? cubicKernel(r.cubicA, t) : std::max(0.0, 1 - t));
      sum += c.back();
    }
    for (double &w : c)
      w /= sum;
    return c;
  }
  if (!cubic)
    return {1 - ratio, ratio};
  return {cubicKernel(r.cubicA, ratio + 1), cubicKernel(r.cubicA, ratio),
          cubicKernel(r.cubicA, 1 - ratio), cubicKernel(r.cubicA, 2 - ratio)};
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
    else if (r.transform == "half_pixel_symmetric") // opset 19: centred when out is rounded
      xo = double(in) / 2 * (1 - double(out) / outWidth) + (double(x) + 0.5) / scale - 0.5;
    else if (r.transform == "tf_half_pixel_for_nn")
      xo = (double(x) + 0.5) / scale;
    else
      n.unsupported("coordinate_transformation_mode '" + r.transform + "'");
    double floor = std::floor(xo);
    bool integral = xo == floor;
    std::vector<double> c = coefficients(r, integral ? 1.0 : xo - floor, integral, scale);
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

/// `values` given for `axes` (opset 18's attribute; all axes when empty) spread over all
/// `rank` dimensions, the others `fill`.
template <typename T>
std::vector<T> onAxes(const NodeImporter &n, const std::vector<T> &values,
                      const std::vector<int64_t> &axes, int64_t rank, const std::vector<T> &fill,
                      const char *what) {
  if (values.empty() || axes.empty()) {
    if (!values.empty() && int64_t(values.size()) != rank)
      fail(ImportErrorKind::BadFile, std::string(what) + " needs one entry per dimension");
    return values;
  }
  if (values.size() != axes.size())
    fail(ImportErrorKind::BadFile, std::string(what) + " needs one entry per axis in 'axes'");
  std::vector<T> all = fill;
  for (size_t i = 0; i < axes.size(); ++i)
    all[size_t(normalizeAxis(n, axes[i], rank, "axis"))] = values[i];
  return all;
}

void resizeWith(NodeImporter &n, Tensor x, std::vector<double> scales, std::vector<int64_t> sizes,
                const Resampling &r, const std::vector<int64_t> &axes = {},
                const std::string &policy = "stretch") {
  if (r.mode != "nearest" && r.mode != "linear" && r.mode != "cubic")
    n.unsupported("mode '" + r.mode + "'");
  if (r.mode != "nearest") {
    DType d = x.dtype();
    if (!rt::isFloat(d))
      fail(ImportErrorKind::UnsupportedDtype, "linear and cubic resizing of integers");
  }
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    n.unsupported("keep_aspect_ratio_policy '" + policy + "'");
  std::vector<int64_t> shape = x.shape();
  int64_t rank = x.rank();
  scales = onAxes(n, scales, axes, rank, std::vector<double>(size_t(rank), 1.0), "scales");
  sizes = onAxes(n, sizes, axes, rank, shape, "sizes");
  if (!sizes.empty()) {
    scales.clear();
    for (size_t i = 0; i < shape.size(); ++i)
      scales.push_back(double(sizes[i]) / double(shape[i]));
    if (policy != "stretch") {
      // One scale for the resized axes, the smallest or the largest; sizes rounded half up.
      std::vector<int64_t> resized = axes;
      if (resized.empty())
        for (int64_t a = 0; a < rank; ++a)
          resized.push_back(a);
      double common = policy == "not_larger" ? INFINITY : 0;
      for (int64_t a : resized) {
        double s = scales[size_t(normalizeAxis(n, a, rank, "axis"))];
        common = policy == "not_larger" ? std::min(common, s) : std::max(common, s);
      }
      std::fill(scales.begin(), scales.end(), 1.0);
      for (int64_t a : resized) {
        size_t d = size_t(normalizeAxis(n, a, rank, "axis"));
        scales[d] = common;
        sizes[d] = int64_t(common * double(shape[d]) + 0.5);
      }
    }
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
               n.attrInt("exclude_outside", 0) != 0, n.opset >= 18 && n.attrInt("antialias", 0) != 0};
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
  bool since18 = n.opset >= 18; // axes and keep_aspect_ratio_policy
  resizeWith(n, n.input(0), scales, sizes, r, since18 ? n.attrInts("axes", {}) : std::vector<int64_t>{},
             since18 ? n.attrString("keep_aspect_ratio_policy", "stretch") : "stretch");
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
