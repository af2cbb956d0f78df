// Implementation of the shared unit-test helpers.
#include "TestUtil.h"

#include "Tolerance.h"

#include "data/Mnist.h"

#include "mlir/IR/Diagnostics.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace smelt::test {

uint64_t rngSeed() {
  static uint64_t seed = [] {
    if (const char *fixed = std::getenv("SMELT_TEST_SEED"))
      return uint64_t(std::strtoull(fixed, nullptr, 10));
    return (uint64_t(std::random_device{}()) << 32) | std::random_device{}();
  }();
  return seed;
}

std::mt19937_64 &rng() {
  static std::mt19937_64 generator(rngSeed());
  return generator;
}

double draw(double lo, double hi, double minMagnitude) {
  std::uniform_real_distribution<double> dist(lo, hi);
  for (;;) {
    double v = dist(rng());
    if (std::abs(v) >= minMagnitude)
      return v;
  }
}

rt::DType toRt(DType dtype) {
  switch (dtype) {
  case DType::f32:
    return rt::DType::f32;
  case DType::f16:
    return rt::DType::f16;
  case DType::bf16:
    return rt::DType::bf16;
  case DType::f64:
    return rt::DType::f64;
  case DType::i32:
    return rt::DType::i32;
  case DType::i64:
    return rt::DType::i64;
  case DType::i1:
    break;
  }
  return rt::DType::i1;
}

rt::HostTensor randomTensor(const std::vector<int64_t> &shape, DType dtype,
                            const std::function<double()> &gen) {
  rt::TensorType type{toRt(dtype), shape};
  std::vector<double> values(size_t(type.numElements()));
  for (double &v : values) {
    v = gen ? gen() : draw(-2.0, 2.0);
    if (dtype == DType::i32 || dtype == DType::i64)
      v = std::round(v * 10.0);
    if (dtype == DType::i1)
      v = v > 0;
  }
  return rt::HostTensor::fromDoubles(type, values);
}

std::vector<rt::HostTensor> run(Graph &graph, const std::vector<rt::HostTensor> &inputs,
                                const std::string &function, const PipelineOptions &options) {
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler capture(&graph.context(), [&](mlir::Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return mlir::success();
  });
  mlir::FailureOr<rt::Executable> exe =
      codegen::compile(graph.module(), function.empty() ? graph.name() : function, options);
  if (failed(exe)) {
    ADD_FAILURE() << "compile failed:\n" << diagnostics;
    return {};
  }
  rt::Expected<rt::CpuExecutor> cpu = rt::CpuExecutor::create(*exe);
  if (!cpu) {
    ADD_FAILURE() << "executor: " << cpu.message();
    return {};
  }
  std::vector<rt::HostTensor> outputs;
  if (rt::Status s = cpu->run(inputs, outputs); !s.ok())
    ADD_FAILURE() << "run: " << s.message();
  return outputs;
}

std::vector<double> centralDifferences(double *x, int64_t count,
                                       const std::function<double()> &loss) {
  std::vector<double> numeric;
  for (int64_t k = 0; k < count; ++k) {
    double saved = x[k], h = 1e-6 * std::max(1.0, std::abs(saved));
    x[k] = saved + h;
    double up = loss();
    x[k] = saved - h;
    double down = loss();
    x[k] = saved;
    numeric.push_back((up - down) / (2 * h));
  }
  return numeric;
}

std::optional<rt::CpuExecutor> compileLossAndGradients(Graph &graph, Tensor loss,
                                                       const std::vector<Tensor> &wrt,
                                                       const std::vector<Tensor> &extra) {
  std::vector<Tensor> outputs = {loss};
  std::vector<Tensor> grads = graph.gradients(loss, wrt);
  outputs.insert(outputs.end(), grads.begin(), grads.end());
  outputs.insert(outputs.end(), extra.begin(), extra.end());
  graph.setOutputs(outputs);
  return compileForCpu(graph.module(), graph.name());
}

std::optional<rt::CpuExecutor> compileForCpu(mlir::ModuleOp module, const std::string &function) {
  mlir::FailureOr<rt::Executable> exe = codegen::compile(module, function);
  EXPECT_TRUE(mlir::succeeded(exe)) << "compiling @" << function;
  if (mlir::failed(exe))
    return std::nullopt;
  rt::Expected<rt::CpuExecutor> cpu = rt::CpuExecutor::create(*exe);
  EXPECT_TRUE(cpu.ok()) << cpu.message();
  if (!cpu)
    return std::nullopt;
  return std::move(*cpu);
}

void expectGradientsMatchDifferences(rt::CpuExecutor &cpu, std::vector<rt::HostTensor> &args,
                                     const std::vector<size_t> &wrt, double tolerance,
                                     const std::vector<std::string> &names) {
  std::vector<rt::HostTensor> out;
  ASSERT_TRUE(cpu.run(args, out).ok());
  ASSERT_GE(out.size(), 1 + wrt.size());
  auto lossAt = [&]() {
    std::vector<rt::HostTensor> o;
    EXPECT_TRUE(cpu.run(args, o).ok());
    return o[0].at(0);
  };
  for (size_t n = 0; n < wrt.size(); ++n) {
    rt::HostTensor &x = args[wrt[n]];
    std::vector<double> numeric = centralDifferences(x.data<double>(), x.type().numElements(), lossAt);
    std::vector<double> analytic = out[1 + n].toDoubles();
    // Relative to the gradient's norm, but never below 1e-3 of it: a gradient that is 0 by
    // the math (an attention key's bias) meets differences that are only rounding noise.
    double diff = 0, norm = 0;
    for (size_t k = 0; k < numeric.size(); ++k) {
      diff += (analytic[k] - numeric[k]) * (analytic[k] - numeric[k]);
      norm += numeric[k] * numeric[k];
    }
    EXPECT_LE(std::sqrt(diff) / std::max(std::sqrt(norm), 1e-3), tolerance)
        << "gradient of " << names[n] << " (norm " << std::sqrt(norm) << ")";
  }
}

double relError(const std::vector<double> &got, const std::vector<double> &ref) {
  if (got.size() != ref.size())
    return INFINITY;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff += (got[i] - ref[i]) * (got[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

double tolerance(DType dtype) { return referenceTolerance(toRt(dtype)); }

data::Dataset fashion(const char *split, int64_t limit) {
  rt::Expected<data::MnistSplit> s = data::loadMnist(data::fashionMnistDir(), split);
  EXPECT_TRUE(s.ok()) << s.message();
  data::Dataset d(std::move(s->images), std::move(s->labels));
  if (!limit)
    return d;
  rt::Expected<data::Dataset> slice = d.slice(0, limit);
  EXPECT_TRUE(slice.ok()) << slice.message();
  return slice ? std::move(*slice) : d;
}

} // namespace smelt::test
