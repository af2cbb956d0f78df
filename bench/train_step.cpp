// CPU training-step time of the seed models on Fashion-MNIST (batch 256 by default): the
// median of 50 steps after 10 of warm-up, measured between consecutive steps of an epoch,
// with fused kernels (the default) and, in the same run, with every op as its own step
// (`fused` runs the first only).
//   smelt-bench-train-step [mlp|cnn] [batch] [precision] [fused]
#include "data/Mnist.h"
#include "train/Trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

int main(int argc, char **argv) {
  using Clock = std::chrono::steady_clock;
  std::string model = argc > 1 ? argv[1] : "mlp";
  int64_t batch = argc > 2 ? std::stoll(argv[2]) : 256;
  const int warmup = 10, measured = 50;
  auto split = smelt::data::loadMnist("/usr/share/datasets/fashion-mnist", "train");
  if (!split) {
    fmt::print(stderr, "error: {}\n", split.message());
    return 1;
  }
  smelt::rt::Expected<smelt::data::Dataset> sliced =
      smelt::data::Dataset(std::move(split->images), std::move(split->labels))
          .slice(0, batch * (warmup + measured));
  if (!sliced) {
    fmt::print(stderr, "error: {}\n", sliced.message());
    return 1;
  }
  smelt::data::Dataset data = std::move(*sliced);
  smelt::train::TrainConfig config;
  config.model = model;
  config.batch = batch;
  if (argc > 3) {
    auto policy = smelt::parsePrecisionPolicy(argv[3]);
    if (!policy) {
      fmt::print(stderr, "error: precision '{}' is not f32, mixed_bf16 or mixed_f16\n", argv[3]);
      return 1;
    }
    config.precision = *policy;
  }
  double fusedMedian = 0;
  bool fusedOnly = argc > 4 && std::string(argv[4]) == "fused";
  for (bool fuse : {true, false}) {
    if (!fuse && fusedOnly)
      break;
    config.pipeline.fuse = fuse;
    auto trainer = smelt::train::Trainer::create(config);
    if (!trainer) {
      fmt::print(stderr, "error: {}\n", trainer.message());
      return 1;
    }
    std::vector<double> ms;
    auto last = Clock::now();
    auto epoch = (*trainer)->trainEpoch(data, 0, [&](int64_t step, int64_t, const auto &) {
      auto now = Clock::now();
      if (step > warmup)
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
               "(min {:.2f}, max {:.2f}) over {} steps after {} warm-up; {:.0f} examples/s\n",
               model, smelt::precisionPolicyName(config.precision).str(), batch,
               fuse ? "fused" : "unfused", (*trainer)->stepCount(), median, ms.front(),
               ms.back(), ms.size(), warmup, batch / median * 1e3);
    if (fuse)
      fusedMedian = median;
    else
      fmt::print("fused is {:.2f}x the speed of unfused\n", median / fusedMedian);
  }
  return 0;
}
