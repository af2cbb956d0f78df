// CPU fused kernels against the same ops unfused, on a 6-op elementwise chain over 16M f32:
// y = min((max(x * 1.5 + 0.25, 0) * 2) - 1, 4). Fused, it reads 64 MB and writes 64 MB, the
// bytes a memcpy of the tensor moves, so a copy is the floor it is measured against: the best
// copy this machine does, which is memcpy split over the kernels' threads (one thread's memcpy
// does not reach the memory bandwidth of two cores) beside one plain memcpy. Unfused, every op
// is a kernel of its own that reads and writes whole tensors. Kernel times come from the
// executor's per-step timings (its copy of the outputs is not the kernels' work). Targets:
// fused >= 3x faster than unfused, <= 1.5x the best copy. SMELT_CPU_THREADS=1 runs the kernels
// and the split copy on one thread.
#include "bench/ElementwiseChain.h"
#include "codegen/Compile.h"
#include "passes/Passes.h"
#include "runtime/CpuExecutor.h"
#include "runtime/Parallel.h"

#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <random>

namespace {

using namespace smelt;

constexpr int64_t kElements = int64_t(1) << 24;

/// The chain's executor, compiled once per variant (JIT for the fused one).
rt::CpuExecutor &chainExecutor(bool fused) {
  static std::unique_ptr<rt::CpuExecutor> executors[2];
  std::unique_ptr<rt::CpuExecutor> &slot = executors[fused];
  if (slot)
    return *slot;
  mlir::MLIRContext context;
  codegen::loadDialects(context);
  auto module =
      mlir::parseSourceString<mlir::ModuleOp>(elementwiseChain(fused, kElements), mlir::ParserConfig(&context));
  if (!module)
    throw std::runtime_error("the chain does not parse");
  // Unfused, each op is a kernel of its own: what the pipeline compiles without fusion.
  mlir::PassManager pm(&context);
  pm.addPass(createFuse(FuseOptions{/*reportPath=*/"", /*oneOpPerKernel=*/true}));
  if (!fused && mlir::failed(pm.run(*module)))
    throw std::runtime_error("smelt-fuse{one-op-per-kernel} failed on the chain");
  mlir::FailureOr<rt::Executable> exe =
      codegen::buildWithKernels(*module->getOps<mlir::func::FuncOp>().begin());
  if (mlir::failed(exe))
    throw std::runtime_error("the chain does not compile");
  rt::Expected<rt::CpuExecutor> executor = rt::CpuExecutor::create(*exe);
  if (!executor)
    throw std::runtime_error(executor.message());
  slot = std::make_unique<rt::CpuExecutor>(std::move(*executor));
  return *slot;
}

const rt::HostTensor &input() {
  static rt::HostTensor x = [] {
    std::vector<double> values(static_cast<size_t>(kElements));
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> dist(-2.0, 2.0);
    for (double &v : values)
      v = dist(rng);
    return rt::HostTensor::fromDoubles({rt::DType::f32, {kElements}}, values);
  }();
  return x;
}

void chain(benchmark::State &state, bool fused) {
  rt::CpuExecutor &executor = chainExecutor(fused);
  std::vector<rt::HostTensor> outputs;
  for (auto _ : state) {
    if (rt::Status s = executor.run({&input()}, outputs); !s.ok()) {
      state.SkipWithError(s.message().c_str());
      return;
    }
    const std::vector<double> &micros = executor.lastStepMicros();
    state.SetIterationTime(std::accumulate(micros.begin(), micros.end(), 0.0) * 1e-6);
  }
  state.counters["steps"] = double(executor.lastStepMicros().size());
  state.SetBytesProcessed(state.iterations() * kElements * 4 * 2);
}

/// The tensor copied by one memcpy, or (split) by one memcpy of a contiguous range on each of
/// the kernels' threads, as the fused kernel's loop is split.
void memcpyFloor(benchmark::State &state, bool split) {
  const rt::HostTensor &x = input();
  rt::HostTensor y = rt::HostTensor::zeros(x.type()); // pages touched before timing
  auto *to = static_cast<char *>(y.raw());
  const auto *from = static_cast<const char *>(x.raw());
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    if (split)
      rt::parallelFor(kElements, [&](int64_t begin, int64_t end) {
        std::memcpy(to + begin * 4, from + begin * 4, size_t(end - begin) * 4);
      });
    else
      std::memcpy(to, from, x.byteSize());
    benchmark::DoNotOptimize(y.raw());
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  state.SetBytesProcessed(state.iterations() * kElements * 4 * 2);
}

BENCHMARK_CAPTURE(chain, fused, true)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(10)
    ->ReportAggregatesOnly();
BENCHMARK_CAPTURE(chain, unfused, false)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(10)
    ->ReportAggregatesOnly();
BENCHMARK_CAPTURE(memcpyFloor, one_thread, false)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(10)
    ->ReportAggregatesOnly();
BENCHMARK_CAPTURE(memcpyFloor, split, true)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(10)
    ->ReportAggregatesOnly();

} // namespace

BENCHMARK_MAIN();
