// MPI all-reduce through Smelt's communicator (runtime/mpi), from rank 0's side:
//   - algorithm bandwidth (bytes of the buffer / time of one all-reduce) of f32 buffers from
//     4 KiB to 64 MiB, in the fast mode (MPI_Iallreduce), against a blocking MPI_Allreduce of
//     the same buffer (what our polling wait costs), and in the deterministic mode (gather,
//     then reduce in rank order: what reproducibility costs);
//   - bucketed vs per tensor: the MLP's gradients (784x512, 512, 512x256, 256, 256x10, 10 f32)
//     as 6 all-reduces one after another, as 6 in flight at once, and as one flat bucket.
// Run it under mpirun; only rank 0 prints (the others run the same benchmarks silently, with
// the same fixed iteration counts, so their collectives match):
//   ninja -C build smelt-bench-all-reduce && OMPI_ALLOW_RUN_AS_ROOT=1 \
//     OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -n 2 --oversubscribe build/bin/smelt-bench-all-reduce
// Numbers measured with it belong in bench/RESULTS.md, with the machine and rank count.
#include "runtime/mpi/MpiCommunicator.h"

#include <benchmark/benchmark.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

namespace {

using namespace smelt;

/// One communicator per mode, made before any benchmark runs (creation is collective).
rt::Communicator *fastComm = nullptr, *deterministicComm = nullptr;

/// Fixed per size, never adapted to the measured time: every rank must run exactly as many
/// all-reduces as the others, and Google Benchmark's own choice could differ between ranks.
int64_t iterationsFor(int64_t bytes) {
  return std::clamp<int64_t>((int64_t(256) << 20) / bytes, 10, 2000);
}

void reportBandwidth(benchmark::State &state, int64_t bytesPerIteration) {
  state.SetBytesProcessed(int64_t(state.iterations()) * bytesPerIteration); // bytes_per_second
}

void failWith(benchmark::State &state, const rt::Status &status) {
  state.SkipWithError(status.message().c_str());
}

void BM_AllReduce(benchmark::State &state, rt::Communicator **comm) {
  const int64_t count = state.range(0) / 4;
  std::vector<float> data(size_t(count), 1.0f);
  MPI_Barrier(MPI_COMM_WORLD);
  for (auto _ : state) {
    if (rt::Status s =
            (*comm)->allReduce(data.data(), count, rt::DType::f32, rt::ReduceKind::sum, "bench");
        !s.ok())
      return failWith(state, s);
  }
  reportBandwidth(state, count * 4);
}

/// The floor: MPI's own blocking all-reduce of the same buffer, in place.
void BM_MpiAllreduceBlocking(benchmark::State &state) {
  const int64_t count = state.range(0) / 4;
  std::vector<float> data(size_t(count), 1.0f);
  MPI_Barrier(MPI_COMM_WORLD);
  for (auto _ : state)
    MPI_Allreduce(MPI_IN_PLACE, data.data(), int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  reportBandwidth(state, count * 4);
}

// Each size registered with its own fixed iteration count.
void registerSized(const char *name, void (*fn)(benchmark::State &, rt::Communicator **),
                   rt::Communicator **comm, int64_t maxBytes) {
  for (int64_t bytes = 4 << 10; bytes <= maxBytes; bytes *= 4)
    benchmark::RegisterBenchmark(name, fn, comm)
        ->Arg(bytes)
        ->Iterations(iterationsFor(bytes))
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
}

const std::vector<int64_t> kMlpGradients = {784 * 512, 512, 512 * 256, 256, 256 * 10, 10};

/// range(0): 0 = one after another, 1 = all in flight, then waited for, 2 = one flat bucket.
void BM_MlpGradients(benchmark::State &state) {
  const int mode = int(state.range(0));
  std::vector<std::vector<float>> tensors;
  for (int64_t n : kMlpGradients)
    tensors.emplace_back(size_t(n), 1.0f);
  const int64_t total = std::accumulate(kMlpGradients.begin(), kMlpGradients.end(), int64_t(0));
  std::vector<float> bucket(size_t(total), 1.0f);
  rt::Communicator &comm = *fastComm;
  MPI_Barrier(MPI_COMM_WORLD);
  for (auto _ : state) {
    if (mode == 2) {
      if (rt::Status s =
              comm.allReduce(bucket.data(), total, rt::DType::f32, rt::ReduceKind::mean, "bucket");
          !s.ok())
        return failWith(state, s);
      continue;
    }
    std::vector<int64_t> tickets;
    for (auto &t : tensors) {
      rt::Expected<int64_t> ticket =
          comm.start(t.data(), int64_t(t.size()), rt::DType::f32, rt::ReduceKind::mean, "grad");
      if (!ticket.ok())
        return failWith(state, ticket.status());
      if (mode == 0) {
        if (rt::Status s = comm.wait(*ticket); !s.ok())
          return failWith(state, s);
      } else {
        tickets.push_back(*ticket);
      }
    }
    for (int64_t ticket : tickets)
      if (rt::Status s = comm.wait(ticket); !s.ok())
        return failWith(state, s);
  }
  reportBandwidth(state, total * 4);
}

/// Rank 1.. run every benchmark but report nothing.
class SilentReporter : public benchmark::BenchmarkReporter {
public:
  bool ReportContext(const Context &) override { return true; }
  void ReportRuns(const std::vector<Run> &) override {}
};

} // namespace

int main(int argc, char **argv) {
  rt::Expected<std::unique_ptr<rt::Communicator>> fast =
      rt::createMpiCommunicator({.timeoutSeconds = 120});
  rt::Expected<std::unique_ptr<rt::Communicator>> deterministic =
      rt::createMpiCommunicator({.timeoutSeconds = 120, .deterministic = true});
  if (!fast.ok() || !deterministic.ok()) {
    std::fprintf(stderr, "smelt-bench-all-reduce: %s\n",
                 (!fast.ok() ? fast : deterministic).message().c_str());
    return 1;
  }
  fastComm = fast->get();
  deterministicComm = deterministic->get();
  const int rank = fastComm->rank();
  if (rank == 0)
    std::printf("smelt-bench-all-reduce: %s; bytes_per_second is the algorithm bandwidth\n",
                fastComm->describe().c_str());

  registerSized("AllReduce/fast", BM_AllReduce, &fastComm, int64_t(64) << 20);
  for (int64_t bytes = 4 << 10; bytes <= (int64_t(64) << 20); bytes *= 4)
    benchmark::RegisterBenchmark("MpiAllreduceBlocking", BM_MpiAllreduceBlocking)
        ->Arg(bytes)
        ->Iterations(iterationsFor(bytes))
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  registerSized("AllReduce/deterministic", BM_AllReduce, &deterministicComm, int64_t(16) << 20);
  for (int mode = 0; mode < 3; ++mode)
    benchmark::RegisterBenchmark(mode == 0   ? "MlpGradients/per_tensor_one_by_one"
                                 : mode == 1 ? "MlpGradients/per_tensor_in_flight"
                                             : "MlpGradients/one_bucket",
                                 BM_MlpGradients)
        ->Arg(mode)
        ->Iterations(300)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);

  // The other ranks must not write the --benchmark_out file rank 0 writes.
  std::vector<char *> args(argv, argv + argc);
  if (rank != 0)
    std::erase_if(args, [](const char *a) { return std::strncmp(a, "--benchmark_out", 15) == 0; });
  int count = int(args.size());
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data()))
    return 1;
  SilentReporter silent;
  if (rank == 0)
    benchmark::RunSpecifiedBenchmarks();
  else
    benchmark::RunSpecifiedBenchmarks(&silent);
  benchmark::Shutdown();
  return 0;
}
