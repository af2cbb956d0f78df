// Training: datasets, safetensors checkpoints, one epoch of the MLP on Fashion-MNIST, and
// bit-identical resumption.
#include "TestUtil.h"

#include "data/Safetensors.h"
#include "train/Checkpoint.h"
#include "train/Trainer.h"

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>

namespace smelt::test {
namespace {

// A slice out of range is an error naming the bounds (issue 21: a NaN validation split made
// slice allocate 2^64 rows and abort; a benchmark's batch count past the data read beyond it).
TEST(Dataset, SliceChecksItsBounds) {
  data::Dataset data(rt::HostTensor::fromDoubles({rt::DType::f32, {4, 2}},
                                               std::vector<double>(8, 1.0)),
                   rt::HostTensor::fromDoubles({rt::DType::i32, {4}}, {0, 1, 2, 3}));
  rt::Expected<data::Dataset> ok = data.slice(1, 3);
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(ok->size(), 2);
  EXPECT_EQ(ok->batch(ok->epochOrder(0, 0, false), 2, 0).labels.at(0), 1.0);
  EXPECT_TRUE(data.slice(4, 4).ok());
  for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, 5}, {3, 2}, {-1, 2},
                            {INT64_MIN, 0}, {0, INT64_MAX}}) {
    rt::Expected<data::Dataset> bad = data.slice(begin, end);
    ASSERT_FALSE(bad.ok()) << begin << ", " << end;
    EXPECT_NE(bad.message().find("are not a slice of a dataset of 4"), std::string::npos)
        << bad.message();
  }
}

TEST(Dataset, EpochOrdersArePermutationsFixedBySeedAndEpoch) {
  data::Dataset data(rt::HostTensor::fromDoubles({rt::DType::f32, {10, 2}},
                                               std::vector<double>(20, 1.0)),
                   rt::HostTensor::fromDoubles({rt::DType::i32, {10}},
                                               {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  std::vector<int64_t> a = data.epochOrder(3, 0, true), b = data.epochOrder(3, 0, true),
                       c = data.epochOrder(3, 1, true);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, data.epochOrder(3, 0, false));
  EXPECT_EQ(data.batchCount(4, true), 2);
  EXPECT_EQ(data.batchCount(4, false), 3);
  data::Batch last = data.batch(a, 4, 2);
  EXPECT_EQ(last.labels.type().shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(last.labels.at(0), double(a[8]));
  data::BatchStream stream(data, a, 4, true);
  int batches = 0;
  while (std::optional<data::Batch> b2 = stream.next())
    EXPECT_EQ(b2->labels.at(0), double(a[4 * batches++]));
  EXPECT_EQ(batches, 2);

  // map runs on the worker threads, once per batch, before the batch is handed out.
  std::atomic<int> mapped = 0;
  data::BatchStream doubled(data, a, 4, false, 3, [&](data::Batch &batch) {
    ++mapped;
    for (int64_t i = 0; i < batch.labels.type().shape[0]; ++i)
      batch.labels.data<int32_t>()[i] *= 2;
  });
  for (int i = 0; std::optional<data::Batch> b3 = doubled.next(); ++i)
    EXPECT_EQ(b3->labels.at(0), 2.0 * double(a[4 * i]));
  EXPECT_EQ(mapped.load(), 3);
}

TEST(Safetensors, RoundTripAndCorruptFiles) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  std::string path = (std::filesystem::temp_directory_path() /
                      ("smelt-ckpt-" + std::to_string(::getpid()) + ".safetensors"))
                         .string();
  data::Checkpoint c;
  c.tensors = {{"w", randomTensor({3, 4}, DType::f32)},
               {"b", randomTensor({4}, DType::bf16)},
               {"n", randomTensor({}, DType::i64)}};
  c.metadata = {{"epoch", "3"}};
  ASSERT_TRUE(data::writeSafetensors(path, c).ok());
  rt::Expected<data::Checkpoint> back = data::readSafetensors(path);
  ASSERT_TRUE(back.ok()) << back.message();
  ASSERT_EQ(back->tensors.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back->tensors[i].name, c.tensors[i].name);
    EXPECT_EQ(back->tensors[i].tensor.type(), c.tensors[i].tensor.type());
    EXPECT_EQ(std::memcmp(back->tensors[i].tensor.raw(), c.tensors[i].tensor.raw(),
                          c.tensors[i].tensor.byteSize()),
              0);
  }
  EXPECT_EQ(back->metadata.at("epoch"), "3");

  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto expectError = [&](const std::string &corrupt, const std::string &expected) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << corrupt;
    rt::Expected<data::Checkpoint> r = data::readSafetensors(path);
    ASSERT_FALSE(r.ok()) << expected;
    EXPECT_NE(r.message().find(path), std::string::npos) << r.message();
    EXPECT_NE(r.message().find(expected), std::string::npos) << r.message();
  };
  expectError(bytes.substr(0, 5), "header length is missing");
  expectError(bytes.substr(0, 20), "runs past the end");
  expectError(bytes.substr(0, bytes.size() - 3), "fall outside");
  std::string garbled = bytes;
  garbled[9] = '#';
  expectError(garbled, "not a JSON object");
  // Shapes whose element count overflows int64 (found by safetensors-fuzz: UBSan reported the
  // multiplication), or with a dimension past int64.
  auto withShape = [](const std::string &shape) {
    std::string header = R"({"t": {"dtype": "I64", "shape": )" + shape +
                         R"(, "data_offsets": [0, 8]}})";
    std::string length(8, '\0');
    for (size_t i = 0, n = header.size(); i < 8; ++i, n >>= 8)
      length[i] = char(n & 0xff);
    return length + header + std::string(8, '\1');
  };
  expectError(withShape("[236666666666696666, 2555555555555555555]"), "is too large to allocate");
  expectError(withShape("[18446744073709551615]"), "is not a list of sizes");
  std::filesystem::remove(path);
}

