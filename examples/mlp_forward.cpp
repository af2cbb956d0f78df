// The demo until training lands: the seed MLP (784-512-512-10, ReLU) built with the C++ builder,
// initialized by its seeded init function, run on the CPU over the whole Fashion-MNIST test set
// in batches of 256, and checked against a float64 reference on the first batch.
#include "codegen/Compile.h"
#include "frontend/Graph.h"
#include "frontend/Models.h"
#include "runtime/CpuExecutor.h"
#include "data/Mnist.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>

using namespace smelt;

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

/// Compiles function `name` of `graph`'s module, or exits with the diagnostics printed.
rt::CpuExecutor compileOrExit(Graph &graph, const std::string &name) {
  mlir::FailureOr<rt::Executable> exe = codegen::compile(graph.module(), name);
  if (failed(exe))
    std::exit(1);
  rt::Expected<rt::CpuExecutor> cpu = rt::CpuExecutor::create(*exe);
  if (!cpu) {
    fmt::print(stderr, "error: {}\n", cpu.message());
    std::exit(1);
  }
  return std::move(*cpu);
}

void check(const rt::Status &status) {
  if (!status.ok()) {
    fmt::print(stderr, "error: {}\n", status.message());
    std::exit(1);
  }
}

} // namespace

int main(int argc, char **argv) {
  std::string dataDir = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
  const int64_t batch = 256;
  const std::vector<int64_t> layers = {784, 512, 512, 10};

  auto start = Clock::now();
  rt::Expected<data::MnistSplit> test = data::loadMnist(dataDir, "t10k");
  if (!test) {
    fmt::print(stderr, "error: {}\n", test.message());
    return 1;
  }
  int64_t count = test->images.type().shape[0];
  fmt::print("loaded {} test images from {} in {:.0f} ms\n", count, dataDir, msSince(start));

  // One graph per batch size: full batches of 256 and the remainder. The init function is the
  // same for both, so their parameters are the same tensors.
  start = Clock::now();
  mlir::MLIRContext context;
  Graph full(context, "forward"), rest(context, "forward_rest");
  full.setOutputs({mlpClassifier(full, full.input("images", {batch, 784}), layers)}, {"logits"});
  int64_t remainder = count % batch;
  if (remainder)
    rest.setOutputs({mlpClassifier(rest, rest.input("images", {remainder, 784}), layers)},
                    {"logits"});
  full.buildInitializer();
  rt::CpuExecutor init = compileOrExit(full, "forward_init");
  rt::CpuExecutor forward = compileOrExit(full, "forward");
  std::optional<rt::CpuExecutor> forwardRest;
  if (remainder)
    forwardRest = compileOrExit(rest, "forward_rest");
  fmt::print("built and compiled the {}-{}-{}-{} MLP in {:.0f} ms\n", layers[0], layers[1],
             layers[2], layers[3], msSince(start));

  std::vector<rt::HostTensor> params;
  check(init.run(std::vector<rt::HostTensor>{}, params));

  // Arguments in the order the builder created them: the images, then the parameters.
  std::vector<const rt::HostTensor *> args = {nullptr};
  for (const rt::HostTensor &p : params)
    args.push_back(&p);
  const float *images = test->images.data<float>();
  int64_t correct = 0;
  std::vector<double> batchMs;
  std::vector<rt::HostTensor> firstLogits;
  for (int64_t begin = 0; begin < count; begin += batch) {
    int64_t n = std::min(batch, count - begin);
    rt::HostTensor x = rt::HostTensor::zeros({rt::DType::f32, {n, 784}});
    std::memcpy(x.data<float>(), images + begin * 784, size_t(n) * 784 * sizeof(float));
    args[0] = &x;
    std::vector<rt::HostTensor> out;
    auto t0 = Clock::now();
    check(n == batch ? forward.run(args, out) : forwardRest->run(args, out));
    if (n == batch)
      batchMs.push_back(msSince(t0));
    const float *logits = out[0].data<float>();
    for (int64_t i = 0; i < n; ++i) {
      int64_t best = std::max_element(logits + i * 10, logits + i * 10 + 10) - (logits + i * 10);
      correct += best == test->labels.data<int32_t>()[begin + i];
    }
    if (begin == 0) {
      firstLogits = std::move(out);
      firstLogits.push_back(std::move(x));
    }
  }
  std::sort(batchMs.begin(), batchMs.end());
  double median = batchMs[batchMs.size() / 2];
  fmt::print("ran forward on {} batches of {} (+{}): median {:.2f} ms/batch, {:.0f} images/s\n",
             batchMs.size(), batch, remainder, median, batch / median * 1e3);
  fmt::print("accuracy of the untrained network: {:.2f}% (chance is 10%)\n",
             100.0 * correct / count);

  // float64 reference of the first batch: relu(x W1 + b1) ... with the same parameters.
  std::vector<double> act(firstLogits[1].data<float>(),
                          firstLogits[1].data<float>() + batch * 784);
  for (size_t l = 0; l + 1 < layers.size(); ++l) {
    const float *w = params[2 * l].data<float>(), *b = params[2 * l + 1].data<float>();
    int64_t in = layers[l], outDim = layers[l + 1];
    std::vector<double> next(size_t(batch * outDim));
    for (int64_t i = 0; i < batch; ++i)
      for (int64_t j = 0; j < outDim; ++j) {
        double s = b[j];
        for (int64_t k = 0; k < in; ++k)
          s += act[i * in + k] * double(w[k * outDim + j]);
        next[i * outDim + j] = l + 2 < layers.size() ? std::max(s, 0.0) : s;
      }
    act = std::move(next);
  }
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < batch * 10; ++i) {
    diff += std::pow(firstLogits[0].data<float>()[i] - act[i], 2);
    norm += act[i] * act[i];
  }
  double rel = std::sqrt(diff / norm);
  fmt::print("first batch against a float64 reference: relative error {:.2e} ({})\n", rel,
             rel < 1e-5 ? "ok" : "TOO LARGE");
  return rel < 1e-5 ? 0 : 1;
}
