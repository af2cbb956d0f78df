// The data the MPI collective tests reduce (mpi-collectives-test, nccl-mpi-test), and how they
// compare it: each rank's contribution is drawn from the job's seed, so every rank computes every
// other's and the reference.
#pragma once

#include "runtime/DType.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace smelt::rt::test {

/// Replica `rank`'s contribution to case `caseId`: floats in [-100, 100], integers in
/// [-50, 50], drawn from the job's seed, so any rank can compute any other rank's data.
std::vector<std::byte> contribution(uint64_t seed, int rank, int caseId, int64_t count,
                                    DType dtype);
/// Element `i` of `bytes` (elements of `dtype`) as a double.
double valueAt(const std::vector<std::byte> &bytes, DType dtype, int64_t i);
/// An ulp of `dtype` at `value` (mantissa bits, smallest normal exponent).
double ulpAt(DType dtype, double value);
/// Rank 0's bytes, compared on rank 0 with every rank's: true (on every rank) when all are the
/// same. Collective over MPI_COMM_WORLD.
bool sameOnEveryRank(const std::vector<std::byte> &mine, int size);

} // namespace smelt::rt::test
