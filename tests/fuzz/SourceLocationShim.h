// std::source_location for clang before 15, whose missing __builtin_source_location leaves
// libstdc++ 12's <source_location> empty: scripts/fuzz.sh force-includes this (-include) when
// it compiles the ONNX importer, whose builder (frontend/Graph.h) takes one in every call.
// Built on __builtin_FILE/LINE/FUNCTION, which clang 14 has; columns are not known (0).
#pragma once

#include <source_location>

#if !__has_builtin(__builtin_source_location)
#include <cstdint>

namespace std {
struct source_location {
  static constexpr source_location current(const char *file = __builtin_FILE(),
                                           const char *function = __builtin_FUNCTION(),
                                           uint_least32_t line = __builtin_LINE()) noexcept {
    source_location location;
    location.file_ = file;
    location.function_ = function;
    location.line_ = line;
    return location;
  }
  constexpr const char *file_name() const noexcept { return file_; }
  constexpr const char *function_name() const noexcept { return function_; }
  constexpr uint_least32_t line() const noexcept { return line_; }
  constexpr uint_least32_t column() const noexcept { return 0; }

private:
  const char *file_ = "";
  const char *function_ = "";
  uint_least32_t line_ = 0;
};
} // namespace std
#endif
