// The MPI communicator across real processes; ctest runs it under mpirun with 2 ranks.
//
//   mpi-collectives-test            sum and mean of every dtype in both modes against references
//                                   every rank computes itself (the data is seeded by rank, so
//                                   each rank knows every contribution); the deterministic mode
//                                   bit-identical across ranks and to reduceInRankOrder; several
//                                   collectives in flight; errors for i1 and unknown tickets.
//   mpi-collectives-test exit T     rank 1 _exit(3)s after the first collective; T s timeout.
//   mpi-collectives-test hang T     rank 1 sleeps instead of joining the second collective; rank 0
//                                   times out after T s and calls abort(), which ends the job.
// The failure modes are driven by mpi_failure_test.sh, which checks how and how fast the job
// ends. Prints what failed and exits 1 on any failure, 0 otherwise.
#include "MpiTestData.h"

#include "runtime/Collectives.h"
#include "runtime/DTypeDispatch.h"
#include "runtime/mpi/MpiCommunicator.h"

#include <fmt/format.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

using namespace smelt::rt;
using namespace smelt::rt::test;

int failures = 0;
int myRank = 0;

void fail(const std::string &what) {
  std::fprintf(stderr, "mpi-collectives-test: rank %d: FAILED: %s\n", myRank, what.c_str());
  ++failures;
}

/// The fast mode's result against a float64 reference: MPI may add in any order, and f16/bf16
/// round after every addition, so a few ulps of the sum of magnitudes; integers are exact.
void expectClose(const std::string &name, const std::vector<std::byte> &got,
                 const std::vector<std::byte> &everyone, int size, int64_t count, DType dtype,
                 ReduceKind kind) {
  for (int64_t i = 0, bad = 0; i < count && bad < 5; ++i) {
    double sum = 0, magnitude = 0;
    for (int r = 0; r < size; ++r) {
      double x = valueAt(everyone, dtype, int64_t(r) * count + i);
      sum += x;
      magnitude += std::fabs(x);
    }
    double ref = kind == ReduceKind::sum ? sum
                 : isFloat(dtype)        ? sum / size
                                         : std::trunc(sum / size);
    double tolerance = isFloat(dtype) ? size * ulpAt(dtype, magnitude) + ulpAt(dtype, ref) : 0;
    double value = valueAt(got, dtype, i);
    if (!(std::fabs(value - ref) <= tolerance)) {
      fail(fmt::format("{}: element {} is {}, expected {} within {}", name, i, value, ref,
                       tolerance));
      ++bad;
    }
  }
}

constexpr DType kReducible[] = {DType::f32,  DType::f64, DType::f16,
                                DType::bf16, DType::i32, DType::i64};

void checkEveryDType(Communicator &fast, Communicator &deterministic, uint64_t seed) {
  const int size = fast.size();
  int caseId = 0;
  for (bool isDeterministic : {false, true})
    for (DType dtype : kReducible)
      for (ReduceKind kind : {ReduceKind::sum, ReduceKind::mean}) {
        ++caseId;
        const int64_t count = 1000 + caseId * 37;
        std::string name =
            fmt::format("{} {} in {} mode (seed {})", dtypeName(dtype), reduceKindName(kind),
                        isDeterministic ? "deterministic" : "fast", seed);
        std::vector<std::byte> everyone, mine;
        for (int r = 0; r < size; ++r) {
          std::vector<std::byte> c = contribution(seed, r, caseId, count, dtype);
          everyone.insert(everyone.end(), c.begin(), c.end());
          if (r == myRank)
            mine = c;
        }
        std::vector<std::byte> inRankOrder(mine.size());
        reduceInRankOrder(everyone.data(), size, count, dtype, kind, inRankOrder.data());

        Communicator &comm = isDeterministic ? deterministic : fast;
        if (Status s = comm.allReduce(mine.data(), count, dtype, kind, name); !s.ok()) {
          fail(s.message());
          continue;
        }
        if (isDeterministic) {
          if (mine != inRankOrder)
            fail(name + ": not bit-identical to reduceInRankOrder");
          if (!sameOnEveryRank(mine, size))
            fail(name + ": the ranks' results differ");
          continue;
        }
        expectClose(name, mine, everyone, size, count, dtype, kind);
      }
}

