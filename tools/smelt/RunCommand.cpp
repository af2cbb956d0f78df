// `smelt run`: compile one function of a .mlir module or an .onnx model (or load an AOT
// artifact that `smelt compile` wrote), feed it .npy inputs, run it on the CPU and write each
// result as <name>.npy (or print a summary without --output-dir). With --repeat, run it again
// and report the steady-state latency, the compile time and the peak memory.
#include "tools/smelt/ArtifactFile.h"
#include "tools/smelt/Cache.h"
#include "tools/smelt/Commands.h"
#include "tools/smelt/Inspect.h"
#include "tools/smelt/Measure.h"
#include "tools/smelt/ModelSource.h"
#include "tools/smelt/Placement.h"

#include "codegen/BuildExecutable.h"
#include "codegen/Compile.h"
#include "runtime/Artifact.h"
#include "runtime/Executor.h"
#include "runtime/FileIO.h"
#include "data/Npy.h"
#include "data/Safetensors.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/WithColor.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

namespace cl = llvm::cl;

namespace smelt::tools {

cl::SubCommand runSubcommand("run", "Compile a function of a .mlir module, or load a .smelt "
                                    "artifact, and run it");
static DeviceFlags deviceFlags(runSubcommand);
static CacheFlags cacheFlags(runSubcommand);
static ModelSourceFlags modelSource(runSubcommand);

static cl::opt<std::string> modelPath(cl::Positional,
                                      cl::desc("<model.mlir | model.mlirbc | model.onnx | "
                                               "model.smelt>"),
                                      cl::Required, cl::sub(runSubcommand),
                                      cl::cat(smeltCategory()));
static cl::list<std::string> inputSpecs(
    "input", cl::desc("An argument's value: NAME=FILE.npy, NAME being the argument's "
                      "smelt.name, argN, or its position N"),
    cl::value_desc("name=file.npy"), cl::sub(runSubcommand), cl::cat(smeltCategory()));
static cl::opt<std::string> outputDir(
    "output-dir", cl::desc("Write each result to DIR/<name>.npy (created if missing)"),
    cl::value_desc("dir"), cl::sub(runSubcommand), cl::cat(smeltCategory()));
static cl::opt<std::string> entryName(
    "entry", cl::desc("Function to run (default: @main, or the only function)"),
    cl::value_desc("name"), cl::sub(runSubcommand), cl::cat(smeltCategory()));
static cl::opt<std::string> dumpDir("dump-dir", cl::desc(kDumpDirHelp), cl::value_desc("dir"),
                                    cl::sub(runSubcommand), cl::cat(smeltCategory()));
static cl::opt<bool> memoryStats(
    "memory-stats",
    cl::desc("Print each device's peak bytes as compiled (smelt-assign-buffers) beside the "
             "peak this run measured"),
    cl::sub(runSubcommand), cl::cat(smeltCategory()));
static cl::opt<std::string> profilePath("profile", cl::desc(kProfileHelp),
                                        cl::value_desc("trace.json"), cl::sub(runSubcommand),
                                        cl::cat(smeltCategory()));

static cl::opt<std::string> expectSha256(
    "expect-sha256",
    cl::desc("Run the .smelt artifact only if its SHA-256 is this (64 hex digits, as `smelt "
             "compile` and sha256sum print it): an artifact is native code"),
    cl::value_desc("hex"), cl::sub(runSubcommand), cl::cat(smeltCategory()));

static cl::opt<std::string> paramsPath(
    "params",
    cl::desc("Arguments by name from a safetensors file (a checkpoint): each tensor feeds the "
             "argument of the same name, --input the others; a tensor that names no argument "
             "is an error"),
    cl::value_desc("file.safetensors"), cl::sub(runSubcommand), cl::cat(smeltCategory()));

static cl::opt<int> repeat(
    "repeat",
    cl::desc("After the run, N more timed runs on the same inputs (after --warmup untimed "
             "ones): prints the median, min and max latency, the compile (or load) time and "
             "the peak resident memory"),
    cl::value_desc("N"), cl::init(0), cl::sub(runSubcommand), cl::cat(smeltCategory()));
static cl::opt<int> warmup("warmup", cl::desc("Untimed runs before --repeat's (default 3)"),
                           cl::value_desc("W"), cl::init(3), cl::sub(runSubcommand),
                           cl::cat(smeltCategory()));

/// The tensors of --params, read by runCommand before anything else.
static data::Checkpoint params;

/// Where an argument's value comes from: a .npy file (--input) or a tensor of --params.
struct InputSource {
  std::string file;
  /// Moved into the run's inputs: each feeds one argument.
  rt::HostTensor *param = nullptr;
  /// For messages: the file, or "<params file>: tensor 'w'".
  std::string what;
};

/// The names, or "none"; past 10, the first 10 and how many more (a file of 100,000 stray
/// tensors made a message of a megabyte).
static std::string listOrNone(const std::vector<std::string> &names) {
  constexpr size_t kListed = 10;
  std::string list;
  for (size_t i = 0; i < names.size() && i < kListed; ++i)
    list += (i ? ", " : "") + names[i];
  if (names.size() > kListed)
    list += " and " + std::to_string(names.size() - kListed) + " more";
  return list.empty() ? "none" : list;
}

/// Each argument's source: the --params tensor of its name or the `--input` naming it; every
/// argument needs exactly one.
static rt::Expected<std::vector<InputSource>> inputSources(const std::string &function,
                                                           const std::vector<std::string> &args) {
  size_t count = args.size();
  std::vector<InputSource> sources(count);
  std::vector<std::string> unknown;
  for (data::NamedTensor &t : params.tensors) {
    auto it = std::find(args.begin(), args.end(), t.name);
    if (it == args.end())
      unknown.push_back("'" + t.name + "'");
    else
      sources[size_t(it - args.begin())] = {"", &t.tensor,
                                            paramsPath + ": tensor '" + t.name + "'"};
  }
  if (!unknown.empty())
    return rt::Status::error("--params " + paramsPath + ": tensors " + listOrNone(unknown) +
                             " name no argument of @" + function + " (its arguments: " +
                             listOrNone(args) + ")");
  for (const std::string &spec : inputSpecs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      return rt::Status::error("--input '" + spec + "' must be NAME=FILE.npy");
    std::string name = spec.substr(0, eq), file = spec.substr(eq + 1);
    std::optional<size_t> index;
    for (size_t i = 0; i < count && !index; ++i)
      if (args[i] == name || "arg" + std::to_string(i) == name || std::to_string(i) == name)
        index = i;
    if (!index)
      return rt::Status::error("--input " + spec + ": @" + function + " has no argument '" +
                               name + "' (its arguments: " + listOrNone(args) + ")");
    if (sources[*index].param)
      return rt::Status::error("--input " + spec + ": argument '" + name +
                               "' is also a tensor of --params " + paramsPath);
    if (!sources[*index].file.empty())
      return rt::Status::error("--input " + spec + ": argument '" + name + "' is given twice");
    sources[*index] = {file, nullptr, file};
  }
  for (size_t i = 0; i < count; ++i)
    if (sources[i].what.empty())
      return rt::Status::error("missing --input for argument '" + args[i] + "' (#" +
                               std::to_string(i) + ")" +
                               (paramsPath.empty() ? "" : ", and --params has no tensor of that name"));
  return sources;
}

/// --output-dir writes each result to DIR/<name>.npy, the names coming from the model file
/// (smelt.name): each must be a plain file name, so that no model writes outside DIR, and
/// unique, so that no result overwrites another.
static rt::Status checkOutputNames(const std::vector<std::string> &names) {
  std::set<std::string> seen;
  for (const std::string &name : names) {
    if (name.empty() || name == "." || name == ".." ||
        std::any_of(name.begin(), name.end(), [](char c) { return c == '/' || uint8_t(c) < 0x20; }))
      return rt::Status::error("--output-dir: result name '" + name + "' is not a plain file "
                               "name (no '/', not empty, '.' or '..'); rename it with smelt.name");
    if (!seen.insert(name).second)
      return rt::Status::error("--output-dir: two results are named '" + name +
                               "'; give each its own smelt.name");
  }
  return rt::Status();
}

/// What `smelt run` runs: an Executable, the names of its arguments and results, and how to
/// run its GPU steps.
struct Program {
  rt::Executable exe;
  std::vector<std::string> argNames, resultNames;
  rt::ExecutorOptions executor;
  /// What making `exe` took: "compile", "import and compile", "load", and " (JIT cache hit)".
  std::string prepared;
};

/// `smelt run model.mlir`: the function compiled now, or found in the JIT cache. Diagnostics
/// are printed; null on failure.
static std::optional<Program> compileModel(rt::Trace *profile) {
  mlir::MLIRContext context;
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  mlir::OwningOpRef<mlir::ModuleOp> module = modelSource.read(context, modelPath);
  if (!module)
    return std::nullopt;
  mlir::func::FuncOp function = codegen::findEntry(*module, entryName);
  if (!function)
    return std::nullopt;
  Program program;
  for (unsigned i = 0; i < function.getNumArguments(); ++i)
    program.argNames.push_back(codegen::argumentName(function, i));
  for (unsigned i = 0; i < function.getNumResults(); ++i)
    program.resultNames.push_back(codegen::resultName(function, i));
  // Before compiling: a wrong --input is reported without waiting for LLVM.
  if (rt::Expected<std::vector<InputSource>> sources =
          inputSources(function.getSymName().str(), program.argNames);
      !sources)
    return fail(sources.message()), std::nullopt;

  codegen::CompileOptions options = compileOptions(dumpDir, profile);
  options.pipeline = placementOptions(deviceFlags.logDevicePlacement, deviceFlags.strictPlacement);
  enableGpuExecution(options.pipeline, options, program.executor);
  options.cudaFmad = deviceFlags.cudaFmad;
  bool inspecting = !dumpDir.empty() || profile || deviceFlags.logDevicePlacement;
  bool cacheHit = false;
  mlir::FailureOr<std::shared_ptr<const codegen::CompiledArtifact>> artifact = compileCached(
      *module, function.getSymName(),
      cacheFlags.options(options, codegen::jitTarget(options), inspecting), &cacheHit);
  if (failed(artifact) ||
      failed(checkValuesFitDevices(function, options.pipeline, (*artifact)->executable)))
    return std::nullopt;
  program.exe = (*artifact)->executable;
  program.prepared = std::string(isOnnxFile(modelPath) ? "import and compile" : "compile") +
                     (cacheHit ? " (JIT cache hit)" : "");
  return program;
}

/// `smelt run model.smelt`: the Executable of an AOT artifact (`smelt compile`) with its CPU
/// code loaded; no MLIR and no LLVM. Arguments and results are named as the function named
/// them, which the artifact keeps.
static std::optional<Program> loadArtifact() {
  std::optional<rt::LoadedArtifact> artifact = loadArtifactFile(modelPath, entryName, expectSha256);
  if (!artifact)
    return std::nullopt;
  Program program{std::move(artifact->executable), {}, {}, {}, "load"};
  rt::Executable &exe = program.exe;
  // Steps compiled for a GPU run there when this machine has one; else on the CPU, whose code
  // every artifact carries, with the reason in the placement line.
  if (std::any_of(exe.steps.begin(), exe.steps.end(),
                  [](const rt::Step &step) { return step.device != "cpu:0"; })) {
    PipelineOptions here = placementOptions(/*logDevicePlacement=*/false,
                                            /*strictPlacement=*/false);
    codegen::CompileOptions unused;
    enableGpuExecution(here, unused, program.executor);
    if (!program.executor.gpuRunner) {
      exe = rt::movedToCpu(std::move(exe));
      exe.placement += " (no GPU here: " + here.noGpuReason + "; every step runs on cpu:0)";
    }
  }
  for (size_t i = 0; i < exe.inputs.size(); ++i)
    program.argNames.push_back(exe.inputName(i));
  for (size_t i = 0; i < exe.outputs.size(); ++i)
    program.resultNames.push_back(exe.outputName(i));
  return program;
}

/// Steady-state latency: `warmup` untimed runs, then `repeat` timed ones, on the same inputs.
/// Making the executable (`prepared`: "compile", ...) took `preparedSeconds`.
static int timeRuns(rt::Executor &executor, const std::vector<rt::HostTensor> &inputs,
                    const std::string &name, const std::string &prepared,
                    double preparedSeconds) {
  std::vector<rt::HostTensor> outputs;
  std::vector<double> ms;
  for (int run = 0; run < warmup + repeat; ++run) {
    auto start = std::chrono::steady_clock::now();
    if (rt::Status s = executor.run(inputs, outputs); !s.ok())
      return fail(s.message());
    if (run >= warmup)
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
  }
  llvm::outs() << llvm::format("latency: @%s: median %.3f ms, min %.3f, max %.3f over %d runs "
                               "(after %d warm-up)\n",
                               name.c_str(), median(ms), *std::min_element(ms.begin(), ms.end()),
                               *std::max_element(ms.begin(), ms.end()), int(repeat), int(warmup))
               << llvm::format("%s: %.3f s\n", prepared.c_str(), preparedSeconds)
               << llvm::format("peak resident memory: %.1f MiB\n",
                               double(peakResidentBytes()) / (1 << 20));
  return 0;
}

int runCommand() {
  if (std::string error = deviceFlags.memory.apply();
      !error.empty())
    return fail(error);
  // A FIFO or a device as the model would hang or read forever (isArtifactFile opens it).
  if (rt::Status s = rt::checkRegularFile(modelPath); !s.ok())
    return fail(s.message());
  if (!paramsPath.empty()) {
    rt::Expected<data::Checkpoint> read = data::readSafetensors(paramsPath);
    if (!read)
      return fail("--params: " + read.message());
    params = std::move(*read);
  }
  if (rt::Status s = rt::checkReplaceable(profilePath); !s.ok())
    return fail(s.message());
  rt::Trace trace;
  rt::Trace *profile = profilePath.empty() ? nullptr : &trace;
  if (repeat < 0 || warmup < 0)
    return fail("--repeat and --warmup must be at least 0");
  bool artifact = rt::isArtifactFile(modelPath);
  if (!expectSha256.empty() && !artifact)
    return fail("--expect-sha256: " + modelPath + " is not a .smelt artifact; the pin is for "
                "artifacts, which carry native code (a .mlir model is compiled here)");
  auto compileStart = std::chrono::steady_clock::now();
  std::optional<Program> program = artifact ? loadArtifact() : compileModel(profile);
  if (!program)
    return 1;
  double compileSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - compileStart).count();
  const std::vector<std::string> &resultNames = program->resultNames;
  if (rt::Status s = checkOutputNames(resultNames); !outputDir.empty() && !s.ok())
    return fail(s.message());
  rt::Expected<std::vector<InputSource>> sources =
      inputSources(program->exe.name, program->argNames);
  if (!sources)
    return fail(sources.message());
  const rt::Executable *exe = &program->exe;
  // One line on stderr, as TensorFlow logs placement: stdout stays the results.
  llvm::errs() << "placement: @" << exe->name << ": " << exe->placement << "\n";
  std::vector<rt::HostTensor> inputs;
  for (const InputSource &source : *sources) {
    if (source.param) {
      inputs.push_back(std::move(*source.param)); // not a second copy of the weights
      continue;
    }
    rt::Expected<rt::HostTensor> tensor = data::readNpy(source.file);
    if (!tensor)
      return fail(tensor.message());
    inputs.push_back(std::move(*tensor));
  }
  program->executor.trace = profile;
  program->executor.allowTf32 = deviceFlags.allowTf32;
  program->executor.cudaGraphs = deviceFlags.cudaGraphs;
  rt::Expected<std::unique_ptr<rt::Executor>> executor =
      rt::Executor::create(*exe, program->executor);
  if (!executor)
    return fail(executor.message());
  std::vector<rt::HostTensor> outputs;
  auto start = std::chrono::steady_clock::now();
  if (rt::Status s = (*executor)->run(inputs, outputs); !s.ok()) {
    // Name the file behind an input the executor rejected ("input #1 (x): ...").
    std::string message = s.message();
    for (size_t i = 0; i < sources->size(); ++i)
      if (message.rfind("input #" + std::to_string(i) + " ", 0) == 0)
        message = (*sources)[i].what + ": " + message;
    return fail(message);
  }
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                  .count();

