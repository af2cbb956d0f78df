// The .npy header parser (NpyHeader.h): a cursor over the dict literal, one method per part of
// its grammar. Stricter than Python's literal_eval where NumPy never writes the form (escapes,
// string prefixes, duplicate keys), because a lenient reader is how a key hidden inside a
// string value once changed how data was read.
#include "data/NpyHeader.h"

#include <fmt/format.h>

#include <optional>

namespace smelt::data {

namespace {

class HeaderCursor {
public:
  HeaderCursor(std::string_view text, size_t offset) : text_(text), offset_(offset) {}

  /// A Status naming the offset of the cursor and what was expected there.
  rt::Status error(const std::string &what) const {
    return rt::Status::error(
        fmt::format("malformed header at offset {}: {}", offset_ + pos_, what));
  }

  void skipSpaces() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t'))
      ++pos_;
  }
  bool atEnd() const { return pos_ == text_.size(); }
  /// Whether a quoted string starts here (after spaces).
  bool atQuote() {
    skipSpaces();
    return peek() == '\'' || peek() == '"';
  }
  char peek() const { return atEnd() ? '\0' : text_[pos_]; }
  /// Skips spaces, then takes `c` if it is next.
  bool take(char c) {
    skipSpaces();
    if (peek() != c)
      return false;
    ++pos_;
    return true;
  }

  /// A quoted string: '...' or "...", printable ASCII without backslash escapes.
  rt::Expected<std::string> string() {
    skipSpaces();
    char quote = peek();
    if (quote != '\'' && quote != '"')
      return error("expected a quoted string");
    size_t start = ++pos_;
    for (; !atEnd() && peek() != quote; ++pos_) {
      unsigned char c = static_cast<unsigned char>(peek());
      if (c == '\\' || c < 0x20 || c > 0x7e)
        return error("a string holds a backslash or a byte that is not printable ASCII");
    }
    if (atEnd())
      return error("unterminated string");
    std::string value(text_.substr(start, pos_ - start));
    ++pos_;
    return value;
  }

  /// True or False, as a whole word.
  rt::Expected<bool> boolean() {
    skipSpaces();
    for (bool value : {true, false}) {
      std::string_view word = value ? "True" : "False";
      if (text_.substr(pos_, word.size()) == word && !isWordChar(pos_ + word.size())) {
        pos_ += word.size();
        return value;
      }
    }
    return error("'fortran_order' must be True or False");
  }

  /// A tuple of sizes with Python's syntax: `()`, `(n,)`, `(n, m)`, `(n, m,)`.
  rt::Expected<std::vector<int64_t>> shape(bool python2Ints) {
    if (!take('('))
      return error("'shape' must be a tuple such as (2, 3), (4,) or ()");
    std::vector<int64_t> dims;
    bool comma = false;
    while (!take(')')) {
      if (!dims.empty() && !comma)
        return error("malformed shape: expected ',' or ')'");
      std::optional<int64_t> size = this->size(python2Ints);
      if (!size)
        return error("malformed shape: expected a size (a non-negative integer)");
      if (dims.size() == kNpyMaxRank)
        return error(fmt::format("shape has more than {} dimensions", kNpyMaxRank));
      dims.push_back(*size);
      comma = take(',');
    }
    // Python reads (3) as the number 3, not a tuple: NumPy rejects it too.
    if (dims.size() == 1 && !comma)
      return error("malformed shape: a one-dimensional shape is written (n,), not (n)");
    return dims;
  }

private:
  bool isWordChar(size_t at) const {
    if (at >= text_.size())
      return false;
    char c = text_[at];
    return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  }

  /// A decimal integer without sign or leading zeros (Python 3 forbids them), saturating at
  /// 2^62: readNpy rejects such a size as too large anyway.
  std::optional<int64_t> size(bool python2Ints) {
    skipSpaces();
    size_t start = pos_;
    constexpr int64_t kCap = int64_t(1) << 62;
    int64_t value = 0;
    // Saturates before multiplying: a 20-digit size overflowed int64 (found by npy_fuzz).
    for (; peek() >= '0' && peek() <= '9'; ++pos_)
      value = value > (kCap - 9) / 10 ? kCap : std::min(kCap, value * 10 + (peek() - '0'));
    if (pos_ == start || (text_[start] == '0' && pos_ - start > 1))
      return std::nullopt;
    if (python2Ints && peek() == 'L')
      ++pos_;
    if (isWordChar(pos_))
      return std::nullopt;
    return value;
  }

  std::string_view text_;
  size_t offset_, pos_ = 0;
};

} // namespace

rt::Expected<NpyHeader> parseNpyHeader(std::string_view text, size_t offset, bool python2Ints) {
  if (text.empty() || text.back() != '\n')
    return rt::Status::error(fmt::format("malformed header at offset {}: it does not end with "
                                         "a newline, as the format requires",
                                         offset + text.size()));
  HeaderCursor cursor(text.substr(0, text.size() - 1), offset);
  if (!cursor.take('{'))
    return cursor.error("expected the header dict's '{'");
  NpyHeader header;
  bool seenDescr = false, seenFortran = false, seenShape = false;
  while (!cursor.take('}')) {
    bool quoted = cursor.atQuote();
    rt::Expected<std::string> key = cursor.string();
    if (!key && quoted)
      return key.status();
    if (!key)
      return cursor.error("expected a key ('descr', 'fortran_order' or 'shape') or '}'");
    bool *seen = *key == "descr"           ? &seenDescr
                 : *key == "fortran_order" ? &seenFortran
                 : *key == "shape"         ? &seenShape
                                           : nullptr;
    if (!seen)
      return cursor.error("unknown key '" + *key +
                          "' (a .npy header has 'descr', 'fortran_order' and 'shape' only)");
    if (*seen)
      return cursor.error("key '" + *key + "' appears twice");
    *seen = true;
    if (!cursor.take(':'))
      return cursor.error("expected ':' after '" + *key + "'");
    if (*key == "descr") {
      bool quoted = cursor.atQuote();
      rt::Expected<std::string> descr = cursor.string();
      if (!descr && quoted)
        return descr.status();
      if (!descr)
        return cursor.error("'descr' must be a dtype string such as '<f4' (structured dtypes "
                            "are not supported)");
      header.descr = *descr;
    } else if (*key == "fortran_order") {
      rt::Expected<bool> fortran = cursor.boolean();
      if (!fortran)
        return fortran.status();
      header.fortranOrder = *fortran;
    } else {
      rt::Expected<std::vector<int64_t>> shape = cursor.shape(python2Ints);
      if (!shape)
        return shape.status();
      header.shape = std::move(*shape);
    }
    if (!cursor.take(',')) {
      if (cursor.take('}'))
        break;
      return cursor.error("expected ',' or '}' after the value of '" + *key + "'");
    }
  }
  cursor.skipSpaces();
  if (!cursor.atEnd())
    return cursor.error("only spaces may follow the header dict before its newline");
  if (!seenDescr || !seenFortran || !seenShape)
    return rt::Status::error(fmt::format(
        "malformed header at offset {}: it needs the keys 'descr', 'fortran_order' and "
        "'shape'; missing:{}{}{}",
        offset, seenDescr ? "" : " 'descr'", seenFortran ? "" : " 'fortran_order'",
        seenShape ? "" : " 'shape'"));
  return header;
}

} // namespace smelt::data
