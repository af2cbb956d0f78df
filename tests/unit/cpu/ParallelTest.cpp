// The runtime's parallel loops: every unit runs exactly once in contiguous ranges, on the
// threads asked for; one thread, small ranges and a loop already running run inline; concurrent
// callers both finish. Fused kernels give the same bits on one thread and on several.
#include "FusionTestUtil.h"

#include "runtime/CpuThreads.h"
#include "runtime/Parallel.h"
#include "runtime/cpu/OneDnn.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <cstring>
#include <set>
#include <thread>

namespace smelt::rt::test {
namespace {

/// Runs parallelFor over `units` on `threads` and expects each unit to have run once, in at
/// most `threads` ranges.
void expectEachUnitOnce(int threads, int64_t units) {
  std::vector<int> hits(size_t(units), 0);
  std::atomic<int> calls{0};
  parallelFor(threads, units, [&](int64_t begin, int64_t end) {
    ++calls;
    EXPECT_LE(begin, end);
    for (int64_t i = begin; i < end; ++i)
      ++hits[size_t(i)]; // ranges are disjoint: no two threads touch one unit
  });
  EXPECT_LE(calls.load(), threads);
  for (int64_t i = 0; i < units; ++i)
    ASSERT_EQ(hits[size_t(i)], 1) << "unit " << i << " of " << units;
}

TEST(Parallel, RunsEveryUnitOnceInContiguousRanges) {
  for (int64_t units : {int64_t(0), int64_t(1), int64_t(3), int64_t(4), int64_t(1000003)})
    expectEachUnitOnce(4, units);
  for (int round = 0; round < 200; ++round) // loops back to back reuse the team
    expectEachUnitOnce(4, 97);
}

TEST(Parallel, RangesRunOnTheThreadsAskedFor) {
  std::mutex mutex;
  std::set<int> seen;
  parallelFor(3, 3000, [&](int64_t, int64_t) {
    std::lock_guard<std::mutex> lock(mutex);
    seen.insert(omp_get_thread_num());
  });
  EXPECT_EQ(seen, (std::set<int>{0, 1, 2}));
}

TEST(Parallel, ConcurrentCallersBothFinish) {
  std::thread other([&] {
    for (int round = 0; round < 100; ++round)
      expectEachUnitOnce(3, 5000);
  });
  for (int round = 0; round < 100; ++round)
    expectEachUnitOnce(3, 5000);
  other.join();
}

TEST(Parallel, OneThreadAndNestedLoopsRunInline) {
  std::thread::id caller = std::this_thread::get_id();
  parallelFor(1, 10, [&](int64_t begin, int64_t end) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 10);
  });
  std::atomic<int> inner{0};
  parallelFor(2, 2, [&](int64_t, int64_t) {
    std::thread::id outer = std::this_thread::get_id();
    parallelFor(4, 100, [&](int64_t begin, int64_t end) {
      EXPECT_EQ(std::this_thread::get_id(), outer);
      EXPECT_EQ(end - begin, 100);
      ++inner;
    });
  });
  EXPECT_EQ(inner.load(), 2);
}

// A step's oneDNN primitive is made once for each thread count it runs under, the first when
// the step is prepared; a count oneDNN refuses falls back to the first primitive, once.
TEST(Parallel, OneDnnPrimitivesAreMadeForEachThreadCount) {
  using dnnl::memory;
  memory::desc a({8, 16}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc b({16, 4}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc c({8, 4}, memory::data_type::f32, memory::format_tag::ab);
  int makes = 0;
  bool refuse = false;
  auto make = [&]() -> dnnl::primitive {
    ++makes;
    if (refuse)
      throw dnnl::error(dnnl_unimplemented, "refused for this test");
    return dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c),
                                                     cpu::oneDnnEngine()));
  };
  int before = omp_get_max_threads();
  omp_set_num_threads(2);
  Expected<cpu::PrimitivePerThreads> primitive = cpu::PrimitivePerThreads::create("matmul", make);
  ASSERT_TRUE(primitive) << primitive.message();
  EXPECT_EQ(makes, 1);
  const dnnl::primitive *onTwo = &primitive->current();
  EXPECT_EQ(&primitive->current(), onTwo);
  omp_set_num_threads(1);
  const dnnl::primitive *onOne = &primitive->current();
  EXPECT_NE(onOne, onTwo);
  EXPECT_EQ(makes, 2);
  EXPECT_EQ(primitive->made(), 2u);
  refuse = true;
  omp_set_num_threads(3);
  EXPECT_EQ(primitive->current().get(), onTwo->get()) << "a refused count runs the first";
  EXPECT_EQ(primitive->current().get(), onTwo->get());
  EXPECT_EQ(makes, 3) << "a refused count is asked for once";
  omp_set_num_threads(before);

  Expected<cpu::PrimitivePerThreads> refused = cpu::PrimitivePerThreads::create("matmul", make);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.message().find("matmul: oneDNN rejected the primitive"), std::string::npos)
      << refused.message();
}

