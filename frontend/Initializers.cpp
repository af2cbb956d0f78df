// Initializers: Keras' fans and bounds, per-parameter seeds, and the ops of an initial value.
#include "frontend/Initializers.h"

#include "frontend/Ops.h"

#include <cmath>

namespace smelt {

Fans kerasFans(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return {1, 1};
  if (shape.size() == 1)
    return {double(shape[0]), double(shape[0])};
  double receptive = 1;
  for (size_t i = 0; i + 2 < shape.size(); ++i)
    receptive *= double(shape[i]);
  return {double(shape[shape.size() - 2]) * receptive, double(shape.back()) * receptive};
}

double glorotLimit(const std::vector<int64_t> &shape) {
  Fans f = kerasFans(shape);
  return std::sqrt(6.0 / std::max(f.in + f.out, 1.0));
}

double heStddev(const std::vector<int64_t> &shape) {
  return std::sqrt(2.0 / std::max(kerasFans(shape).in, 1.0));
}

uint64_t parameterSeed(uint64_t graphSeed, uint64_t index) {
  uint64_t z = graphSeed + 0x9e3779b97f4a7c15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (z ^ (z >> 31)) & 0x7fffffffffffffffull;
}

/// The draw (or constant) of `p`'s initializer, before its constant slices.
static Tensor drawnValue(Graph &g, const ParameterSpec &p) {
  // The init function's ops point at the parameter's creation site: a bad initializer (an
  // rng on an integer parameter, say) is reported where the user asked for it.
  switch (p.init.kind) {
  case Initializer::Kind::GlorotUniform: {
    double limit = glorotLimit(p.shape);
    return rngUniform(g, p.shape, p.seed, -limit, limit, p.dtype, std::nullopt, p.loc);
  }
  case Initializer::Kind::HeNormal:
    return rngNormal(g, p.shape, p.seed, 0.0, heStddev(p.shape), p.dtype, std::nullopt, p.loc);
  case Initializer::Kind::Uniform:
    return rngUniform(g, p.shape, p.seed, p.init.value, p.init.high, p.dtype, std::nullopt, p.loc);
  case Initializer::Kind::Zeros:
    return constant(g, 0.0, p.shape, p.dtype, p.loc);
  case Initializer::Kind::Constant:
    break;
  }
  return constant(g, p.init.value, p.shape, p.dtype, p.loc);
}

Tensor initialValue(Graph &g, const ParameterSpec &p) {
  Tensor value = drawnValue(g, p);
  if (p.init.constantSlices.empty())
    return value;
  Tensor column = iota(g, p.shape, int64_t(p.shape.size()) - 1, DType::i64, p.loc);
  for (const ConstantSlice &slice : p.init.constantSlices) {
    Tensor from = compare(column, scalarLike(column, double(slice.begin), p.loc),
                          CompareDirection::ge, p.loc);
    Tensor below = compare(column, scalarLike(column, double(slice.end), p.loc),
                           CompareDirection::lt, p.loc);
    Tensor fill = constant(g, slice.value, p.shape, p.dtype, p.loc);
    value = select(from, select(below, fill, value, p.loc), value, p.loc);
  }
  return value;
}

} // namespace smelt
