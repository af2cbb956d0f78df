// `smelt compile`: compile one function of a .mlir module, or of an ONNX model as exported,
// ahead of time into an artifact
// (runtime/Artifact.h) that `smelt run` or the runtime alone loads: the plan, its constants,
// the CPU kernels as a shared library and, for a CUDA target, the kernels' CUDA code too.
#include "tools/smelt/Cache.h"
#include "tools/smelt/Commands.h"
#include "tools/smelt/Inspect.h"
#include "tools/smelt/ModuleFile.h"

#include "llvm/Support/Format.h"

#include "codegen/BuildExecutable.h"
#include "codegen/CompileArtifact.h"
#include "runtime/ContentHash.h"
#include "runtime/FileIO.h"
#ifdef SMELT_HAVE_CUDA_CODEGEN
#include "codegen/cuda/CudaCodegen.h"
#endif

#include "llvm/Support/WithColor.h"

namespace cl = llvm::cl;

namespace smelt::tools {

cl::SubCommand compileSubcommand("compile",
                                 "Compile a function of a .mlir module or an .onnx model ahead of "
                                 "time into an artifact (.smelt) that `smelt run` runs");

static cl::opt<std::string> modelPath(cl::Positional,
                                      cl::desc("<model.mlir | model.mlirbc | model.onnx>"),
                                      cl::Required, cl::sub(compileSubcommand),
                                      cl::cat(smeltCategory()));
static cl::opt<std::string> outputPath("o", cl::desc("The artifact to write"), cl::Required,
                                       cl::value_desc("model.smelt"), cl::sub(compileSubcommand),
                                       cl::cat(smeltCategory()));
static cl::opt<std::string> target(
    "target",
    cl::desc("cpu (the CPU kernels as a shared library), or cuda:sm_XX (CUDA code for that "
             "arch, and the CPU library so that it also runs without a GPU)"),
    cl::init("cpu"), cl::value_desc("cpu|cuda:sm_XX"), cl::sub(compileSubcommand),
    cl::cat(smeltCategory()));
static cl::opt<bool> cudaFmad(
    "cuda-fmad",
    cl::desc("With a cuda: target, let NVRTC contract a multiply and an add into one FMA, "
             "rounded once (default: on). Off: rounded as the CPU kernels round"),
    cl::init(true), cl::sub(compileSubcommand), cl::cat(smeltCategory()));
static cl::opt<std::string> entryName(
    "entry", cl::desc("Function to compile (default: @main, or the only function)"),
    cl::value_desc("name"), cl::sub(compileSubcommand), cl::cat(smeltCategory()));
static cl::opt<std::string> profilePath("profile", cl::desc(kProfileHelp),
                                        cl::value_desc("trace.json"), cl::sub(compileSubcommand),
                                        cl::cat(smeltCategory()));
static CacheFlags cacheFlags(compileSubcommand);
static ModelSourceFlags modelSource(compileSubcommand);

int compileCommand() {
  codegen::CompileOptions options;
  // The target decides placement, not this machine: a CUDA artifact puts ops on gpu:0 (and
  // runs on the CPU where there is no GPU), a CPU one keeps everything on cpu:0.
  options.pipeline.devices = "cpu:0";
  options.pipeline.noGpuReason = "compiled for --target=" + target;
  options.cudaFmad = cudaFmad;
  llvm::StringRef arch = target;
  if (arch.consume_front("cuda:")) {
    if (!arch.starts_with("sm_") || arch.size() == 3)
      return fail("--target=" + target + ": a CUDA target names an arch, as in cuda:sm_90");
#ifdef SMELT_HAVE_CUDA_CODEGEN
    // compileArtifact compiles the GPU's kernels for `arch`, and the CPU's code for every
    // kernel, so the artifact also runs where there is no GPU.
    options.pipeline.devices = "cpu:0,gpu:0";
#else
    return fail("--target=" + target + ": this smelt was built without the CUDA back end");
#endif
  } else if (target != "cpu") {
    return fail("--target=" + target + ": unknown target (cpu, or cuda:sm_XX)");
  }

  // Before compiling: an output that is the model or the other output, -o /dev/full or a
  // directory fails now, not after the work.
  if (outputPath.empty())
    return fail("-o is empty: name the file to write");
  if (rt::Status s = rt::checkDistinctFiles(
          {{"the model", modelPath}, {"-o", outputPath}, {"--profile", profilePath}});
      !s.ok())
    return fail(s.message());
  if (rt::Status s = rt::checkReplaceable(outputPath); !s.ok())
    return fail(s.message());
  if (rt::Status s = rt::checkReplaceable(profilePath); !s.ok())
    return fail(s.message());
  // A profile shows the compile itself: a cache hit would show none, so it compiles again.
  rt::Trace trace;
  if (!profilePath.empty())
    options.trace = &trace;
  ModuleFile file(modelPath, modelSource);
  if (!file.module)
    return 1;
  // A cache entry is the artifact this command writes, for the same target and options.
  mlir::FailureOr<std::shared_ptr<const codegen::CompiledArtifact>> artifact = compileCached(
      *file.module, entryName,
      cacheFlags.options(options, target, /*inspecting=*/!profilePath.empty()));
  if (failed(artifact))
    return 1;
  rt::Expected<rt::EncodedArtifact> encoded =
      rt::encodeArtifactParts((*artifact)->executable, (*artifact)->extras);
  if (!encoded)
    return fail(outputPath + ": " + encoded.message());
  if (rt::Status s = rt::writeArtifact(outputPath, *encoded); !s.ok())
    return fail(s.message());
  const rt::Executable &exe = (*artifact)->executable;
  llvm::outs() << "wrote " << outputPath << ": @" << exe.name << " for " << target << ", "
               << exe.steps.size() << " steps, " << exe.kernels.size() << " fused kernels ("
               << (*artifact)->extras.cpuObject.size() << " bytes of CPU code"
               << (exe.cuda ? ", " + std::to_string(exe.cuda->cubin.size()) + " bytes of CUBIN"
                            : std::string())
               << ")\n";
  for (const auto &[device, peak] : exe.peakBytes)
    llvm::outs() << "peak memory on " << device << ": " << peak << " bytes ("
                 << llvm::format("%.2f", double(peak) / (1 << 20))
                 << " MiB, known at compile time)\n";
  // The artifact is native code: this hash lets whoever runs it pin exactly this file.
  llvm::outs() << "sha256 " << rt::sha256HexOfParts(encoded->parts())
               << " (smelt run --expect-sha256=... loads "
               << "only this file)\n";
  if (!profilePath.empty() && !writeProfile(trace, profilePath))
    return 1;
  return 0;
}

} // namespace smelt::tools
