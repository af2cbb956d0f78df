// Element types of Smelt tensors and their sizes and names, shared by the runtime and codegen.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace smelt::rt {

enum class DType : uint8_t { f32, f16, bf16, f64, i32, i64, i1 };

/// Bytes one element occupies in memory; i1 is stored as one byte holding 0 or 1.
size_t byteWidth(DType dtype);
/// The MLIR spelling: "f32", "bf16", "i1" ...
std::string_view dtypeName(DType dtype);
std::optional<DType> parseDType(std::string_view name);
bool isFloat(DType dtype);

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