  if (!outputDir.empty()) {
    if (std::error_code ec = llvm::sys::fs::create_directories(outputDir))
      return fail(outputDir + ": cannot create directory: " + ec.message());
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputDir.empty()) {
      llvm::outs() << resultNames[i] << ": " << outputs[i].type().str() << " "
                   << outputs[i].summary() << "\n";
      continue;
    }
    llvm::SmallString<256> path(outputDir);
    llvm::sys::path::append(path, resultNames[i] + ".npy");
    if (rt::Status s = data::writeNpy(path.str().str(), outputs[i]); !s.ok())
      return fail(s.message());
    llvm::outs() << "wrote " << path << " (" << outputs[i].type().str() << ")\n";
  }
  llvm::errs() << llvm::format("ran @%s: %zu steps in %.3f ms\n",
                               exe->name.c_str(), exe->steps.size(), ms);
  printMemoryReport(llvm::errs());
  if (memoryStats) {
    // The run's peak is its largest segment's: one per device.
    for (const auto &[device, bytes] : exe->peakBytes)
      llvm::errs() << "memory: @" << exe->name << " on " << device << ": " << bytes
                   << " bytes at peak as compiled\n";
    llvm::errs() << "memory: @" << exe->name << ": " << (*executor)->lastRunPeakBytes()
                 << " bytes at peak in this run (its largest device segment)\n";
  }
  if (profile && !writeProfile(trace, profilePath))
    return 1;
  if (repeat > 0)
    return timeRuns(**executor, inputs, exe->name, program->prepared, compileSeconds);
  return 0;
}

} // namespace smelt::tools