TEST(Training, OneEpochOfTheMlpReachesEightyPercent) {
  train::TrainConfig config;
  config.seed = rngSeed() % 1000;
  SCOPED_TRACE("seed " + std::to_string(config.seed));
  rt::Expected<std::unique_ptr<train::Trainer>> trainer = train::Trainer::create(config);
  ASSERT_TRUE(trainer.ok()) << trainer.message();
  rt::Expected<train::Metrics> epoch = (*trainer)->trainEpoch(fashion("train"), 0);
  ASSERT_TRUE(epoch.ok()) << epoch.message();
  rt::Expected<train::Metrics> test = (*trainer)->evaluate(fashion("t10k"));
  ASSERT_TRUE(test.ok()) << test.message();
  EXPECT_GE(test->accuracy(), 0.80);
  EXPECT_EQ(test->examples, 10000);
}

TEST(Training, ResumedRunEqualsUninterruptedRunBitForBit) {
  train::TrainConfig config;
  config.seed = 11;
  config.batch = 128;
  data::Dataset data = fashion("train", 2048);
  std::string path = (std::filesystem::temp_directory_path() /
                      ("smelt-resume-" + std::to_string(::getpid()) + ".safetensors"))
                         .string();
  auto uninterrupted = train::Trainer::create(config);
  ASSERT_TRUE(uninterrupted.ok()) << uninterrupted.message();
  std::vector<double> losses;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    rt::Expected<train::Metrics> m = (*uninterrupted)->trainEpoch(data, epoch);
    ASSERT_TRUE(m.ok()) << m.message();
    losses.push_back(m->loss);
    if (epoch == 1) {
      ASSERT_TRUE((*uninterrupted)->save(path, 2).ok());
    }
  }
  auto resumed = train::Trainer::create(config);
  ASSERT_TRUE(resumed.ok());
  rt::Expected<int64_t> done = (*resumed)->load(path);
  ASSERT_TRUE(done.ok()) << done.message();
  ASSERT_EQ(*done, 2);
  rt::Expected<train::Metrics> m = (*resumed)->trainEpoch(data, 2);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->loss, losses[2]);
  const auto &a = (*uninterrupted)->parameters(), &b = (*resumed)->parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(std::memcmp(a[i].raw(), b[i].raw(), a[i].byteSize()), 0)
        << (*resumed)->parameterNames()[i];

  // A checkpoint that lacks one of the optimizer's state tensors is refused, naming it, and
  // leaves the run as it was: its parameters are not half restored.
  rt::Expected<train::LoadedCheckpoint> saved = train::loadCheckpoint(path);
  ASSERT_TRUE(saved.ok()) << saved.message();
  std::string lost = saved->tensors.back().name;
  saved->tensors.pop_back();
  ASSERT_TRUE(train::saveCheckpoint(path, saved->tensors, saved->info).ok());
  auto fresh = train::Trainer::create(config);
  ASSERT_TRUE(fresh.ok());
  std::vector<rt::HostTensor> before = (*fresh)->parameters();
  rt::Expected<int64_t> refused = (*fresh)->load(path);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("optimizer state '" + lost + "' of model 'mlp' is missing"),
            std::string::npos)
      << refused.message();
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_EQ(std::memcmp(before[i].raw(), (*fresh)->parameters()[i].raw(), before[i].byteSize()),
              0)
        << (*fresh)->parameterNames()[i] << " changed";

  // The same seed gives the same loss curve.
  auto again = train::Trainer::create(config);
  ASSERT_TRUE(again.ok());
  for (int64_t epoch = 0; epoch < 2; ++epoch)
    EXPECT_EQ((*again)->trainEpoch(data, epoch)->loss, losses[epoch]);
  std::filesystem::remove(path);
}

