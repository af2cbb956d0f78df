// `smelt bench`: kernel microbenchmarks of one compiled function (of a .mlir module or an
// .onnx model, or of a .smelt artifact as it was compiled). Random inputs (never zero,
// from --seed), W warm-up runs, then N timed runs; per step (fused kernel, library call, copy)
// the median time, bytes moved, GB/s, FLOP/s and the percentage of the roofline (Roofline.h),
// with the fusion's ops and the source location it came from; then the whole run's wall time
// beside the sum of its steps, so that time spent between steps shows, with the whole runs'
// min and max, the compile time and the peak resident memory. --json prints the same for
// scripts.
#include "tools/smelt/ArtifactFile.h"
#include "tools/smelt/Cache.h"
#include "tools/smelt/Commands.h"
#include "tools/smelt/Measure.h"
#include "tools/smelt/ModuleFile.h"
#include "tools/smelt/Placement.h"
#include "tools/smelt/Roofline.h"

#include "codegen/Compile.h"
#include "runtime/CpuExecutor.h"
#include "runtime/FileIO.h"
#include "runtime/StepCost.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/WithColor.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <random>

namespace cl = llvm::cl;

namespace smelt::tools {

cl::SubCommand benchSubcommand("bench", "Time each kernel and library call of a compiled "
                                        "function against this machine's roofline");

static cl::opt<std::string> modelPath(cl::Positional,
                                      cl::desc("<model.mlir | model.mlirbc | model.onnx | "
                                               "model.smelt>"),
                                      cl::Required, cl::sub(benchSubcommand),
                                      cl::cat(smeltCategory()));
static cl::opt<std::string> entryName(
    "entry", cl::desc("Function to benchmark (default: @main, or the only function)"),
    cl::value_desc("name"), cl::sub(benchSubcommand), cl::cat(smeltCategory()));
static cl::opt<int> repeat("repeat", cl::desc("Timed runs; each step's median is reported"),
                           cl::init(20), cl::sub(benchSubcommand), cl::cat(smeltCategory()));
static cl::opt<int> warmup("warmup", cl::desc("Untimed runs first (caches, threads, oneDNN)"),
                           cl::init(3), cl::sub(benchSubcommand), cl::cat(smeltCategory()));
static cl::opt<unsigned long long> seed("seed", cl::desc("Seed of the random inputs"),
                                        cl::init(0), cl::sub(benchSubcommand),
                                        cl::cat(smeltCategory()));
static cl::opt<bool> json("json", cl::desc("Print the results as JSON"),
                          cl::sub(benchSubcommand), cl::cat(smeltCategory()));
static CacheFlags cacheFlags(benchSubcommand);
static ModelSourceFlags modelSource(benchSubcommand);

namespace {

/// Values in +-[0.5, 1.5) (integers 1..3, booleans true): never zero, so no step runs on a
/// shortcut (a zero divisor, a multiply the hardware skips) that real data would not take.
rt::HostTensor randomInput(const rt::TensorType &type, std::mt19937_64 &rng) {
  std::vector<double> values(size_t(type.numElements()));
  std::uniform_real_distribution<double> magnitude(0.5, 1.5);
  std::uniform_int_distribution<int> small(1, 3), sign(0, 1);
  for (double &v : values) {
    if (type.dtype == rt::DType::i1)
      v = 1;
    else if (rt::isFloat(type.dtype))
      v = (sign(rng) ? 1 : -1) * magnitude(rng);
    else
      v = small(rng);
  }
  return rt::HostTensor::fromDoubles(type, values);
}

/// The whole run against its parts: the steps' medians added up, the median wall time of
/// Executor::run (inputs in, every step, outputs out), and what lies between them.
struct Totals {
  double stepsSum = 0;  // the sum of the per-step medians
  double runSum = 0;    // the median over runs of each run's step times added up
  double wall = 0;      // the median wall time of a whole run
  double wallMin = 0, wallMax = 0;
  double compileSeconds = 0; // making the executable: import, compile or load
  double between() const { return wall - stepsSum; }
};

struct Row {
  rt::StepCost cost;
  double micros = 0;
  double gbPerSecond() const { return micros > 0 ? cost.bytes / (micros * 1e3) : 0; }
  double gflopPerSecond() const { return micros > 0 ? cost.flops / (micros * 1e3) : 0; }
};

std::string bytesText(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 3)
    bytes /= 1024, ++unit;
  return llvm::formatv(unit ? "{0:f1} {1}" : "{0:f0} {1}", bytes, units[unit]).str();
}

std::string origin(const rt::StepCost &cost) {
  return cost.location.empty() ? cost.ops : cost.ops + " at " + cost.location;
}

void printTable(const std::string &function, const std::vector<Row> &rows, const Totals &totals,
                const Roofline &roof) {
  llvm::outs() << llvm::format("@%s: %zu steps, median of %d runs after %d warm-up (seed %llu)\n",
                               function.c_str(), rows.size(), int(repeat), int(warmup),
                               (unsigned long long)seed)
               << llvm::format("roofs: copy %.1f GB/s (%s), %.1f GFLOP/s (%s)\n\n",
                               roof.copyBytesPerSecond * 1e-9, roof.copyWhat.c_str(),
                               roof.gemmFlopsPerSecond * 1e-9, roof.gemmWhat.c_str());
  llvm::outs() << llvm::format("%4s  %-7s  %-16s %10s %10s %8s %9s %8s  %s\n", "step", "kind",
                               "name", "median us", "bytes", "GB/s", "GFLOP/s", "roofline",
                               "from");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row &r = rows[i];
    llvm::outs() << llvm::format("%4zu  %-7s  %-16s %10.1f %10s %8.2f %9.2f %7.1f%%  %s\n", i,
                                 r.cost.kind.c_str(), r.cost.name.c_str(), r.micros,
                                 bytesText(r.cost.bytes).c_str(), r.gbPerSecond(),
                                 r.gflopPerSecond(), roof.percent(r.cost, r.micros),
                                 origin(r.cost).c_str());
  }
  // Each line names what it adds up, so that the three are not read as one another.
  llvm::outs() << llvm::format("%4s  %-7s  %-16s %10.1f  the step medians above\n", "", "sum", "",
                               totals.stepsSum)
               << llvm::format("%4s  %-7s  %-16s %10.1f  median of whole runs (inputs in, "
                               "outputs out)\n",
                               "", "wall", "", totals.wall)
               << llvm::format("%4s  %-7s  %-16s %10.1f  wall - sum: time outside the steps "
                               "(%.1f%% of wall)\n",
                               "", "between", "", totals.between(),
                               totals.wall > 0 ? 100 * totals.between() / totals.wall : 0.0)
               << llvm::format("\nwhole runs: median %.1f us, min %.1f, max %.1f; compile %.3f s; "
                               "peak resident memory %.1f MiB\n",
                               totals.wall, totals.wallMin, totals.wallMax, totals.compileSeconds,
                               double(peakResidentBytes()) / (1 << 20));
}

