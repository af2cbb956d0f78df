// "[1, 2, 3]": how diagnostics and messages print a list of integers (a shape, a window, a
// padding), shared by the verifiers, the passes and the builder's errors.
#pragma once

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <string>

namespace smelt {

inline std::string bracketed(llvm::ArrayRef<int64_t> values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i)
    text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

} // namespace smelt
