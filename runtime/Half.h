// f16 and bf16 storage types: 16-bit patterns with exact conversions to and from float, rounding
// to nearest even, so the CPU computes in f32 and stores what a GPU would.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace smelt::rt {

inline uint32_t floatBits(float f) { return std::bit_cast<uint32_t>(f); }
inline float bitsFloat(uint32_t u) { return std::bit_cast<float>(u); }

/// Narrows a double to float rounding to odd (truncate, then set the last bit if inexact).
/// Rounding that float again to f16 or bf16 (at least two bits fewer) then gives exactly the
/// nearest-even result of rounding the double directly: no double-rounding error.
inline float floatRoundedToOdd(double d) {
  float f = float(d);
  if (double(f) == d || d != d)
    return f;
  if (std::fabs(double(f)) > std::fabs(d)) // rounded away from zero: step back
    f = std::nextafter(f, 0.0f);
  return bitsFloat(floatBits(f) | 1u);
}

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f) {
    uint32_t u = floatBits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) { // NaN: keep it quiet, never round it to infinity
      bits = uint16_t((u >> 16) | 0x40);
      return;
    }
    u += 0x7fffu + ((u >> 16) & 1); // round to nearest even
    bits = uint16_t(u >> 16);
  }
  operator float() const { return bitsFloat(uint32_t(bits) << 16); }
};

struct Half {
  uint16_t bits = 0;
  Half() = default;
  explicit Half(float f) {
    uint32_t u = floatBits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t absBits = u & 0x7fffffffu;
    if (absBits >= 0x7f800000u) { // Inf or NaN
      bits = uint16_t(sign | 0x7c00u | (absBits > 0x7f800000u ? 0x200u : 0));
      return;
    }
    if (absBits >= 0x47800000u) { // >= 65536; 65520..65536 round up to infinity below
      bits = uint16_t(sign | 0x7c00u);
      return;
    }
    if (absBits < 0x38800000u) { // below 2^-14: subnormal half, rounded by the FPU
      float magnitude = bitsFloat(absBits) + 0.5f; // 0.5 = 2^-1 aligns 2^-24 to the last bit
      bits = uint16_t(sign | (floatBits(magnitude) - 0x3f000000u));
      return;
    }
    uint32_t mantissaOdd = (absBits >> 13) & 1;
    absBits += 0xc8000fffu + mantissaOdd; // rebias exponent (-112 << 23) and round to even
    bits = uint16_t(sign | (absBits >> 13));
  }
  operator float() const {
    uint32_t sign = uint32_t(bits & 0x8000u) << 16;
    uint32_t exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ffu;
    if (exponent == 0x1f)
      return bitsFloat(sign | 0x7f800000u | (mantissa << 13));
    if (exponent == 0) // zero or subnormal: mantissa * 2^-24
      return bitsFloat(sign) + (sign ? -1.0f : 1.0f) * float(mantissa) * 5.9604644775390625e-8f;
    return bitsFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
  }
};

} // namespace smelt::rt
