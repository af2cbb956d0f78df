// The caching allocator and the process's memory configuration: random workloads against a
// shadow model (no block overlaps another, contents survive, stats add up, frees coalesce),
// limits, preallocation, out-of-memory messages, the memory flags, logical GPUs, and the CPU
// executor's buffers freed by liveness, failing a run cleanly when they do not fit.
#include "RuntimeTestUtil.h"

#include "runtime/DeviceMemory.h"

#include <cstring>
#include <map>

namespace smelt::rt::test {
namespace {

constexpr uint64_t kMiB = 1 << 20;

#define ASSERT_OK(expr)                                                                            \
  do {                                                                                             \
    Status status_ = (expr);                                                                       \
    ASSERT_TRUE(status_.ok()) << status_.message();                                                \
  } while (0)

/// Host memory with a budget of its own, counting what it gave: the test's view of a device.
class BudgetSource : public MemorySource {
public:
  BudgetSource(uint64_t capacity, uint64_t budget, int *regionsOut = nullptr)
      : capacity_(capacity), budget_(budget), regions_(regionsOut) {}
  Expected<void *> take(uint64_t bytes) override {
    if (bytes > budget_ - used_)
      return Status::error("the test device is full");
    used_ += bytes;
    if (regions_)
      ++*regions_;
    return std::aligned_alloc(Allocator::kAlignment, bytes);
  }
  void give(void *region, uint64_t bytes) override {
    used_ -= bytes;
    if (regions_)
      --*regions_;
    std::free(region);
  }
  uint64_t capacity() const override { return capacity_; }

private:
  uint64_t capacity_, budget_, used_ = 0;
  int *regions_;
};

std::unique_ptr<Allocator> makeAllocator(MemoryPolicy policy, uint64_t capacity = 256 * kMiB,
                                         uint64_t budget = 256 * kMiB, int *regions = nullptr) {
  Expected<std::unique_ptr<Allocator>> made =
      Allocator::create("test:0", std::make_unique<BudgetSource>(capacity, budget, regions), policy);
  EXPECT_TRUE(made.ok()) << made.message();
  return made.ok() ? std::move(*made) : nullptr;
}

TEST(Allocator, RandomWorkloadKeepsBlocksApartAndCoalesces) {
  std::unique_ptr<Allocator> allocator = makeAllocator({}, kMiB << 10, kMiB << 10);
  ASSERT_TRUE(allocator);
  struct Live {
    uint64_t bytes;
    uint8_t pattern;
  };
  std::map<char *, Live> live;
  std::uniform_int_distribution<int> coin(0, 1), sizeClass(0, 3);
  auto drawBytes = [&] {
    uint64_t scale[] = {300, 5000, 100000, 3 * kMiB};
    return uint64_t(std::uniform_int_distribution<uint64_t>(0, scale[sizeClass(rng())])(rng()));
  };
  uint64_t expectedInUse = 0, peak = 0;
  auto rounded = [](uint64_t b) { return std::max<uint64_t>(256, (b + 255) / 256 * 256); };
  for (int op = 0; op < 3000; ++op) {
    if (live.empty() || coin(rng()) != 0) {
      uint64_t bytes = drawBytes();
      Expected<void *> block = allocator->allocate(bytes, "block " + std::to_string(op));
      ASSERT_TRUE(block.ok()) << block.message();
      char *at = static_cast<char *>(*block);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(at) % Allocator::kAlignment, 0u);
      // No overlap with the neighbours by address.
      auto next = live.lower_bound(at);
      if (next != live.end()) {
        ASSERT_LE(at + bytes, next->first) << "overlaps the next block";
      }
      if (next != live.begin()) {
        ASSERT_LE(std::prev(next)->first + std::prev(next)->second.bytes, at)
            << "overlaps the previous block";
      }
      uint8_t pattern = uint8_t(op * 37 + 11);
      std::memset(at, pattern, bytes);
      live[at] = {bytes, pattern};
      expectedInUse += rounded(bytes);
      peak = std::max(peak, expectedInUse);
    } else {
      auto it = live.begin();
      std::advance(it, std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng()));
      for (uint64_t i = 0; i < it->second.bytes; ++i)
        ASSERT_EQ(uint8_t(it->first[i]), it->second.pattern) << "a block was overwritten";
      expectedInUse -= rounded(it->second.bytes);
      allocator->free(it->first);
      live.erase(it);
    }
    MemoryStats stats = allocator->stats();
    ASSERT_EQ(stats.inUseBytes, expectedInUse);
    ASSERT_EQ(stats.liveBuffers, int64_t(live.size()));
    ASSERT_GE(stats.reservedBytes, stats.inUseBytes);
  }
  EXPECT_EQ(allocator->stats().peakBytes, peak);
  for (auto &[at, block] : live)
    allocator->free(at);
  // Everything coalesced: each region is one free piece again, and giving them back leaves
  // nothing held.
  MemoryStats idle = allocator->stats();
  EXPECT_EQ(idle.inUseBytes, 0u);
  allocator->releaseCached();
  EXPECT_EQ(allocator->stats().reservedBytes, 0u);
  EXPECT_EQ(allocator->stats().regions, 0);
}

