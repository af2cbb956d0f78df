// `smelt import`: read an ONNX model and write it as a .mlir module in Smelt's dialect (one
// func.func @main) that `smelt compile`, `run` and `dump` take, and its weights as safetensors
// (--weights-out) for `smelt run --params` and `smelt train --init-params`. Shapes must be
// static: a symbolic dimension is fixed with --input-shape.
#include "tools/smelt/Commands.h"

#include "data/Safetensors.h"
#include "frontend/onnx/OnnxImport.h"
#include "runtime/FileIO.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

namespace smelt::tools {

cl::SubCommand importSubcommand("import", "Import an ONNX model (.onnx) as a .mlir module in "
                                          "Smelt's dialect");

static cl::opt<std::string> modelPath(cl::Positional, cl::desc("<model.onnx>"), cl::Required,
                                      cl::sub(importSubcommand), cl::cat(smeltCategory()));
static cl::opt<std::string> outputPath("o",
                                       cl::desc("The module to write: MLIR text, or MLIR "
                                                "bytecode when the name ends in .mlirbc"),
                                       cl::Required,
                                       cl::value_desc("model.mlir"), cl::sub(importSubcommand),
                                       cl::cat(smeltCategory()));
static cl::list<std::string> inputShapes(
    "input-shape",
    cl::desc("A graph input's static shape, replacing the model's (needed where it has "
             "symbolic dimensions): NAME=DxDx..., e.g. x=1x3x224x224; a scalar is NAME="),
    cl::value_desc("name=1x3x224x224"), cl::sub(importSubcommand), cl::cat(smeltCategory()));
static cl::opt<bool> initializersAsConstants(
    "initializers-as-constants",
    cl::desc("Make the model's initializers constants in the module instead of parameters "
             "(arguments marked smelt.param, named as in the model)"),
    cl::sub(importSubcommand), cl::cat(smeltCategory()));
static cl::opt<std::string> weightsPath(
    "weights-out",
    cl::desc("Also write the parameters' values (the model's float initializers) here as "
             "safetensors, named as the arguments: for smelt run --params and smelt train "
             "--init-params"),
    cl::value_desc("weights.safetensors"), cl::sub(importSubcommand), cl::cat(smeltCategory()));

/// The weights of `main`'s parameters, by their argument names, from the initializers' values.
static rt::Expected<data::Checkpoint>
parameterWeights(mlir::func::FuncOp main, std::map<std::string, rt::HostTensor> &values) {
  data::Checkpoint weights;
  for (unsigned i = 0; i < main.getNumArguments(); ++i) {
    auto name = main.getArgAttrOfType<mlir::StringAttr>(i, "smelt.name");
    if (!main.getArgAttr(i, "smelt.param") || !name)
      continue;
    auto value = values.find(name.str());
    if (value == values.end())
      return rt::Status::error("parameter '" + name.str() + "' has no initializer value");
    weights.tensors.push_back({name.str(), std::move(value->second)});
  }
  return weights;
}

int importCommand() {
  onnx::ImportOptions options;
  options.initializersAsConstants = initializersAsConstants;
  for (const std::string &spec : inputShapes)
    if (llvm::Error e = onnx::parseInputShape(spec, options))
      return fail(llvm::toString(std::move(e)));
  if (!weightsPath.empty() && initializersAsConstants)
    return fail("--weights-out with --initializers-as-constants: the weights are in the module "
                "then, there are no parameters to write");
  std::map<std::string, rt::HostTensor> values;
  if (!weightsPath.empty())
    options.parameterValues = &values;
  // Before importing: an output that is the model or the other output, -o /dev/full or a
  // directory fails now, not after the work.
  if (outputPath.empty())
    return fail("-o is empty: name the file to write");
  if (rt::Status s = rt::checkDistinctFiles(
          {{"the model", modelPath}, {"-o", outputPath}, {"--weights-out", weightsPath}});
      !s.ok())
    return fail(s.message());
  for (const std::string &output : {std::string(outputPath), std::string(weightsPath)})
    if (rt::Status s = output.empty() ? rt::Status() : rt::checkReplaceable(output); !s.ok())
      return fail(s.message());
  mlir::MLIRContext context;
  llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> module =
      onnx::importModel(modelPath, options, context);
  if (!module)
    return fail(llvm::toString(module.takeError()));
  // Streamed into the file: a model's weights are most of the module (a dense_resource blob
  // each, hex text in a .mlir, raw bytes in a .mlirbc).
  bool bytecode = llvm::StringRef(outputPath).ends_with(".mlirbc");
  rt::Status written = rt::writeFileAtomically(outputPath, [&](int fd, const std::string &tmp) {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/false);
    if (bytecode) {
      if (mlir::failed(mlir::writeBytecodeToFile(module->get(), os)))
        return rt::Status::error(tmp + ": cannot write the module as bytecode");
    } else {
      (*module)->print(os);
    }
    os.flush();
    if (os.has_error())
      return rt::Status::error(tmp + ": cannot write: " + os.error().message());
    return rt::Status();
  });
  if (!written.ok())
    return fail(written.message());
  auto main = (*module)->lookupSymbol<mlir::func::FuncOp>("main");
  llvm::outs() << "wrote " << outputPath << ": @main with " << main.getNumArguments()
               << " arguments and " << main.getNumResults() << " results\n";
  if (!weightsPath.empty()) {
    rt::Expected<data::Checkpoint> weights = parameterWeights(main, values);
    if (!weights)
      return fail(weights.message());
    if (rt::Status s = data::writeSafetensors(weightsPath, *weights); !s.ok())
      return fail(s.message());
    llvm::outs() << "wrote " << weightsPath << ": " << weights->tensors.size()
                 << " parameters\n";
  }
  return 0;
}

} // namespace smelt::tools