// Fine-tuning from another model's weights: a trainer given a trained run's parameters by name
// starts where that run ended (its evaluation equal to the bit), while its optimizer starts
// fresh; files that do not hold exactly the model's parameters are refused, naming the tensor.
TEST(Training, InitParametersStartsFromAnotherRunsWeights) {
  train::TrainConfig config;
  config.seed = rngSeed() % 1000;
  config.batch = 128;
  SCOPED_TRACE("seed " + std::to_string(config.seed));
  data::Dataset data = fashion("train", 1024), test = fashion("t10k", 1000);
  auto trained = train::Trainer::create(config);
  ASSERT_TRUE(trained.ok()) << trained.message();
  ASSERT_TRUE((*trained)->trainEpoch(data, 0).ok());
  data::Checkpoint weights;
  for (size_t i = 0; i < (*trained)->parameters().size(); ++i)
    weights.tensors.push_back({(*trained)->parameterNames()[i], (*trained)->parameters()[i]});
  std::string path = (std::filesystem::temp_directory_path() /
                      ("smelt-init-" + std::to_string(::getpid()) + ".safetensors"))
                         .string();
  ASSERT_TRUE(data::writeSafetensors(path, weights).ok());

  config.seed += 1; // other initial weights, which the file replaces
  auto tuned = train::Trainer::create(config);
  ASSERT_TRUE(tuned.ok()) << tuned.message();
  rt::Expected<train::Metrics> fresh = (*tuned)->evaluate(test);
  ASSERT_TRUE(fresh.ok());
  rt::Status init = (*tuned)->initParameters(path);
  ASSERT_TRUE(init.ok()) << init.message();
  rt::Expected<train::Metrics> want = (*trained)->evaluate(test), got = (*tuned)->evaluate(test);
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_EQ(got->loss, want->loss);
  EXPECT_EQ(got->accuracy(), want->accuracy());
  EXPECT_LT(got->loss, fresh->loss) << "the trained weights are better than fresh ones";
  EXPECT_EQ((*tuned)->globalStep(), 0);
  ASSERT_TRUE((*tuned)->trainEpoch(data, 0).ok()) << "and training goes on from them";

  // The trained run's whole checkpoint serves too: its Adam moments are left, the optimizer
  // starts fresh (they were refused as "not a parameter").
  std::string checkpointPath = path + ".checkpoint";
  ASSERT_TRUE((*trained)->save(checkpointPath, 1).ok());
  auto fromCheckpoint = train::Trainer::create(config);
  ASSERT_TRUE(fromCheckpoint.ok()) << fromCheckpoint.message();
  rt::Status initFromCheckpoint = (*fromCheckpoint)->initParameters(checkpointPath);
  ASSERT_TRUE(initFromCheckpoint.ok()) << initFromCheckpoint.message();
  rt::Expected<train::Metrics> fromCheckpointMetrics = (*fromCheckpoint)->evaluate(test);
  ASSERT_TRUE(fromCheckpointMetrics.ok());
  EXPECT_EQ(fromCheckpointMetrics->loss, want->loss);
  EXPECT_EQ((*fromCheckpoint)->globalStep(), 0);
  std::filesystem::remove(checkpointPath);

  auto refused = [&](data::Checkpoint file, const std::string &expected) {
    ASSERT_TRUE(data::writeSafetensors(path, file).ok());
    rt::Status s = (*tuned)->initParameters(path);
    ASSERT_FALSE(s.ok()) << expected;
    EXPECT_NE(s.message().find(expected), std::string::npos) << s.message();
  };
  data::Checkpoint missing = weights;
  missing.tensors.pop_back();
  refused(missing, "parameter 'logits/bias' of model 'mlp' is missing");
  data::Checkpoint extra = weights;
  extra.tensors.push_back({"dense9/kernel", randomTensor({2, 2}, DType::f32)});
  refused(extra, "tensor 'dense9/kernel' is not a parameter of model 'mlp'");
  data::Checkpoint reshaped = weights;
  reshaped.tensors[0].tensor = randomTensor({784, 3}, DType::f32);
  refused(reshaped, "tensor 'dense1/kernel' is tensor<784x3xf32>, the parameter is "
                    "tensor<784x512xf32>");
  std::filesystem::remove(path);
}

} // namespace
} // namespace smelt::test