TEST(Allocator, ReusesFreedBlocksWithoutAskingTheDevice) {
  int regions = 0;
  std::unique_ptr<Allocator> allocator = makeAllocator({}, 256 * kMiB, 256 * kMiB, &regions);
  Expected<void *> a = allocator->allocate(kMiB, "a"), b = allocator->allocate(100, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  int regionsBefore = regions;
  allocator->free(*a);
  Expected<void *> again = allocator->allocate(kMiB - 10, "again");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *a) << "the freed block, best fit";
  EXPECT_EQ(regions, regionsBefore);
}

TEST(Allocator, OutOfMemoryNamesTheBufferTheLimitAndWhatIsInUse) {
  std::unique_ptr<Allocator> allocator = makeAllocator({.limitBytes = 4 * kMiB});
  Expected<void *> big = allocator->allocate(3 * kMiB, "buffer b3 (matmul at m.mlir:4:5)");
  ASSERT_TRUE(big.ok()) << big.message();
  Expected<void *> more = allocator->allocate(2 * kMiB, "buffer b9 (add at m.mlir:7:2)");
  ASSERT_FALSE(more.ok());
  const std::string &message = more.message();
  for (const char *part : {"test:0: out of memory for buffer b9 (add at m.mlir:7:2)",
                           "needs 2.0 MiB", "The limit is 4.0 MiB", "3.0 MiB is in use by 1 buffer",
                           "3.0 MiB buffer b3 (matmul at m.mlir:4:5)"})
    EXPECT_NE(message.find(part), std::string::npos) << "missing '" << part << "' in " << message;
  // The allocator carries on: freeing makes room.
  allocator->free(*big);
  Expected<void *> fits = allocator->allocate(2 * kMiB, "buffer b9");
  EXPECT_TRUE(fits.ok()) << fits.message();
  // A request past the limit, or one too large to round, fails without growing.
  EXPECT_FALSE(allocator->allocate(5 * kMiB, "huge").ok());
  EXPECT_FALSE(allocator->allocate(~uint64_t(0), "absurd").ok());
  EXPECT_LE(allocator->stats().reservedBytes, 4 * kMiB);
}

TEST(Allocator, PreallocatesOnceAndNeverGrows) {
  int regions = 0;
  std::unique_ptr<Allocator> allocator =
      makeAllocator({.preallocate = true, .fraction = 0.5, .limitBytes = 8 * kMiB}, 256 * kMiB,
                    256 * kMiB, &regions);
  ASSERT_TRUE(allocator);
  EXPECT_EQ(regions, 1);
  EXPECT_EQ(allocator->stats().reservedBytes, 4 * kMiB);
  std::vector<void *> blocks;
  for (int i = 0; i < 4; ++i) {
    Expected<void *> block = allocator->allocate(kMiB, "quarter");
    ASSERT_TRUE(block.ok()) << block.message();
    blocks.push_back(*block);
  }
  Expected<void *> over = allocator->allocate(1, "one more byte");
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.message().find("preallocate 50%"), std::string::npos) << over.message();
  EXPECT_EQ(regions, 1);
  for (void *block : blocks)
    allocator->free(block);
  allocator->releaseCached(); // the preallocated region stays
  EXPECT_EQ(regions, 1);
}

TEST(Allocator, PolicyErrorsAtCreation) {
  auto create = [](MemoryPolicy policy, uint64_t budget) {
    return Allocator::create("gpu:7", std::make_unique<BudgetSource>(64 * kMiB, budget), policy)
        .status();
  };
  Status tooBig = create({.limitBytes = 128 * kMiB}, 64 * kMiB);
  ASSERT_FALSE(tooBig.ok());
  EXPECT_NE(tooBig.message().find("gpu:7: the memory limit 128.0 MiB is more than the device "
                                  "has (64.0 MiB)"),
            std::string::npos)
      << tooBig.message();
  Status cannot = create({.preallocate = true, .fraction = 0.9}, 16 * kMiB);
  ASSERT_FALSE(cannot.ok());
  EXPECT_NE(cannot.message().find("cannot preallocate 57.6 MiB (90% of 64.0 MiB)"),
            std::string::npos)
      << cannot.message();
  EXPECT_FALSE(create({.preallocate = true, .fraction = 0}, 64 * kMiB).ok());
}

