// `smelt train`: trains the MLP or the small CNN on Fashion-MNIST on the CPU, with Keras-style
// progress per epoch, validation on the last part of the training set, a final test accuracy,
// and safetensors checkpoints that --resume continues from. --replicas trains data-parallel:
// in one process (a thread per replica), or one replica per rank under mpirun, where rank 0
// prints and writes checkpoints and a failing rank ends the job instead of hanging it.
#include "tools/smelt/Cache.h"
#include "tools/smelt/Commands.h"
#include "tools/smelt/Inspect.h"
#include "tools/smelt/Placement.h"

#include "data/Mnist.h"
#include "runtime/FileIO.h"
#include "train/Trainer.h"
#ifdef SMELT_HAVE_MPI
#include "runtime/mpi/MpiCommunicator.h"
#endif
#if SMELT_HAVE_NCCL
#include "runtime/cuda/NcclReplicas.h"
#endif

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <unistd.h>

namespace cl = llvm::cl;

namespace smelt::tools {

cl::SubCommand trainSubcommand("train", "Train a model on Fashion-MNIST");
static DeviceFlags deviceFlags(trainSubcommand);
static CacheFlags cacheFlags(trainSubcommand);

static cl::opt<std::string> model("model", cl::desc("mlp (784-512-256-10, dropout) or cnn "
                                                    "(conv-pool-conv-pool-dense)"),
                                  cl::init("mlp"), cl::sub(trainSubcommand),
                                  cl::cat(smeltCategory()));
static cl::opt<int> epochs("epochs", cl::desc("Epochs to train"), cl::init(5),
                           cl::sub(trainSubcommand), cl::cat(smeltCategory()));
static cl::opt<int> batch("batch", cl::desc("Batch size"), cl::init(256),
                          cl::sub(trainSubcommand), cl::cat(smeltCategory()));
static cl::opt<double> learningRate("lr", cl::desc("Learning rate"), cl::init(1e-3),
                                    cl::sub(trainSubcommand), cl::cat(smeltCategory()));
static cl::opt<std::string> optimizer("optimizer", cl::desc("sgd, momentum, adam or adamw"),
                                      cl::init("adam"), cl::sub(trainSubcommand),
                                      cl::cat(smeltCategory()));
static cl::opt<unsigned long long> seed("seed", cl::desc("Seed of parameters, shuffling and "
                                                         "dropout"),
                                        cl::init(0), cl::sub(trainSubcommand),
                                        cl::cat(smeltCategory()));
static cl::opt<double> dropoutRate("dropout", cl::desc("Dropout rate after hidden layers"),
                                   cl::init(0.2), cl::sub(trainSubcommand),
                                   cl::cat(smeltCategory()));
static cl::opt<double> validationSplit("validation-split",
                                       cl::desc("Fraction of the training set, taken from its "
                                                "end, used for validation"),
                                       cl::init(0.1), cl::sub(trainSubcommand),
                                       cl::cat(smeltCategory()));
static cl::opt<int> limit("limit", cl::desc("Train on only the first N training examples "
                                            "(0: all)"),
                          cl::init(0), cl::sub(trainSubcommand), cl::cat(smeltCategory()));
static cl::opt<std::string> dataDir("data-dir", cl::desc("Directory of the Fashion-MNIST IDX "
                                                         "files"),
                                    cl::init("/usr/share/datasets/fashion-mnist"),
                                    cl::sub(trainSubcommand), cl::cat(smeltCategory()));
static cl::opt<std::string> checkpointPath(
    "checkpoint", cl::desc("Save parameters and optimizer state here (safetensors) after each "
                           "epoch"),
    cl::value_desc("file"), cl::sub(trainSubcommand), cl::cat(smeltCategory()));
static cl::opt<std::string> precision(
    "precision", cl::desc("f32, mixed_bf16 or mixed_f16 (bf16/f16 compute, f32 master weights; "
                          "mixed_f16 adds dynamic loss scaling)"),
    cl::init("f32"), cl::sub(trainSubcommand), cl::cat(smeltCategory()));
static cl::opt<double> initialLossScale(
    "initial-loss-scale", cl::desc("Starting loss scale of mixed_f16"), cl::init(32768),
    cl::sub(trainSubcommand), cl::cat(smeltCategory()));
static cl::opt<bool> resume("resume", cl::desc("Continue from --checkpoint if it exists"),
                            cl::sub(trainSubcommand), cl::cat(smeltCategory()));
static cl::opt<std::string> initParams(
    "init-params",
    cl::desc("Fine-tune: start from the parameters in this safetensors file, by name (an "
             "imported model's weights, or another run's), with a fresh optimizer"),
    cl::value_desc("file"), cl::sub(trainSubcommand), cl::cat(smeltCategory()));
static cl::opt<std::string> dumpDir("dump-dir", cl::desc(kDumpDirHelp), cl::value_desc("dir"),
                                    cl::sub(trainSubcommand), cl::cat(smeltCategory()));
static cl::opt<std::string> profilePath("profile", cl::desc(kProfileHelp),
                                        cl::value_desc("trace.json"), cl::sub(trainSubcommand),
                                        cl::cat(smeltCategory()));

static cl::opt<int> replicas(
    "replicas", cl::desc("Data-parallel replicas: --batch is the global batch, split evenly "
                         "over them, and gradients are averaged before the optimizer. Without "
                         "mpirun they run in this process, a thread each; under mpirun there "
                         "is one per rank and it must equal the rank count (default)"),
    cl::init(0), cl::sub(trainSubcommand), cl::cat(smeltCategory()));
static cl::opt<bool> deterministic(
    "deterministic", cl::desc("All-reduce in rank order (gather, then add replica 0, 1, ...): "
                              "the same bits in every run, on every replica, with threads "
                              "or MPI; and no FMA contraction on a GPU (--cuda-fmad=false)"),
    cl::sub(trainSubcommand), cl::cat(smeltCategory()));
static cl::opt<double> collectiveTimeout(
    "collective-timeout", cl::desc("Seconds an all-reduce waits for the other replicas "
                                   "before the run fails (0: forever)"),
    cl::init(300), cl::sub(trainSubcommand), cl::cat(smeltCategory()));
static cl::opt<double> bucketMegabytes(
    "all-reduce-bucket-mb", cl::desc("The most gradient MiB one all-reduce carries "
                                     "(smelt-bucket-all-reduce); 0 reduces each alone"),
    cl::init(4), cl::sub(trainSubcommand), cl::cat(smeltCategory()));

/// Where the other replicas are: nowhere (one process) or the MPI job's other ranks.
static rt::Communicator *mpiCommunicator = nullptr;

/// fail(), and under MPI the rank in the message and the end of the job.
static int failJob(const std::string &message) {
  fail(rt::namingReplica(mpiCommunicator, message));
  // The other ranks would wait for this one until their timeout: end the job now.
  if (mpiCommunicator)
    mpiCommunicator->abort("ending the MPI job after the error above");
  return 1;
}

/// This process's rank of an MPI job, when mpirun started it.
static rt::Expected<std::unique_ptr<rt::Communicator>> joinMpiJob(rt::CollectiveOptions options) {
#ifdef SMELT_HAVE_MPI
  if (rt::launchedByMpi())
    return rt::createMpiCommunicator(options);
#endif
  return std::unique_ptr<rt::Communicator>();
}

/// The first numeric flag whose value is out of its range (NaN and infinity included: they
/// would train to NaN and exit 0), as an error naming it; "" when every value is usable.
static std::string checkNumericFlags() {
  struct Range {
    const char *flag;
    double value;
    bool ok;
    const char *expected;
  };
  const Range ranges[] = {
      {"epochs", double(epochs), epochs >= 0, "a count >= 0"},
      {"batch", double(batch), batch >= 1, "a count >= 1"},
      {"limit", double(limit), limit >= 0, "a count >= 0 (0: all)"},
      {"validation-split", validationSplit, validationSplit >= 0 && validationSplit < 1,
       "a fraction in [0, 1)"},
      {"lr", learningRate, std::isfinite(learningRate) && learningRate > 0,
       "a finite number > 0"},
      {"dropout", dropoutRate, dropoutRate >= 0 && dropoutRate < 1, "a rate in [0, 1)"},
      {"initial-loss-scale", initialLossScale,
       std::isfinite(initialLossScale) && initialLossScale > 0, "a finite number > 0"},
      {"replicas", double(replicas), replicas >= 0, "a count >= 0 (0: one per MPI rank)"},
      {"collective-timeout", collectiveTimeout,
       std::isfinite(collectiveTimeout) && collectiveTimeout >= 0,
       "a finite number of seconds >= 0 (0: forever)"},
      {"all-reduce-bucket-mb", bucketMegabytes, bucketMegabytes >= 0 && bucketMegabytes <= 1 << 20,
       "MiB from 0 to 1048576"},
  };
  for (const Range &r : ranges)
    if (!r.ok)
      return fmt::format("--{}={} must be {}", r.flag, r.value, r.expected);
  return "";
}

int trainCommand() {
  using Clock = std::chrono::steady_clock;
  std::optional<OptimizerKind> kind = parseOptimizer(optimizer);
  if (!kind)
    return failJob("--optimizer=" + optimizer + " is not one of sgd, momentum, adam, adamw");
  if (std::string error = checkNumericFlags(); !error.empty())
    return failJob(error);
  std::optional<PrecisionPolicy> policy = parsePrecisionPolicy(precision);
  if (!policy)
    return failJob("--precision=" + precision + " is not one of f32, mixed_bf16, mixed_f16");
  if (resume && checkpointPath.empty())
    return failJob("--resume needs --checkpoint=FILE");
  if (resume && !initParams.empty())
    return failJob("--resume and --init-params both say where training starts: give one");
  // Before training, not after its first epoch: an output that cannot be written.
  for (const std::string &output : {std::string(checkpointPath), std::string(profilePath)})
    if (rt::Status s = rt::checkReplaceable(output); !s.ok())
      return failJob(s.message());

  if (std::string error = deviceFlags.memory.apply();
      !error.empty())
    return failJob(error);

  rt::CollectiveOptions collectives;
  collectives.deterministic = deterministic;
  collectives.timeoutSeconds = collectiveTimeout;
  rt::Expected<std::unique_ptr<rt::Communicator>> mpi = joinMpiJob(collectives);
  if (!mpi)
    return failJob(mpi.message());
  mpiCommunicator = mpi->get();
  int64_t replicaCount = replicas ? replicas : mpiCommunicator ? mpiCommunicator->size() : 1;
  if (mpiCommunicator && replicaCount != mpiCommunicator->size())
    return failJob(fmt::format("--replicas={} under mpirun with {} ranks: each rank runs one "
                            "replica, so they must be equal",
                            replicaCount, mpiCommunicator->size()));
  // Rank 0 speaks for the job; the others print only errors.
  bool speaks = !mpiCommunicator || mpiCommunicator->rank() == 0;
  llvm::raw_ostream &out = speaks ? llvm::outs() : llvm::nulls();

  rt::Expected<data::MnistSplit> trainSplit = data::loadMnist(dataDir, "train");
  if (!trainSplit)
    return failJob(trainSplit.message());
  rt::Expected<data::MnistSplit> testSplit = data::loadMnist(dataDir, "t10k");
  if (!testSplit)
    return failJob(testSplit.message());
  data::Dataset all(std::move(trainSplit->images), std::move(trainSplit->labels));
  int64_t count = limit ? std::min<int64_t>(limit, all.size()) : all.size();
  int64_t validationCount = int64_t(double(count) * validationSplit);
  rt::Expected<data::Dataset> trainSlice = all.slice(0, count - validationCount);
  if (!trainSlice)
    return failJob(trainSlice.message());
  data::Dataset train = std::move(*trainSlice);
  std::optional<data::Dataset> validation;
  if (validationCount > 0) {
    rt::Expected<data::Dataset> held = all.slice(count - validationCount, count);
    if (!held)
      return failJob(held.message());
    validation = std::move(*held);
  }
  data::Dataset test(std::move(testSplit->images), std::move(testSplit->labels));

  train::TrainConfig config;
  config.model = model;
  config.batch = batch;
  config.seed = seed;
  config.dropout = dropoutRate;
  config.optimizer.kind = *kind;
  config.optimizer.learningRate = learningRate;
  config.precision = *policy;
  config.lossScale.initialScale = initialLossScale;
  config.pipeline = placementOptions(deviceFlags.logDevicePlacement, deviceFlags.strictPlacement);
  config.pipeline.allReduceBucketBytes = int64_t(bucketMegabytes * (1 << 20));
  config.replicas = replicaCount;
  config.communicator = mpiCommunicator;
  config.collectives = collectives;
  rt::Trace trace;
  config.compile = compileOptions(dumpDir, profilePath.empty() ? nullptr : &trace);
  enableGpuExecution(config.pipeline, config.compile, config.executor);
  config.executor.allowTf32 = deviceFlags.allowTf32;
  // Determinism here also means multiply-adds rounded as the CPU rounds them: no FMA
  // contraction in the GPU's fused kernels.
  config.compile.cudaFmad = deviceFlags.cudaFmad && !deterministic;
  // The Trainer sets the cache's compile options and target from the configuration above.
  config.cache = cacheFlags.options(config.compile, "", /*inspecting=*/!dumpDir.empty() ||
                                                          !profilePath.empty() ||
                                                          deviceFlags.logDevicePlacement);
#if SMELT_HAVE_NCCL
  config.gpuGroup = rt::cuda::ncclReplicaGroup;
#endif
  auto start = Clock::now();
  rt::Expected<std::unique_ptr<train::Trainer>> trainer = train::Trainer::create(config);
  if (!trainer)
    return failJob(trainer.message());
  std::vector<std::string> devices = (*trainer)->replicaDevices();
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
  out << llvm::format("%s (%s) on %s: %lld training, %lld validation, %lld test "
                      "examples; compiled in %.2f s\n",
                      model.c_str(), precision.c_str(), llvm::join(devices, ", ").c_str(),
                      (long long)train.size(),
                      (long long)validationCount, (long long)test.size(),
                      std::chrono::duration<double>(Clock::now() - start).count());
  out << "placement: " << (*trainer)->placement() << "\n";
  if (replicaCount > 1)
    out << llvm::format("data parallel: %lld replicas %s, %lld examples each of a global batch "
                        "of %d; %s all-reduce\n",
                        (long long)replicaCount,
                        mpiCommunicator ? "(one per MPI rank)" : "(threads of this process)",
                        (long long)(batch / replicaCount), int(batch),
                        // Threads reduce in rank order (LocalGroup), unless NCCL does it.
                        deterministic || (!mpiCommunicator && !(*trainer)->reducesOnGpus())
                            ? "deterministic (rank-order)"
                            : "fast");
  if (!(*trainer)->gpuCollectives().empty())
    out << "all-reduce on the GPUs: " << (*trainer)->gpuCollectives() << "\n";

  int64_t firstEpoch = 0;
  // A checkpoint that cannot even be looked at is loaded too: load() says why it fails.
  std::error_code unknown;
  if (resume && (std::filesystem::exists(std::string(checkpointPath), unknown) || unknown)) {
    rt::Expected<int64_t> done = (*trainer)->load(checkpointPath);
    if (!done)
      return failJob(done.message());
    firstEpoch = *done;
    out << "resumed from " << checkpointPath << " after epoch " << firstEpoch << "\n";
  }
  if (!initParams.empty()) {
    if (rt::Status s = (*trainer)->initParameters(initParams); !s.ok())
      return failJob(s.message());
    out << "parameters from " << initParams << "\n";
  }

  bool tty = speaks && ::isatty(STDOUT_FILENO);
  for (int64_t epoch = firstEpoch; epoch < epochs; ++epoch) {
    out << "Epoch " << epoch + 1 << "/" << epochs << "\n";
    auto epochStart = Clock::now();
    rt::Expected<train::Metrics> metrics = (*trainer)->trainEpoch(
        train, epoch, [&](int64_t step, int64_t steps, const train::Metrics &m) {
          if (tty)
            llvm::outs() << llvm::format("\r%lld/%lld - loss: %.4f - accuracy: %.4f",
                                         (long long)step, (long long)steps, m.loss, m.accuracy)
                         << (step == steps ? "\r" : ""),
                llvm::outs().flush();
        });
    if (!metrics)
      return failJob(metrics.message());
    double seconds = std::chrono::duration<double>(Clock::now() - epochStart).count();
    int64_t steps = train.batchCount(batch, true);
    out << llvm::format("%lld/%lld - %.1fs - loss: %.4f - accuracy: %.4f",
                                 (long long)steps, (long long)steps, seconds, metrics->loss,
                                 metrics->accuracy);
    if (validation) {
      rt::Expected<train::Metrics> val = (*trainer)->evaluate(*validation);
      if (!val)
        return failJob(val.message());
      out << llvm::format(" - val_loss: %.4f - val_accuracy: %.4f", val->loss, val->accuracy);
    }
    // Skipped steps are shown, never silent: users of other frameworks miss them.
    if (*policy == PrecisionPolicy::mixed_f16)
      out << llvm::format(" - skipped: %lld - loss_scale: %g", (long long)metrics->skippedSteps,
                          metrics->lossScale);
    out << llvm::format(" - %.0f examples/s\n", double(metrics->examples) / seconds);
    // Every replica holds the same parameters: rank 0 writes them.
    if (!checkpointPath.empty() && speaks)
      if (rt::Status s = (*trainer)->save(checkpointPath, epoch + 1); !s.ok())
        return failJob(s.message());
  }
  rt::Expected<train::Metrics> result = (*trainer)->evaluate(test);
  if (!result)
    return failJob(result.message());
  out << llvm::format("test loss: %.4f - test accuracy: %.4f\n", result->loss,
                      result->accuracy);
  printMemoryReport(out);
  if (!profilePath.empty() && speaks && !writeProfile(trace, profilePath))
    return 1;
  return 0;
}

} // namespace smelt::tools
