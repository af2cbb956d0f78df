// The text train-step workloads the benchmarks and bench/peers share, on windows of Debian's
// fortunes literature ($SMELT_TEXT overrides), one window every 16 characters
// (bench/peers/text.py builds the same windows):
// - the char-level GPT of `smelt train --model=gpt` at its defaults (4 layers, width 128, 4
//   heads, context 64, dropout 0.1), batch 32;
// - the char LSTM (train/BuiltinModels.h: embedding 64, 128 units unrolled over a context of
//   32 by default), batch 64.
#pragma once

#include "data/Text.h"
#include "train/BuiltinModels.h"

#include <cstdlib>
#include <string>

namespace smelt::bench {

struct TextWindows {
  int64_t vocab = 0;
  data::Dataset windows;
};

/// The text's windows of `context` tokens (and their next-token labels).
inline rt::Expected<TextWindows> loadTextWindows(int64_t context) {
  const char *path = std::getenv("SMELT_TEXT");
  rt::Expected<data::EncodedText> text =
      data::readEncodedText(path ? path : "/usr/share/games/fortunes/literature");
  if (!text)
    return text.status();
  rt::Expected<data::Dataset> windows = data::nextTokenWindows(text->ids, context, 16);
  if (!windows)
    return windows.status();
  return TextWindows{int64_t(text->vocabulary.size()), std::move(*windows)};
}

struct GptWorkload {
  GptConfig config;
  data::Dataset windows;
};

inline rt::Expected<GptWorkload> loadGptWorkload() {
  GptConfig config;
  rt::Expected<TextWindows> text = loadTextWindows(config.context);
  if (!text)
    return text.status();
  config.vocab = text->vocab;
  return GptWorkload{config, std::move(text->windows)};
}

struct LstmWorkload {
  train::LstmConfig config;
  data::Dataset windows;
};

/// The benchmarks' model name "lstm:STEPS" is the LSTM unrolled over STEPS: `model` becomes
/// "lstm" and STEPS is returned; 32 for any other name, 0 for a STEPS that is not a whole
/// number >= 1.
inline int64_t takeLstmSteps(std::string &model) {
  if (model.rfind("lstm:", 0) != 0)
    return 32;
  std::string count = model.substr(5);
  model = "lstm";
  char *end = nullptr;
  long long steps = std::strtoll(count.c_str(), &end, 10);
  return !count.empty() && *end == '\0' && steps >= 1 ? steps : 0;
}

/// The LSTM unrolled over `context` steps.
inline rt::Expected<LstmWorkload> loadLstmWorkload(int64_t context = 32) {
  train::LstmConfig config;
  config.context = context;
  rt::Expected<TextWindows> text = loadTextWindows(config.context);
  if (!text)
    return text.status();
  config.vocab = text->vocab;
  return LstmWorkload{config, std::move(text->windows)};
}

} // namespace smelt::bench