TEST(Allocator, GivesCachedRegionsBackWhenTheDeviceIsFull) {
  // The device has 6 MiB; 4 MiB sit cached from earlier steps, and a 5 MiB buffer comes.
  std::unique_ptr<Allocator> allocator = makeAllocator({}, 64 * kMiB, 6 * kMiB);
  Expected<void *> early = allocator->allocate(3 * kMiB, "early");
  ASSERT_TRUE(early.ok()) << early.message();
  allocator->free(*early);
  Expected<void *> late = allocator->allocate(5 * kMiB, "late");
  EXPECT_TRUE(late.ok()) << late.message();
}

TEST(MemoryFlags, ParseSizesPoliciesLimitsAndLogicalGpus) {
  EXPECT_EQ(*parseBytes("512MiB"), 512 * kMiB);
  EXPECT_EQ(*parseBytes("1.5 GiB"), 1536 * kMiB);
  EXPECT_EQ(*parseBytes("4g"), 4096 * kMiB);
  EXPECT_EQ(*parseBytes("1000"), 1000u);
  for (const char *bad : {"", "MiB", "-1GiB", "3 parsecs", "1e40"})
    EXPECT_FALSE(parseBytes(bad).ok()) << bad;
  EXPECT_NE(parseBytes("3 parsecs").message().find("'3 parsecs' is not a size"),
            std::string::npos);

  Expected<MemoryConfig> config =
      parseMemoryFlags("preallocate=0.5", "2GiB,gpu:1=1GiB", "1GiB,3GiB");
  ASSERT_TRUE(config.ok()) << config.message();
  EXPECT_TRUE(config->defaults.preallocate);
  EXPECT_EQ(config->defaults.fraction, 0.5);
  EXPECT_EQ(config->policyFor("cpu:0").limitBytes, 2048 * kMiB);
  EXPECT_EQ(config->policyFor("gpu:1").limitBytes, 1024 * kMiB);
  EXPECT_TRUE(config->policyFor("gpu:1").preallocate);
  EXPECT_EQ(config->logicalGpuLimits, (std::vector<uint64_t>{1024 * kMiB, 3072 * kMiB}));
  EXPECT_EQ(config->policyFor("gpu:0").str(), "preallocate 50%, limit 2.00 GiB");

  struct Bad {
    const char *memory, *limit, *logical, *says;
  };
  for (Bad bad : {Bad{"preallocate=1.5", "", "", "--memory=preallocate=1.5"},
                  Bad{"lots", "", "", "write 'grow' or 'preallocate"},
                  Bad{"", "tpu:0=1GiB", "", "'tpu:0' is not a device"},
                  Bad{"", "gpu:0=0", "", "a limit of 0 bytes"},
                  Bad{"", "", "4GiB,x", "--logical-gpus=4GiB,x"}}) {
    Expected<MemoryConfig> parsed = parseMemoryFlags(bad.memory, bad.limit, bad.logical);
    ASSERT_FALSE(parsed.ok()) << bad.says;
    EXPECT_NE(parsed.message().find(bad.says), std::string::npos) << parsed.message();
  }
}

TEST(MemoryConfig, LogicalGpusNumberedAcrossPhysicalOnesAndPoliciesFixedAtFirstUse) {
  Expected<Allocator *> host = deviceAllocator("cpu:0"); // made under the default policy
  ASSERT_TRUE(host.ok()) << host.message();
  MemoryConfig original = memoryConfig();

  MemoryConfig limited = original;
  limited.devices["cpu:0"].limitBytes = 64 * kMiB;
  Status refused = configureMemory(limited);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("cpu:0's memory is already in use under policy 'grow'"),
            std::string::npos)
      << refused.message();

  MemoryConfig split = original;
  split.logicalGpuLimits = {kMiB << 10, 2 * (kMiB << 10)};
  ASSERT_OK(configureMemory(split));
  EXPECT_EQ(logicalGpuCount(2), 3);
  EXPECT_EQ(logicalGpuCount(0), 0);
  Expected<LogicalGpu> second = logicalGpu(1, 2), third = logicalGpu(2, 2);
  ASSERT_TRUE(second.ok() && third.ok());
  EXPECT_EQ(second->physical, 0);
  EXPECT_EQ(second->limitBytes, 2 * (kMiB << 10));
  EXPECT_EQ(third->physical, 1);
  EXPECT_EQ(third->limitBytes, 0u);
  Expected<LogicalGpu> missing = logicalGpu(3, 2);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.message(),
            "gpu:3 does not exist: there are 3 GPUs (2 logical on physical GPU 0)");
  EXPECT_FALSE(deviceAllocator("npu:0").ok());

  // What placement sees: the split GPU's two logical GPUs, each limited, then physical gpu:1
  // under the configured limit of the name it now has (gpu:2).
  MemoryConfig named = split;
  named.devices["gpu:2"].limitBytes = 5 * kMiB;
  named.devices["gpu:0"].limitBytes = 2 * (kMiB << 10); // above its logical limit: not used
  ASSERT_OK(configureMemory(named));
  std::vector<DeviceInfo> physical = {{"cpu:0", "host", 0, 0, 8, 16 * (kMiB << 10)},
                                      {"gpu:0", "GPU A", 9, 0, 132, 80 * (kMiB << 10)},
                                      {"gpu:1", "GPU B", 8, 0, 108, 40 * (kMiB << 10)}};
  std::vector<LogicalDevice> logical = logicalDevices(physical);
  ASSERT_EQ(logical.size(), 4u);
  EXPECT_EQ(logicalDeviceTable(logical),
            "cpu:0  host, memory: grow\n"
            "gpu:0  on gpu:0 (GPU A), memory: grow, limit 1.00 GiB\n"
            "gpu:1  on gpu:0 (GPU A), memory: grow, limit 2.00 GiB\n"
            "gpu:2  on gpu:1 (GPU B), memory: grow, limit 5.0 MiB\n");
  EXPECT_EQ(logical[3].info.computeMajor, 8);
  ASSERT_OK(configureMemory(original));
  // Without a split, each GPU is itself.
  logical = logicalDevices(physical);
  ASSERT_EQ(logical.size(), 3u);
  EXPECT_EQ(logical[2].info.name, "gpu:1");
  EXPECT_EQ(logical[2].physical, "gpu:1");
}

