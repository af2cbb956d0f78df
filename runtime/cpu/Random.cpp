// Counter-based random numbers (docs/ops.md): Philox4x32-10 keyed by the seed and counted by
// element index, so any device, any split of the work, gives the same numbers. The kernels
// split large tensors over the process's threads. Compiled models draw uniform numbers inside
// fused kernels (codegen); these steps serve rng_normal (initializers, once) and hand-built
// executables, so they compute one element at a time.
#include "runtime/cpu/Random.h"

#include "runtime/DTypeDispatch.h"
#include "runtime/Parallel.h"
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

// The draws from an element's first two words: one formula for the scalar functions and the
// kernels, so they agree bit for bit.
float uniform24(uint32_t word0) { return float(word0 >> 8) * 0x1p-24f; }
double uniform53(uint32_t word0, uint32_t word1) {
  return double((uint64_t(word0) << 21) ^ (word1 >> 11)) * 0x1p-53;
}
float normal24(uint32_t word0, uint32_t word1) {
  float u1 = (float(word0 >> 8) + 1.0f) * 0x1p-24f, u2 = float(word1 >> 8) * 0x1p-24f;
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(2.0f * float(M_PI) * u2);
}
double normal53(uint32_t word0, uint32_t word1) {
  double u1 = (double(word0 >> 8) + 1) * 0x1p-24, u2 = double(word1 >> 8) * 0x1p-24;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

/// Below this many elements a draw runs on the executor's thread (waking the pool costs more).
constexpr int64_t kParallelElements = int64_t(1) << 15;

} // namespace

Expected<Kernel> prepareRandom(const Step &step, const StepTypes &types) {
  // a and b: low and high, or mean and stddev.
  bool uniform = step.op == StepOp::RngUniform;
  const UniformParams *u = step.paramsAs<UniformParams>();
  const NormalParams *g = step.paramsAs<NormalParams>();
  uint64_t seed = uint64_t(uniform ? u->seed : g->seed);
  double a = uniform ? u->low : g->mean, b = uniform ? u->high : g->stddev;
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
    // Element i's value from its words: f64 draws and computes in double, the rest in float.
    auto value = [=](uint32_t word0, uint32_t word1) {
      if (wide)
        return fromCompute<T>(uniform ? a + (b - a) * uniform53(word0, word1)
                                      : a + b * normal53(word0, word1));
      return fromCompute<T>(uniform ? float(a) + (float(b) - float(a)) * uniform24(word0)
                                    : float(a) + float(b) * normal24(word0, word1));
    };
    return Kernel([=](const void *const *in, void *out) {
      uint64_t offset = hasOffset ? uint64_t(*static_cast<const int64_t *>(in[0])) : 0;
      T *y = static_cast<T *>(out);
      // Elements depend on their index alone: any split over threads gives the same numbers.
      auto fill = [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          std::array<uint32_t, 4> words = wordsAt(uint64_t(i), seed, offset);
          y[i] = value(words[0], words[1]);
        }
      };
      if (n < kParallelElements)
        fill(0, n);
      else
        parallelFor(n, fill);
    });
  });
}

} // namespace smelt::rt::cpu
