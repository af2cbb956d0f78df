// Character vocabularies, text files and next-token windows.
#include "data/Text.h"

#include "runtime/FileIO.h"

#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace smelt::data {

CharVocabulary CharVocabulary::of(std::string_view text) {
  std::array<bool, 256> seen{};
  for (char c : text)
    seen[uint8_t(c)] = true;
  CharVocabulary vocabulary;
  vocabulary.ids_.fill(-1);
  for (int b = 0; b < 256; ++b)
    if (seen[size_t(b)]) {
      vocabulary.ids_[size_t(b)] = int32_t(vocabulary.symbols_.size());
      vocabulary.symbols_.push_back(char(b));
    }
  return vocabulary;
}

rt::Expected<std::vector<int32_t>> CharVocabulary::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    int32_t id = ids_[uint8_t(text[i])];
    if (id < 0)
      return rt::Status::error(fmt::format("byte 0x{:02x} at offset {} is not in the "
                                           "vocabulary of {} characters",
                                           unsigned(uint8_t(text[i])), i, symbols_.size()));
    ids.push_back(id);
  }
  return ids;
}

std::string CharVocabulary::decode(const std::vector<int32_t> &ids) const {
  std::string text;
  for (int32_t id : ids)
    text.push_back(id >= 0 && id < size() ? symbols_[size_t(id)] : '?');
  return text;
}

rt::Expected<EncodedText> readEncodedText(const std::string &path) {
  // The bytes go into the ids a chunk at a time and become ids once the file's vocabulary is
  // known: loading holds the ids (4 bytes a character), not the text beside them as well.
  rt::Expected<int> opened = rt::openRegularFile(path);
  if (!opened)
    return opened.status();
  EncodedText encoded;
  std::vector<int32_t> &ids = encoded.ids;
  std::array<bool, 256> seen{};
  std::string why;
  try {
    struct stat st;
    if (::fstat(*opened, &st) == 0)
      ids.reserve(size_t(st.st_size));
    std::vector<uint8_t> chunk(size_t(1) << 20);
    for (ssize_t n; (n = ::read(*opened, chunk.data(), chunk.size())) != 0;) {
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0) {
        why = fmt::format("cannot read byte {}: {}", ids.size(), std::strerror(errno));
        break;
      }
      for (ssize_t i = 0; i < n; ++i) {
        seen[chunk[size_t(i)]] = true;
        ids.push_back(chunk[size_t(i)]);
      }
    }
  } catch (const std::bad_alloc &e) {
    why = fmt::format("cannot hold the ids of its characters: {}", e.what());
  }
  ::close(*opened);
  if (why.empty() && ids.empty())
    why = "the text file is empty";
  if (!why.empty())
    return rt::Status::error(path + ": " + why);
  std::string symbols;
  for (int b = 0; b < 256; ++b)
    if (seen[size_t(b)])
      symbols.push_back(char(b));
  encoded.vocabulary = CharVocabulary::of(symbols);
  for (int32_t &id : ids)
    id = encoded.vocabulary.idOf(uint8_t(id));
  return encoded;
}

rt::Expected<Dataset> nextTokenWindows(std::span<const int32_t> ids,
                                       std::shared_ptr<const void> owner, int64_t context,
                                       int64_t stride) {
  if (context < 1 || stride < 1)
    return rt::Status::error(fmt::format("windows need a context and a stride of at least 1, "
                                         "got {} and {}",
                                         context, stride));
  int64_t tokens = int64_t(ids.size());
  if (tokens < context + 1)
    return rt::Status::error(fmt::format("{} tokens hold no window of {} (a context of {} and "
                                         "the token after it)",
                                         tokens, context + 1, context));
  int64_t count = (tokens - context - 1) / stride + 1;
  return Dataset(TokenWindows{ids, std::move(owner), count, context, stride});
}

rt::Expected<Dataset> nextTokenWindows(std::span<const int32_t> ids, int64_t context,
                                       int64_t stride) {
  auto held = std::make_shared<const std::vector<int32_t>>(ids.begin(), ids.end());
  return nextTokenWindows(*held, held, context, stride);
}

} // namespace smelt::data
