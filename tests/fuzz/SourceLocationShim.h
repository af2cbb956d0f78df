// std::source_location for clang before 15, whose missing __builtin_source_location leaves
// libstdc++ 12's <source_location> empty: scripts/fuzz.sh force-includes this (-include) when
// it compiles the ONNX importer, whose builder (frontend/Graph.h) takes one in every call.
// The importer is linked to the builder compiled by gcc, so the layout is libstdc++'s: one
// pointer to {file, function, line, column}. libstdc++ points at a constant the compiler
// emits; here each call site's record is made once, from __builtin_FILE/FUNCTION/LINE (which
// clang 14 has), and kept for the process (columns are not known: 0).
#pragma once

#include <source_location>

#if !__has_builtin(__builtin_source_location)
#include <cstdint>
#include <mutex>
#include <set>
#include <tuple>

namespace std {
struct source_location {
  struct __impl {
    const char *_M_file_name;
    const char *_M_function_name;
    unsigned _M_line;
    unsigned _M_column;
    bool operator<(const __impl &other) const {
      return tie(_M_file_name, _M_function_name, _M_line) <
             tie(other._M_file_name, other._M_function_name, other._M_line);
    }
  };

  static source_location current(const char *file = __builtin_FILE(),
                                 const char *function = __builtin_FUNCTION(),
                                 unsigned line = __builtin_LINE()) noexcept {
    static mutex guard;
    static set<__impl> *sites = new set<__impl>; // never freed: records outlive every caller
    lock_guard<mutex> lock(guard);
    source_location location;
    location._M_impl = &*sites->insert({file, function, line, 0}).first;
    return location;
  }
  const char *file_name() const noexcept { return _M_impl ? _M_impl->_M_file_name : ""; }
  const char *function_name() const noexcept { return _M_impl ? _M_impl->_M_function_name : ""; }
  uint_least32_t line() const noexcept { return _M_impl ? _M_impl->_M_line : 0; }
  uint_least32_t column() const noexcept { return 0; }

private:
  const __impl *_M_impl = nullptr;
};
} // namespace std
#endif
