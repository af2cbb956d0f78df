// CPU training-step time of the seed models on Fashion-MNIST (batch 256 by default; the ResNet
// with batch norm, resnet, 64), or of the
// char-level GPT on text (bench/TextWorkloads.h; batch 32 by default), or of the char LSTM
// (lstm, batch 64, unrolled over 32 steps; lstm:128 over 128): the
// median of 50 steps (fewer where the text has fewer windows) after a warm-up of 10 steps and 0.6 s, measured between consecutive steps
// of an epoch, for each of `variants` in turn (default fused,unfused): the default pipeline
// (fused: kernels, and epilogues folded into matmuls and conv2ds), with matmuls' only
// (no-conv-epilogues), fused kernels without epilogue folding (no-epilogues), every op as its own
// step (unfused). Ratios are against the first variant.
//   smelt-bench-train-step [mlp|cnn|resnet|gpt|lstm[:steps]] [batch] [precision] [variants]
#include "bench/TextWorkloads.h"
#include "data/Mnist.h"
#include "train/Trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  using Clock = std::chrono::steady_clock;
  std::string model = argc > 1 ? argv[1] : "mlp";
  int64_t lstmSteps = smelt::bench::takeLstmSteps(model);
  if (lstmSteps < 1) {
    fmt::print(stderr, "error: lstm:STEPS needs a whole number of steps >= 1\n");
    return 1;
  }
  int64_t batch = argc > 2   ? std::stoll(argv[2])
                  : model == "gpt"  ? 32
                  : model == "lstm" || model == "resnet" ? 64
                                                         : 256;
  const int64_t warmup = 10;
  smelt::train::TrainConfig config;
  config.model = model;
  std::optional<smelt::data::Dataset> loaded;
  if (model == "gpt") {
    auto gpt = smelt::bench::loadGptWorkload();
    if (!gpt) {
      fmt::print(stderr, "error: {}\n", gpt.message());
      return 1;
    }
    config.model = smelt::train::gptModel(gpt->config);
    loaded = std::move(gpt->windows);
  } else if (model == "lstm") {
    auto lstm = smelt::bench::loadLstmWorkload(lstmSteps);
    if (!lstm) {
      fmt::print(stderr, "error: {}\n", lstm.message());
      return 1;
    }
    config.model = smelt::train::lstmModel(lstm->config);
    loaded = std::move(lstm->windows);
  } else {
    auto split = smelt::data::loadMnist("/usr/share/datasets/fashion-mnist", "train");
    if (!split) {
      fmt::print(stderr, "error: {}\n", split.message());
      return 1;
    }
    loaded = smelt::data::Dataset(std::move(split->images), std::move(split->labels));
  }
  const smelt::data::Dataset &all = *loaded;
  int64_t measured = std::min<int64_t>(50, all.size() / batch - warmup - 1);
  if (measured < 5) {
    fmt::print(stderr, "error: {} examples make too few batches of {} to measure\n", all.size(),
               batch);
    return 1;
  }
  // Warm-up batches, then the measured ones: one more, as the first interval measured ends at
  // its second step.
  smelt::rt::Expected<smelt::data::Dataset> warmData = all.slice(0, batch * warmup),
                                            data = all.slice(batch * warmup,
                                                             batch * (warmup + measured + 1));
  if (!warmData || !data) {
    fmt::print(stderr, "error: {}\n", (warmData ? data : warmData).message());
    return 1;
  }
  config.batch = batch;
  if (argc > 3) {
    auto policy = smelt::parsePrecisionPolicy(argv[3]);
    if (!policy) {
      fmt::print(stderr, "error: precision '{}' is not f32, mixed_bf16 or mixed_f16\n", argv[3]);
      return 1;
    }
    config.precision = *policy;
  }
  std::vector<std::string> variants;
  for (std::string rest = argc > 4 ? argv[4] : "fused,unfused"; !rest.empty();) {
    size_t comma = rest.find(',');
    variants.push_back(rest.substr(0, comma));
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    if (variants.back() != "fused" && variants.back() != "no-conv-epilogues" &&
        variants.back() != "no-epilogues" && variants.back() != "unfused") {
      fmt::print(stderr,
                 "error: variant '{}' is not fused, no-conv-epilogues, no-epilogues or "
                 "unfused\n",
                 variants.back());
      return 1;
    }
  }
  double firstMedian = 0;
  for (const std::string &variant : variants) {
    config.pipeline.fuse = variant != "unfused";
    config.pipeline.epilogues = variant == "fused" || variant == "no-conv-epilogues";
    config.pipeline.convEpilogues = variant == "fused";
    auto trainer = smelt::train::Trainer::create(config);
    if (!trainer) {
      fmt::print(stderr, "error: {}\n", trainer.message());
      return 1;
    }
    // At least `warmup` steps and 0.6 s of them: the thread count that follows the load
    // (runtime/CpuLoad.h) decides on 250 ms windows, and is settled before the steps measured.
    auto warmStart = Clock::now();
    do {
      if (auto warm = (*trainer)->trainEpoch(*warmData, 0); !warm) {
        fmt::print(stderr, "error: {}\n", warm.message());
        return 1;
      }
    } while (Clock::now() - warmStart < std::chrono::milliseconds(600));
    std::vector<double> ms;
    auto last = Clock::now();
    auto epoch = (*trainer)->trainEpoch(*data, 1, [&](int64_t step, int64_t, const auto &) {
      auto now = Clock::now();
      if (step > 1)
        ms.push_back(std::chrono::duration<double, std::milli>(now - last).count());
      last = now;
    });
    if (!epoch) {
      fmt::print(stderr, "error: {}\n", epoch.message());
      return 1;
    }
    std::sort(ms.begin(), ms.end());
    double median = ms[ms.size() / 2];
    fmt::print("{} train step ({}), batch {}, cpu:0, {}: {} steps per run; median {:.2f} ms "
               "(min {:.2f}, max {:.2f}) over {} steps after {}+ warm-up; {:.0f} examples/s\n",
               model, smelt::precisionPolicyName(config.precision).str(), batch, variant,
               (*trainer)->stepCount(), median, ms.front(), ms.back(), ms.size(), warmup,
               batch / median * 1e3);
    if (variant == variants.front())
      firstMedian = median;
    else
      fmt::print("{} is {:.2f}x the speed of {}\n", variants.front(), median / firstMedian,
                 variant);
  }
  return 0;
}
