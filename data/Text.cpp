// Character vocabularies, text files and next-token windows.
#include "data/Text.h"

#include "runtime/FileIO.h"

#include <fmt/format.h>

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

rt::Expected<std::string> readTextFile(const std::string &path) {
  rt::Expected<std::vector<uint8_t>> bytes = rt::readFileBytes(path);
  if (!bytes)
    return bytes.status();
  if (bytes->empty())
    return rt::Status::error(path + ": the text file is empty");
  return std::string(bytes->begin(), bytes->end());
}

rt::Expected<EncodedText> readEncodedText(const std::string &path) {
  rt::Expected<std::string> text = readTextFile(path);
  if (!text)
    return text.status();
  EncodedText encoded{CharVocabulary::of(*text), {}};
  rt::Expected<std::vector<int32_t>> ids = encoded.vocabulary.encode(*text);
  if (!ids)
    return ids.status();
  encoded.ids = std::move(*ids);
  return encoded;
}

rt::Expected<Dataset> nextTokenWindows(std::span<const int32_t> ids, int64_t context,
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
  rt::HostTensor examples = rt::HostTensor::zeros({rt::DType::i32, {count, context}});
  rt::HostTensor labels = rt::HostTensor::zeros({rt::DType::i32, {count, context}});
  for (int64_t i = 0; i < count; ++i) {
    const int32_t *start = ids.data() + i * stride;
    std::memcpy(examples.data<int32_t>() + i * context, start, size_t(context) * 4);
    std::memcpy(labels.data<int32_t>() + i * context, start + 1, size_t(context) * 4);
  }
  return Dataset(std::move(examples), std::move(labels));
}

} // namespace smelt::data
