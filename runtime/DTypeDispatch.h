// Compile-time dispatch over dtypes: the storage type of each DType, the type it computes in
// (f16/bf16 compute in float, i1 in uint8_t), and conversions between the two.
#pragma once

#include "runtime/DType.h"
#include "runtime/Half.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace smelt::rt {

template <typename T> struct TypeTag {
  using type = T;
};

/// Calls `fn(TypeTag<Storage>{})` for the storage type of `dtype`.
template <typename Fn> decltype(auto) visitDType(DType dtype, Fn &&fn) {
  switch (dtype) {
  case DType::f32:
    return fn(TypeTag<float>{});
  case DType::f16:
    return fn(TypeTag<Half>{});
  case DType::bf16:
    return fn(TypeTag<BFloat16>{});
  case DType::f64:
    return fn(TypeTag<double>{});
  case DType::i32:
    return fn(TypeTag<int32_t>{});
  case DType::i64:
    return fn(TypeTag<int64_t>{});
  case DType::i1:
    break;
  }
  return fn(TypeTag<bool>{});
}

/// The DType whose storage type is T (float -> f32, Half -> f16, bool -> i1 ...).
template <typename T> constexpr DType dtypeOf() {
  if constexpr (std::is_same_v<T, float>)
    return DType::f32;
  else if constexpr (std::is_same_v<T, Half>)
    return DType::f16;
  else if constexpr (std::is_same_v<T, BFloat16>)
    return DType::bf16;
  else if constexpr (std::is_same_v<T, double>)
    return DType::f64;
  else if constexpr (std::is_same_v<T, int32_t>)
    return DType::i32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return DType::i64;
  else {
    static_assert(std::is_same_v<T, bool>, "not the storage type of a Smelt dtype");
    return DType::i1;
  }
}

template <typename T> struct ComputeOf {
  using type = T;
};
template <> struct ComputeOf<Half> {
  using type = float;
};
template <> struct ComputeOf<BFloat16> {
  using type = float;
};
template <typename T> using Compute = typename ComputeOf<T>::type;

template <typename T> constexpr bool kIsFloat = std::is_floating_point_v<Compute<T>>;

template <typename T> inline Compute<T> toCompute(T value) { return Compute<T>(value); }

/// Converts a computed value to storage type T: floats round, float to integer truncates toward
/// zero and saturates (NaN gives 0), anything to bool is `!= 0`.
template <typename T, typename V> inline T fromCompute(V value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value != V(0);
  } else if constexpr (std::is_integral_v<T> && std::is_floating_point_v<V>) {
    if (std::isnan(value))
      return 0;
    if (value <= V(std::numeric_limits<T>::min()))
      return std::numeric_limits<T>::min();
    if (value >= V(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::max();
    return T(value);
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    // From double or an integer, round once (through round-to-odd), not twice via float.
    if constexpr (!std::is_same_v<V, float>)
      return T(floatRoundedToOdd(double(value)));
    else
      return T(float(value));
  } else {
    return T(value);
  }
}

} // namespace smelt::rt
