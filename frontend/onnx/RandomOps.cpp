// Converters of ONNX's random ops: RandomUniform and RandomNormal (a shape attribute),
// RandomUniformLike and RandomNormalLike (the input's shape), and Bernoulli (1 where a uniform
// draw falls below the input's probability), as smelt.rng_uniform and smelt.rng_normal. Those
// are counter-based (Philox keyed by a seed, docs/ops.md): a node draws with its `seed`
// attribute, or without one with a seed of its own from its place in the graph. At inference
// (smelt run, importModel) every run of a compiled model draws the same numbers, as a jitted JAX
// function with a fixed key does; in importInto's steps the binding's step offsets the counter,
// so each training step draws afresh (a masked autoencoder's masks, as Dropout's).
#include "frontend/onnx/NodeImporter.h"

#include <cstring>

namespace smelt::onnx {

uint64_t nodeSeed(const NodeImporter &n) {
  return (n.binding ? n.binding->seed : 0) + 0x9E3779B97F4A7C15ull * uint64_t(n.index + 1);
}

std::optional<Tensor> drawOffset(const NodeImporter &n) {
  return n.binding ? n.binding->step : std::nullopt;
}

namespace {

/// The node's seed: its `seed` attribute (a float in ONNX: its bits), else nodeSeed.
uint64_t seedOf(const NodeImporter &n) {
  if (const ::onnx::AttributeProto *seed = n.attribute("seed")) {
    float value = seed->f();
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    return uint64_t(bits) ^ 0xD1B54A32D192ED03ull;
  }
  return nodeSeed(n);
}

/// The `dtype` attribute, `fallback` when absent; a float type.
DType floatDType(const NodeImporter &n, DType fallback) {
  DType dtype = n.attrDType("dtype", fallback);
  if (!rt::isFloat(dtype))
    fail(ImportErrorKind::UnsupportedDtype,
         std::string("dtype ") + dtypeName(dtype) +
             " (random draws are float16, bfloat16, float or double)");
  return dtype;
}

/// The draws of `n` over `shape`: uniform in [low, high) or normal with mean and scale.
Tensor draws(const NodeImporter &n, const std::vector<int64_t> &shape, DType dtype, bool normal) {
  return normal ? rngNormal(n.g, shape, seedOf(n), n.attrFloat("mean", 0), n.attrFloat("scale", 1),
                            dtype, drawOffset(n))
                : rngUniform(n.g, shape, seedOf(n), n.attrFloat("low", 0), n.attrFloat("high", 1),
                             dtype, drawOffset(n));
}

template <bool Normal> void randomOfShape(NodeImporter &n) {
  const ::onnx::AttributeProto *shape = n.attribute("shape");
  if (!shape)
    fail(ImportErrorKind::BadFile, "no 'shape' attribute");
  std::vector<int64_t> dims(shape->ints().begin(), shape->ints().end());
  for (int64_t d : dims)
    if (d < 0)
      fail(ImportErrorKind::BadFile, "shape " + shapeString(dims) + " has a negative dimension");
  n.setOutput(0, draws(n, dims, floatDType(n, DType::f32), Normal));
}

template <bool Normal> void randomLike(NodeImporter &n) {
  Tensor like = n.input(0);
  DType fallback = rt::isFloat(like.dtype()) ? like.dtype() : DType::f32;
  n.setOutput(0, draws(n, like.shape(), floatDType(n, fallback), Normal));
}

/// Bernoulli: 1 where a uniform draw in [0, 1) is below the probability, in the `dtype`
/// attribute's type (the input's by default), drawn in f32 (f64 for double probabilities).
void bernoulli(NodeImporter &n) {
  Tensor p = floatInput(n, 0);
  DType work = p.dtype() == DType::f64 ? DType::f64 : DType::f32;
  Tensor u = rngUniform(n.g, p.shape(), seedOf(n), 0, 1, work, drawOffset(n));
  Tensor hit = compare(u, convert(p, work), CompareDirection::lt);
  n.setOutput(0, convert(hit, n.attrDType("dtype", p.dtype())));
}

} // namespace

void addRandomOps(ConverterTable &t) {
  t["RandomUniform"] = randomOfShape<false>;
  t["RandomNormal"] = randomOfShape<true>;
  t["RandomUniformLike"] = randomLike<false>;
  t["RandomNormalLike"] = randomLike<true>;
  t["Bernoulli"] = bernoulli;
}

} // namespace smelt::onnx
