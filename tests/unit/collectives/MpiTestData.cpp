// The data the MPI collective tests reduce, and how they compare it (MpiTestData.h).
#include "MpiTestData.h"

#include "runtime/DTypeDispatch.h"

#include <mpi.h>

#include <cmath>
#include <cstring>
#include <random>

namespace smelt::rt::test {

/// Replica `rank`'s contribution to case `caseId`: floats in [-100, 100], integers in
/// [-50, 50], drawn from the job's seed, so any rank can compute any other rank's data.
std::vector<std::byte> contribution(uint64_t seed, int rank, int caseId, int64_t count,
                                    DType dtype) {
  std::mt19937_64 gen(seed ^ (uint64_t(rank) * 0x9e3779b97f4a7c15ull) ^ (uint64_t(caseId) << 40));
  std::vector<std::byte> bytes(size_t(count) * byteWidth(dtype));
  visitDType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T *values = reinterpret_cast<T *>(bytes.data());
    std::uniform_real_distribution<double> real(-100, 100);
    std::uniform_int_distribution<int> integer(-50, 50);
    for (int64_t i = 0; i < count; ++i) {
      if constexpr (kIsFloat<T>)
        values[i] = fromCompute<T>(real(gen));
      else if constexpr (!std::is_same_v<T, bool>)
        values[i] = T(integer(gen));
    }
  });
  return bytes;
}

double valueAt(const std::vector<std::byte> &bytes, DType dtype, int64_t i) {
  return visitDType(dtype, [&](auto tag) -> double {
    using T = typename decltype(tag)::type;
    return double(toCompute(reinterpret_cast<const T *>(bytes.data())[i]));
  });
}

/// An ulp of `dtype` at `value` (mantissa bits, smallest normal exponent).
double ulpAt(DType dtype, double value) {
  int precision = dtype == DType::f64    ? 53
                  : dtype == DType::f16  ? 11
                  : dtype == DType::bf16 ? 8
                                         : 24;
  int minExponent = dtype == DType::f64 ? -1022 : dtype == DType::f16 ? -14 : -126;
  int exponent = value == 0 ? minExponent
                            : std::max(int(std::floor(std::log2(std::fabs(value)))), minExponent);
  return std::ldexp(1.0, exponent - precision + 1);
}

/// Rank 0's bytes, compared on rank 0 with every rank's: true when all are the same.
bool sameOnEveryRank(const std::vector<std::byte> &mine, int size) {
  int myRank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &myRank);
  std::vector<std::byte> all(mine.size() * size_t(size));
  MPI_Gather(mine.data(), int(mine.size()), MPI_BYTE, all.data(), int(mine.size()), MPI_BYTE, 0,
             MPI_COMM_WORLD);
  int same = 1;
  if (myRank == 0)
    for (int r = 1; r < size; ++r)
      same &= std::memcmp(all.data(), all.data() + size_t(r) * mine.size(), mine.size()) == 0;
  MPI_Bcast(&same, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return same;
}

} // namespace smelt::rt::test
