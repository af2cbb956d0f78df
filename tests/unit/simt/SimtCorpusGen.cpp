// smelt-simt-corpus: writes the SIMT emulator's corpus into the build tree. Every kernel of the
// CUDA corpus (CudaCorpus.h: the fusion cases, every op in every dtype, the seed models' steps)
// (its fusions, and its argmax and scatter_add ops placed on a GPU, which have kernels of their
// own) is cloned into a function of one module (a function per case, per op corpus, per model
// step), each reading fresh arguments, its results returned. Then:
//   --mlir FILE    that module, which the test compiles with the CPU back end as the reference;
//   --source FILE  one C++ translation unit: SimtPrelude.h, the module's kernels rendered by
//                  codegen::renderCudaModule exactly as NVRTC would get them, and the table of
//                  SimtCorpus.h (names, launches, buffers);
//   --subset-source FILE --subset PREFIX,...  the same for the functions named PREFIX... only
//                  (the sanitized build compiles fewer kernels).
#include "CudaCorpus.h"

#include "codegen/BuildExecutable.h"
#include "codegen/Compile.h"
#include "codegen/FusionWalk.h"
#include "codegen/cuda/CudaRenderer.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <fstream>
#include <iostream>
#include <map>

using namespace mlir;
using namespace smelt;

namespace {

/// Adds @name to `into`: the clones of `ops` (fusions, and ops with a kernel of their own),
/// each reading its own arguments, all results returned.
void addFunction(ModuleOp into, const std::string &name, ArrayRef<Operation *> ops) {
  SmallVector<Type> inputs, results;
  for (Operation *op : ops) {
    llvm::append_range(inputs, op->getOperandTypes());
    llvm::append_range(results, op->getResultTypes());
  }
  OpBuilder b = OpBuilder::atBlockEnd(into.getBody());
  auto function =
      func::FuncOp::create(b, into.getLoc(), name, b.getFunctionType(inputs, results));
  Block *entry = function.addEntryBlock();
  b.setInsertionPointToEnd(entry);
  SmallVector<Value> returned;
  unsigned next = 0;
  for (Operation *op : ops) {
    IRMapping mapping;
    for (Value input : op->getOperands())
      mapping.map(input, entry->getArgument(next++));
    Operation *clone = b.clone(*op, mapping);
    // Offsets into the model step's arena, which the new function does not share.
    clone->removeAttr("smelt.arena_offsets");
    llvm::append_range(returned, clone->getResults());
  }
  func::ReturnOp::create(b, into.getLoc(), returned);
}

/// The kernel ops of the first function of `text` (codegen::kernelOpsInOrder).
std::vector<Operation *> parseKernelOps(MLIRContext &context, const std::string &text,
                                        std::vector<OwningOpRef<ModuleOp>> &keep) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  if (!module)
    return {};
  std::vector<Operation *> ops = codegen::kernelOpsInOrder(*module->getOps<func::FuncOp>().begin());
  keep.push_back(std::move(module));
  return ops;
}

/// The corpus module: one function per group of kernels, named for the group.
OwningOpRef<ModuleOp> buildCorpus(MLIRContext &context) {
  OwningOpRef<ModuleOp> corpus = ModuleOp::create(UnknownLoc::get(&context));
  std::vector<OwningOpRef<ModuleOp>> sources; // the fusions cloned live in these
  cuda_test::OpCorpus ops = cuda_test::everyOpInEveryDtype();
  std::vector<Operation *> opFusions = parseKernelOps(context, ops.mlir, sources);
  if (int(opFusions.size()) != ops.fusions)
    return nullptr;
  addFunction(*corpus, "ops", opFusions);
  for (const cuda_test::FusionCase &c : cuda_test::fusionCases()) {
    std::vector<Operation *> fusions = parseKernelOps(context, c.mlir, sources);
    if (fusions.empty())
      return nullptr;
    addFunction(*corpus, std::string("case_") + c.name, fusions);
  }
  for (const cuda_test::ModelCase &c : cuda_test::modelCases()) {
    std::vector<OwningOpRef<ModuleOp>> steps = cuda_test::fusedModelSteps(context, c);
    if (steps.empty())
      return nullptr;
    for (OwningOpRef<ModuleOp> &step : steps)
      for (auto function : step->getOps<func::FuncOp>()) {
        std::vector<Operation *> fusions = codegen::kernelOpsInOrder(function);
        if (!fusions.empty())
          addFunction(*corpus, cuda_test::modelCaseName(c) + "_" + function.getSymName().str(),
                      fusions);
      }
  }
  if (failed(verify(*corpus)))
    return nullptr;
  return corpus;
}

