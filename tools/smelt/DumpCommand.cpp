// `smelt dump`: compile one function of a .mlir module or an .onnx model for a target and write
// what the compiler
// did into a dump directory (CompileDump.h) without running anything: IR after every pass, the
// fusion report, the graph, the executable plan, LLVM IR, CUDA source and PTX. For a .smelt
// artifact, what it holds: the plan, its CUDA source and PTX, and its CPU code as a library.
#include "tools/smelt/ArtifactFile.h"
#include "tools/smelt/Commands.h"
#include "tools/smelt/ModuleFile.h"
#include "tools/smelt/Inspect.h"

#include "codegen/Compile.h"
#include "codegen/CompileDump.h"
#include "runtime/Artifact.h"
#include "runtime/FileIO.h"

#include "llvm/Support/WithColor.h"

namespace cl = llvm::cl;

namespace smelt::tools {

cl::SubCommand dumpSubcommand("dump", "Compile a function of a .mlir module or an .onnx model "
                                      "and write the IR after each pass, fusion report, graph "
                                      "and kernels");

static cl::opt<std::string>
    modelPath(cl::Positional, cl::desc("<model.mlir | model.mlirbc | model.onnx | model.smelt>"),
              cl::Required, cl::sub(dumpSubcommand), cl::cat(smeltCategory()));
static cl::opt<std::string> entryName(
    "entry", cl::desc("Function to compile (default: @main, or the only function)"),
    cl::value_desc("name"), cl::sub(dumpSubcommand), cl::cat(smeltCategory()));
static cl::opt<std::string> dumpDir("dump-dir", cl::desc(kDumpDirHelp), cl::value_desc("dir"),
                                    cl::init("smelt-dump"), cl::sub(dumpSubcommand),
                                    cl::cat(smeltCategory()));
static cl::opt<std::string> target(
    "target", cl::desc("cpu (every op on cpu:0) or cuda:<arch> such as cuda:sm_90 (ops on gpu:0 "
                       "where they have a GPU kernel; CUDA kernels for that arch)"),
    cl::init("cpu"), cl::sub(dumpSubcommand), cl::cat(smeltCategory()));

static ModelSourceFlags modelSource(dumpSubcommand);

/// The dump of an artifact: nothing is compiled, so no IR; the plan and code it carries.
static int dumpArtifact() {
  std::optional<rt::LoadedArtifact> artifact = readArtifactFile(modelPath, entryName);
  if (!artifact)
    return 1;
  const rt::Executable &exe = artifact->executable;
  rt::Expected<std::unique_ptr<codegen::CompileDump>> dump =
      codegen::CompileDump::create(dumpDir, exe.name);
  if (!dump)
    return fail(dump.message());
  std::string from = " (from " + modelPath + ", compiled for " + artifact->extras.target + ")";
  std::vector<std::pair<std::string, rt::Status>> written = {
      {"executable.txt", (*dump)->write("executable.txt", exe.str(), "executable plan" + from)}};
  if (exe.cuda) {
    written.push_back({"cuda-kernels.cu", (*dump)->write("cuda-kernels.cu", exe.cuda->source,
                                                         "cuda kernels (source for NVRTC)")});
    written.push_back({"cuda-kernels.ptx",
                       (*dump)->write("cuda-kernels.ptx", exe.cuda->ptx,
                                      "cuda kernels (ptx for " + exe.cuda->arch + ")")});
  }
  const std::vector<uint8_t> &library = artifact->extras.cpuObject;
  if (!library.empty())
    written.push_back({"cpu-kernels.so",
                       (*dump)->write("cpu-kernels.so", std::string(library.begin(), library.end()),
                                      "cpu kernels (the shared library; objdump -d shows them)")});
  for (const auto &[file, status] : written)
    if (!status.ok())
      return fail(status.message());
  (*dump)->setPeakBytes(exe.peakBytes);
  if (rt::Status s = (*dump)->finish(); !s.ok())
    return fail(s.message());
  llvm::outs() << "wrote " << (*dump)->directory() << " (@" << exe.name << from
               << "; manifest.json lists the files)\n";
  return 0;
}

int dumpCommand() {
  std::string arch = "sm_90";
  bool gpu = llvm::StringRef(target).starts_with("cuda:");
  if (gpu)
    arch = target.substr(5);
  if ((!gpu && target != "cpu") || !llvm::StringRef(arch).starts_with("sm_")) {
    llvm::WithColor::error(llvm::errs(), "smelt")
        << "--target=" << target << " is not cpu or cuda:sm_<NN> (cuda:sm_90)\n";
    return 1;
  }
  // "" would mean "no dump" to the compiler, and this command would say it wrote one.
  if (dumpDir.empty())
    return fail("--dump-dir is empty: name the directory to write the dump into");
  if (rt::Status s = rt::checkRegularFile(modelPath); !s.ok())
    return fail(s.message());
  if (rt::isArtifactFile(modelPath))
    return dumpArtifact();
  ModuleFile file(modelPath, modelSource);
  mlir::func::FuncOp function = file.entry(entryName);
  if (!function)
    return 1;

  codegen::CompileOptions options = compileOptions(dumpDir, nullptr, arch);
  if (gpu) {
    // Placement as on a machine with one GPU of that arch; no GPU is needed to compile for it.
    options.pipeline.devices = "cpu:0,gpu:0";
    options.pipeline.defaultDevice = "gpu:0";
  }
  // The dump names its own directory (DIR/<function>-<N>); keep it to tell the user.
  std::string directory;
  options.dumpWrittenTo = &directory;
  if (failed(codegen::compile(*file.module, function.getSymName(), options)))
    return 1;
  llvm::outs() << "wrote " << directory << " (@" << function.getSymName() << " for " << target
               << "; manifest.json lists the files)\n";
  return 0;
}

} // namespace smelt::tools
