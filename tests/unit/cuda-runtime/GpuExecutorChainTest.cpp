// The GPU executor on a hand-built Executable (no MLIR, no kernels): a chain of matmuls whose
// intermediate buffers die at different steps, so the allocator hands a freed block to a later
// writer while other blocks are still to be read. Each run's outputs against float64. What it
// guards: the executor reads outputs only after the stream finished them, and frees its pinned
// staging buffer only after the copies queued through it (tests/emucuda/mutants break each and
// must fail here).
#include "GpuTestUtil.h"
#include "RuntimeTestUtil.h"

#include "runtime/Allocator.h"
#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/CudaMemory.h"
#include "runtime/cuda/GpuExecutor.h"

namespace smelt::rt::test {
namespace {

using Matrix = std::vector<double>;

/// a [m x k] times b [k x n], row-major, in float64.
Matrix product(const Matrix &a, const Matrix &b, int64_t m, int64_t k, int64_t n) {
  Matrix c(size_t(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j)
        c[size_t(i * n + j)] += a[size_t(i * k + p)] * b[size_t(p * n + j)];
  return c;
}

/// An allocator of gpu:0's memory for one test: the process-wide one (deviceAllocator) would be
/// in use afterwards, and GpuMemory's tests set policies that must come before its first use.
std::unique_ptr<Allocator> ownAllocator(const MemoryPolicy &policy = {}) {
  Expected<std::unique_ptr<Allocator>> made = Allocator::create(
      "gpu:0", std::make_unique<cuda::CudaMemorySource>(*testGpu()), policy);
  EXPECT_TRUE(made.ok()) << made.message();
  return made.ok() ? std::move(*made) : nullptr;
}

/// x, w1..w4 -> (y3, y4): y1 = x w1, y2 = y1 w2, y3 = y2 w3, y4 = y1 w4. y1 is read last by the
/// final step; y2 dies after step 3, and y3 (written then) may take its block.
Executable matmulChain(int64_t n) {
  Executable exe;
  exe.name = "chain";
  TensorType square{DType::f32, {n, n}};
  BufferId x = appendBuffer(exe, square, "%x");
  std::vector<BufferId> w;
  for (int i = 1; i <= 4; ++i)
    w.push_back(appendBuffer(exe, square, "%w" + std::to_string(i)));
  exe.inputs = {x, w[0], w[1], w[2], w[3]};
  BufferId y1 = appendStep(exe, "matmul", {x, w[0]}, square, {}, "chain.mlir:1:1");
  BufferId y2 = appendStep(exe, "matmul", {y1, w[1]}, square, {}, "chain.mlir:2:1");
  BufferId y3 = appendStep(exe, "matmul", {y2, w[2]}, square, {}, "chain.mlir:3:1");
  BufferId y4 = appendStep(exe, "matmul", {y1, w[3]}, square, {}, "chain.mlir:4:1");
  for (Step &step : exe.steps)
    step.device = "gpu:0";
  exe.outputs = {y3, y4};
  return exe;
}

TEST(GpuExecutorChain, MatmulChainMatchesFloat64RunAfterRun) {
  SMELT_REQUIRE_GPU();
  const int64_t n = 48;
  std::unique_ptr<Allocator> allocator = ownAllocator();
  ASSERT_TRUE(allocator);
  Expected<cuda::GpuExecutor> exec =
      cuda::GpuExecutor::create(matmulChain(n), *testGpu(), allocator.get());
  ASSERT_TRUE(exec.ok()) << exec.message();
  for (int run = 0; run < 3; ++run) {
    std::vector<HostTensor> inputs;
    for (int i = 0; i < 5; ++i)
      inputs.push_back(randomTensor(DType::f32, {n, n}));
    std::vector<Matrix> v;
    for (const HostTensor &t : inputs)
      v.push_back(t.toDoubles());
    Matrix y1 = product(v[0], v[1], n, n, n), y2 = product(y1, v[2], n, n, n);
    Matrix y3 = product(y2, v[3], n, n, n), y4 = product(y1, v[4], n, n, n);
    std::vector<HostTensor> outputs;
    SMELT_ASSERT_OK(exec->run(inputs, outputs));
    ASSERT_EQ(outputs.size(), 2u);
    std::string what = "run " + std::to_string(run);
    expectClose(outputs[0], y3, what + ": y3 = ((x w1) w2) w3", tolerance(DType::f32));
    expectClose(outputs[1], y4, what + ": y4 = (x w1) w4, y1 read last", tolerance(DType::f32));
  }
}

// A state kept on the GPU and donated back each run, as a train step keeps its parameters:
// w <- w m, with m a fresh host input. The state moves between blocks from run to run, and from
// the second run on the executor queues the step as a CUDA graph captured for those blocks: a
// graph replayed for other blocks than its own would multiply a stale w (a block given back,
// or another run's), which the float64 product of every run catches.
TEST(GpuExecutorChain, DonatedStateReplaysTheGraphOfItsOwnBlocks) {
  SMELT_REQUIRE_GPU();
  const int64_t n = 32;
  std::unique_ptr<Allocator> allocator = ownAllocator();
  ASSERT_TRUE(allocator);
  Executable exe;
  exe.name = "state";
  TensorType square{DType::f32, {n, n}};
  BufferId w = appendBuffer(exe, square, "%w"), m = appendBuffer(exe, square, "%m");
  exe.inputs = {w, m};
  exe.outputs = {appendStep(exe, "matmul", {w, m}, square, {}, "state.mlir:1:1")};
  exe.steps[0].device = "gpu:0";
  Expected<cuda::GpuExecutor> exec = cuda::GpuExecutor::create(exe, *testGpu(), allocator.get());
  ASSERT_TRUE(exec.ok()) << exec.message();
  RunValues donateAndKeep;
  donateAndKeep.donated = {1, 0};
  donateAndKeep.keepOnDevice = {1};
  HostTensor first = randomTensor(DType::f32, {n, n});
  Matrix want = first.toDoubles();
  Value state(std::move(first));
  for (int run = 0; run < 6; ++run) {
    HostTensor factor = randomTensor(DType::f32, {n, n});
    want = product(want, factor.toDoubles(), n, n, n);
    Value lent = Value::lent(factor);
    std::vector<Value> outputs;
    SMELT_ASSERT_OK(exec->run({&state, &lent}, outputs, donateAndKeep));
    ASSERT_EQ(outputs.size(), 1u);
    state = std::move(outputs[0]);
    Expected<HostTensor> got = state.toHost();
    ASSERT_TRUE(got.ok()) << got.message();
    expectClose(*got, want, "run " + std::to_string(run), tolerance(DType::f32));
  }
  cuda::GpuExecutor::GraphStats stats = exec->graphStats();
  EXPECT_EQ(stats.off, "");
  EXPECT_EQ(stats.captured + stats.replayed, 5) << "runs after the first go as graphs";
}

// A run that runs out of memory half way leaves its input copies queued; the executor destroyed
// right after must not free the pinned staging they read from before they ran (a buffer freed
// before its last reader), and the device must stay sound for the next executor.
TEST(GpuExecutorChain, AFailedRunThenDestroyedExecutorLeavesTheDeviceSound) {
  SMELT_REQUIRE_GPU();
  const int64_t n = 512; // 1 MiB a matrix
  MemoryPolicy policy;
  // cuBLASLt's workspace and the 5 inputs fit, with y1 beside them they do not: the run fails
  // at its first step, after the inputs' copies were queued.
  policy.limitBytes = cuda::CublasLt::kWorkspaceBytes + (5 << 20) + (512 << 10);
  std::unique_ptr<Allocator> allocator = ownAllocator(policy);
  ASSERT_TRUE(allocator);
  std::vector<HostTensor> inputs, outputs;
  for (int i = 0; i < 5; ++i)
    inputs.push_back(randomTensor(DType::f32, {n, n}));
  {
    Expected<cuda::GpuExecutor> exec =
        cuda::GpuExecutor::create(matmulChain(n), *testGpu(), allocator.get());
    ASSERT_TRUE(exec.ok()) << exec.message();
    Status failed = exec->run(inputs, outputs);
    ASSERT_FALSE(failed.ok()) << "the run fit under the limit";
    EXPECT_NE(failed.message().find("out of memory"), std::string::npos) << failed.message();
  }
  SMELT_ASSERT_OK((*testGpu())->check((*testGpu())->driver().ctxSynchronize(),
                                      "cuCtxSynchronize after the failed run"));
  std::unique_ptr<Allocator> fresh = ownAllocator();
  ASSERT_TRUE(fresh);
  Expected<cuda::GpuExecutor> next =
      cuda::GpuExecutor::create(matmulChain(48), *testGpu(), fresh.get());
  ASSERT_TRUE(next.ok()) << next.message();
  std::vector<HostTensor> small;
  for (int i = 0; i < 5; ++i)
    small.push_back(randomTensor(DType::f32, {48, 48}));
  SMELT_ASSERT_OK(next->run(small, outputs));
}

} // namespace
} // namespace smelt::rt::test
