// The emulator catches broken kernels: each of BrokenKernels.h runs correct and broken, in both
// fiber orders, on random inputs; the correct one must give the host's answer in both orders,
// the broken one must fail in at least one, by a wrong result or an error. Sums are of small
// integers, exact in any order, so "right" is bit for bit.
#include "BrokenKernels.h"
#include "RuntimeTestUtil.h"
#include "SimtTestUtil.h"

#include <cmath>
#include <map>

namespace smelt::simt::test {
namespace {

using broken::LoopBug;

/// Small nonzero integers held as f32.
rt::HostTensor smallIntegers(int64_t n) {
  std::mt19937_64 &random = rt::test::rng();
  return rt::test::randomTensor(rt::DType::f32, {n},
                                [&] { return std::round(rt::test::draw(random, -50, 50, 1)); });
}

/// What went wrong in each order ("" where the result is `expected`, bit for bit).
struct Problems {
  std::string forward, reversed;
  bool any() const { return !forward.empty() || !reversed.empty(); }
};

Problems run(unsigned grid, unsigned block, const rt::HostTensor &input,
             const rt::HostTensor &expected, const std::function<void(void *const *)> &call) {
  Problems problems;
  for (Order order : {Order::Forward, Order::Reversed}) {
    Emulated emulated = emulate(grid, block, order, {input}, {expected.type()}, call);
    std::string problem = emulated.error;
    if (problem.empty()) {
      std::string difference = firstDifference(emulated.results[0], expected);
      if (!difference.empty())
        problem = "a wrong result, first at " + difference;
    }
    (order == Order::Forward ? problems.forward : problems.reversed) = problem;
  }
  return problems;
}

std::ostream &operator<<(std::ostream &os, const Problems &p) {
  return os << "forward: " << (p.forward.empty() ? "right" : p.forward)
            << "; reversed: " << (p.reversed.empty() ? "right" : p.reversed);
}

const float *in(void *const *args) { return static_cast<const float *>(args[0]); }
float *out(void *const *args) { return static_cast<float *>(args[1]); }

/// The sum of each run of `group` consecutive values.
rt::HostTensor groupSums(const rt::HostTensor &input, int64_t group) {
  std::vector<double> values = input.toDoubles(), sums(values.size() / group, 0.0);
  for (size_t i = 0; i < values.size(); ++i)
    sums[i / group] += values[i];
  return rt::HostTensor::fromDoubles({rt::DType::f32, {int64_t(sums.size())}}, sums);
}

TEST(SimtBroken, WrongShuffleOffsetGivesWrongSums) {
  rt::HostTensor input = smallIntegers(16 * 256), expected = groupSums(input, 32);
  for (bool broken : {false, true}) {
    Problems problems = run(16, 256, input, expected, [broken](void *const *a) {
      broken::warpSums(broken, in(a), out(a));
    });
    EXPECT_EQ(problems.any(), broken) << (broken ? "broken: " : "correct: ") << problems;
  }
}

TEST(SimtBroken, MissingBarrierBeforeReadingTheWarpsSumsShowsInForwardOrder) {
  // Thread 1 reads warp 1's sum before thread 32, later in the pass, has written it.
  rt::HostTensor input = smallIntegers(16 * 256), expected = groupSums(input, 256);
  Problems correct = run(16, 256, input, expected, [](void *const *a) {
    broken::blockSums(false, in(a), out(a));
  });
  EXPECT_FALSE(correct.any()) << correct;
  Problems broken = run(16, 256, input, expected, [](void *const *a) {
    broken::blockSums(true, in(a), out(a));
  });
  EXPECT_NE(broken.forward, "") << broken;
  EXPECT_EQ(broken.reversed, "") << "every reader comes after its writer in reversed order";
}

TEST(SimtBroken, MissingBarrierBeforeReadingANeighbourShowsInReversedOrder) {
  // Thread t reads what thread t - 1 staged: in reversed order, before it is staged.
  rt::HostTensor input = smallIntegers(8 * 256);
  std::vector<double> values = input.toDoubles(), shifted(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    shifted[i] = i % 256 == 0 ? 0.0 : values[i - 1];
  rt::HostTensor expected = rt::HostTensor::fromDoubles(input.type(), shifted);
  Problems correct = run(8, 256, input, expected, [](void *const *a) {
    broken::shiftByOne(false, in(a), out(a));
  });
  EXPECT_FALSE(correct.any()) << correct;
  Problems broken = run(8, 256, input, expected, [](void *const *a) {
    broken::shiftByOne(true, in(a), out(a));
  });
  EXPECT_EQ(broken.forward, "") << "every reader comes after its writer in forward order";
  EXPECT_NE(broken.reversed, "") << broken;
}

TEST(SimtBroken, ShortTailAndOverrunFail) {
  // 1003 elements: 250 vectors of 4 and a tail of 3. One block of 64 threads strides.
  constexpr int n = 1003;
  rt::HostTensor input = smallIntegers(n);
  std::vector<double> values = input.toDoubles();
  for (double &v : values)
    v *= 2;
  rt::HostTensor expected = rt::HostTensor::fromDoubles(input.type(), values);
  std::map<LoopBug, Problems> outcomes;
  for (LoopBug bug : {LoopBug::None, LoopBug::ShortTail, LoopBug::Overrun})
    outcomes[bug] = run(1, 64, input, expected, [bug](void *const *a) {
      broken::doubled(bug, n, in(a), out(a));
    });
  EXPECT_FALSE(outcomes[LoopBug::None].any()) << outcomes[LoopBug::None];
  // The last element keeps the pattern the results start with.
  EXPECT_NE(outcomes[LoopBug::ShortTail].forward.find("wrong result, first at byte 4008"),
            std::string::npos)
      << outcomes[LoopBug::ShortTail];
  // The vector one past the end writes into the guard (ASan also sees the read: see
  // SimtSanitizedTest).
  EXPECT_NE(outcomes[LoopBug::Overrun].forward.find("a write past the end of a 4012-byte buffer"),
            std::string::npos)
      << outcomes[LoopBug::Overrun];
}

/// The error of a one-block launch of `kernel` over 64 values, in each order.
Problems ruleBreak(void (*kernel)(const float *, float *)) {
  rt::HostTensor input = smallIntegers(64);
  return run(1, 64, input, input, [kernel](void *const *a) { kernel(in(a), out(a)); });
}

TEST(SimtBroken, FullMaskShuffleAfterLanesReturnedIsAnError) {
  Problems p = ruleBreak(broken::shuffleAfterReturn);
  for (const std::string &error : {p.forward, p.reversed})
    EXPECT_NE(error.find("__shfl_down_sync with mask 0xffffffff names lanes 0xffff0000 that have "
                         "returned or do not exist"),
              std::string::npos)
        << p;
}

TEST(SimtBroken, BarrierAgainstAShuffleIsADeadlock) {
  Problems p = ruleBreak(broken::barrierAgainstShuffle);
  for (const std::string &error : {p.forward, p.reversed}) {
    EXPECT_NE(error.find("every live thread waits and none can go on"), std::string::npos) << p;
    EXPECT_NE(error.find("warp 0 lanes 0xffff0000 at __shfl_down_sync"), std::string::npos) << p;
    EXPECT_NE(error.find("warp 0 lanes 0x0000ffff at __syncthreads"), std::string::npos) << p;
  }
}

TEST(SimtBroken, LaneOutsideItsMaskIsAnError) {
  Problems p = ruleBreak(broken::laneOutsideMask);
  for (const std::string &error : {p.forward, p.reversed})
    EXPECT_NE(error.find("__shfl_down_sync with mask 0x0000ffff leaves out the lane calling it"),
              std::string::npos)
        << p;
}

} // namespace
} // namespace smelt::simt::test