/// The translation unit of the functions of `corpus` whose names start with one of `prefixes`
/// (all of them when empty).
std::string translationUnit(ModuleOp corpus, const std::vector<std::string> &prefixes) {
  std::vector<Operation *> ops;
  std::vector<rt::FusedKernel> kernels;
  std::vector<std::string> functions; // of each kernel
  for (auto function : corpus.getOps<func::FuncOp>()) {
    std::string name = function.getSymName().str();
    if (!prefixes.empty() && llvm::none_of(prefixes, [&](const std::string &prefix) {
          return llvm::StringRef(name).starts_with(prefix);
        }))
      continue;
    for (auto [i, op] : llvm::enumerate(codegen::kernelOpsInOrder(function))) {
      ops.push_back(op);
      kernels.push_back(codegen::describeKernel(op, codegen::kernelName(function, op, i)));
      functions.push_back(name);
    }
  }
  std::string text = "// Generated by smelt-simt-corpus (tests/unit/simt/SimtCorpusGen.cpp) from "
                     "the CUDA corpus: do not edit.\n"
                     "#include \"SimtCorpus.h\"\n#include \"SimtPrelude.h\"\n\n";
  text += codegen::renderCudaModule(ops, kernels);
  text += "\n// ---- The table (SimtCorpus.h) ----\n"
          "const std::vector<smelt::simt::CorpusKernel> &smelt::simt::corpus() {\n"
          "  static const std::vector<CorpusKernel> kernels = {\n";
  for (auto [k, op] : llvm::enumerate(ops)) {
    const rt::FusedKernel &kernel = kernels[k];
    std::string args;
    for (Value value : llvm::concat<const Value>(op->getOperands(), op->getResults())) {
      std::string dtype(rt::dtypeName(codegen::elementDType(value)));
      int64_t elements = cast<RankedTensorType>(value.getType()).getNumElements();
      args += (args.empty() ? "{\"" : ", {\"") + dtype + "\", " + std::to_string(elements) + "}";
    }
    text += "      {\"" + functions[k] + "\", \"" + kernel.name + "\", " +
            std::to_string(kernel.cudaGrid) + ", " + std::to_string(kernel.cudaBlock) + ", " +
            std::to_string(op->getNumOperands()) + ", {" + args + "}, parameterCount(&" +
            kernel.name + "), callKernel<&" + kernel.name + ">},\n";
  }
  return text + "  };\n  return kernels;\n}\n";
}

bool writeFile(const std::string &path, const std::string &text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out)
    std::cerr << "smelt-simt-corpus: cannot write " << path << "\n";
  return bool(out);
}

} // namespace

int main(int argc, char **argv) {
  std::map<std::string, std::string> options;
  for (int i = 1; i + 1 < argc; i += 2)
    options[argv[i]] = argv[i + 1];
  if (argc % 2 != 1 || !options.count("--source") || !options.count("--mlir")) {
    std::cerr << "usage: smelt-simt-corpus --source FILE.cpp --mlir FILE.mlir "
                 "[--subset-source FILE.cpp --subset PREFIX,...]\n";
    return 2;
  }
  MLIRContext context;
  codegen::loadDialects(context);
  OwningOpRef<ModuleOp> corpus = buildCorpus(context); // diagnostics go to stderr
  if (!corpus) {
    std::cerr << "smelt-simt-corpus: the corpus does not build\n";
    return 1;
  }
  std::string mlir;
  llvm::raw_string_ostream os(mlir);
  corpus->print(os);
  if (!writeFile(options["--mlir"], mlir) ||
      !writeFile(options["--source"], translationUnit(*corpus, {})))
    return 1;
  if (options.count("--subset-source")) {
    SmallVector<StringRef> prefixes;
    llvm::SplitString(options["--subset"], prefixes, ",");
    std::vector<std::string> subset(prefixes.begin(), prefixes.end());
    if (!writeFile(options["--subset-source"], translationUnit(*corpus, subset)))
      return 1;
  }
  return 0;
}