const char *kThreaded = R"(
func.func @f(%x: tensor<1024x600xf32>, %b: tensor<600xf32>) -> (tensor<1024x600xf32>, tensor<1024xf32>) {
  %t = smelt.fusion loop (%x, %b) : (tensor<1024x600xf32>, tensor<600xf32>) -> tensor<1024x600xf32> {
  ^bb0(%a: tensor<1024x600xf32>, %c: tensor<600xf32>):
    %0 = smelt.broadcast_in_dim %c, dims = [1] : tensor<600xf32> -> tensor<1024x600xf32>
    %1 = smelt.add %a, %0 : tensor<1024x600xf32>
    %2 = smelt.tanh %1 : tensor<1024x600xf32>
    smelt.yield %2 : tensor<1024x600xf32>
  }
  %s = smelt.fusion reduction (%t) : (tensor<1024x600xf32>) -> tensor<1024xf32> {
  ^bb0(%a: tensor<1024x600xf32>):
    %0 = smelt.exp %a : tensor<1024x600xf32>
    %1 = smelt.reduce sum %0 axes = [1] : tensor<1024x600xf32>
    smelt.yield %1 : tensor<1024xf32>
  }
  %z = smelt.fusion loop (%t) : (tensor<1024x600xf32>) -> tensor<1024x600xf32> {
  ^bb0(%a: tensor<1024x600xf32>):
    %u = smelt.rng_uniform seed = 7, low = -1.0, high = 1.0 : tensor<1024x600xf32>
    %n = smelt.rng_normal seed = 8, mean = 0.0, stddev = 1.0 : tensor<1024x600xf32>
    %0 = smelt.add %a, %u : tensor<1024x600xf32>
    %1 = smelt.mul %0, %n : tensor<1024x600xf32>
    smelt.yield %1 : tensor<1024x600xf32>
  }
  return %z, %s : tensor<1024x600xf32>, tensor<1024xf32>
}
)";

TEST(Parallel, KernelsGiveTheSameBitsOnOneThreadAndOnSeveral) {
  std::optional<Compiled> compiled = compileBoth(kThreaded);
  ASSERT_TRUE(compiled);
  std::vector<HostTensor> inputs = {randomTensor(DType::f32, {1024, 600}),
                                    randomTensor(DType::f32, {600})};
  Expected<int> before = cpuThreads();
  ASSERT_TRUE(before) << before.message();
  std::vector<std::vector<HostTensor>> results;
  for (int threads : {1, 2, 3, 4}) {
    setCpuThreads(threads);
    for (const Executable *exe : {&compiled->fused, &compiled->unfused})
      results.push_back(runExecutable(*exe, inputs));
  }
  setCpuThreads(*before);
  for (size_t run = 2; run < results.size(); ++run) {
    const std::vector<HostTensor> &first = results[run % 2], &got = results[run];
    ASSERT_EQ(got.size(), first.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(std::memcmp(got[i].data<uint8_t>(), first[i].data<uint8_t>(), first[i].byteSize()), 0)
          << "result #" << i << " of run " << run << " differs from one thread's";
  }
}

} // namespace
} // namespace smelt::rt::test
