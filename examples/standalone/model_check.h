// The standalone examples' model, y = tanh(x·w + b) and sumsq = Σ_j y², its inputs (fresh random
// numbers each run) and its float64 reference: shared by jit_model, which builds it, and
// run_artifact, which runs the artifact jit_model wrote. Runtime types only, so run_artifact
// stays free of MLIR.
#pragma once

#include "runtime/HostTensor.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace standalone {

inline constexpr int64_t kRows = 16, kIn = 32, kOut = 8;
/// f32 against float64 over a 32-term dot product and tanh: a few ulps, far below this.
inline constexpr double kTolerance = 1e-5;

/// x, w, b in the order the model's arguments were created; uniform in [-1, 1), never all
/// zero, from a fresh seed, printed; SMELT_TEST_SEED=<seed> replays one (as in Smelt's tests).
inline std::vector<smelt::rt::HostTensor> randomInputs() {
  const char *replay = std::getenv("SMELT_TEST_SEED");
  unsigned seed = replay ? unsigned(std::strtoul(replay, nullptr, 10)) : std::random_device{}();
  std::printf("inputs from SMELT_TEST_SEED=%u\n", seed);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  auto random = [&](std::vector<int64_t> shape) {
    smelt::rt::TensorType type{smelt::rt::DType::f32, std::move(shape)};
    std::vector<double> values(size_t(type.numElements()));
    for (double &v : values)
      v = uniform(gen);
    return smelt::rt::HostTensor::fromDoubles(type, values);
  };
  std::vector<smelt::rt::HostTensor> inputs;
  inputs.push_back(random({kRows, kIn}));
  inputs.push_back(random({kIn, kOut}));
  inputs.push_back(random({kOut}));
  return inputs;
}

/// y and sumsq in float64, from the inputs as the model saw them (already rounded to f32).
inline std::vector<std::vector<double>> reference(const std::vector<smelt::rt::HostTensor> &in) {
  std::vector<double> x = in[0].toDoubles(), w = in[1].toDoubles(), b = in[2].toDoubles();
  std::vector<double> y(kRows * kOut), sumsq(kRows, 0.0);
  for (int64_t i = 0; i < kRows; ++i)
    for (int64_t j = 0; j < kOut; ++j) {
      double acc = b[j];
      for (int64_t k = 0; k < kIn; ++k)
        acc += x[i * kIn + k] * w[k * kOut + j];
      y[i * kOut + j] = std::tanh(acc);
      sumsq[i] += y[i * kOut + j] * y[i * kOut + j];
    }
  return {y, sumsq};
}

/// Each output against the reference by relative norm, ||got - want|| / ||want||; prints one
/// line per output and returns whether all are within kTolerance.
inline bool matchesReference(const std::vector<smelt::rt::HostTensor> &inputs,
                             const std::vector<smelt::rt::HostTensor> &outputs) {
  std::vector<std::vector<double>> want = reference(inputs);
  if (outputs.size() != want.size()) {
    std::printf("expected %zu outputs, got %zu\n", want.size(), outputs.size());
    return false;
  }
  bool ok = true;
  for (size_t r = 0; r < want.size(); ++r) {
    std::vector<double> got = outputs[r].toDoubles();
    if (got.size() != want[r].size()) {
      std::printf("output %zu: %zu elements, expected %zu\n", r, got.size(), want[r].size());
      return false;
    }
    double diff = 0, norm = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      diff += (got[i] - want[r][i]) * (got[i] - want[r][i]);
      norm += want[r][i] * want[r][i];
    }
    double error = std::sqrt(diff / norm);
    bool within = error <= kTolerance; // false for NaN too
    std::printf("output %zu against float64: relative error %.2e (%s)\n", r, error,
                within ? "ok" : "MISMATCH");
    ok = ok && within;
  }
  return ok;
}

} // namespace standalone
