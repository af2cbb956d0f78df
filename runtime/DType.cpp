// The printed form and element count of tensor types (DType.h).
#include "runtime/DType.h"

namespace smelt::rt {

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
