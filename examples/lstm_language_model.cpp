// A character-level LSTM language model on Debian's fortunes through fit() (docs/training.md):
// the LSTM layer (its forget-gate bias at 1), the embedding in a parameter group of its own
// with a higher rate, gradient accumulation over 2 steps of 32 sequences, and evaluation on a
// moving average of the weights. The validation loss must fall (it exits 1 otherwise).
//   smelt-lstm-language-model [text file]   (default /usr/share/games/fortunes/fortunes)
#include "data/Text.h"
#include "frontend/Recurrent.h"
#include "train/Fit.h"

#include <cstdio>
#include <iostream>

using namespace smelt;

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "/usr/share/games/fortunes/fortunes";
  auto text = data::readEncodedText(path);
  if (!text) {
    std::fprintf(stderr, "error: %s\n", text.message().c_str());
    return 1;
  }
  const int64_t context = 32, vocab = int64_t(text->vocabulary.size());
  // Windows of 32 characters every 8; the last tenth of the text validates.
  size_t split = text->ids.size() * 9 / 10;
  auto trainSet = data::nextTokenWindows(std::span(text->ids).first(split), context, 8);
  auto heldOut = data::nextTokenWindows(std::span(text->ids).subspan(split), context, 8);
  if (!trainSet || !heldOut) {
    std::fprintf(stderr, "error: %s\n", (trainSet ? heldOut : trainSet).message().c_str());
    return 1;
  }

  train::ModelSpec model("char-lstm", /*example=*/{{context}, DType::i32},
                         /*label=*/{{context}, DType::i32},
                         [vocab](Graph &, const train::ModelInputs &in) {
                           Tensor x = embedding(in.examples, vocab, 32, "embedding");
                           Tensor h = lstm(x, 64, "lstm"); // every step's state
                           return train::classification(dense(h, vocab, "logits"), in.labels);
                         });
  train::TrainConfig config;
  config.model = model;
  config.batch = 32;
  config.accumulateSteps = 2; // each update sees 64 sequences
  config.optimizer.learningRate = 3e-3;
  OptimizerConfig embeddings;
  embeddings.learningRate = 1e-2;
  config.parameterGroups = {{"embedding", namePrefix("embedding/"), embeddings}};
  config.emaMomentum = 0.9; // validation runs on the average
  config.evalBatch = 256;
  auto trainer = train::Trainer::create(config);
  if (!trainer) {
    std::fprintf(stderr, "error: %s\n", trainer.message().c_str());
    return 1;
  }
  train::FitOptions options;
  options.epochs = 4;
  options.validation = &*heldOut;
  options.out = &std::cout;
  auto history = train::fit(**trainer, *trainSet, options);
  if (!history) {
    std::fprintf(stderr, "error: %s\n", history.message().c_str());
    return 1;
  }
  double first = history->epochs.front().value("val_loss"),
         last = history->epochs.back().value("val_loss");
  std::printf("validation loss: %.4f -> %.4f\n", first, last);
  if (!(last < first)) {
    std::fprintf(stderr, "error: the validation loss did not fall\n");
    return 1;
  }
  std::printf("validation loss fell\n");
  return 0;
}
