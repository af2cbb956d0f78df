// Converters of ONNX's signal ops: DFT (opsets 17 and 20), STFT (17) and MelWeightMatrix (17),
// an audio model's spectrogram front end as torch.stft and torchaudio export it. A DFT of
// length L is a matmul by the constant [cos | sin] matrix of its frequencies (O(L^2) work where
// an FFT is O(L log L), but one library call that fuses nothing away and differentiates as a
// matmul, so spectrogram losses train); STFT gathers its frames at positions computed from
// iotas, weights them by the window and takes each frame's DFT. Complex values are ONNX's: a
// last axis of 2 (real, imaginary), or of 1 for a real signal.
#include "frontend/onnx/NodeImporter.h"

#include <cmath>

namespace smelt::onnx {
namespace {

/// One scalar input known at import time, as an integer.
int64_t knownInteger(const NodeImporter &n, int i, const std::string &what) {
  const TensorValue &v = n.constantInput(i, what);
  if (v.values.size() != 1)
    fail(ImportErrorKind::BadFile, what + " must be a scalar, not " + shapeString(v.shape));
  return int64_t(v.values[0]);
}

/// The DFT of `x` [..., N at `axis`, ..., 1 or 2] along `axis`, the signal zero-padded or cut to
/// `length`: [..., bins at `axis`, ..., 2], the first `bins` frequencies of
/// sum_n x_n e^(-+2 pi i k n / length), with + and a factor 1 / length when `inverse`.
Tensor dft(Tensor x, int64_t axis, int64_t length, int64_t bins, bool inverse) {
  Graph &g = x.graph();
  int64_t rank = x.rank(), parts = x.dim(-1);
  // The other axes first, then the signal's, then the complex one.
  std::vector<int64_t> order, others;
  for (int64_t d = 0; d < rank - 1; ++d)
    if (d != axis) {
      order.push_back(d);
      others.push_back(x.dim(d));
    }
  order.push_back(axis);
  order.push_back(rank - 1);
  Tensor signal = transpose(x, order);
  int64_t n = x.dim(axis), rows = 1;
  for (int64_t d : others)
    rows *= d;
  std::vector<int64_t> start(size_t(rank), 0), limit = signal.shape();
  if (n > length) {
    limit[size_t(rank - 2)] = length;
    signal = slice(signal, start, limit);
  } else if (n < length) {
    std::vector<int64_t> low(size_t(rank), 0), high(size_t(rank), 0);
    high[size_t(rank - 2)] = length - n;
    signal = pad(signal, low, high);
  }
  // [rows, parts, length] -> [rows, parts * length]: the real part's samples, then the
  // imaginary part's.
  Tensor flat =
      reshape(transpose(reshape(signal, {rows, length, parts}), {0, 2, 1}), {rows, parts * length});
  // re = xr C + xi S, im = xi C - xr S forward; re = xr C - xi S, im = xi C + xr S inverse,
  // over 1 / length. One matrix [parts * length, 2 * bins]: rows for xr then xi, columns for
  // re then im.
  double sign = inverse ? 1 : -1, scale = inverse ? 1.0 / double(length) : 1.0;
  std::vector<double> matrix(size_t(parts * length * 2 * bins));
  for (int64_t p = 0; p < parts; ++p)
    for (int64_t t = 0; t < length; ++t)
      for (int64_t k = 0; k < bins; ++k) {
        // The angle reduced exactly first: k t mod length in integers.
        double angle = 2 * M_PI * double((k * t) % length) / double(length);
        double c = std::cos(angle) * scale, s = sign * std::sin(angle) * scale;
        size_t row = size_t((p * length + t) * 2 * bins);
        // xr contributes (c, s) to (re, im); xi contributes (-s, c).
        matrix[row + size_t(k)] = p == 0 ? c : -s;
        matrix[row + size_t(bins + k)] = p == 0 ? s : c;
      }
  Tensor spectrum =
      matmul(flat, constant(g, matrix, {parts * length, 2 * bins}, x.dtype())); // [rows, 2 bins]
  std::vector<int64_t> shape = others;
  shape.push_back(bins);
  shape.push_back(2);
  Tensor out = reshape(transpose(reshape(spectrum, {rows, 2, bins}), {0, 2, 1}), shape);
  return transpose(out, inversePermutation(order));
}

void checkComplexAxis(Tensor x, const char *op) {
  if (x.rank() < 2 || (x.dim(-1) != 1 && x.dim(-1) != 2))
    fail(ImportErrorKind::BadFile, std::string(op) + "'s input is " + shapeString(x.shape()) +
                                       ", expected a last axis of 1 (real) or 2 (complex)");
}

void dftOp(NodeImporter &n) {
  Tensor x = floatInput(n, 0);
  checkComplexAxis(x, "DFT");
  bool inverse = n.attrInt("inverse", 0) != 0, onesided = n.attrInt("onesided", 0) != 0;
  int64_t axis =
      n.opset >= 20 ? (n.hasInput(2) ? knownInteger(n, 2, "the axis") : -2) : n.attrInt("axis", 1);
  int64_t rank = x.rank();
  if (axis < -rank || axis >= rank - 1 || axis == -1)
    fail(ImportErrorKind::BadFile, "axis " + std::to_string(axis) + " of an input of rank " +
                                       std::to_string(rank) +
                                       " (the last axis holds the real and imaginary parts)");
  axis = axis < 0 ? axis + rank : axis;
  int64_t length = n.hasInput(1) ? knownInteger(n, 1, "dft_length") : x.dim(axis);
  if (length < 1)
    fail(ImportErrorKind::BadFile, "dft_length " + std::to_string(length) + " is not positive");
  if (inverse && onesided)
    n.unsupported("inverse with onesided (a real inverse transform of a one-sided spectrum)");
  if (onesided && x.dim(-1) != 1)
    fail(ImportErrorKind::BadFile, "onesided takes a real signal (a last axis of 1)");
  n.setOutput(0, dft(x, axis, length, onesided ? length / 2 + 1 : length, inverse));
}

/// STFT: signal [batch, samples, 1 or 2] -> [batch, frames, bins, 2], frame f the samples from
/// f * frame_step, frame_length of them, times the window, transformed (one-sided by default).
void stftOp(NodeImporter &n) {
  Tensor signal = floatInput(n, 0);
  checkComplexAxis(signal, "STFT");
  if (signal.rank() != 3)
    fail(ImportErrorKind::BadFile,
         "the signal is " + shapeString(signal.shape()) + ", expected [batch, samples, 1 or 2]");
  int64_t step = knownInteger(n, 1, "frame_step");
  std::optional<Tensor> window;
  if (n.hasInput(2))
    window = floatInput(n, 2);
  int64_t frameLength = n.hasInput(3) ? knownInteger(n, 3, "frame_length")
                        : window      ? window->dim(0)
                                      : signal.dim(1);
  if (window && (window->rank() != 1 || window->dim(0) != frameLength))
    fail(ImportErrorKind::BadFile, "the window is " + shapeString(window->shape()) +
                                       ", expected [" + std::to_string(frameLength) +
                                       "] (frame_length)");
  int64_t samples = signal.dim(1);
  if (step < 1 || frameLength < 1 || frameLength > samples)
    fail(ImportErrorKind::BadFile, "frame_step " + std::to_string(step) + " and frame_length " +
                                       std::to_string(frameLength) + " over " +
                                       std::to_string(samples) + " samples");
  bool onesided = n.attrInt("onesided", 1) != 0;
  if (onesided && signal.dim(2) != 1)
    fail(ImportErrorKind::BadFile, "onesided takes a real signal (a last axis of 1)");
  int64_t frames = 1 + (samples - frameLength) / step, batch = signal.dim(0), parts = signal.dim(2);
  // Each frame's samples gathered from the signal's [samples, batch * parts] rows at
  // f * step + t, positions from two iotas.
  Tensor position = add(mul(iota(n.g, {frames, frameLength}, 0, DType::i64),
                            constant(n.g, double(step), {}, DType::i64)),
                        iota(n.g, {frames, frameLength}, 1, DType::i64));
  Tensor rows = reshape(transpose(signal, {1, 0, 2}), {samples, batch * parts});
  Tensor framed = reshape(gatherRows(rows, position), {frames, frameLength, batch, parts});
  framed = transpose(framed, {2, 0, 1, 3}); // [batch, frames, frame_length, parts]
  if (window)
    framed =
        mul(framed, broadcastTo(reshape(convert(*window, framed.dtype()), {1, 1, frameLength, 1}),
                                framed.shape()));
  n.setOutput(0, dft(framed, 2, frameLength, onesided ? frameLength / 2 + 1 : frameLength, false));
}

/// MelWeightMatrix: [dft_length / 2 + 1, num_mel_bins] triangular filters evenly spaced in mel
/// between the edges, computed at import time as ONNX's reference computes them.
void melWeightMatrix(NodeImporter &n) {
  int64_t mels = knownInteger(n, 0, "num_mel_bins"), dftLength = knownInteger(n, 1, "dft_length");
  double rate = n.constantInput(2, "sample_rate").values.at(0);
  double lower = n.constantInput(3, "lower_edge_hertz").values.at(0);
  double upper = n.constantInput(4, "upper_edge_hertz").values.at(0);
  if (mels < 1 || dftLength < 1 || !(rate > 0) || !(lower >= 0) || !(upper > lower))
    fail(ImportErrorKind::BadFile, "num_mel_bins, dft_length and sample_rate must be positive, "
                                   "and 0 <= lower_edge_hertz < upper_edge_hertz");
  DType dtype = n.attrDType("output_datatype", DType::f32);
  int64_t bins = dftLength / 2 + 1;
  auto mel = [](double hertz) { return 2595 * std::log1p(hertz / 700) / std::log(10.0); };
  double low = mel(lower), step = (mel(upper) - low) / double(mels + 2);
  std::vector<int64_t> edges;
  for (int64_t i = 0; i < mels + 2; ++i) {
    double hertz = 700 * std::expm1((double(i) * step + low) / 2595 * std::log(10.0));
    edges.push_back(int64_t(std::floor(double(dftLength + 1) * hertz / rate)));
  }
  std::vector<double> weights(size_t(bins * mels), 0.0);
  auto at = [&](int64_t bin, int64_t m) -> double & {
    if (bin < 0 || bin >= bins)
      fail(ImportErrorKind::BadFile, "upper_edge_hertz lies above the Nyquist frequency");
    return weights[size_t(bin * mels + m)];
  };
  for (int64_t m = 0; m < mels; ++m) {
    int64_t left = edges[size_t(m)], centre = edges[size_t(m + 1)], right = edges[size_t(m + 2)];
    if (centre == left)
      at(centre, m) = 1;
    else
      for (int64_t j = left; j <= centre; ++j)
        at(j, m) = double(j - left) / double(centre - left);
    for (int64_t j = centre; j < right; ++j)
      at(j, m) = double(right - j) / double(right - centre);
  }
  n.setOutput(0, constant(n.g, weights, {bins, mels}, dtype));
}

} // namespace

void addSignalOps(ConverterTable &t) {
  t["DFT"] = dftOp;
  t["STFT"] = stftOp;
  t["MelWeightMatrix"] = melWeightMatrix;
}

} // namespace smelt::onnx
