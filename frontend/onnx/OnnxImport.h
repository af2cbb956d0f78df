// The ONNX importer's public API: read a ModelProto (.onnx file) and build a module holding one
// `func.func @main` in Smelt's dialect, from the ops Smelt already has. Graph inputs become
// arguments, initializers parameters (or constants), graph outputs results, each named as in
// the file (`smelt.name`). Shapes are static: taken from the model, or from
// ImportOptions::inputShapes where the model leaves a dimension symbolic.
//
//   mlir::MLIRContext ctx;
//   smelt::onnx::ImportOptions options;
//   options.inputShapes["x"] = {1, 3, 224, 224};
//   llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> module =
//       smelt::onnx::importModel("model.onnx", options, ctx);
//   if (!module) { llvm::errs() << llvm::toString(module.takeError()) << "\n"; ... }
//
// Nothing that does not map is guessed at: the error names the node (its name and index), the
// op type and the reason, and its ImportErrorKind says which kind of limit it hit.
//
// onnx/ImportInto.h builds a model inside a graph that is already being built (fine-tuning).
#pragma once

#include "frontend/DType.h"
#include "runtime/HostTensor.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace smelt::onnx {

/// A value's contents known at import time: an initializer, a Constant node, an input bound by
/// ImportOptions::constantInputs. Values are held as doubles (int64 beyond 2^53 rounds).
struct TensorValue {
  DType type = DType::f32;
  std::vector<int64_t> shape;
  std::vector<double> values; // row-major
};

struct ImportOptions {
  /// Shapes of graph inputs (`--input-shape name=1x3x224x224`); they replace the model's own,
  /// which must agree on the rank where it states one.
  std::map<std::string, std::vector<int64_t>> inputShapes;
  /// Initializers become `smelt.constant`s instead of `smelt.param` arguments.
  bool initializersAsConstants = false;
  /// Graph inputs whose value is fixed at import time (e.g. a Reshape's target shape that a
  /// model passes as an input): they become constants and leave the function's arguments.
  std::map<std::string, TensorValue> constantInputs;
  /// When set, receives the values of the initializers that became parameters, by name: the
  /// model's weights, which `smelt import --weights-out` writes for `smelt run --params` and
  /// `smelt train --init-params`. (A parameter no op reads is left out of the function, so
  /// take the names from its arguments.)
  std::map<std::string, rt::HostTensor> *parameterValues = nullptr;
};

/// Why an import failed: the kinds of limit an ONNX model can hit, for callers (the
/// conformance test) that tell "Smelt does not do this" from "this went wrong".
enum class ImportErrorKind {
  BadFile,             // unreadable, not a ModelProto, or an invalid model
  BadOption,           // an ImportOptions entry that does not fit the model
  UnsupportedOp,       // no mapping for the op type (or its domain)
  UnsupportedDtype,    // an element type Smelt does not have (uint8, string, ...)
  UnsupportedAttribute,// an attribute or input value the mapping does not cover
  DataDependentShape,  // a shape or index that would only be known at run time
  ControlFlow,         // If, Loop, Scan: subgraphs
  Internal,            // the dialect refused what the importer built: a bug
};
const char *kindName(ImportErrorKind kind);

/// The error importModel returns; `value` names the ONNX value at fault where there is one
/// (the input a DataDependentShape error needs as a constant).
class ImportError : public llvm::ErrorInfo<ImportError> {
public:
  static char ID;
  ImportError(ImportErrorKind kind, std::string message, std::string value = "")
      : kind(kind), message(std::move(message)), value(std::move(value)) {}
  void log(llvm::raw_ostream &os) const override { os << message; }
  std::error_code convertToErrorCode() const override { return llvm::inconvertibleErrorCode(); }

  ImportErrorKind kind;
  std::string message;
  std::string value;
};

/// Imports the model at `path` into a new module of `context`.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importModel(const std::string &path, const ImportOptions &options, mlir::MLIRContext &context);

/// A graph input of a model as the file declares it: a symbolic dimension is -1.
struct ModelInput {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype;
};
/// The graph inputs of the model at `path` that are not initializers, in the file's order.
llvm::Expected<std::vector<ModelInput>> modelInputs(const std::string &path);

/// The op types (default domain) the importer maps, sorted.
std::vector<std::string> supportedOps();

/// The op types the importer evaluates at import time when their inputs are known (constant
/// folding of shape arithmetic), sorted.
std::vector<std::string> foldedOps();

/// Reads a serialized TensorProto (the .pb files of ONNX's test data).
llvm::Expected<TensorValue> readTensorFile(const std::string &path);

/// A TensorValue as the runtime's tensor of the same type and shape: an input to run, or a
/// weight to write (`smelt import --weights-out`).
rt::HostTensor hostTensor(const TensorValue &value);

/// Parses `--input-shape` text "name=1x3x224x224" (a scalar: "name=") into `options`; the
/// error says what is wrong with `spec`.
llvm::Error parseInputShape(const std::string &spec, ImportOptions &options);

} // namespace smelt::onnx
