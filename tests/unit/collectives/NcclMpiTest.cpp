// NCCL across processes: ctest runs this under mpirun with 2 ranks on the emulated CUDA
// (tests/emucuda: each process its own emulated gpu:0, the ranks meeting through the emulated
// NCCL's shared-memory rendezvous); on a machine with GPUs it runs as well on the real ones.
// Each rank builds the MPI communicator, makes an NCCL communicator from it on gpu:0 as the
// runtime does (createNcclCommunicator: rank 0's unique id sent over MPI), and all-reduces
// device buffers: f32 and bf16, sum and mean, fast and deterministic modes, more elements than
// one round of the emulation's rendezvous holds. The data is seeded by rank, so every rank
// computes the reference: bit-identical to reduceInRankOrder in deterministic mode, within a
// few ulps otherwise, and the same bits on every rank. Prints what failed; exits 1 on any
// failure, 0 otherwise.
#include "MpiTestData.h"

#include "runtime/Collectives.h"
#include "runtime/DTypeDispatch.h"
#include "runtime/cuda/Nccl.h"
#include "runtime/mpi/MpiCommunicator.h"

#include <fmt/format.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace smelt::rt;
using namespace smelt::rt::test;
using namespace smelt::rt::cuda;

int failures = 0;
int myRank = 0;

void fail(const std::string &what) {
  std::fprintf(stderr, "nccl-mpi-test: rank %d: FAILED: %s\n", myRank, what.c_str());
  ++failures;
}

// 2^21 + 3 elements: 8 MiB of f32, more than one 4 MiB round of the emulation's rendezvous,
// and not a multiple of anything.
constexpr int64_t kCount = (int64_t(1) << 21) + 3;

void checkCase(const CudaDriver &cu, Communicator &nccl, uint64_t seed, int caseId, DType dtype,
               ReduceKind kind, bool deterministic) {
  const int size = nccl.size();
  std::string name = fmt::format("{} {} in {} mode (seed {})", dtypeName(dtype),
                                 reduceKindName(kind), deterministic ? "deterministic" : "fast",
                                 seed);
  std::vector<std::byte> everyone, mine;
  for (int r = 0; r < size; ++r) {
    std::vector<std::byte> c = contribution(seed, r, caseId, kCount, dtype);
    everyone.insert(everyone.end(), c.begin(), c.end());
    if (r == myRank)
      mine = c;
  }
  CUdeviceptr device = 0;
  // From pageable memory the copy may return before it lands, on the legacy stream, which the
  // communicator's non-blocking stream does not wait for: hence the synchronize.
  for (Status status : {cu.check(cu.memAlloc(&device, mine.size()), "cuMemAlloc"),
                        cu.check(cu.memcpyHtoD(device, mine.data(), mine.size()), "cuMemcpyHtoD"),
                        cu.check(cu.ctxSynchronize(), "cuCtxSynchronize")})
    if (!status.ok())
      return fail(name + ": " + status.message());
  std::vector<std::byte> got(mine.size());
  Status reduced = nccl.allReduce(reinterpret_cast<void *>(uintptr_t(device)), kCount, dtype,
                                  kind, name);
  Status downloaded = reduced.ok() ? cu.check(cu.memcpyDtoH(got.data(), device, got.size()),
                                              "cuMemcpyDtoH")
                                   : reduced;
  cu.memFree(device);
  if (!downloaded.ok())
    return fail(name + ": " + downloaded.message());

  std::vector<std::byte> exact(mine.size());
  reduceInRankOrder(everyone.data(), size, kCount, dtype, kind, exact.data());
  if (deterministic) {
    if (std::memcmp(got.data(), exact.data(), got.size()) != 0)
      fail(name + ": not bit-identical to reduceInRankOrder");
  } else {
    for (int64_t i = 0, bad = 0; i < kCount && bad < 5; ++i) {
      double magnitude = 0;
      for (int r = 0; r < size; ++r)
        magnitude += std::fabs(valueAt(everyone, dtype, int64_t(r) * kCount + i));
      double ref = valueAt(exact, dtype, i), value = valueAt(got, dtype, i);
      double tolerance = size * ulpAt(dtype, magnitude) + ulpAt(dtype, ref);
      if (!(std::fabs(value - ref) <= tolerance)) {
        fail(fmt::format("{}: element {} is {}, expected {} within {}", name, i, value, ref,
                         tolerance));
        ++bad;
      }
    }
  }
  if (!sameOnEveryRank(got, size))
    fail(name + ": the ranks' results differ");
}

} // namespace

int main() {
  Expected<std::unique_ptr<Communicator>> mpi = createMpiCommunicator({.timeoutSeconds = 120});
  if (!mpi.ok()) {
    std::fprintf(stderr, "nccl-mpi-test: %s\n", mpi.message().c_str());
    return 1;
  }
  myRank = (*mpi)->rank();
  unsigned long long seed = 0;
  if (myRank == 0)
    seed = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  MPI_Bcast(&seed, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);

  auto both = openDriverAndNccl();
  CUdevice device = 0;
  CUcontext context = nullptr;
  if (!both.ok()) {
    fail(both.message());
  } else {
    const CudaDriver &cu = *both->first;
    for (Status status : {cu.check(cu.deviceGet(&device, 0), "cuDeviceGet"),
                          cu.check(cu.primaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain"),
                          cu.check(cu.ctxSetCurrent(context), "cuCtxSetCurrent")})
      if (!status.ok() && failures == 0)
        fail("gpu 0: " + status.message());
  }
  int caseId = 0;
  for (bool deterministic : {false, true}) {
    if (failures)
      break;
    Expected<std::unique_ptr<NcclCommunicator>> nccl = createNcclCommunicator(
        **mpi, /*device=*/0, {.timeoutSeconds = 120, .deterministic = deterministic});
    if (!nccl.ok()) {
      fail(nccl.message());
      break;
    }
    for (DType dtype : {DType::f32, DType::bf16})
      for (ReduceKind kind : {ReduceKind::sum, ReduceKind::mean})
        checkCase(*both->first, **nccl, seed, ++caseId, dtype, kind, deterministic);
  }
  if (context)
    both->first->primaryCtxRelease(device);

  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (myRank == 0)
    std::printf("nccl-mpi-test: %d ranks, seed %llu: %s\n", (*mpi)->size(), seed,
                total == 0 ? "all checks passed" : fmt::format("{} failures", total).c_str());
  return total == 0 ? 0 : 1;
}
