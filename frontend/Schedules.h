// Learning-rate schedules, computed on the host in double and fed to the compiled training step
// as its rank-0 "learning_rate" input each step, so a schedule never recompiles anything (as
// Keras' LearningRateSchedule objects and optax's schedules are evaluated per step).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace smelt {

struct LearningRateSchedule {
  enum class Kind { constant, step, exponential, warmupCosine };
  Kind kind = Kind::constant;
  /// step: the rate is multiplied by `factor` every `every` steps.
  /// exponential: multiplied by `factor` ^ (step / every), continuously (Keras'
  /// ExponentialDecay with staircase=false).
  int64_t every = 1000;
  double factor = 0.1;
  /// warmupCosine: linear from 0 to the base rate over `warmupSteps` (step 0 already takes
  /// 1/warmupSteps of it), then a half cosine down to `finalFraction` of the base rate at
  /// `totalSteps`, and that rate after (optax.warmup_cosine_decay_schedule).
  int64_t warmupSteps = 0, totalSteps = 0;
  double finalFraction = 0;

  /// The rate of global step `step` (0-based) for the base rate `base`.
  double at(double base, int64_t step) const;
  /// Why the schedule cannot be used ("" when it can): bad counts or factors.
  std::string check() const;
  /// "constant", "step:EVERY:FACTOR", "exponential:EVERY:FACTOR",
  /// "cosine:WARMUP:TOTAL[:FINAL_FRACTION]" (the command line's --lr-schedule); nullopt for
  /// anything else, including values check() refuses.
  static std::optional<LearningRateSchedule> parse(const std::string &text);
};

} // namespace smelt
