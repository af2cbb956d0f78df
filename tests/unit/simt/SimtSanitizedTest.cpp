// The emulator under ASan and UBSan (its kernels, the emulator and this test are instrumented):
// every kernel of the sanitized subset (the op x dtype corpus, the fusion cases and the MLP
// steps) runs in both fiber orders on random inputs in buffers exactly as large as their
// tensors, so a vector access one element past the end, which a GPU's 256-byte allocation
// granule hides, stops the test; the two orders must agree bit for bit. The CNN steps are left
// to the unsanitized build (SimtCorpusTest): their tensors cost over a minute under ASan. Death
// tests show that the sanitizers do stop a kernel that reads past the end or overflows a signed
// integer.
#include "BrokenKernels.h"
#include "RuntimeTestUtil.h"
#include "SimtTestUtil.h"

namespace smelt::simt::test {
namespace {

class SimtSanitized : public testing::TestWithParam<std::string> {};

TEST_P(SimtSanitized, KernelsRunCleanInBothOrders) {
  for (const CorpusKernel &kernel : corpus()) {
    if (kernel.function != GetParam())
      continue;
    ASSERT_EQ(kernel.parameters, int(kernel.args.size())) << kernel.name << ": a stale table";
    std::vector<rt::HostTensor> inputs;
    for (size_t a = 0; a < kernel.inputs; ++a)
      inputs.push_back(rt::test::randomTensor(argType(kernel.args[a]).dtype,
                                              argType(kernel.args[a]).shape));
    Emulated forward = emulate(kernel, inputs, Order::Forward);
    Emulated reversed = emulate(kernel, inputs, Order::Reversed);
    ASSERT_EQ(forward.error, "") << kernel.name;
    ASSERT_EQ(reversed.error, "") << kernel.name;
    for (size_t r = 0; r < forward.results.size(); ++r)
      EXPECT_EQ(firstDifference(forward.results[r], reversed.results[r]), "")
          << kernel.name << " result #" << r << " differs between the two orders";
  }
}

INSTANTIATE_TEST_SUITE_P(Functions, SimtSanitized, testing::ValuesIn(corpusFunctions()),
                         [](const testing::TestParamInfo<std::string> &info) {
                           return info.param;
                         });

TEST(SimtSanitizedDeathTest, VectorOnePastTheEndStops) {
  GTEST_FLAG_SET(death_test_style, "threadsafe"); // the launch starts threads
  constexpr int n = 1003;                         // 250 vectors of 4 and a tail of 3
  rt::HostTensor input = rt::test::randomTensor(rt::DType::f32, {n});
  auto doubled = [&](broken::LoopBug bug) {
    return emulate(1, 64, Order::Forward, {input}, {input.type()}, [bug](void *const *a) {
      broken::doubled(bug, n, static_cast<const float *>(a[0]), static_cast<float *>(a[1]));
    });
  };
  EXPECT_EQ(doubled(broken::LoopBug::None).error, "");
  EXPECT_DEATH(doubled(broken::LoopBug::Overrun), "heap-buffer-overflow");
}

TEST(SimtSanitizedDeathTest, SignedOverflowStops) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  rt::HostTensor input = rt::test::randomTensor(rt::DType::i32, {256}, [] { return 7.0; });
  EXPECT_DEATH(emulate(1, 256, Order::Forward, {input}, {input.type()},
                       [](void *const *a) {
                         broken::signedOverflow(static_cast<const int *>(a[0]),
                                                static_cast<int *>(a[1]));
                       }),
               "signed integer overflow");
}

} // namespace
} // namespace smelt::simt::test
