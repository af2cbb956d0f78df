// Element types of Smelt tensors and their sizes and names: the one enum the builder, the ONNX
// importer, codegen and the runtime share (frontend/DType.h names it for the builder).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace smelt::rt {

enum class DType : uint8_t { f32, f16, bf16, f64, i32, i64, i1 };

// Inline, so that the builder, which names these types but does not link the runtime, can ask.
namespace detail {
struct DTypeInfo {
  DType dtype;
  const char *name;
  size_t width;
};
inline constexpr DTypeInfo kDTypes[] = {
    {DType::f32, "f32", 4}, {DType::f16, "f16", 2}, {DType::bf16, "bf16", 2},
    {DType::f64, "f64", 8}, {DType::i32, "i32", 4}, {DType::i64, "i64", 8},
    {DType::i1, "i1", 1},
};
} // namespace detail

/// Bytes one element occupies in memory; i1 is stored as one byte holding 0 or 1.
constexpr size_t byteWidth(DType dtype) { return detail::kDTypes[size_t(dtype)].width; }
/// The MLIR spelling: "f32", "bf16", "i1" ...
constexpr const char *dtypeName(DType dtype) { return detail::kDTypes[size_t(dtype)].name; }
constexpr std::optional<DType> parseDType(std::string_view name) {
  for (const detail::DTypeInfo &info : detail::kDTypes)
    if (info.name == name)
      return info.dtype;
  return std::nullopt;
}
/// f32, f16, bf16 or f64.
constexpr bool isFloat(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16 || dtype == DType::f64;
}

/// A static shape and element type: what every buffer of an Executable has.
struct TensorType {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;

  int64_t numElements() const;
  size_t byteSize() const { return size_t(numElements()) * byteWidth(dtype); }
  /// "tensor<256x784xf32>", as MLIR prints it.
  std::string str() const;
  bool operator==(const TensorType &other) const = default;
};

} // namespace smelt::rt
