// Data-parallel replicas of a training step placed on a GPU (MirroredStrategy): each replica
// takes its own GPU, the Trainer asks its DeviceGroupFactory for their communicators and uses
// them (or keeps the host group when it gets none), and the results are those of the same
// replicas on the CPU. The GPU segments run on a CPU stand-in, so this runs without a GPU; the
// NCCL group itself (rt::cuda::ncclReplicaGroup) needs GPUs and is not run here.
#include "TestUtil.h"

#include "runtime/Collectives.h"
#include "train/Trainer.h"

#include <atomic>
#include <mutex>
#include <set>

namespace smelt::test {
namespace {

/// A host communicator that counts the collectives it starts and claims the GPU memory of
/// `cudaDevice` (-1: host), so tests see whose communicator a replica reduces with.
class CountingCommunicator final : public rt::Communicator {
public:
  CountingCommunicator(std::unique_ptr<rt::Communicator> inner, std::atomic<int> &started,
                       int cudaDevice = -1)
      : inner_(std::move(inner)), started_(started), cudaDevice_(cudaDevice) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string describe() const override { return "counting " + inner_->describe(); }
  rt::Expected<int64_t> start(void *data, int64_t count, rt::DType dtype, rt::ReduceKind kind,
                              std::string what) override {
    ++started_;
    return inner_->start(data, count, dtype, kind, std::move(what));
  }
  rt::Status wait(int64_t ticket) override { return inner_->wait(ticket); }
  void abort(const std::string &reason) override { inner_->abort(reason); }
  int cudaDevice() const override { return cudaDevice_; }

private:
  std::unique_ptr<rt::Communicator> inner_;
  std::atomic<int> &started_;
  int cudaDevice_;
};

/// Two replicas of the MLP with SGD and no dropout: a configuration whose replicas compare
/// closely with other runs of it (DataParallelTest explains the choice).
train::TrainConfig twoReplicas() {
  train::TrainConfig config;
  config.seed = rngSeed() % 1000;
  config.batch = 256;
  config.dropout = 0;
  config.optimizer.kind = OptimizerKind::SGD;
  config.optimizer.learningRate = 0.1;
  config.replicas = 2;
  return config;
}

/// The parameters after `epochs` epochs on 512 examples.
std::vector<rt::HostTensor> train(train::Trainer &trainer, int64_t epochs) {
  data::Dataset data = fashion("train", 512);
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    rt::Expected<train::Metrics> m = trainer.trainEpoch(data, epoch);
    EXPECT_TRUE(m.ok()) << m.message();
  }
  return trainer.parameters();
}

TEST(GpuReplicas, EachReplicaTakesItsOwnGpuAndUsesTheGroupsCommunicators) {
  train::TrainConfig config = twoReplicas();
  SCOPED_TRACE("seed " + std::to_string(config.seed));
  auto onCpu = train::Trainer::create(config);
  ASSERT_TRUE(onCpu.ok()) << onCpu.message();
  EXPECT_EQ((*onCpu)->replicaDevices(), (std::vector<std::string>{"cpu:0", "cpu:0"}));
  EXPECT_EQ((*onCpu)->gpuCollectives(), "");

  // Placed on two GPUs: the runner is asked for both, and the factory for their group.
  config.pipeline.devices = "cpu:0,gpu:0,gpu:1";
  std::mutex mutex;
  std::set<std::string> runnerDevices;
  config.executor.gpuRunner = [&](const rt::Executable &segment, const std::string &device,
                                  const rt::ExecutorOptions &options) {
    std::lock_guard<std::mutex> lock(mutex);
    runnerDevices.insert(device);
    return rt::cpuSegmentRunner(segment, device, options);
  };
  std::vector<std::string> groupDevices;
  std::atomic<int> started{0};
  config.gpuGroup = [&](const std::vector<std::string> &devices, rt::Communicator *bootstrap,
                        rt::CollectiveOptions options) -> rt::Expected<rt::DeviceGroup> {
    EXPECT_EQ(bootstrap, nullptr) << "one process: no bootstrap";
    groupDevices = devices;
    rt::LocalGroup hosts(int(devices.size()), options);
    rt::DeviceGroup group;
    for (int r = 0; r < int(devices.size()); ++r)
      group.communicators.push_back(
          std::make_unique<CountingCommunicator>(hosts.communicator(r), started));
    group.summary = "a counting group over " + std::to_string(devices.size()) + " devices";
    return group;
  };
  auto onGpus = train::Trainer::create(config);
  ASSERT_TRUE(onGpus.ok()) << onGpus.message();
  EXPECT_EQ((*onGpus)->replicaDevices(), (std::vector<std::string>{"gpu:0", "gpu:1"}));
  EXPECT_EQ(groupDevices, (std::vector<std::string>{"gpu:0", "gpu:1"}));
  EXPECT_EQ((*onGpus)->gpuCollectives(), "a counting group over 2 devices");
  EXPECT_FALSE((*onGpus)->reducesOnGpus());

  std::vector<rt::HostTensor> want = train(**onCpu, 2), got = train(**onGpus, 2);
  EXPECT_EQ(runnerDevices, (std::set<std::string>{"gpu:0", "gpu:1"}));
  EXPECT_GT(started.load(), 0) << "the replicas reduced with the group's communicators";
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_LT(relError(got[i].toDoubles(), want[i].toDoubles()), 1e-6) << i;
}

TEST(GpuReplicas, WithoutCommunicatorsFromTheFactoryTheHostGroupReduces) {
  train::TrainConfig config = twoReplicas();
  SCOPED_TRACE("seed " + std::to_string(config.seed));
  config.pipeline.devices = "cpu:0,gpu:0,gpu:1";
  config.executor.gpuRunner = rt::cpuSegmentRunner;
  config.gpuGroup = [](const std::vector<std::string> &, rt::Communicator *,
                       rt::CollectiveOptions) -> rt::Expected<rt::DeviceGroup> {
    rt::DeviceGroup group;
    group.summary = "through host copies (gpu:0 and gpu:1 are both on physical GPU 0)";
    return group;
  };
  auto trainer = train::Trainer::create(config);
  ASSERT_TRUE(trainer.ok()) << trainer.message();
  EXPECT_EQ((*trainer)->gpuCollectives(),
            "through host copies (gpu:0 and gpu:1 are both on physical GPU 0)");
  std::vector<rt::HostTensor> params = train(**trainer, 1);
  for (const rt::HostTensor &p : params)
    for (double v : p.toDoubles())
      ASSERT_TRUE(std::isfinite(v));
}

TEST(GpuReplicas, ErrorsNameTheProblem) {
  train::TrainConfig config = twoReplicas();
  config.pipeline.devices = "cpu:0,gpu:0";
  config.executor.gpuRunner = rt::cpuSegmentRunner;
  auto tooFew = train::Trainer::create(config);
  ASSERT_FALSE(tooFew.ok());
  EXPECT_EQ(tooFew.message(), "2 replicas run one per GPU, and there is 1 (gpu:0); "
                              "--logical-gpus splits one GPU into several");

  config.pipeline.devices = "cpu:0,gpu:0,gpu:1";
  config.gpuGroup = [](const std::vector<std::string> &, rt::Communicator *,
                       rt::CollectiveOptions) -> rt::Expected<rt::DeviceGroup> {
    return rt::Status::error("ncclCommInitAll failed: unhandled system error");
  };
  auto failed = train::Trainer::create(config);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.message(), "ncclCommInitAll failed: unhandled system error");

  // A communicator of GPU memory given to an all_reduce that runs on the CPU.
  config.pipeline.devices = "cpu:0";
  config.replicas = 1;
  train::TrainConfig alone = config;
  alone.replicas = 2;
  std::atomic<int> started{0};
  rt::LocalGroup hosts(2);
  CountingCommunicator gpuMemory(hosts.communicator(0), started, /*cudaDevice=*/0);
  alone.communicator = &gpuMemory;
  auto trainer = train::Trainer::create(alone);
  ASSERT_TRUE(trainer.ok()) << trainer.message();
  rt::Expected<train::Metrics> m = (*trainer)->trainEpoch(fashion("train", 256), 0);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("runs on the CPU, but counting local replica 0 of 2 reduces GPU "
                             "memory: place it on gpu:0"),
            std::string::npos)
      << m.message();
  EXPECT_EQ(started.load(), 0);
}

} // namespace
} // namespace smelt::test
