// A Trainer trained for a number of epochs, for the tests that compare where training ends.
#pragma once

#include "train/Trainer.h"

#include <gtest/gtest.h>

namespace smelt::test {

/// A Trainer of `config` after `epochs` epochs on `data` (null, and a test failure, when
/// creating or an epoch fails); `last` gets the last epoch's metrics.
inline std::unique_ptr<train::Trainer> trainedFor(const train::TrainConfig &config,
                                                  const data::Dataset &data, int64_t epochs,
                                                  train::Metrics *last = nullptr) {
  auto trainer = train::Trainer::create(config);
  EXPECT_TRUE(trainer.ok()) << trainer.message();
  if (!trainer.ok())
    return nullptr;
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    rt::Expected<train::Metrics> m = (*trainer)->trainEpoch(data, epoch);
    EXPECT_TRUE(m.ok()) << m.message();
    if (!m.ok())
      return nullptr;
    if (last)
      *last = *m;
  }
  return std::move(*trainer);
}

} // namespace smelt::test
