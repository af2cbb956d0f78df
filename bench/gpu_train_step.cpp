// Training steps on the GPU against the CPU, and mixed precision on the GPU (issues 5 and 6):
//  1. the Fashion-MNIST MLP (784-512-256-10, Adam, batch 256) on cpu:0 and placed on gpu:0:
//     the median step of 40 after 10 of warm-up, both measured in this run, and the ratio;
//  2. a compute-bound MLP (4 dense layers of 4096, batch 4096, SGD, random data) on gpu:0 in
//     f32 and mixed_bf16: the median step of 10 after 3 of warm-up, the ratio, and the most
//     bytes the GPU segments held at once (activations, gradients and the parameters).
// A step is Executor::run: it includes uploading the parameters and downloading the updated
// ones (rt::Executor passes values through the host), which the ratio pays for; each GPU
// step's line is followed by those bytes and the host's waits for the GPU, per step.
//   ninja -C build smelt-bench-gpu-train && build/bin/smelt-bench-gpu-train [--small]
// Without a GPU it prints why and exits 77, the skip code. Numbers go in bench/RESULTS.md.
// --small runs the same steps on small sizes (3 measured steps, the wide MLP 256 wide): what
// ctest runs on the emulated GPU (tests/emucuda), and a quick first look on a real one.
#include "codegen/Compile.h"
#include "codegen/cuda/CudaCodegen.h"
#include "frontend/Layers.h"
#include "frontend/Optimizers.h"
#include "data/Mnist.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/GpuRunner.h"
#include "train/Trainer.h"

#include "mlir/IR/MLIRContext.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>

namespace {

using namespace smelt;
using Clock = std::chrono::steady_clock;
constexpr int kSkip = 77;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

/// Median ms per step of the seed MLP trained with `config`.
rt::Expected<double> seedMlpStep(train::TrainConfig config, const data::Dataset &data,
                                 int warmup) {
  auto trainer = train::Trainer::create(config);
  if (!trainer)
    return trainer.status();
  std::vector<double> ms;
  auto last = Clock::now();
  auto epoch = (*trainer)->trainEpoch(data, 0, [&](int64_t step, int64_t, const auto &) {
    if (step > warmup)
      ms.push_back(msSince(last));
    last = Clock::now();
  });
  if (!epoch)
    return epoch.status();
  fmt::print("  placement: {}\n", (*trainer)->placement());
  if (rt::TransferStats step = (*trainer)->lastStepTransfers(); step.any())
    fmt::print("  host<->device per step: {}; launches: {}\n", step.str(), step.launchStr());
  return median(ms);
}

/// One SGD step of 4 dense layers of `width` (ReLU between) and a softmax cross-entropy, on a
/// batch of `batch`, under `precision`, placed on gpu:0.
rt::Expected<std::unique_ptr<rt::Executor>> wideMlpStep(mlir::MLIRContext &context,
                                                        PrecisionPolicy precision, int64_t width,
                                                        int64_t batch, const std::string &arch,
                                                        std::vector<rt::HostTensor> &inputs) {
  Graph g(context, "wide_step", /*seed=*/7);
  Tensor x = g.input("x", {batch, width});
  Tensor labels = g.input("labels", {batch}, DType::i32);
  Tensor h = x;
  for (int layer = 0; layer < 4; ++layer)
    h = dense(h, width, fmt::format("dense{}", layer),
              layer < 3 ? Activation::Relu : Activation::None);
  Tensor loss = sparseSoftmaxCrossEntropy(h, labels);
  g.applyPrecision(precision);
  std::vector<Tensor> params = g.parameterTensors();
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::SGD;
  sgd.learningRate = 1e-3;
  OptimizerUpdate update = applyOptimizer(g, sgd, params, g.gradients(loss, params));
  std::vector<Tensor> outputs = update.newParams;
  outputs.push_back(loss);
  g.setOutputs(outputs);
  g.buildInitializer();

  codegen::CompileOptions options;
  options.pipeline.devices = "cpu:0,gpu:0";
  options.cudaArch = arch;
  rt::ExecutorOptions executorOptions;
  executorOptions.gpuRunner = rt::cuda::gpuSegmentRunner;
  auto init = codegen::compile(g.module(), "wide_step_init", options);
  auto step = codegen::compile(g.module(), "wide_step", options);
  if (mlir::failed(init) || mlir::failed(step))
    return rt::Status::error("the wide MLP does not compile (diagnostics above)");
  auto initExec = rt::Executor::create(*init, executorOptions);
  if (!initExec)
    return initExec.status();
  std::vector<rt::HostTensor> initial;
  if (rt::Status s = (*initExec)->run(std::vector<rt::HostTensor>{}, initial); !s.ok())
    return s;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1, 1);
  rt::HostTensor images = rt::HostTensor::zeros({rt::DType::f32, {batch, width}});
  for (int64_t i = 0; i < batch * width; ++i)
    images.data<float>()[i] = uniform(rng);
  rt::HostTensor classes = rt::HostTensor::zeros({rt::DType::i32, {batch}});
  for (int64_t i = 0; i < batch; ++i)
    classes.data<int32_t>()[i] = int32_t(rng() % uint32_t(width));
  inputs = {std::move(images), std::move(classes)};
  for (rt::HostTensor &p : initial)
    inputs.push_back(std::move(p));
  fmt::print("  placement: {}\n", step->placement);
  return rt::Executor::create(*step, executorOptions);
}

} // namespace