void printJson(const std::string &function, const std::vector<Row> &rows, const Totals &totals,
               const Roofline &roof) {
  nlohmann::json steps = nlohmann::json::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row &r = rows[i];
    steps.push_back({{"step", i}, {"kind", r.cost.kind}, {"name", r.cost.name},
                     {"ops", r.cost.ops}, {"location", r.cost.location},
                     {"shapes", r.cost.shapes}, {"median_us", r.micros},
                     {"bytes", r.cost.bytes}, {"flops", r.cost.flops},
                     {"gb_per_s", r.gbPerSecond()}, {"gflop_per_s", r.gflopPerSecond()},
                     {"roofline_percent", roof.percent(r.cost, r.micros)}});
  }
  nlohmann::json out = {{"function", function},
                        {"runs", int(repeat)},
                        {"warmup", int(warmup)},
                        {"seed", (unsigned long long)seed},
                        {"copy_gb_per_s", roof.copyBytesPerSecond * 1e-9},
                        {"copy_measured", roof.copyWhat},
                        {"gemm_gflop_per_s", roof.gemmFlopsPerSecond * 1e-9},
                        {"gemm_measured", roof.gemmWhat},
                        {"steps", steps},
                        {"total_median_us", totals.runSum},
                        {"steps_sum_us", totals.stepsSum},
                        {"wall_median_us", totals.wall},
                        {"between_steps_us", totals.between()},
                        {"wall_min_us", totals.wallMin},
                        {"wall_max_us", totals.wallMax},
                        {"compile_s", totals.compileSeconds},
                        {"peak_resident_bytes", peakResidentBytes()}};
  llvm::outs() << out.dump(2) << "\n";
}

