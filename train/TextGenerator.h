// Text from a trained GPT: its forward pass compiled for one sequence, run token by token on
// the trainer's parameters, each next token drawn from the softmax of its logits.
#pragma once

#include "codegen/Compile.h"
#include "frontend/Gpt.h"
#include "runtime/Executor.h"

#include "mlir/IR/MLIRContext.h"

namespace smelt::train {

class TextGenerator {
public:
  /// Compiles `config`'s forward pass (no dropout) for a batch of one sequence.
  static rt::Expected<std::unique_ptr<TextGenerator>>
  create(const GptConfig &config, const codegen::CompileOptions &options = {});

  /// `length` tokens following `prompt` (ids in [0, vocab), at least one), each drawn from
  /// softmax(logits / temperature) with draws seeded by `seed` (temperature 0: the most likely
  /// token). The model sees the last `context` tokens. `params` are the model's parameters in
  /// creation order (Trainer::parameters()).
  rt::Expected<std::vector<int32_t>> generate(const std::vector<rt::HostTensor> &params,
                                              std::vector<int32_t> prompt, int64_t length,
                                              double temperature, uint64_t seed);

private:
  TextGenerator() = default;
  GptConfig config_;
  std::unique_ptr<rt::Executor> forward_;
};

} // namespace smelt::train
