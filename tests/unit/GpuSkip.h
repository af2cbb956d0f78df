// How a GPU test reacts to a machine without a GPU: it skips, saying why, unless
// SMELT_EXPECT_GPU is set, where it fails instead. ctest sets it for every GPU test, which
// runs against the emulated CUDA (tests/emucuda): there a missing device is a broken build, not
// a reason to skip. scripts/gpu-check.sh sets it on the GPU machine for the same reason.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>

/// Returns from the test: GTEST_SKIP() << `reason`, or a failure when a GPU is expected.
#define SMELT_SKIP_WITHOUT_GPU(reason)                                                             \
  do {                                                                                             \
    if (const char *expect_ = std::getenv("SMELT_EXPECT_GPU"); expect_ && *expect_)               \
      GTEST_FAIL() << "SMELT_EXPECT_GPU is set, and: " << reason;                                  \
    else                                                                                           \
      GTEST_SKIP() << reason;                                                                      \
  } while (0)
