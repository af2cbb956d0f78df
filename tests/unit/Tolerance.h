// The relative-norm tolerances of Smelt's numerical tests, by element type: against a float64
// reference (the builder-level tests) and fused against unfused (the CPU back end's tests),
// one table so the two agree.
#pragma once

#include "runtime/DType.h"

namespace smelt::test {

/// f32 2e-6, f16 1e-3, bf16 8e-3, f64 1e-12; integers and i1 exact.
inline double referenceTolerance(rt::DType dtype) {
  switch (dtype) {
  case rt::DType::f32:
    return 2e-6;
  case rt::DType::f16:
    return 1e-3;
  case rt::DType::bf16:
    return 8e-3;
  case rt::DType::f64:
    return 1e-12;
  default:
    return 0;
  }
}

} // namespace smelt::test