/// A chain of `length` elementwise steps over f32[rows, 256] (1 KiB per row): x -> x+x -> ...,
/// each value given back after the step that reads it, as the compiler's schedule says.
Executable chain(int length, int64_t rows) {
  Executable exe;
  exe.name = "chain";
  TensorType type{DType::f32, {rows, 256}};
  exe.buffers.push_back({type, "%arg0"});
  exe.inputs = {0};
  for (int i = 0; i < length; ++i) {
    appendKernelStep(exe, kernels::add, "add", {i, i}, type,
                     "chain.mlir:" + std::to_string(i + 2) + ":3");
    exe.buffers.back().name = "add" + std::to_string(i);
    exe.steps.back().frees = {i};
  }
  exe.outputs = {length};
  return exe;
}

TEST(ExecutorMemory, HoldsOnlyLiveBuffersAndFailsARunCleanlyWhenTheyDoNotFit) {
  // 1024 rows: 1 MiB per buffer. Ten steps hold at most two buffers at once.
  std::unique_ptr<Allocator> roomy = makeAllocator({.limitBytes = 3 * kMiB});
  Expected<CpuExecutor> exec = CpuExecutor::create(chain(10, 1024), nullptr, roomy.get());
  ASSERT_TRUE(exec.ok()) << exec.message();
  HostTensor x = randomTensor(DType::f32, {1024, 256});
  std::vector<HostTensor> outputs;
  ASSERT_OK(exec->run({x}, outputs));
  EXPECT_EQ(exec->lastRunPeakBytes(), 2 * kMiB);
  std::vector<double> xv = x.toDoubles(), ref(xv.size());
  for (size_t i = 0; i < xv.size(); ++i)
    ref[i] = xv[i] * 1024;
  expectClose(outputs[0], ref, "x doubled ten times");
  EXPECT_EQ(roomy->stats().inUseBytes, 0u) << "a run gives every block back";
  EXPECT_EQ(roomy->stats().peakBytes, 2 * kMiB);

  // Under a 1.5 MiB limit the second buffer does not fit: the run fails naming it, gives
  // back what it took, and the executor fails the same way next time instead of crashing.
  std::unique_ptr<Allocator> tight = makeAllocator({.limitBytes = 3 * kMiB / 2});
  Expected<CpuExecutor> cramped = CpuExecutor::create(chain(10, 1024), nullptr, tight.get());
  ASSERT_TRUE(cramped.ok()) << cramped.message();
  for (int attempt = 0; attempt < 2; ++attempt) {
    Status failed = cramped->run({x}, outputs);
    ASSERT_FALSE(failed.ok());
    EXPECT_NE(failed.message().find("test:0: out of memory for buffer b2 (add1, "
                                    "tensor<1024x256xf32>): it needs 1.0 MiB (no free piece fits it"),
              std::string::npos)
        << failed.message();
    EXPECT_NE(failed.message().find("1.0 MiB buffer b1 (add0"), std::string::npos)
        << failed.message();
    EXPECT_EQ(tight->stats().inUseBytes, 0u);
  }
}

} // namespace
} // namespace smelt::rt::test
