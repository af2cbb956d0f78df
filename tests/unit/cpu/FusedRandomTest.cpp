// rng_uniform inside a fused kernel against the runtime's step (runtime/cpu/Random.cpp, scalar
// Philox): the same bits in every float dtype, with and without the step offset, for seeds
// using both key words and ranges whose float difference rounds; so a dropout mask is the same
// fused or not, and the CUDA kernels, which the SIMT emulator checks against the fused CPU
// kernels, draw it too.
#include "FusionTestUtil.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace smelt::rt::test {
namespace {

TEST(FusedRandom, UniformIsTheRuntimeStepBitForBit) {
  const std::vector<int64_t> shape = {37, 41}; // 1517 elements: vector bodies and tails
  for (DType dtype : kFloatDTypes)
    for (bool withOffset : {false, true}) {
      int64_t seed = int64_t(rng()() >> 1); // both key words
      double low = draw(-10, 0), high = low + draw(0.1, 20);
      std::string type = tensorType(shape, dtype);
      std::string what = std::string(dtypeName(dtype)) + (withOffset ? " with" : " without") +
                         " offset, seed " + std::to_string(seed) + ", [" +
                         std::to_string(low) + ", " + std::to_string(high) + ")";
      std::string op = "smelt.rng_uniform seed = " + std::to_string(seed) +
                         ", low = " + fmt::format("{:.17g}", low) +
                         ", high = " + fmt::format("{:.17g}", high) +
                         (withOffset ? " offset %s" : "") + " : " + type;
      std::string mlir =
          withOffset ? "func.func @f(%step: tensor<i64>) -> " + type + " {\n  %r = smelt.fusion loop (%step) : (tensor<i64>) -> " + type + " {\n  ^bb0(%s: tensor<i64>):\n"
                     : "func.func @f() -> " + type + " {\n  %r = smelt.fusion loop () : () -> " + type + " {\n";
      mlir += "    %u = " + op + "\n    smelt.yield %u : " + type + "\n  }\n  return %r : " +
              type + "\n}\n";
      std::optional<Compiled> compiled = compileBoth(mlir);
      ASSERT_TRUE(compiled) << what;
      std::vector<HostTensor> inputs;
      std::vector<TensorType> operands;
      if (withOffset) {
        inputs.push_back(HostTensor::fromDoubles({DType::i64, {}}, {double(rng()() % 100000)}));
        operands.push_back({DType::i64, {}});
      }
      Executable step = oneStep("rng_uniform", operands, {dtype, shape},
                                {{"seed", seed}, {"low", low}, {"high", high}});
      std::vector<HostTensor> fused = runExecutable(compiled->fused, inputs);
      std::vector<HostTensor> runtime = runExecutable(step, inputs);
      ASSERT_EQ(fused.size(), 1u) << what;
      ASSERT_EQ(runtime.size(), 1u) << what;
      EXPECT_EQ(std::memcmp(fused[0].raw(), runtime[0].raw(), fused[0].byteSize()), 0) << what;
      // Within [low, high] as the dtype holds them (f16 and bf16 round the draws).
      std::vector<double> values = fused[0].toDoubles(),
                          bounds = HostTensor::fromDoubles({dtype, {2}}, {low, high}).toDoubles();
      EXPECT_GE(*std::min_element(values.begin(), values.end()), bounds[0]) << what;
      EXPECT_LE(*std::max_element(values.begin(), values.end()), bounds[1]) << what;
    }
}

} // namespace
} // namespace smelt::rt::test
