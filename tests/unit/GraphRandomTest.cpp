// rng_uniform / rng_normal built with the builder and compiled: determinism, distribution
// moments and the offset operand. Philox itself is tested in runtime/RandomTest.cpp.
#include "TestUtil.h"

#include "frontend/Ops.h"

#include <cmath>

namespace smelt::test {
namespace {

TEST(GraphRandom, UniformAndNormalMomentsAndDeterminism) {
  uint64_t seed = rngSeed() % 1000003;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const int64_t n = 1 << 20;
  for (DType dtype : {DType::f32, DType::f64}) {
    mlir::MLIRContext ctx;
    Graph g(ctx, "f");
    g.setOutputs({rngUniform(g, {n}, seed, -1.0, 3.0, dtype),
                  rngNormal(g, {n}, seed, 0.5, 2.0, dtype),
                  rngUniform(g, {n}, seed + 1, -1.0, 3.0, dtype)});
    std::vector<rt::HostTensor> first = run(g, {}), second = run(g, {});
    ASSERT_EQ(first.size(), 3u);
    ASSERT_EQ(second.size(), 3u);
    EXPECT_EQ(std::memcmp(first[0].raw(), second[0].raw(), first[0].byteSize()), 0);
    std::vector<double> u = first[0].toDoubles(), z = first[1].toDoubles();
    double um = 0, uv = 0, zm = 0, zv = 0, lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < n; ++i) {
      um += u[i];
      zm += z[i];
      lo = std::min(lo, u[i]);
      hi = std::max(hi, u[i]);
    }
    um /= n;
    zm /= n;
    for (int64_t i = 0; i < n; ++i) {
      uv += (u[i] - um) * (u[i] - um);
      zv += (z[i] - zm) * (z[i] - zm);
    }
    uv /= n;
    zv /= n;
    // Uniform(-1, 3): mean 1, variance 16/12; Normal(0.5, 2): mean 0.5, variance 4. Tolerances
    // are ~6 standard errors at n = 2^20.
    EXPECT_NEAR(um, 1.0, 6 * std::sqrt(16.0 / 12 / n));
    EXPECT_NEAR(uv, 16.0 / 12, 0.01);
    EXPECT_NEAR(zm, 0.5, 6 * 2.0 / std::sqrt(double(n)));
    EXPECT_NEAR(zv, 4.0, 0.04);
    EXPECT_GE(lo, -1.0);
    EXPECT_LT(hi, 3.0);
    EXPECT_NE(std::memcmp(first[0].raw(), first[2].raw(), first[0].byteSize()), 0)
        << "different seeds must give different numbers";
  }
}

TEST(GraphRandom, OffsetSelectsAStreamAndZeroMatchesNoOffset) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor step = g.input("step", {}, DType::i64);
  g.setOutputs({rngUniform(g, {64}, 5, 0.0, 1.0, DType::f32, step),
                rngUniform(g, {64}, 5, 0.0, 1.0, DType::f32)});
  auto at = [&](double s) {
    return run(g, {rt::HostTensor::fromDoubles({rt::DType::i64, {}}, {s})});
  };
  std::vector<rt::HostTensor> zero = at(0), one = at(1), big = at(double(1ll << 40));
  ASSERT_EQ(zero.size(), 2u);
  EXPECT_EQ(zero[0].toDoubles(), zero[1].toDoubles());
  EXPECT_NE(one[0].toDoubles(), zero[0].toDoubles());
  EXPECT_NE(big[0].toDoubles(), one[0].toDoubles());
  EXPECT_EQ(at(1)[0].toDoubles(), one[0].toDoubles());
}

} // namespace
} // namespace smelt::test
