// Compiling the GPT's forward pass and sampling from it.
#include "train/TextGenerator.h"

#include "mlir/IR/Diagnostics.h"

#include <fmt/format.h>

#include <cmath>
#include <random>

namespace smelt::train {

rt::Expected<std::unique_ptr<TextGenerator>>
TextGenerator::create(const GptConfig &config, const codegen::CompileOptions &options) {
  std::unique_ptr<TextGenerator> generator(new TextGenerator());
  generator->config_ = config;
  mlir::MLIRContext context;
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler capture(&context, [&](mlir::Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return mlir::success();
  });
  mlir::FailureOr<rt::Executable> exe = mlir::failure();
  try {
    Graph g(context, "gpt_forward");
    Tensor tokens = g.input("tokens", {1, config.context}, DType::i32);
    g.setOutputs({gptLogits(tokens, config, /*training=*/false)}, {"logits"});
    exe = codegen::compile(g.module(), "gpt_forward", options);
  } catch (const BuildError &e) {
    return rt::Status::error(std::string("building the GPT's forward pass: ") + e.what());
  }
  if (mlir::failed(exe))
    return rt::Status::error("compiling the GPT's forward pass: " + diagnostics);
  rt::Expected<std::unique_ptr<rt::Executor>> executor = rt::Executor::create(*exe);
  if (!executor)
    return executor.status();
  generator->forward_ = std::move(*executor);
  return generator;
}

rt::Expected<std::vector<int32_t>>
TextGenerator::generate(const std::vector<rt::HostTensor> &params, std::vector<int32_t> prompt,
                        int64_t length, double temperature, uint64_t seed) {
  int64_t context = config_.context, vocab = config_.vocab;
  if (prompt.empty())
    return rt::Status::error("generating text needs a prompt of at least one token");
  for (int32_t id : prompt)
    if (id < 0 || id >= vocab)
      return rt::Status::error(fmt::format("prompt token {} is outside the vocabulary [0, {})",
                                           id, vocab));
  if (!(temperature >= 0) || !std::isfinite(temperature))
    return rt::Status::error(fmt::format("temperature {} must be a finite number >= 0",
                                         temperature));
  std::mt19937_64 rng(seed);
  std::vector<int32_t> text = std::move(prompt), generated;
  rt::HostTensor tokens = rt::HostTensor::zeros({rt::DType::i32, {1, context}});
  std::vector<const rt::HostTensor *> args = {&tokens};
  for (const rt::HostTensor &p : params)
    args.push_back(&p);
  std::vector<rt::HostTensor> out;
  std::vector<double> weights(static_cast<size_t>(vocab));
  for (int64_t n = 0; n < length; ++n) {
    // The last `context` tokens, left-aligned: positions after them hold 0s that the causal
    // mask keeps from the position read.
    int64_t seen = std::min<int64_t>(int64_t(text.size()), context);
    std::fill_n(tokens.data<int32_t>(), context, 0);
    std::copy(text.end() - seen, text.end(), tokens.data<int32_t>());
    if (rt::Status s = forward_->run(args, out); !s.ok())
      return s;
    std::vector<double> logits = out[0].toDoubles();
    const double *last = logits.data() + (seen - 1) * vocab;
    int32_t next = int32_t(std::max_element(last, last + vocab) - last);
    if (temperature > 0) {
      for (int64_t v = 0; v < vocab; ++v)
        weights[size_t(v)] = std::exp((last[v] - last[next]) / temperature);
      next = int32_t(std::discrete_distribution<int32_t>(weights.begin(), weights.end())(rng));
    }
    text.push_back(next);
    generated.push_back(next);
  }
  return generated;
}

} // namespace smelt::train
