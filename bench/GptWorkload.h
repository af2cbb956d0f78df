// The GPT train-step workload the benchmarks and bench/peers share: the char-level GPT of
// `smelt train --model=gpt` at its defaults (4 layers, width 128, 4 heads, context 64, dropout
// 0.1, batch 32) on windows of Debian's fortunes literature ($SMELT_TEXT overrides), one window
// every 16 characters. bench/peers/text.py builds the same windows.
#pragma once

#include "data/Text.h"
#include "train/BuiltinModels.h"

#include <cstdlib>

namespace smelt::bench {

struct GptWorkload {
  GptConfig config;
  data::Dataset windows;
};

inline rt::Expected<GptWorkload> loadGptWorkload() {
  const char *path = std::getenv("SMELT_TEXT");
  rt::Expected<data::EncodedText> text =
      data::readEncodedText(path ? path : "/usr/share/games/fortunes/literature");
  if (!text)
    return text.status();
  GptConfig config;
  config.vocab = text->vocabulary.size();
  rt::Expected<data::Dataset> windows = data::nextTokenWindows(text->ids, config.context, 16);
  if (!windows)
    return windows.status();
  return GptWorkload{config, std::move(*windows)};
}

} // namespace smelt::bench
