// rng_uniform and rng_normal inside fused kernels, against docs/ops.md's formula: Philox4x32-10
// written here from its paper and checked against Random123's published vectors, then every
// element of the fused CPU kernels past the size they split over threads, in every float dtype,
// with and without the step offset, for seeds using both key words: uniform bit for bit (a
// dropout mask is the same on every device), normal within a few ulps (the kernels' log and cos
// are LLVM's, the reference's glibc's). The SIMT emulator checks the CUDA kernels against these
// (tests/unit/cuda/FusionCases.cpp).
#include "FusionTestUtil.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstring>

namespace smelt::rt::test {
namespace {

using Words = std::array<uint32_t, 4>;

/// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
Words philox(Words counter, std::array<uint32_t, 2> key) {
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t(0xD2511F53u) * counter[0], p1 = uint64_t(0xCD9E8D57u) * counter[2];
    counter = {uint32_t(p1 >> 32) ^ counter[1] ^ key[0], uint32_t(p1),
               uint32_t(p0 >> 32) ^ counter[3] ^ key[1], uint32_t(p0)};
    key = {key[0] + 0x9E3779B9u, key[1] + 0xBB67AE85u};
  }
  return counter;
}

/// Element `i`'s words under `seed` and `offset` (docs/ops.md).
Words wordsAt(uint64_t i, uint64_t seed, uint64_t offset) {
  return philox({uint32_t(i), uint32_t(i >> 32), uint32_t(offset), uint32_t(offset >> 32)},
                {uint32_t(seed), uint32_t(seed >> 32)});
}

TEST(FusedRandom, PhiloxKnownAnswers) {
  EXPECT_EQ(philox({0, 0, 0, 0}, {0, 0}), (Words{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (Words{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (Words{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

// 37 x 891 = 32,967 elements: past the 2^15 the kernels split over threads, a multiple of no
// split, with vector bodies and tails.
const std::vector<int64_t> kShape = {37, 891};

/// The fused kernel of `op` (an rng op without its type, "rng_normal seed = 1, ...") for
/// kShape in `dtype`, run with the step offset `offset`, or with none when it is negative.
HostTensor runFused(const std::string &op, DType dtype, int64_t offset) {
  std::string type = tensorType(kShape, dtype);
  bool withOffset = offset >= 0;
  std::string mlir = withOffset ? "func.func @f(%step: tensor<i64>) -> " + type +
                                      " {\n  %r = smelt.fusion loop (%step) : (tensor<i64>) -> " +
                                      type + " {\n  ^bb0(%s: tensor<i64>):\n"
                                : "func.func @f() -> " + type +
                                      " {\n  %r = smelt.fusion loop () : () -> " + type + " {\n";
  mlir += "    %u = smelt." + op + (withOffset ? " offset %s" : "") + " : " + type +
          "\n    smelt.yield %u : " + type + "\n  }\n  return %r : " + type + "\n}\n";
  std::optional<Compiled> compiled = compileBoth(mlir);
  EXPECT_TRUE(compiled) << mlir;
  if (!compiled)
    return HostTensor();
  std::vector<HostTensor> inputs;
  if (withOffset)
    inputs.push_back(HostTensor::fromVector<int64_t>({}, {offset}));
  std::vector<HostTensor> out = runExecutable(compiled->fused, inputs);
  EXPECT_EQ(out.size(), 1u) << mlir;
  return out.empty() ? HostTensor() : std::move(out[0]);
}

TEST(FusedRandom, UniformIsTheFormulaBitForBit) {
  for (DType dtype : kFloatDTypes)
    for (int64_t offset : {int64_t(-1), int64_t(rng()() >> 1)}) {
      uint64_t seed = rng()() >> 1; // both key words
      double low = draw(-10, 0), high = low + draw(0.1, 20);
      std::string what =
          fmt::format("{} offset {}, seed {}, [{}, {})", dtypeName(dtype), offset, seed, low, high);
      HostTensor got = runFused(
          fmt::format("rng_uniform seed = {}, low = {:.17g}, high = {:.17g}", seed, low, high),
          dtype, offset);
      int64_t n = kShape[0] * kShape[1];
      ASSERT_EQ(got.type(), (TensorType{dtype, kShape})) << what;
      std::vector<double> want(static_cast<size_t>(n));
      // In f32 (f64 for f64), each product and sum rounded: range is float(high) - float(low).
      float lowF = float(low), rangeF = float(high) - float(low);
      for (int64_t i = 0; i < n; ++i) {
        Words r = wordsAt(uint64_t(i), seed, uint64_t(std::max<int64_t>(offset, 0)));
        if (dtype == DType::f64) {
          double u = double((uint64_t(r[0]) << 21) ^ (r[1] >> 11)) * 0x1p-53;
          double scaled = (high - low) * u;
          want[size_t(i)] = low + scaled;
        } else {
          float u = float(r[0] >> 8) * 0x1p-24f;
          float scaled = rangeF * u;
          want[size_t(i)] = double(lowF + scaled);
        }
      }
      HostTensor reference = HostTensor::fromDoubles({dtype, kShape}, want);
      EXPECT_EQ(std::memcmp(got.raw(), reference.raw(), got.byteSize()), 0) << what;
    }
}

TEST(FusedRandom, NormalIsTheFormulaWithinAFewUlps) {
  for (DType dtype : kFloatDTypes)
    for (int64_t offset : {int64_t(-1), int64_t(rng()() >> 1)}) {
      uint64_t seed = rng()() >> 1;
      double mean = draw(-3, 3), stddev = draw(0.01, 4);
      std::string what = fmt::format("{} offset {}, seed {}, mean {}, stddev {}", dtypeName(dtype),
                                     offset, seed, mean, stddev);
      HostTensor got = runFused(
          fmt::format("rng_normal seed = {}, mean = {:.17g}, stddev = {:.17g}", seed, mean, stddev),
          dtype, offset);
      ASSERT_EQ(got.type(), (TensorType{dtype, kShape})) << what;
      std::vector<double> values = got.toDoubles();
      // Where the kernel's log and cos may differ from glibc's by a few ulps, and then the
      // rounding to f16 or bf16 of the f32 result.
      double ulp = dtype == DType::f64 ? 0x1p-52 : 0x1p-23;
      double stored = dtype == DType::f16 ? 0x1p-11 : dtype == DType::bf16 ? 0x1p-8 : 0;
      double worst = 0;
      for (size_t i = 0; i < values.size(); ++i) {
        Words r = wordsAt(i, seed, uint64_t(std::max<int64_t>(offset, 0)));
        double want;
        if (dtype == DType::f64) {
          double u1 = (double(r[0] >> 8) + 1) * 0x1p-24, u2 = double(r[1] >> 8) * 0x1p-24;
          want = mean + stddev * (std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2));
        } else {
          float u1 = (float(r[0] >> 8) + 1.0f) * 0x1p-24f, u2 = float(r[1] >> 8) * 0x1p-24f;
          float z = std::sqrt(-2.0f * std::log(u1)) * std::cos(2.0f * float(M_PI) * u2);
          want = double(float(mean) + float(stddev) * z);
        }
        // z is at most 5.8 in size (u1 >= 2^-24): 16 ulps of that scale.
        double tolerance = 16 * ulp * (std::abs(mean) + 6 * stddev) + stored * std::abs(want);
        worst = std::max(worst, std::abs(values[i] - want) / tolerance);
        ASSERT_LE(std::abs(values[i] - want), tolerance) << what << ", element " << i;
      }
      std::printf("%s: largest error %.3f of the tolerance\n", what.c_str(), worst);
    }
}

} // namespace
} // namespace smelt::rt::test
