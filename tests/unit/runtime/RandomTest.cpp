// Counter-based random numbers: Philox4x32-10 known-answer tests, each element equal to the
// docs/ops.md formula, moments over 2^20 samples, the offset operand, and reproducibility.
#include "RuntimeTestUtil.h"

#include "runtime/cpu/Random.h"

#include <cmath>

namespace smelt::rt::test {
namespace {

using Words = std::array<uint32_t, 4>;

TEST(Random, PhiloxKnownAnswers) {
  // Random123's published vectors for philox4x32_10.
  EXPECT_EQ(cpu::philox4x32({0, 0, 0, 0}, {0, 0}),
            (Words{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(
      cpu::philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
      (Words{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(
      cpu::philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
      (Words{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

HostTensor offsetTensor(int64_t offset) { return HostTensor::fromVector<int64_t>({}, {offset}); }

TEST(Random, ElementsFollowTheDocumentedFormula) {
  uint64_t seed = rng()();
  // Past the size the kernels split over threads, and not a multiple of any split.
  int64_t offset = int64_t(rng()() >> 1), n = (int64_t(1) << 15) + 37;
  Attrs uniform = {{"seed", int64_t(seed)}, {"low", -2.0}, {"high", 3.0}};
  Attrs normal = {{"seed", int64_t(seed)}, {"mean", 1.5}, {"stddev", 0.5}};
  std::vector<double> u32 =
      runOp("rng_uniform", {offsetTensor(offset)}, {DType::f32, {n}}, uniform).toDoubles();
  std::vector<double> u64 =
      runOp("rng_uniform", {offsetTensor(offset)}, {DType::f64, {n}}, uniform).toDoubles();
  std::vector<double> z32 =
      runOp("rng_normal", {offsetTensor(offset)}, {DType::f32, {n}}, normal).toDoubles();
  std::vector<double> z64 =
      runOp("rng_normal", {offsetTensor(offset)}, {DType::f64, {n}}, normal).toDoubles();
  for (int64_t i = 0; i < n; ++i) {
    Words r = cpu::philox4x32({uint32_t(i), uint32_t(uint64_t(i) >> 32), uint32_t(offset),
                               uint32_t(uint64_t(offset) >> 32)},
                              {uint32_t(seed), uint32_t(seed >> 32)});
    float u = float(r[0] >> 8) * 0x1p-24f;
    ASSERT_EQ(u32[size_t(i)], double(-2.0f + 5.0f * u)) << i;
    double wide = double((uint64_t(r[0]) << 21) ^ (r[1] >> 11)) * 0x1p-53;
    ASSERT_EQ(u64[size_t(i)], -2.0 + 5.0 * wide) << i;
    float u1 = (float(r[0] >> 8) + 1.0f) * 0x1p-24f, u2 = float(r[1] >> 8) * 0x1p-24f;
    float z = std::sqrt(-2.0f * std::log(u1)) * std::cos(2.0f * float(M_PI) * u2);
    ASSERT_EQ(z32[size_t(i)], double(1.5f + 0.5f * z)) << i;
    double d1 = (double(r[0] >> 8) + 1) * 0x1p-24, d2 = double(r[1] >> 8) * 0x1p-24;
    ASSERT_NEAR(z64[size_t(i)], 1.5 + 0.5 * std::sqrt(-2 * std::log(d1)) * std::cos(2 * M_PI * d2),
                1e-15)
        << i;
  }
}

/// Mean and variance of `v`.
std::pair<double, double> moments(const std::vector<double> &v) {
  double mean = 0, var = 0;
  for (double x : v)
    mean += x;
  mean /= double(v.size());
  for (double x : v)
    var += (x - mean) * (x - mean);
  return {mean, var / double(v.size())};
}

TEST(Random, MomentsOverAMillionSamples) {
  int64_t n = 1 << 20;
  for (DType dtype : {DType::f32, DType::f64, DType::bf16}) {
    Attrs uniform = {{"seed", int64_t(rng()() >> 1)}, {"low", -1.0}, {"high", 3.0}};
    std::vector<double> u = runOp("rng_uniform", {}, {dtype, {n}}, uniform).toDoubles();
    auto [mean, var] = moments(u);
    // Five standard errors: var(mean) = var / n, var(var) ~ (mu4 - var^2) / n.
    double sigma = 4.0 / std::sqrt(12.0);
    EXPECT_NEAR(mean, 1.0, 5 * sigma / std::sqrt(double(n))) << dtypeName(dtype);
    EXPECT_NEAR(var, 16.0 / 12, 5 * std::sqrt((256.0 / 80 - 256.0 / 144) / double(n)) + 1e-4)
        << dtypeName(dtype);
    double lo = *std::min_element(u.begin(), u.end()), hi = *std::max_element(u.begin(), u.end());
    EXPECT_GE(lo, -1.0) << dtypeName(dtype);
    if (dtype != DType::bf16) { // bf16 may round the largest draws up to `high` itself
      EXPECT_LT(hi, 3.0) << dtypeName(dtype);
    }

    Attrs normal = {{"seed", int64_t(rng()() >> 1)}, {"mean", -0.5}, {"stddev", 2.0}};
    std::vector<double> z = runOp("rng_normal", {}, {dtype, {n}}, normal).toDoubles();
    auto [zMean, zVar] = moments(z);
    double bf16Slack = dtype == DType::bf16 ? 0.02 : 0; // rounding adds variance
    EXPECT_NEAR(zMean, -0.5, 5 * 2.0 / std::sqrt(double(n))) << dtypeName(dtype);
    EXPECT_NEAR(zVar, 4.0, 5 * std::sqrt(2 * 16.0 / double(n)) + bf16Slack) << dtypeName(dtype);
  }
}

TEST(Random, SameSeedSameNumbersAndOffsetsGiveNewOnes) {
  Attrs attrs = {{"seed", int64_t(42)}, {"low", 0.0}, {"high", 1.0}};
  TensorType type{DType::f32, {64}};
  std::vector<double> a = runOp("rng_uniform", {}, type, attrs).toDoubles();
  EXPECT_EQ(runOp("rng_uniform", {}, type, attrs).toDoubles(), a);
  EXPECT_EQ(runOp("rng_uniform", {offsetTensor(0)}, type, attrs).toDoubles(), a)
      << "offset 0 is the same as no offset";
  std::vector<double> b = runOp("rng_uniform", {offsetTensor(1)}, type, attrs).toDoubles();
  int same = 0;
  for (size_t i = 0; i < a.size(); ++i)
    same += a[i] == b[i];
  EXPECT_LT(same, 3);
  attrs["seed"] = int64_t(43);
  EXPECT_NE(runOp("rng_uniform", {}, type, attrs).toDoubles(), a);
}

TEST(Random, RejectsIntegerResultsAndBadOffsets) {
  Attrs attrs = {{"seed", int64_t(1)}, {"low", 0.0}, {"high", 1.0}};
  EXPECT_NE(createError("rng_uniform", {}, {DType::i32, {4}}, attrs).find("gives floats"),
            std::string::npos);
  EXPECT_NE(createError("rng_uniform", {{DType::i32, {}}}, {DType::f32, {4}}, attrs)
                .find("optional tensor<i64> offset"),
            std::string::npos);
}

} // namespace
} // namespace smelt::rt::test
