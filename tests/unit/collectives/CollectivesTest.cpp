// Collectives without MPI or a GPU: reduceInRankOrder against a float64 reference for every
// dtype, and LocalGroup's replicas as threads: results bit-identical to reduceInRankOrder on
// every replica, collectives in flight together, and the failures (a mismatch, a replica that
// never arrives, an abort) ending every replica with a message instead of a hang.
#include "RuntimeTestUtil.h"

#include "runtime/Collectives.h"
#include "runtime/DTypeDispatch.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <functional>
#include <thread>

namespace smelt::rt {
namespace {

using test::draw;
using test::randomTensor;
using test::rng;

constexpr DType kReducible[] = {DType::f32,  DType::f64, DType::f16,
                                DType::bf16, DType::i32, DType::i64};

/// One contribution per replica, of `count` elements: floats in [-100, 100] with |x| >= 0.01
/// (so float64 holds the exact sum of any four f32 values), integers in [-50, 50].
std::vector<HostTensor> contributions(int replicas, int64_t count, DType dtype) {
  std::vector<HostTensor> tensors;
  for (int r = 0; r < replicas; ++r)
    tensors.push_back(isFloat(dtype)
                          ? randomTensor(dtype, {count}, [] { return draw(-100, 100, 0.01); })
                          : randomTensor(dtype, {count}));
  return tensors;
}

/// The contributions one after another, as reduceInRankOrder reads them.
std::vector<std::byte> concatenated(const std::vector<HostTensor> &tensors) {
  std::vector<std::byte> bytes;
  for (const HostTensor &t : tensors) {
    const std::byte *begin = static_cast<const std::byte *>(t.raw());
    bytes.insert(bytes.end(), begin, begin + t.byteSize());
  }
  return bytes;
}

HostTensor expectedResult(const std::vector<HostTensor> &tensors, ReduceKind kind) {
  HostTensor out = HostTensor::zeros(tensors[0].type());
  reduceInRankOrder(concatenated(tensors).data(), int(tensors.size()), out.type().numElements(),
                    out.type().dtype, kind, out.raw());
  return out;
}

/// Mantissa bits and smallest normal exponent of each float dtype, for ulps.
double ulpAt(DType dtype, double value) {
  int precision = 24, minExponent = -126;
  if (dtype == DType::f64)
    precision = 53, minExponent = -1022;
  else if (dtype == DType::f16)
    precision = 11, minExponent = -14;
  else if (dtype == DType::bf16)
    precision = 8;
  int exponent = value == 0 ? minExponent
                            : std::max(int(std::floor(std::log2(std::fabs(value)))), minExponent);
  return std::ldexp(1.0, exponent - precision + 1);
}

std::string caseName(DType dtype, ReduceKind kind, int replicas) {
  return fmt::format("{} {} over {} replicas (SMELT_TEST_SEED={})", dtypeName(dtype),
                     reduceKindName(kind), replicas, test::baseSeed());
}

TEST(ReduceInRankOrder, MatchesAFloat64ReferenceForEveryDType) {
  const int64_t count = 1000;
  for (DType dtype : kReducible)
    for (ReduceKind kind : {ReduceKind::sum, ReduceKind::mean})
      for (int replicas : {1, 2, 3, 4, 7}) {
        SCOPED_TRACE(caseName(dtype, kind, replicas));
        std::vector<HostTensor> inputs = contributions(replicas, count, dtype);
        HostTensor got = expectedResult(inputs, kind);
        int bad = 0;
        for (int64_t i = 0; i < count && bad < 5; ++i) {
          long double sum = 0, magnitude = 0;
          for (const HostTensor &t : inputs)
            sum += t.at(i), magnitude += std::fabs(t.at(i));
          if (kind == ReduceKind::mean)
            sum = isFloat(dtype) ? sum / replicas : std::trunc(sum / replicas);
          double ref = double(sum);
          // Rounded once to the dtype: within half an ulp of the exact value (f64 also carries
          // the float64 additions' own rounding, up to one ulp of the magnitude per addition).
          double tolerance = 0;
          if (isFloat(dtype))
            tolerance = 0.5 * ulpAt(dtype, ref) * (1 + 1e-6) +
                        (dtype == DType::f64 ? replicas * ulpAt(dtype, double(magnitude)) : 0);
          if (!(std::fabs(got.at(i) - ref) <= tolerance)) {
            ADD_FAILURE() << "element " << i << ": got " << got.at(i) << ", expected " << ref
                          << " within " << tolerance;
            ++bad;
          }
        }
      }
}

TEST(ReduceInRankOrder, IntegerSumsWrapAndMeansAreExact) {
  // Two replicas at INT32_MAX: the sum wraps like MPI_SUM's, the mean is exact.
  int32_t both[2] = {INT32_MAX, INT32_MAX}, out = 0;
  reduceInRankOrder(both, 2, 1, DType::i32, ReduceKind::sum, &out);
  EXPECT_EQ(out, -2);
  reduceInRankOrder(both, 2, 1, DType::i32, ReduceKind::mean, &out);
  EXPECT_EQ(out, INT32_MAX);
  int64_t big[3] = {INT64_MAX, INT64_MAX, INT64_MAX}, out64 = 0;
  reduceInRankOrder(big, 3, 1, DType::i64, ReduceKind::mean, &out64);
  EXPECT_EQ(out64, INT64_MAX);
  // Mean truncates toward zero: -7 / 2 = -3.
  int32_t odd[2] = {-3, -4};
  reduceInRankOrder(odd, 2, 1, DType::i32, ReduceKind::mean, &out);
  EXPECT_EQ(out, -3);
}

/// Runs fn(rank, communicator) on one thread per replica of `group`, and returns once all end.
void onReplicas(LocalGroup &group, const std::function<void(int, Communicator &)> &fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < group.size(); ++r)
    threads.emplace_back([&group, &fn, r] {
      std::unique_ptr<Communicator> comm = group.communicator(r);
      fn(r, *comm);
    });
  for (std::thread &t : threads)
    t.join();
}

void expectSameBits(const HostTensor &got, const HostTensor &expected, const std::string &what) {
  ASSERT_EQ(got.byteSize(), expected.byteSize()) << what;
  EXPECT_EQ(std::memcmp(got.raw(), expected.raw(), got.byteSize()), 0)
      << what << ": not bit-identical to reduceInRankOrder; first values " << got.summary()
      << " vs " << expected.summary();
}

TEST(LocalGroup, AllReduceIsBitIdenticalToReduceInRankOrderOnEveryReplica) {
  for (int replicas : {2, 3, 4})
    for (DType dtype : kReducible)
      for (ReduceKind kind : {ReduceKind::sum, ReduceKind::mean}) {
        std::string name = caseName(dtype, kind, replicas);
        std::vector<HostTensor> buffers = contributions(replicas, 4099, dtype);
        HostTensor expected = expectedResult(buffers, kind);
        LocalGroup group(replicas, {.timeoutSeconds = 30});
        std::vector<Status> results(static_cast<size_t>(replicas));
        onReplicas(group, [&](int rank, Communicator &comm) {
          HostTensor &mine = buffers[size_t(rank)];
          results[size_t(rank)] =
              comm.allReduce(mine.raw(), mine.type().numElements(), dtype, kind, "gradients");
        });
        for (int r = 0; r < replicas; ++r) {
          ASSERT_TRUE(results[size_t(r)].ok()) << name << ": " << results[size_t(r)].message();
          expectSameBits(buffers[size_t(r)], expected, name + ", replica " + std::to_string(r));
        }
      }
}

TEST(LocalGroup, SeveralCollectivesInFlightWaitedInAnotherOrder) {
  const int replicas = 3;
  struct Bucket {
    DType dtype;
    int64_t count;
    ReduceKind kind;
  };
  const std::vector<Bucket> buckets = {{DType::f32, 784 * 512, ReduceKind::mean},
                                       {DType::bf16, 512, ReduceKind::sum},
                                       {DType::i64, 10, ReduceKind::sum},
                                       {DType::f16, 0, ReduceKind::mean},
                                       {DType::f64, 256 * 10, ReduceKind::mean}};
  // buffers[bucket][rank]
  std::vector<std::vector<HostTensor>> buffers;
  std::vector<HostTensor> expected;
  for (const Bucket &b : buckets) {
    buffers.push_back(contributions(replicas, b.count, b.dtype));
    expected.push_back(expectedResult(buffers.back(), b.kind));
  }
  LocalGroup group(replicas, {.timeoutSeconds = 30});
  std::vector<std::string> failures(replicas);
  onReplicas(group, [&](int rank, Communicator &comm) {
    std::vector<int64_t> tickets;
    for (size_t i = 0; i < buckets.size(); ++i) {
      HostTensor &mine = buffers[i][size_t(rank)];
      Expected<int64_t> ticket = comm.start(mine.raw(), buckets[i].count, buckets[i].dtype,
                                            buckets[i].kind, "bucket " + std::to_string(i));
      if (!ticket.ok()) {
        failures[size_t(rank)] += ticket.message() + "\n";
        return;
      }
      tickets.push_back(*ticket);
      comm.progress();
    }
    // Each replica waits in its own order: backwards, or rotated by its rank.
    for (size_t k = 0; k < tickets.size(); ++k) {
      size_t i = rank == 0 ? tickets.size() - 1 - k : (k + size_t(rank)) % tickets.size();
      if (Status s = comm.wait(tickets[i]); !s.ok())
        failures[size_t(rank)] += s.message() + "\n";
    }
    // A ticket waited for already is an error, not a hang.
    if (comm.wait(tickets[0]).ok())
      failures[size_t(rank)] += "a second wait for the same ticket succeeded\n";
  });
  for (int r = 0; r < replicas; ++r)
    EXPECT_EQ(failures[size_t(r)], "") << "replica " << r;
  for (size_t i = 0; i < buckets.size(); ++i)
    for (int r = 0; r < replicas; ++r)
      expectSameBits(buffers[i][size_t(r)], expected[i],
                     fmt::format("bucket {} on replica {} ({})", i, r, test::baseSeed()));
}

TEST(LocalGroup, MismatchedCountsFailEveryReplicaNamingTheMismatch) {
  LocalGroup group(2, {.timeoutSeconds = 10});
  std::vector<float> data[2] = {std::vector<float>(200, 1.0f), std::vector<float>(100, 1.0f)};
  std::vector<Status> results(2);
  onReplicas(group, [&](int rank, Communicator &comm) {
    results[size_t(rank)] = comm.allReduce(data[rank].data(), int64_t(data[rank].size()),
                                           DType::f32, ReduceKind::sum, "layer1.weight grad");
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(results[size_t(r)].ok()) << "replica " << r;
    const std::string &message = results[size_t(r)].message();
    EXPECT_NE(message.find("does not match across replicas"), std::string::npos) << message;
    EXPECT_NE(message.find("200 elements of f32"), std::string::npos) << message;
    EXPECT_NE(message.find("100 elements of f32"), std::string::npos) << message;
    EXPECT_NE(message.find("layer1.weight grad"), std::string::npos) << message;
  }
}

TEST(LocalGroup, AReplicaThatNeverArrivesFailsTheOthersWithinTheTimeout) {
  LocalGroup group(3, {.timeoutSeconds = 0.5});
  std::vector<Status> results(3);
  std::vector<double> seconds(3);
  onReplicas(group, [&](int rank, Communicator &comm) {
    if (rank == 2)
      return; // died before the collective
    std::vector<float> data(1024, float(rank));
    auto begin = std::chrono::steady_clock::now();
    results[size_t(rank)] =
        comm.allReduce(data.data(), 1024, DType::f32, ReduceKind::mean, "bucket 0");
    seconds[size_t(rank)] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(results[size_t(r)].ok()) << "replica " << r;
    const std::string &message = results[size_t(r)].message();
    EXPECT_LT(seconds[size_t(r)], 3.0) << message;
    EXPECT_NE(message.find("all_reduce 'bucket 0' (4096 bytes of f32, mean)"), std::string::npos)
        << message;
    EXPECT_NE(message.find("replica 2"), std::string::npos) << message;
  }
  // The first to time out fails the group: at least one says so in its own words.
  bool named = results[0].message().find("did not arrive within 0.5 s") != std::string::npos ||
               results[1].message().find("did not arrive within 0.5 s") != std::string::npos;
  EXPECT_TRUE(named) << results[0].message() << "\n" << results[1].message();
}

TEST(LocalGroup, AbortFromOneReplicaFailsTheOthersPromptly) {
  LocalGroup group(3, {.timeoutSeconds = 60});
  std::vector<Status> results(3);
  std::vector<double> seconds(3);
  onReplicas(group, [&](int rank, Communicator &comm) {
    std::vector<double> data(64, 1.0);
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100)); // let the others wait
      comm.abort("the loss is NaN at step 7");
      results[1] = comm.allReduce(data.data(), 64, DType::f64, ReduceKind::sum, "after abort");
      return;
    }
    auto begin = std::chrono::steady_clock::now();
    results[size_t(rank)] = comm.allReduce(data.data(), 64, DType::f64, ReduceKind::sum, "loss");
    seconds[size_t(rank)] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  });
  for (int r = 0; r < 3; ++r) {
    ASSERT_FALSE(results[size_t(r)].ok()) << "replica " << r;
    EXPECT_NE(results[size_t(r)].message().find("local replica 1 of 3: the loss is NaN at step 7"),
              std::string::npos)
        << results[size_t(r)].message();
    EXPECT_LT(seconds[size_t(r)], 5.0) << "replica " << r << " was not released promptly";
  }
}

