// CPU training-step time of the seed models on Fashion-MNIST (batch 256 by default): the
// median of 50 steps after 10 of warm-up, measured between consecutive steps of an epoch.
#include "runtime/Mnist.h"
#include "train/Trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

int main(int argc, char **argv) {
  using Clock = std::chrono::steady_clock;
  std::string model = argc > 1 ? argv[1] : "mlp";
  int64_t batch = argc > 2 ? std::stoll(argv[2]) : 256;
  const int warmup = 10, measured = 50;
  auto split = smelt::rt::loadMnist("/usr/share/datasets/fashion-mnist", "train");
  if (!split) {
    fmt::print(stderr, "error: {}\n", split.message());
    return 1;
  }
  smelt::rt::Dataset data =
      smelt::rt::Dataset(std::move(split->images), std::move(split->labels))
          .slice(0, batch * (warmup + measured));
  smelt::train::TrainConfig config;
  config.model = model;
  config.batch = batch;
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
  fmt::print("{} train step, batch {}, cpu:0: median {:.2f} ms (min {:.2f}, max {:.2f}) over {} "
             "steps after {} warm-up; {:.0f} examples/s\n",
             model, batch, ms[ms.size() / 2], ms.front(), ms.back(), ms.size(), warmup,
             batch / ms[ms.size() / 2] * 1e3);
  return 0;
}