void checkInFlightAndErrors(Communicator &comm, bool deterministic, uint64_t seed) {
  const int size = comm.size();
  // Three collectives at once, waited for in reverse order.
  const int64_t counts[] = {784 * 512, 512, 10};
  std::vector<std::vector<std::byte>> buffers, everyone(3), expected;
  std::vector<int64_t> tickets;
  for (int k = 0; k < 3; ++k) {
    for (int r = 0; r < size; ++r) {
      std::vector<std::byte> c = contribution(seed, r, 100 + k, counts[k], DType::f32);
      everyone[size_t(k)].insert(everyone[size_t(k)].end(), c.begin(), c.end());
      if (r == myRank)
        buffers.push_back(c);
    }
    expected.emplace_back(buffers.back().size());
    reduceInRankOrder(everyone[size_t(k)].data(), size, counts[k], DType::f32, ReduceKind::mean,
                      expected.back().data());
  }
  for (int k = 0; k < 3; ++k) {
    Expected<int64_t> ticket = comm.start(buffers[size_t(k)].data(), counts[k], DType::f32,
                                          ReduceKind::mean, fmt::format("bucket {}", k));
    if (!ticket.ok())
      return fail(ticket.message());
    tickets.push_back(*ticket);
    comm.progress();
  }
  for (int k = 2; k >= 0; --k) {
    std::string name = fmt::format("bucket {} in flight ({} mode, seed {})", k,
                                   deterministic ? "deterministic" : "fast", seed);
    if (Status s = comm.wait(tickets[size_t(k)]); !s.ok())
      fail(s.message());
    else if (!deterministic)
      expectClose(name, buffers[size_t(k)], everyone[size_t(k)], size, counts[k], DType::f32,
                  ReduceKind::mean);
    else if (buffers[size_t(k)] != expected[size_t(k)])
      fail(name + ": not bit-identical to reduceInRankOrder");
  }
  if (comm.wait(tickets[0]).ok())
    fail("a second wait for the same ticket succeeded");

  bool flags[4] = {};
  Expected<int64_t> ticket = comm.start(flags, 4, DType::i1, ReduceKind::sum, "mask");
  if (ticket.ok() || ticket.message().find("i1") == std::string::npos)
    fail("an i1 all_reduce was not refused with a message naming i1");
  std::string describe = comm.describe();
  if (describe.rfind(fmt::format("mpi rank {} of {} (host ", myRank, size), 0) != 0)
    fail("describe() says " + describe);
}

/// Rank 1 stops (exit, or hang) after the first of two collectives; rank 0 reports.
int runFailure(const std::string &mode, double timeoutSeconds) {
  Expected<std::unique_ptr<Communicator>> comm =
      createMpiCommunicator({.timeoutSeconds = timeoutSeconds});
  if (!comm.ok()) {
    std::fprintf(stderr, "mpi-collectives-test: %s\n", comm.message().c_str());
    return 1;
  }
  std::vector<float> data(1024, 1.0f);
  if (Status s =
          (*comm)->allReduce(data.data(), 1024, smelt::rt::DType::f32, ReduceKind::sum, "step 1");
      !s.ok())
    (*comm)->abort(s.message());
  if ((*comm)->rank() == 1) {
    if (mode == "exit")
      _exit(3); // dies without a word, as a crash would
    for (;;)
      std::this_thread::sleep_for(std::chrono::seconds(1)); // stuck
  }
  // What the executor does with a failed collective: say why and end the whole job.
  if (Status s = (*comm)->allReduce(data.data(), 1024, DType::f32, ReduceKind::sum, "step 2");
      !s.ok())
    (*comm)->abort(s.message());
  std::fprintf(stderr, "mpi-collectives-test: rank 0: step 2 completed without rank 1\n");
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  std::string mode = argc > 1 ? argv[1] : "check";
  if (mode == "exit" || mode == "hang")
    return runFailure(mode, argc > 2 ? std::atof(argv[2]) : 3.0);
  if (mode != "check") {
    std::fprintf(stderr, "usage: mpi-collectives-test [check | exit SECONDS | hang SECONDS]\n");
    return 2;
  }
  if (!launchedByMpi())
    std::fprintf(stderr, "mpi-collectives-test: not started by mpirun: running as one rank\n");

  Expected<std::unique_ptr<Communicator>> fast = createMpiCommunicator({.timeoutSeconds = 30});
  Expected<std::unique_ptr<Communicator>> deterministic =
      createMpiCommunicator({.timeoutSeconds = 30, .deterministic = true});
  if (!fast.ok() || !deterministic.ok()) {
    std::fprintf(stderr, "mpi-collectives-test: %s\n",
                 (!fast.ok() ? fast : deterministic).message().c_str());
    return 1;
  }
  myRank = (*fast)->rank();
  // A fresh seed every run, the same on every rank.
  unsigned long long seed = 0;
  if (myRank == 0)
    seed = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  MPI_Bcast(&seed, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);

  checkEveryDType(**fast, **deterministic, seed);
  checkInFlightAndErrors(**fast, false, seed);
  checkInFlightAndErrors(**deterministic, true, seed + 1);

  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (myRank == 0)
    std::printf("mpi-collectives-test: %d ranks, seed %llu: %s\n", (*fast)->size(), seed,
                total == 0 ? "all checks passed" : fmt::format("{} failures", total).c_str());
  return total == 0 ? 0 : 1;
}