TEST(LocalGroup, GroupAbortAndBooleansAreErrorsNotCrashes) {
  LocalGroup group(2);
  std::unique_ptr<Communicator> comm = group.communicator(0);
  ASSERT_TRUE(comm);
  EXPECT_EQ(comm->describe(), "local replica 0 of 2");
  EXPECT_FALSE(group.communicator(2)) << "rank 2 of a group of 2";
  bool flags[4] = {};
  Expected<int64_t> ticket = comm->start(flags, 4, DType::i1, ReduceKind::sum, "mask");
  ASSERT_FALSE(ticket.ok());
  EXPECT_NE(ticket.message().find("i1"), std::string::npos) << ticket.message();
  EXPECT_FALSE(comm->wait(12345).ok());

  group.abort("replica 1 ran out of memory");
  float x = 1;
  Status status = comm->allReduce(&x, 1, DType::f32, ReduceKind::sum, "after");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("replica 1 ran out of memory"), std::string::npos)
      << status.message();

  LocalGroup empty(0);
  Status none = empty.communicator(0)->allReduce(&x, 1, DType::f32, ReduceKind::sum, "x");
  EXPECT_FALSE(none.ok());
}

TEST(LocalGroup, OneReplicaIsItsOwnSum) {
  LocalGroup group(1);
  std::unique_ptr<Communicator> comm = group.communicator(0);
  std::vector<float> data = {1.5f, -2.0f};
  ASSERT_TRUE(comm->allReduce(data.data(), 2, DType::f32, ReduceKind::mean, "x").ok());
  EXPECT_EQ(data, (std::vector<float>{1.5f, -2.0f}));
}

} // namespace
} // namespace smelt::rt
