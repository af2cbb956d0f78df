// Counter-based random numbers (docs/ops.md): Philox4x32-10 keyed by the seed and counted by
// element index, so any device, any split of the work, gives the same numbers.
#include "runtime/cpu/Random.h"

#include "runtime/DTypeDispatch.h"
#include "runtime/cpu/Kernels.h"

#include <fmt/format.h>

#include <cmath>

namespace smelt::rt::cpu {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t(kMul0) * counter[0], p1 = uint64_t(kMul1) * counter[2];
    counter = {uint32_t(p1 >> 32) ^ counter[1] ^ key[0], uint32_t(p1),
               uint32_t(p0 >> 32) ^ counter[3] ^ key[1], uint32_t(p0)};
    key = {key[0] + kWeyl0, key[1] + kWeyl1};
  }
  return counter;
}

namespace {

std::array<uint32_t, 4> wordsAt(uint64_t index, uint64_t seed, uint64_t offset) {
  return philox4x32({uint32_t(index), uint32_t(index >> 32), uint32_t(offset),
                     uint32_t(offset >> 32)},
                    {uint32_t(seed), uint32_t(seed >> 32)});
}

} // namespace

double uniformAt(uint64_t index, uint64_t seed, uint64_t offset, bool wide) {
  std::array<uint32_t, 4> r = wordsAt(index, seed, offset);
  if (wide)
    return double((uint64_t(r[0]) << 21) ^ (r[1] >> 11)) * 0x1p-53;
  return double(float(r[0] >> 8) * 0x1p-24f);
}

double normalAt(uint64_t index, uint64_t seed, uint64_t offset, bool wide) {
  std::array<uint32_t, 4> r = wordsAt(index, seed, offset);
  if (wide) {
    double u1 = (double(r[0] >> 8) + 1) * 0x1p-24, u2 = double(r[1] >> 8) * 0x1p-24;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
  float u1 = (float(r[0] >> 8) + 1.0f) * 0x1p-24f, u2 = float(r[1] >> 8) * 0x1p-24f;
  return double(std::sqrt(-2.0f * std::log(u1)) * std::cos(2.0f * float(M_PI) * u2));
}

Expected<Kernel> prepareRandom(const Step &step, const StepTypes &types) {
  AttrReader attrs(step);
  bool uniform = step.op == "rng_uniform";
  uint64_t seed = uint64_t(attrs.integer("seed"));
  double a = attrs.real(uniform ? "low" : "mean"), b = attrs.real(uniform ? "high" : "stddev");
  if (Status s = attrs.status(); !s.ok())
    return s;
  bool hasOffset = types.operands.size() == 1;
  if (types.operands.size() > 1 || !isFloat(types.result.dtype) ||
      (hasOffset && types.operands[0] != TensorType{DType::i64, {}}))
    return Status::error(fmt::format("{}: takes an optional tensor<i64> offset and gives "
                                     "floats, not {}",
                                     describe(step), types.result.str()));
  int64_t n = types.result.numElements();
  bool wide = types.result.dtype == DType::f64;
  return visitDType(types.result.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return Kernel([=](const void *const *in, void *out) {
      uint64_t offset = hasOffset ? uint64_t(*static_cast<const int64_t *>(in[0])) : 0;
      T *y = static_cast<T *>(out);
      for (int64_t i = 0; i < n; ++i) {
        uint64_t index = uint64_t(i);
        if (wide)
          y[i] = fromCompute<T>(uniform ? a + (b - a) * uniformAt(index, seed, offset, true)
                                        : a + b * normalAt(index, seed, offset, true));
        else
          y[i] = fromCompute<T>(
              uniform ? float(a) + (float(b) - float(a)) *
                                       float(uniformAt(index, seed, offset, false))
                      : float(a) + float(b) * float(normalAt(index, seed, offset, false)));
      }
    });
  });
}

} // namespace smelt::rt::cpu
