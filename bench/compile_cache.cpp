// Compile time of a seed model's training step (the MLP or the CNN, batch 256; the ResNet with
// batch norm, batch 64) through the JIT
// cache (codegen/JitCache.h): cold (an empty cache directory: pipeline, LLVM, linking), warm in
// memory (the same JitCache again) and warm on disk (a new JitCache on the same directory, as a
// new process: read the artifact and dlopen its CPU code, no LLVM). Prints the median of
// several runs of each.
//   smelt-bench-compile-cache [runs=5] [mlp|cnn|resnet|gpt|lstm[:steps]]
// (gpt: batch 32; lstm: batch 64, unrolled over 32 steps or `steps`; bench/TextWorkloads.h)
#include "bench/TextWorkloads.h"
#include "codegen/JitCache.h"
#include "frontend/Graph.h"
#include "train/Trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
  int runs = argc > 1 ? std::atoi(argv[1]) : 5;
  std::string model = argc > 2 ? argv[2] : "mlp";
  int64_t lstmSteps = smelt::bench::takeLstmSteps(model);
  if (runs < 1 || lstmSteps < 1 ||
      (model != "mlp" && model != "cnn" && model != "resnet" && model != "gpt" &&
       model != "lstm"))
    return fmt::print(stderr, "usage: smelt-bench-compile-cache [runs >= 1] "
                              "[mlp|cnn|resnet|gpt|lstm[:steps]]\n"),
           1;
  namespace fs = std::filesystem;
  mlir::MLIRContext context;
  smelt::codegen::loadDialects(context);
  smelt::train::TrainConfig config; // batch 256
  config.model = model;
  if (model == "gpt") {
    auto gpt = smelt::bench::loadGptWorkload();
    if (!gpt)
      return fmt::print(stderr, "error: {}\n", gpt.message()), 1;
    config.model = smelt::train::gptModel(gpt->config);
    config.batch = 32;
  } else if (model == "lstm") {
    auto lstm = smelt::bench::loadLstmWorkload(lstmSteps);
    if (!lstm)
      return fmt::print(stderr, "error: {}\n", lstm.message()), 1;
    config.model = smelt::train::lstmModel(lstm->config);
    config.batch = 64;
  } else if (model == "resnet") {
    config.batch = 64;
  }
  auto buildStart = Clock::now();
  std::unique_ptr<smelt::Graph> graph = smelt::train::buildTrainStep(context, config);
  double buildMs = msSince(buildStart);
  mlir::ModuleOp module = graph->module();

  std::vector<double> cold, memory, disk;
  std::map<std::string, uint64_t> peakBytes;
  for (int run = 0; run < runs; ++run) {
    std::string pattern = (fs::temp_directory_path() / "smelt-bench-cache-XXXXXX").string();
    if (!::mkdtemp(pattern.data()))
      return fmt::print(stderr, "error: cannot create a temporary directory\n"), 1;
    smelt::codegen::JitOptions options;
    options.cacheDir = pattern;
    auto timed = [&](smelt::codegen::JitCache &cache, std::vector<double> &into) {
      auto start = Clock::now();
      auto exe = cache.get(module, "train_step");
      if (mlir::failed(exe))
        return false;
      into.push_back(msSince(start));
      peakBytes = (*exe)->peakBytes;
      return true;
    };
    smelt::codegen::JitCache first(options);
    if (!timed(first, cold) || !timed(first, memory))
      return fmt::print(stderr, "error: the train step does not compile\n"), 1;
    smelt::codegen::JitCache second(options);
    if (!timed(second, disk) || second.stats().diskHits != 1)
      return fmt::print(stderr, "error: the warm on-disk compile missed\n"), 1;
    fs::remove_all(pattern);
  }
  fmt::print("{} train step (batch {}), median of {} runs:\n", model, config.batch, runs);
  fmt::print("  build (the step and its gradients) {:9.1f} ms, once\n", buildMs);
  fmt::print("  cold (empty cache directory)       {:9.1f} ms\n", median(cold));
  fmt::print("  warm, in memory (same JitCache)    {:9.3f} ms\n", median(memory));
  fmt::print("  warm, on disk (new JitCache)       {:9.1f} ms\n", median(disk));
  for (const auto &[device, peak] : peakBytes)
    fmt::print("  planned peak memory on {}        {:9.1f} MiB\n", device, double(peak) / (1 << 20));
  return 0;
}
