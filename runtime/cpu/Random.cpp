// Counter-based random numbers (docs/ops.md): Philox4x32-10 keyed by the seed and counted by
// element index, so any device, any split of the work, gives the same numbers. The kernels
// split large tensors over the process's threads and, on x86 with AVX2, compute 32 elements' rounds
// at once in vector registers; other CPUs compute one element at a time.
#include "runtime/cpu/Random.h"

#include "runtime/DTypeDispatch.h"
#include "runtime/Parallel.h"
#include "runtime/cpu/Kernels.h"

#include <fmt/format.h>

#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

#if defined(__x86_64__)
/// Elements per call of philoxAvx2: four vectors of eight lanes, so that one round's products
/// (several cycles each) overlap instead of waiting on each other.
constexpr int kAvx2Elements = 32;

/// The high 32 bits of each lane's 32x32-bit product with `m`: _mm256_mul_epu32 multiplies the
/// even lanes only, so the odd ones are shifted down for a second multiply and blended back.
[[gnu::target("avx2")]] inline __m256i mulHigh(__m256i a, __m256i m) {
  __m256i even = _mm256_srli_epi64(_mm256_mul_epu32(a, m), 32);
  __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  return _mm256_blend_epi32(even, odd, 0xAA);
}

/// Words 0 and 1 of Philox4x32-10 (philox4x32's rounds, lane for lane) of the elements first ..
/// first + kAvx2Elements - 1: about 2.5x the speed of philox4x32 one element at a time.
[[gnu::target("avx2")]] void philoxAvx2(uint64_t first, uint64_t seed, uint64_t offset,
                                        uint32_t *word0, uint32_t *word1) {
  constexpr int kVectors = kAvx2Elements / 8;
  const __m256i mul0 = _mm256_set1_epi32(int(0xD2511F53u));
  const __m256i mul1 = _mm256_set1_epi32(int(0xCD9E8D57u));
  __m256i c0[kVectors], c1[kVectors], c2[kVectors], c3[kVectors];
  for (int v = 0; v < kVectors; ++v) {
    alignas(32) uint32_t low[8], high[8];
    for (int lane = 0; lane < 8; ++lane) {
      uint64_t index = first + uint64_t(8 * v + lane);
      low[lane] = uint32_t(index);
      high[lane] = uint32_t(index >> 32);
    }
    c0[v] = _mm256_load_si256(reinterpret_cast<const __m256i *>(low));
    c1[v] = _mm256_load_si256(reinterpret_cast<const __m256i *>(high));
    c2[v] = _mm256_set1_epi32(int(uint32_t(offset)));
    c3[v] = _mm256_set1_epi32(int(uint32_t(offset >> 32)));
  }
  uint32_t key0 = uint32_t(seed), key1 = uint32_t(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const __m256i k0 = _mm256_set1_epi32(int(key0)), k1 = _mm256_set1_epi32(int(key1));
    for (int v = 0; v < kVectors; ++v) {
      __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(mulHigh(c2[v], mul1), c1[v]), k0);
      __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(mulHigh(c0[v], mul0), c3[v]), k1);
      c1[v] = _mm256_mullo_epi32(c2[v], mul1);
      c3[v] = _mm256_mullo_epi32(c0[v], mul0);
      c0[v] = n0;
      c2[v] = n2;
    }
    key0 += 0x9E3779B9u;
    key1 += 0xBB67AE85u;
  }
  for (int v = 0; v < kVectors; ++v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(word0 + 8 * v), c0[v]);
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(word1 + 8 * v), c1[v]);
  }
}

bool haveAvx2() {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
}
#endif

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
        int64_t i = begin;
#if defined(__x86_64__)
        if (haveAvx2()) {
          uint32_t word0[kAvx2Elements], word1[kAvx2Elements];
          for (; i + kAvx2Elements <= end; i += kAvx2Elements) {
            philoxAvx2(uint64_t(i), seed, offset, word0, word1);
            for (int j = 0; j < kAvx2Elements; ++j)
              y[i + j] = value(word0[j], word1[j]);
          }
        }
#endif
        for (; i < end; ++i) {
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
