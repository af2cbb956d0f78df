// f16 and bf16 conversions: checked against the compiler's _Float16 (IEEE round to nearest
// even) and, for bf16, against a nearest-value search in double; every 16-bit pattern round
// trips, NaN stays NaN, ties go to even, and double inputs are rounded once.
#include "RuntimeTestUtil.h"

#include "runtime/DTypeDispatch.h"
#include "runtime/Half.h"

#include <bit>
#include <cmath>
#include <limits>

namespace smelt::rt::test {
namespace {

uint16_t compilerHalfBits(double d) {
  _Float16 h = static_cast<_Float16>(d); // GCC rounds double -> half directly, to nearest even
  return std::bit_cast<uint16_t>(h);
}

/// bf16 by definition: the nearer of the two bf16 values around |f| (ties to the even
/// pattern), where the value past the largest finite one is infinity.
uint16_t referenceBf16Bits(double d) {
  if (std::isnan(d))
    return 0x7fc0;
  uint16_t sign = std::signbit(d) ? 0x8000 : 0;
  double a = std::fabs(d);
  auto value = [](uint32_t bits) {
    return bits >= 0x7f80 ? std::ldexp(1.0, 128) : double(bitsFloat(bits << 16));
  };
  uint32_t lo = 0;
  for (uint32_t step = 0x8000; step; step >>= 1) // largest pattern with value(lo) <= a
    if (lo + step <= 0x7f80 && value(lo + step) <= a)
      lo += step;
  if (lo >= 0x7f80)
    return sign | 0x7f80;
  double below = a - value(lo), above = value(lo + 1) - a;
  uint32_t bits = below < above ? lo : above < below ? lo + 1 : (lo & 1 ? lo + 1 : lo);
  return uint16_t(sign | bits);
}

/// Floats that probe rounding: random bit patterns, plus every half/bf16 value and midpoint
/// nudged by -1, 0, +1 ulp.
std::vector<float> probeFloats() {
  std::vector<float> out;
  for (int i = 0; i < 200000; ++i)
    out.push_back(bitsFloat(uint32_t(rng()())));
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    float v = float(std::bit_cast<_Float16>(uint16_t(h)));
    float next = float(std::bit_cast<_Float16>(uint16_t(h + 1)));
    float mid = v + (next - v) / 2; // exact: halves have 11 significant bits
    for (float f : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      out.push_back(f);
      out.push_back(-f);
    }
  }
  for (uint32_t b = 0; b < 0x7f80; b += 7) {
    float mid = bitsFloat((b << 16) | 0x8000); // exactly between b and b + 1
    out.push_back(mid);
    out.push_back(std::nextafter(mid, 0.0f));
    out.push_back(-mid);
  }
  for (float f : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e30f, INFINITY, -INFINITY,
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::quiet_NaN()})
    out.push_back(f);
  return out;
}

TEST(Half, FloatToHalfMatchesCompilerFloat16) {
  int mismatches = 0;
  for (float f : probeFloats()) {
    uint16_t got = Half(f).bits, want = compilerHalfBits(f);
    bool bothNaN = (got & 0x7fff) > 0x7c00 && (want & 0x7fff) > 0x7c00;
    if (got != want && !bothNaN && mismatches++ < 5)
      ADD_FAILURE() << "Half(" << f << " = 0x" << std::hex << floatBits(f) << ") = 0x" << got
                    << ", want 0x" << want;
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(Half, EveryHalfPatternRoundTripsThroughFloat) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    Half h;
    h.bits = uint16_t(bits);
    float f = float(h);
    float want = float(std::bit_cast<_Float16>(uint16_t(bits)));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << bits;
      ASSERT_TRUE(std::isnan(float(Half(f)))) << "NaN stays NaN: " << std::hex << bits;
      continue;
    }
    ASSERT_EQ(floatBits(f), floatBits(want)) << std::hex << bits;
    ASSERT_EQ(Half(f).bits, bits);
  }
}