int main(int argc, char **argv) {
  bool small = argc == 2 && std::string(argv[1]) == "--small";
  if (argc > 2 || (argc == 2 && !small)) {
    fmt::print(stderr, "usage: smelt-bench-gpu-train [--small]\n");
    return 2;
  }
  auto gpu = rt::cuda::CudaDevice::open(0);
  if (!gpu) {
    fmt::print("skipped: needs a GPU: {}\n", gpu.message());
    return kSkip;
  }
  std::string arch = (*gpu)->arch();
  fmt::print("device: {} ({}, {:.0f} GiB)\n", (*gpu)->name(), arch,
             double((*gpu)->totalMemory()) / (1 << 30));

  // 1. The seed MLP, CPU against GPU.
  const int warmup = small ? 1 : 10, measured = small ? 3 : 40;
  train::TrainConfig config;
  config.batch = 256;
  auto split = data::loadMnist(data::fashionMnistDir(), "train");
  if (!split) {
    fmt::print(stderr, "error: {}\n", split.message());
    return 1;
  }
  rt::Expected<data::Dataset> sliced =
      data::Dataset(std::move(split->images), std::move(split->labels))
          .slice(0, config.batch * (warmup + measured));
  if (!sliced) {
    fmt::print(stderr, "error: {}\n", sliced.message());
    return 1;
  }
  data::Dataset data = std::move(*sliced);
  rt::Expected<double> cpuMs = seedMlpStep(config, data, warmup);
  config.pipeline.devices = "cpu:0,gpu:0";
  config.compile.cudaArch = arch;
  config.executor.gpuRunner = rt::cuda::gpuSegmentRunner;
  rt::Expected<double> gpuMs = seedMlpStep(config, data, warmup);
  if (!cpuMs || !gpuMs) {
    fmt::print(stderr, "error: {}\n", !cpuMs ? cpuMs.message() : gpuMs.message());
    return 1;
  }
  fmt::print("mlp 784-512-256-10 train step, batch 256 (Adam): cpu:0 {:.2f} ms, gpu:0 {:.2f} "
             "ms: the GPU is {:.1f}x the CPU's speed\n",
             *cpuMs, *gpuMs, *cpuMs / *gpuMs);

  // 2. Compute-bound: f32 against mixed_bf16 on the GPU.
  const int64_t width = small ? 256 : 4096, batch = small ? 256 : 4096;
  const int wideWarmup = small ? 1 : 3, wideSteps = small ? 4 : 13;
  double f32Ms = 0;
  for (PrecisionPolicy precision : {PrecisionPolicy::f32, PrecisionPolicy::mixed_bf16}) {
    mlir::MLIRContext context;
    std::vector<rt::HostTensor> inputs;
    auto exec = wideMlpStep(context, precision, width, batch, arch, inputs);
    if (!exec) {
      fmt::print(stderr, "error: {}\n", exec.message());
      return 1;
    }
    std::vector<double> ms;
    std::vector<rt::HostTensor> outputs;
    for (int i = 0; i < wideSteps; ++i) {
      auto start = Clock::now();
      if (rt::Status s = (*exec)->run(inputs, outputs); !s.ok()) {
        fmt::print(stderr, "error: {}\n", s.message());
        return 1;
      }
      if (i >= wideWarmup)
        ms.push_back(msSince(start));
    }
    double step = median(ms);
    // 3 matmuls of 2 * batch * width^2 flops per layer (forward, two gradients).
    double tflops = 4 * 3 * 2.0 * batch * width * width / (step * 1e-3) / 1e12;
    fmt::print("wide mlp 4x{} train step, batch {} (SGD), {}: median {:.2f} ms ({:.0f} TFLOP/s "
               "of matmul), GPU peak {:.0f} MiB, loss {:.4f}\n",
               width, batch, precisionPolicyName(precision).str(), step, tflops,
               double((*exec)->lastRunPeakBytes()) / (1 << 20),
               double(outputs.back().toDoubles()[0]));
    fmt::print("  host<->device per step: {}; launches: {}\n", (*exec)->lastRunTransfers().str(),
               (*exec)->lastRunTransfers().launchStr());
    if (precision == PrecisionPolicy::f32)
      f32Ms = step;
    else
      fmt::print("mixed_bf16 is {:.2f}x the speed of f32\n", f32Ms / step);
  }
  return 0;
}
