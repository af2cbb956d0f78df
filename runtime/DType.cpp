// Element type helpers: sizes, names and the printed form of tensor types.
#include "runtime/DType.h"

namespace smelt::rt {

namespace {
struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t width;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::f32, "f32", 4}, {DType::f16, "f16", 2}, {DType::bf16, "bf16", 2},
    {DType::f64, "f64", 8}, {DType::i32, "i32", 4}, {DType::i64, "i64", 8},
    {DType::i1, "i1", 1},
};
} // namespace

size_t byteWidth(DType dtype) { return kDTypes[size_t(dtype)].width; }
std::string_view dtypeName(DType dtype) { return kDTypes[size_t(dtype)].name; }

std::optional<DType> parseDType(std::string_view name) {
  for (const DTypeInfo &info : kDTypes)
    if (info.name == name)
      return info.dtype;
  return std::nullopt;
}

bool isFloat(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16 ||
         dtype == DType::f64;
}

int64_t TensorType::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string TensorType::str() const {
  std::string s = "tensor<";
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  s += dtypeName(dtype);
  return s + ">";
}

} // namespace smelt::rt
