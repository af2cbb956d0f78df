// Parameter initializers (Keras' GlorotUniform, HeNormal, RandomUniform, Zeros, Constant): how a
// parameter gets its first value in the graph's init function, and the per-parameter seeds.
#pragma once

#include <cstdint>
#include <vector>

namespace smelt {

class Graph;
class Tensor;
struct ParameterSpec;

/// Elements [begin, end) along a parameter's last axis, set to `value` after its initializer
/// drew the rest (an LSTM's forget-gate slice of its bias: Keras' unit_forget_bias).
struct ConstantSlice {
  int64_t begin = 0, end = 0;
  double value = 0;
};

/// How a parameter gets its first value. Fans are computed as Keras does (see kerasFans).
struct Initializer {
  enum class Kind { GlorotUniform, HeNormal, Uniform, Zeros, Constant } kind = Kind::Zeros;
  /// Constant's value; Uniform's low end.
  double value = 0;
  /// Uniform's high end.
  double high = 0;

  /// Uniform in [-limit, limit), limit = sqrt(6 / (fan_in + fan_out)).
  static Initializer glorotUniform() { return {Kind::GlorotUniform}; }
  /// Keras draws He normal from a normal truncated at two standard deviations (stddev
  /// sqrt(2 / fan_in) / .87962566103423978). Smelt has no truncation op, so this is a plain
  /// normal with stddev sqrt(2 / fan_in): the same variance, but with rare large tails.
  static Initializer heNormal() { return {Kind::HeNormal}; }
  /// Uniform in [low, high) whatever the shape (Keras' RandomUniform; its Embedding layer's
  /// default is uniform(-0.05, 0.05)).
  static Initializer uniform(double low, double high) { return {Kind::Uniform, low, high}; }
  static Initializer zeros() { return {Kind::Zeros}; }
  static Initializer constant(double v) { return {Kind::Constant, v}; }

  /// Applied in order after the draw; Graph::parameter checks them against the shape.
  std::vector<ConstantSlice> constantSlices;
  /// This initializer with elements [begin, end) of the last axis set to `value`.
  Initializer withConstantSlice(int64_t begin, int64_t end, double value) const {
    Initializer copy = *this;
    copy.constantSlices.push_back({begin, end, value});
    return copy;
  }
};

/// Keras' fans of a kernel shape: [in, out] for a matrix; for a conv kernel [..., in, out]
/// each is multiplied by the receptive field (the product of the leading dims); a vector has
/// fan_in = fan_out = its size, a scalar 1.
struct Fans {
  double in = 1, out = 1;
};
Fans kerasFans(const std::vector<int64_t> &shape);

/// The bound of GlorotUniform and the stddev of HeNormal for `shape`.
double glorotLimit(const std::vector<int64_t> &shape);
double heStddev(const std::vector<int64_t> &shape);

/// The seed of the parameter created `index`-th (from 0) in a graph seeded `graphSeed`: a
/// splitmix64 mix, so neighbouring parameters and neighbouring graph seeds draw unrelated
/// streams. Kept below 2^63 because the dialect's seed attribute is a signed i64.
uint64_t parameterSeed(uint64_t graphSeed, uint64_t index);

/// Emits, at the graph's insertion point, the ops computing `p`'s initial value
/// (rng_uniform, rng_normal or constant).
Tensor initialValue(Graph &g, const ParameterSpec &p);

} // namespace smelt
