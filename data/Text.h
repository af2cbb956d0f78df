// Character-level text data for language models: the vocabulary of a text's bytes, encoding
// and decoding, and next-token windows (each example a run of tokens, its labels the same run
// shifted by one) as a Dataset.
#pragma once

#include "data/Dataset.h"

#include <array>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace smelt::data {

class CharVocabulary {
public:
  /// The distinct bytes of `text`, in byte order: ids 0 .. size()-1.
  static CharVocabulary of(std::string_view text);
  int64_t size() const { return int64_t(symbols_.size()); }
  /// The ids of `text`; an error naming the first byte (and its offset) not in the vocabulary.
  rt::Expected<std::vector<int32_t>> encode(std::string_view text) const;
  /// The text of `ids`; an id out of range becomes '?'.
  std::string decode(const std::vector<int32_t> &ids) const;
  const std::string &symbols() const { return symbols_; }
  /// The id of `byte`, or -1 when it is not in the vocabulary.
  int32_t idOf(uint8_t byte) const { return ids_[byte]; }

private:
  std::string symbols_;
  std::array<int32_t, 256> ids_{};
};

/// A text file's characters: its vocabulary and the ids of every byte.
struct EncodedText {
  CharVocabulary vocabulary;
  std::vector<int32_t> ids;
};
/// A text file's vocabulary and ids, holding no copy of the text; an error naming the file when
/// it cannot be read or is empty.
rt::Expected<EncodedText> readEncodedText(const std::string &path);

/// Windows over `ids` starting every `stride` tokens (TokenWindows): examples [N, context] and
/// labels [N, context] (i32), labels[i][t] = ids[start_i + t + 1]. The dataset views `ids`,
/// which `owner` keeps alive. An error when `ids` holds no window of context + 1 tokens or the
/// counts are not positive.
rt::Expected<Dataset> nextTokenWindows(std::span<const int32_t> ids,
                                       std::shared_ptr<const void> owner, int64_t context,
                                       int64_t stride);
/// The same over a copy of `ids` that the dataset holds (4 bytes a token, once).
rt::Expected<Dataset> nextTokenWindows(std::span<const int32_t> ids, int64_t context,
                                       int64_t stride);

} // namespace smelt::data
