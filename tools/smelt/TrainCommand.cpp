// `smelt train`: trains the MLP or the small CNN on Fashion-MNIST, or the character-level GPT on
// a text file (--model=gpt --text=FILE), through fit(): Keras-style progress per epoch,
// validation on the last part of the training data, a final test accuracy (a generated sample
// for the GPT), and safetensors checkpoints that --resume continues from. --replicas trains data-parallel:
// in one process (a thread per replica), or one replica per rank under mpirun, where rank 0
// prints and writes checkpoints and a failing rank ends the job instead of hanging it.
#include "tools/smelt/Cache.h"
#include "tools/smelt/Commands.h"
#include "tools/smelt/Inspect.h"
#include "tools/smelt/ModelSource.h"
#include "tools/smelt/OnnxClassifier.h"
#include "tools/smelt/Placement.h"

#include "data/Mnist.h"
#include "data/Text.h"
#include "runtime/CpuThreads.h"
#include "runtime/FileIO.h"
#include "train/BuiltinModels.h"
#include "train/Fit.h"
#include "train/TextGenerator.h"
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
#include <iostream>
#include <unistd.h>

namespace cl = llvm::cl;

namespace smelt::tools {

cl::SubCommand trainSubcommand("train", "Train a model on Fashion-MNIST");
static DeviceFlags deviceFlags(trainSubcommand);
static CacheFlags cacheFlags(trainSubcommand);

static cl::opt<std::string> model("model",
                                  cl::desc("mlp (784-512-256-10, dropout), cnn "
                                           "(conv-pool-conv-pool-dense) or resnet (3 "
                                           "stages of 2 residual blocks, batch norm) "
                                           "on Fashion-MNIST, or gpt or lstm (a "
                                           "character LSTM) on --text; or FILE.onnx, "
                                           "a classifier of Fashion-MNIST images "
                                           "fine-tuned from the file's weights"),
                                  cl::init("mlp"), cl::sub(trainSubcommand),
                                  cl::cat(smeltCategory()));
static cl::opt<int> epochs("epochs", cl::desc("Epochs to train"), cl::init(5),
                           cl::sub(trainSubcommand), cl::cat(smeltCategory()));
static cl::opt<int> batch("batch", cl::desc("Batch size (gpt: 32, lstm: 64 unless given)"), cl::init(256),
                          cl::sub(trainSubcommand), cl::cat(smeltCategory()));
static cl::opt<double> learningRate("lr", cl::desc("Learning rate"), cl::init(1e-3),
                                    cl::sub(trainSubcommand), cl::cat(smeltCategory()));
static cl::opt<std::string> optimizer("optimizer", cl::desc("sgd, momentum, adam or adamw"),
                                      cl::init("adam"), cl::sub(trainSubcommand),
                                      cl::cat(smeltCategory()));
static cl::opt<std::string> lrSchedule(
    "lr-schedule", cl::desc("constant, step:EVERY:FACTOR, exponential:EVERY:FACTOR or "
                            "cosine:WARMUP:TOTAL[:FINAL_FRACTION] (in steps), fed to each step"),
    cl::init("constant"), cl::sub(trainSubcommand), cl::cat(smeltCategory()));
static cl::opt<double> clipNorm("clip-norm", cl::desc("Clip the gradients to this global norm "
                                                      "(0: no clipping)"),
                                cl::init(0), cl::sub(trainSubcommand), cl::cat(smeltCategory()));
static cl::opt<int> accumulateSteps("accumulate-steps",
                                    cl::desc("Update the parameters every K steps with the mean "
                                             "of their gradients (1: every step)"),
                                    cl::init(1), cl::sub(trainSubcommand),
                                    cl::cat(smeltCategory()));
static cl::opt<double> emaMomentum("ema", cl::desc("Keep a moving average of the weights with "
                                                   "this momentum and evaluate on it (0: none)"),
                                   cl::init(0), cl::sub(trainSubcommand),
                                   cl::cat(smeltCategory()));
static cl::opt<double> weightDecay("weight-decay", cl::desc("AdamW's decoupled weight decay, on "
                                                            "parameters of rank >= 2"),
                                   cl::init(0.004), cl::sub(trainSubcommand),
                                   cl::cat(smeltCategory()));
static cl::opt<std::string> textPath("text", cl::desc("--model=gpt or lstm: the text file to "
                                                      "train on, by characters"),
                                     cl::value_desc("file"), cl::sub(trainSubcommand),
                                     cl::cat(smeltCategory()));
static cl::opt<int> gptContext("context", cl::desc("--model=gpt or lstm: tokens per sequence "
                                                         "(the LSTM's steps)"),
                               cl::init(64), cl::sub(trainSubcommand), cl::cat(smeltCategory()));
static cl::opt<int> gptWidth("width", cl::desc("--model=gpt: model width; lstm: its units"), cl::init(128),
                             cl::sub(trainSubcommand), cl::cat(smeltCategory()));
static cl::opt<int> gptLayers("layers", cl::desc("--model=gpt: transformer blocks"), cl::init(4),
                              cl::sub(trainSubcommand), cl::cat(smeltCategory()));
static cl::opt<int> gptHeads("heads", cl::desc("--model=gpt: attention heads"), cl::init(4),
                             cl::sub(trainSubcommand), cl::cat(smeltCategory()));
static cl::opt<int> sampleLength("sample-length", cl::desc("--model=gpt: characters generated "
                                                           "after each epoch"),
                                 cl::init(200), cl::sub(trainSubcommand),
                                 cl::cat(smeltCategory()));
static cl::opt<double> temperature("temperature", cl::desc("--model=gpt: sampling temperature "
                                                           "(0: the most likely character)"),
                                   cl::init(0.8), cl::sub(trainSubcommand),
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
static cl::opt<int> limit("limit", cl::desc("Train on only the first N training examples, "
                                            "validating on the split's share of them (0: all)"),
                          cl::init(0), cl::sub(trainSubcommand), cl::cat(smeltCategory()));
static cl::opt<bool> dropRemainder(
    "drop-remainder", cl::desc("Leave out each epoch's short last batch (by default it trains "
                               "in a step of its own)"),
    cl::sub(trainSubcommand), cl::cat(smeltCategory()));
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
static cl::opt<bool>
    deterministic("deterministic",
                  cl::desc("All-reduce in rank order (gather, then add replica 0, 1, ...): "
                           "the same bits in every run, on every replica, with threads "
                           "or MPI; a CPU thread count that does not follow other "
                           "processes' load; and no FMA contraction on a GPU "
                           "(--cuda-fmad=false)"),
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
      {"clip-norm", clipNorm, std::isfinite(clipNorm) && clipNorm >= 0,
       "a finite number >= 0 (0: no clipping)"},
      {"weight-decay", weightDecay, std::isfinite(weightDecay) && weightDecay >= 0,
       "a finite number >= 0"},
      {"accumulate-steps", double(accumulateSteps), accumulateSteps >= 1, "a count >= 1"},
      {"ema", emaMomentum, emaMomentum >= 0 && emaMomentum < 1, "a momentum in [0, 1)"},
      {"context", double(gptContext), gptContext >= 1, "a count >= 1"},
      {"width", double(gptWidth), gptWidth >= 2 && gptWidth % 2 == 0, "an even count >= 2"},
      {"layers", double(gptLayers), gptLayers >= 1, "a count >= 1"},
      {"heads", double(gptHeads), gptHeads >= 1 && gptWidth % gptHeads == 0,
       "a count >= 1 that divides --width"},
      {"sample-length", double(sampleLength), sampleLength >= 0, "a count >= 0"},
      {"temperature", temperature, std::isfinite(temperature) && temperature >= 0,
       "a finite number >= 0"},
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

/// What a run trains and evaluates on.
struct TrainingData {
  data::Dataset train;
  std::optional<data::Dataset> validation, test;
  /// --model=gpt: the model, its characters and a prompt for samples.
  GptConfig gpt;
  data::CharVocabulary vocabulary;
  std::vector<int32_t> prompt;
};

/// The first `count` of `all` less the last validationSplit of them for validation.
static rt::Expected<TrainingData> splitForValidation(const data::Dataset &all, int64_t count) {
  int64_t validationCount = int64_t(double(count) * validationSplit);
  rt::Expected<data::Dataset> trainSlice = all.slice(0, count - validationCount);
  if (!trainSlice)
    return trainSlice.status();
  TrainingData out{std::move(*trainSlice), std::nullopt, std::nullopt, {}, {}, {}};
  if (validationCount > 0) {
    rt::Expected<data::Dataset> held = all.slice(count - validationCount, count);
    if (!held)
      return held.status();
    out.validation = std::move(*held);
  }
  return out;
}

/// Fashion-MNIST: --limit training images less the validation split, and the test set.
static rt::Expected<TrainingData> loadFashionMnist() {
  rt::Expected<data::MnistSplit> trainSplit = data::loadMnist(dataDir, "train");
  if (!trainSplit)
    return trainSplit.status();
  rt::Expected<data::MnistSplit> testSplit = data::loadMnist(dataDir, "t10k");
  if (!testSplit)
    return testSplit.status();
  data::Dataset all(std::move(trainSplit->images), std::move(trainSplit->labels));
  rt::Expected<TrainingData> out =
      splitForValidation(all, limit ? std::min<int64_t>(limit, all.size()) : all.size());
  if (out)
    out->test = data::Dataset(std::move(testSplit->images), std::move(testSplit->labels));
  return out;
}

/// --text: the characters of the file, in windows of --context (one every --context
/// characters, so an epoch reads the text once), the last validation split of the text held
/// out; no test set.
static rt::Expected<TrainingData> loadText() {
  rt::Expected<data::EncodedText> text = data::readEncodedText(textPath);
  if (!text)
    return text.status();
  const data::CharVocabulary &vocabulary = text->vocabulary;
  // The windows of both splits view these ids (4 bytes a character) and keep them alive.
  auto shared = std::make_shared<const std::vector<int32_t>>(std::move(text->ids));
  const std::vector<int32_t> &ids = *shared;
  int64_t held = int64_t(double(ids.size()) * validationSplit);
  std::span<const int32_t> trainIds(ids.data(), ids.size() - size_t(held));
  std::span<const int32_t> heldIds(ids.data() + (ids.size() - size_t(held)), size_t(held));
  rt::Expected<data::Dataset> windows =
      data::nextTokenWindows(trainIds, shared, gptContext, gptContext);
  if (!windows)
    return rt::Status::error(textPath + ": " + windows.message());
  int64_t count = limit ? std::min<int64_t>(limit, windows->size()) : windows->size();
  rt::Expected<data::Dataset> used =
      count == windows->size() ? std::move(*windows) : windows->slice(0, count);
  if (!used)
    return used.status();
  TrainingData out{std::move(*used), std::nullopt, std::nullopt, {}, vocabulary, {}};
  if (held > gptContext) {
    rt::Expected<data::Dataset> heldWindows =
        data::nextTokenWindows(heldIds, shared, gptContext, gptContext);
    if (!heldWindows)
      return heldWindows.status();
    // --limit bounds validation too, to the share the split gives it beside the training
    // windows kept (a 200 MB text validated on all its held-out windows after 32 examples).
    if (limit && validationSplit < 1) {
      auto share = int64_t(std::ceil(double(count) * validationSplit / (1 - validationSplit)));
      int64_t kept = std::min<int64_t>(heldWindows->size(), std::max<int64_t>(1, share));
      rt::Expected<data::Dataset> some = heldWindows->slice(0, kept);
      if (!some)
        return some.status();
      heldWindows = std::move(*some);
    }
    out.validation = std::move(*heldWindows);
  }
  out.gpt.vocab = vocabulary.size();
  out.gpt.context = gptContext;
  out.gpt.width = gptWidth;
  out.gpt.layers = gptLayers;
  out.gpt.heads = gptHeads;
  out.gpt.dropout = dropoutRate.getNumOccurrences() ? double(dropoutRate) : 0.1;
  // Samples start where a line would: after a newline, or else the text's first character.
  rt::Expected<std::vector<int32_t>> newline = vocabulary.encode("\n");
  out.prompt = newline ? *newline : std::vector<int32_t>{ids.front()};
  return out;
}

static size_t parameterCount(const train::Trainer &trainer) {
  size_t count = 0;
  for (const rt::HostTensor &p : trainer.parameters())
    count += size_t(p.type().numElements());
  return count;
}

/// After each epoch, --sample-length characters of text from the GPT.
class SampleText : public train::Callback {
public:
  SampleText(std::unique_ptr<train::TextGenerator> generator, data::CharVocabulary vocabulary,
             std::vector<int32_t> prompt, uint64_t seed)
      : generator_(std::move(generator)), vocabulary_(std::move(vocabulary)),
        prompt_(std::move(prompt)), seed_(seed) {}
  rt::Status onEpochEnd(train::Trainer &trainer, const train::EpochLogs &logs, bool &) override {
    rt::Expected<std::vector<int32_t>> ids = generator_->generate(
        trainer.parameters(), prompt_, sampleLength, temperature, seed_ + uint64_t(logs.epoch));
    if (!ids)
      return ids.status();
    std::cout << "sample: " << vocabulary_.decode(*ids) << std::endl;
    return rt::Status();
  }

private:
  std::unique_ptr<train::TextGenerator> generator_;
  data::CharVocabulary vocabulary_;
  std::vector<int32_t> prompt_;
  uint64_t seed_;
};

int trainCommand() {
  using Clock = std::chrono::steady_clock;
  std::optional<OptimizerKind> kind = parseOptimizer(optimizer);
  if (!kind)
    return failJob("--optimizer=" + optimizer + " is not one of sgd, momentum, adam, adamw");
  if (std::string error = checkNumericFlags(); !error.empty())
    return failJob(error);
  std::optional<LearningRateSchedule> schedule = LearningRateSchedule::parse(lrSchedule);
  if (!schedule)
    return failJob("--lr-schedule=" + lrSchedule + " is not constant, step:EVERY:FACTOR, "
                   "exponential:EVERY:FACTOR or cosine:WARMUP:TOTAL[:FINAL_FRACTION] with "
                   "counts >= 1, factors in (0, 1] and WARMUP <= TOTAL");
  bool textModel = model == "gpt" || model == "lstm";
  if (textModel && textPath.empty())
    return failJob("--model=" + model + " trains on a text file: give --text=FILE");
  if (!textModel && !textPath.empty())
    return failJob("--text is the training data of the text models: give --model=gpt or "
                   "--model=lstm with it");
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

  // The same bits run after run: a thread count that followed other processes' load would
  // change how oneDNN's convolution gradients split their sums from one run to the next.
  if (deterministic && rt::cpuThreadsFollowLoad())
    rt::setCpuThreads(rt::defaultCpuThreads());
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

  rt::Expected<TrainingData> loaded = textModel ? loadText() : loadFashionMnist();
  if (!loaded)
    return failJob(loaded.message());
  data::Dataset &train = loaded->train;
  std::optional<data::Dataset> &validation = loaded->validation;
  int64_t validationCount = validation ? validation->size() : 0;

  train::TrainConfig config;
  train::LstmConfig lstm;
  lstm.vocab = loaded->gpt.vocab;
  lstm.context = gptContext;
  lstm.hidden = gptWidth;
  std::optional<OnnxClassifier> imported;
  if (isOnnxFile(model)) {
    rt::Expected<OnnxClassifier> classifier =
        onnxClassifier(model, train::TensorSpec{{784}, DType::f32});
    if (!classifier)
      return failJob(classifier.message());
    imported = std::move(*classifier);
  }
  config.model = imported          ? imported->spec
                 : model == "gpt"  ? train::gptModel(loaded->gpt)
                 : model == "lstm" ? train::lstmModel(lstm)
                                   : train::ModelSpec(model);
  // The GPT's sequences are 64 examples of work each: 32 make a step, as nanoGPT's do; the
  // LSTM's steps are cheaper, 64 of them.
  if (!batch.getNumOccurrences() && textModel)
    config.batch = model == "gpt" ? 32 : 64;
  else
    config.batch = int(batch);
  config.dropRemainder = dropRemainder;
  config.seed = seed;
  config.dropout = dropoutRate;
  config.optimizer.kind = *kind;
  config.optimizer.learningRate = learningRate;
  config.optimizer.schedule = *schedule;
  config.optimizer.clipGlobalNorm = clipNorm;
  config.optimizer.weightDecay = weightDecay;
  config.accumulateSteps = accumulateSteps;
  config.emaMomentum = emaMomentum;
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
  config.executor.cudaGraphs = deviceFlags.cudaGraphs;
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
                      (long long)train.size(), (long long)validationCount,
                      (long long)(loaded->test ? loaded->test->size() : 0),
                      std::chrono::duration<double>(Clock::now() - start).count());
  if (model == "gpt")
    out << llvm::format("gpt: %lld characters, %lld layers of width %lld, %lld heads, context "
                        "%lld; %zu parameters\n",
                        (long long)loaded->gpt.vocab, (long long)loaded->gpt.layers,
                        (long long)loaded->gpt.width, (long long)loaded->gpt.heads,
                        (long long)loaded->gpt.context, parameterCount(**trainer));
  if (model == "lstm")
    out << llvm::format("lstm: %lld characters, embedding %lld, %lld units unrolled over %lld "
                        "steps; %zu parameters\n",
                        (long long)lstm.vocab, (long long)lstm.width, (long long)lstm.hidden,
                        (long long)lstm.context, parameterCount(**trainer));
  out << "placement: " << (*trainer)->placement() << "\n";
  if (replicaCount > 1)
    out << llvm::format("data parallel: %lld replicas %s, %lld examples each of a global batch "
                        "of %d; %s all-reduce\n",
                        (long long)replicaCount,
                        mpiCommunicator ? "(one per MPI rank)" : "(threads of this process)",
                        (long long)(config.batch / replicaCount), int(config.batch),
                        // Threads reduce in rank order (LocalGroup), unless NCCL does it.
                        deterministic || (!mpiCommunicator && !(*trainer)->reducesOnGpus())
                            ? "deterministic (rank-order)"
                            : "fast");
  if (!(*trainer)->gpuCollectives().empty())
    out << "all-reduce on the GPUs: " << (*trainer)->gpuCollectives() << "\n";

  // An imported model starts from its file's weights; a checkpoint to resume or --init-params
  // replace them below.
  if (imported) {
    size_t count = imported->weights->size();
    if (rt::Status s = (*trainer)->initParameters(std::move(*imported->weights), model); !s.ok())
      return failJob(s.message());
    out << "weights from " << model << ": " << count << " tensors ("
        << (*trainer)->variableNames().size() << " of them batch norm statistics)\n";
  }

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

  // The epochs run through fit(), as a user's program would: a checkpoint after each (rank 0
  // writes it: every replica holds the same parameters), validation and progress lines.
  train::FitOptions fitOptions;
  fitOptions.epochs = epochs;
  fitOptions.initialEpoch = firstEpoch;
  fitOptions.validation = validation ? &*validation : nullptr;
  fitOptions.out = speaks ? &std::cout : nullptr;
  fitOptions.liveProgress = speaks && ::isatty(STDOUT_FILENO);
  std::optional<train::ModelCheckpoint> checkpoint;
  if (!checkpointPath.empty() && speaks) {
    checkpoint.emplace(checkpointPath);
    fitOptions.callbacks.push_back(&*checkpoint);
  }
  std::optional<SampleText> sampler;
  if (model == "gpt" && sampleLength > 0 && speaks) {
    rt::Expected<std::unique_ptr<train::TextGenerator>> generator =
        train::TextGenerator::create(loaded->gpt);
    if (!generator)
      return failJob(generator.message());
    sampler.emplace(std::move(*generator), loaded->vocabulary, loaded->prompt, seed);
    fitOptions.callbacks.push_back(&*sampler);
  }
  out.flush();
  rt::Expected<train::History> history = train::fit(**trainer, train, fitOptions);
  std::cout.flush();
  if (!history)
    return failJob(history.message());
  // What a trace does not show: the bytes a GPU step moves through the host and the times it
  // waits for the GPU, which keeping the state on the device removes.
  // A run with one full batch has only a first step to show, which uploads the state and
  // launches its steps one by one; the line says so instead of passing it off as every step's.
  if (!profilePath.empty())
    if (rt::TransferStats step = (*trainer)->lastStepTransfers(); step.any()) {
      bool firstOnly = (*trainer)->fullBatchSteps() == 1;
      std::string which = firstOnly ? " in the only full-batch step (the first: it uploads the "
                                      "state; graphs replay from the second)"
                                    : " per step";
      out << "host<->device" << which << (replicaCount > 1 ? " of each replica" : "") << ": "
          << step.str() << "\nGPU launches" << (firstOnly ? " in that step" : " per step")
          << ": " << step.launchStr() << "\n";
    }
  if (!loaded->test) {
    printMemoryReport(out);
    if (!profilePath.empty() && speaks && !writeProfile(trace, profilePath))
      return 1;
    return 0;
  }
  data::Dataset &test = *loaded->test;
  rt::Expected<train::Metrics> result = (*trainer)->evaluate(test);
  if (!result)
    return failJob(result.message());
  out << llvm::format("test loss: %.4f", result->loss);
  for (const auto &[name, value] : result->values)
    out << llvm::format(" - test %s: %.4f", name.c_str(), value);
  out << "\n";
  printMemoryReport(out);
  if (!profilePath.empty() && speaks && !writeProfile(trace, profilePath))
    return 1;
  return 0;
}

} // namespace smelt::tools
