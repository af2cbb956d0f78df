// The header of a .npy file: the Python dict literal after the magic, version and length,
// parsed strictly as NumPy's format spec describes it (numpy.lib.format), without a regex.
#pragma once

#include "runtime/Status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace smelt::data {

struct NpyHeader {
  std::string descr; // the dtype string, such as '<f4'
  bool fortranOrder = false;
  std::vector<int64_t> shape;
};

/// NumPy allows at most this many dimensions (NPY_MAXDIMS of NumPy 2).
constexpr size_t kNpyMaxRank = 64;

/// Parses `text`, the header's HEADER_LEN bytes, which start at byte `offset` of the file (for
/// messages). The header is exactly one dict literal with the keys 'descr' (a string),
/// 'fortran_order' (True or False) and 'shape' (a tuple of sizes: `()`, `(n,)`, `(n, m)`),
/// each once, in any order, with an optional trailing comma, then spaces and a final '\n'.
/// `python2Ints` accepts the sizes Python 2 wrote as `3L` (format 1.0 and 2.0). Errors say
/// what is wrong and at which offset; the iterative parser needs no stack for long headers.
rt::Expected<NpyHeader> parseNpyHeader(std::string_view text, size_t offset, bool python2Ints);

} // namespace smelt::data