/// Benchmarks `exe` (compiled here, or loaded from an artifact) and prints the results.
int benchExecutable(const rt::Executable *exe, mlir::MLIRContext &context,
                    double compileSeconds) {
  const std::string &name = exe->name;
  rt::Expected<rt::CpuExecutor> executor = rt::CpuExecutor::create(*exe);
  if (!executor)
    return fail(executor.message());
  // The roofline's own buffers are the machine's measurement, not the model's memory.
  size_t peakBefore = peakResidentBytes();
  rt::Expected<Roofline> roof = measureRoofline(context);
  if (!roof)
    return fail(roof.message());
  leaveOutOfPeak(peakBefore);

  std::mt19937_64 rng(seed);
  std::vector<rt::HostTensor> inputs, outputs;
  for (rt::BufferId id : exe->inputs)
    inputs.push_back(randomInput(exe->buffers[id].type, rng));
  size_t steps = exe->steps.size();
  std::vector<std::vector<double>> times(steps);
  std::vector<double> runSums, walls;
  for (int run = 0; run < warmup + repeat; ++run) {
    auto start = std::chrono::steady_clock::now();
    if (rt::Status s = executor->run(inputs, outputs); !s.ok())
      return fail(s.message());
    double wall = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() -
                                                            start)
                      .count();
    if (run < warmup)
      continue;
    walls.push_back(wall);
    const std::vector<double> &micros = executor->lastStepMicros();
    double total = 0;
    for (size_t s = 0; s < steps; ++s) {
      times[s].push_back(micros[s]);
      total += micros[s];
    }
    runSums.push_back(total);
  }
  std::vector<Row> rows;
  Totals totals{0, median(runSums), median(walls), *std::min_element(walls.begin(), walls.end()),
                *std::max_element(walls.begin(), walls.end()), compileSeconds};
  for (size_t s = 0; s < steps; ++s) {
    rows.push_back({rt::stepCost(*exe, exe->steps[s]), median(times[s])});
    totals.stepsSum += rows.back().micros;
  }
  if (json)
    printJson(name, rows, totals, *roof);
  else
    printTable(name, rows, totals, *roof);
  return 0;
}

} // namespace

int benchCommand() {
  if (repeat < 1 || warmup < 0)
    return fail("--repeat must be at least 1 and --warmup at least 0");
  if (rt::Status s = rt::checkRegularFile(modelPath); !s.ok())
    return fail(s.message());
  auto start = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  // An artifact runs as compiled; its steps all run on the CPU here, which its code covers.
  if (rt::isArtifactFile(modelPath)) {
    std::optional<rt::LoadedArtifact> artifact = loadArtifactFile(modelPath, entryName);
    if (!artifact)
      return 1;
    artifact->executable = rt::movedToCpu(std::move(artifact->executable));
    mlir::MLIRContext context;
    return benchExecutable(&artifact->executable, context, seconds());
  }
  ModuleFile file(modelPath, modelSource);
  mlir::func::FuncOp function = file.entry(entryName);
  if (!function)
    return 1;
  mlir::FailureOr<std::shared_ptr<const codegen::CompiledArtifact>> artifact =
      compileCached(*file.module, function.getSymName().str(),
                    cacheFlags.options({}, "cpu", /*inspecting=*/false));
  if (failed(artifact) ||
      failed(checkValuesFitDevices(function, PipelineOptions{}, (*artifact)->executable)))
    return 1;
  return benchExecutable(&(*artifact)->executable, file.context, seconds());
}

} // namespace smelt::tools