TEST(BFloat16, FloatToBf16MatchesNearestValue) {
  int mismatches = 0;
  for (float f : probeFloats()) {
    uint16_t got = BFloat16(f).bits, want = referenceBf16Bits(f);
    bool bothNaN = (got & 0x7fff) > 0x7f80 && (want & 0x7fff) > 0x7f80;
    if (got != want && !bothNaN && mismatches++ < 5)
      ADD_FAILURE() << "BFloat16(" << f << " = 0x" << std::hex << floatBits(f) << ") = 0x" << got
                    << ", want 0x" << want;
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(BFloat16(1.0f + 0x1p-8f).bits, 0x3f80) << "a tie rounds to the even pattern";
  EXPECT_EQ(BFloat16(1.0f + 3 * 0x1p-8f).bits, 0x3f82) << "a tie rounds to the even pattern";
}

TEST(BFloat16, EveryPatternRoundTripsThroughFloat) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    BFloat16 b;
    b.bits = uint16_t(bits);
    float f = float(b);
    ASSERT_EQ(floatBits(f), bits << 16);
    if (std::isnan(f))
      ASSERT_TRUE(std::isnan(float(BFloat16(f)))) << "NaN must not round to infinity";
    else
      ASSERT_EQ(BFloat16(f).bits, bits);
  }
}

TEST(Half, DoublesRoundOnceNotTwice) {
  // 1 + 2^-11 + 2^-40 is just above the f16 midpoint 1 + 2^-11, but rounds to that midpoint as
  // a float; a second rounding would then give 1.0 instead of 1 + 2^-10.
  double justAbove = 1.0 + 0x1p-11 + 0x1p-40;
  EXPECT_EQ(fromCompute<Half>(justAbove).bits, compilerHalfBits(justAbove));
  EXPECT_EQ(float(fromCompute<Half>(justAbove)), 1.0f + 0x1p-10f);
  EXPECT_EQ(float(fromCompute<BFloat16>(1.0 + 0x1p-8 + 0x1p-40)), 1.0f + 0x1p-7f);
  int mismatches = 0;
  for (int i = 0; i < 200000; ++i) {
    // Doubles near f16 midpoints, and random magnitudes across the f16 and bf16 ranges.
    double d = std::ldexp(draw(0.5, 1.0), int(rng()() % 40) - 26);
    if (i % 2)
      d = std::nearbyint(d * 2048) / 2048 + std::ldexp(draw(-1, 1, 0), -40);
    uint16_t h = fromCompute<Half>(d).bits, b = fromCompute<BFloat16>(d).bits;
    if ((h != compilerHalfBits(d) || b != referenceBf16Bits(d)) && mismatches++ < 5)
      ADD_FAILURE() << "double " << d << ": f16 0x" << std::hex << h << " vs 0x"
                    << compilerHalfBits(d) << ", bf16 0x" << b << " vs 0x" << referenceBf16Bits(d);
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(Half, OverflowUnderflowAndSpecials) {
  EXPECT_EQ(Half(65504.0f).bits, 0x7bff);
  EXPECT_EQ(Half(65520.0f).bits, 0x7c00) << "the midpoint past the max rounds to infinity";
  EXPECT_EQ(Half(-1e9f).bits, 0xfc00);
  EXPECT_EQ(Half(0x1p-24f).bits, 0x0001) << "smallest subnormal";
  EXPECT_EQ(Half(0x1p-25f).bits, 0x0000) << "tie with zero goes to even (zero)";
  EXPECT_EQ(Half(-0.0f).bits, 0x8000);
  EXPECT_TRUE(std::isnan(float(Half(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(BFloat16(INFINITY).bits, 0x7f80);
  EXPECT_EQ(BFloat16(-INFINITY).bits, 0xff80);
}

} // namespace
} // namespace smelt::rt::test
