// importModel: reads the ModelProto, turns graph inputs, initializers and nodes (in the file's
// order, which ONNX requires to be topological) into one function, and turns every failure
// into an ImportError naming the file and, for a node, its index, name and op type.
#include "frontend/onnx/ExternalData.h"
#include "frontend/onnx/NodeImporter.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"

#include <set>

namespace smelt::onnx {

char ImportError::ID = 0;

const char *kindName(ImportErrorKind kind) {
  switch (kind) {
  case ImportErrorKind::BadFile:
    return "bad file";
  case ImportErrorKind::BadOption:
    return "bad option";
  case ImportErrorKind::UnsupportedOp:
    return "unsupported op";
  case ImportErrorKind::UnsupportedDtype:
    return "unsupported dtype";
  case ImportErrorKind::UnsupportedAttribute:
    return "unsupported attribute value";
  case ImportErrorKind::DataDependentShape:
    return "data-dependent shape";
  case ImportErrorKind::ControlFlow:
    return "control flow";
  case ImportErrorKind::Internal:
    return "internal error";
  }
  return "error";
}

static bool isDefaultDomain(const std::string &domain) {
  return domain.empty() || domain == "ai.onnx";
}

static ::onnx::ModelProto readModel(const std::string &path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!file)
    fail(ImportErrorKind::BadFile, "cannot read the file: " + file.getError().message());
  ::onnx::ModelProto model;
  llvm::StringRef bytes = (*file)->getBuffer();
  if (bytes.size() > size_t(INT32_MAX) || !model.ParseFromArray(bytes.data(), int(bytes.size())))
    fail(ImportErrorKind::BadFile, "not an ONNX model: the protobuf does not parse (a "
                                   "truncated or corrupt file?)");
  // An empty file parses as an empty message: a model needs a graph and an opset.
  if (!model.has_graph() || model.opset_import_size() == 0)
    fail(ImportErrorKind::BadFile, "not an ONNX model: no graph or no opset_import");
  return model;
}

/// The shape of graph input `info`: --input-shape's, else the model's static one.
static std::vector<int64_t> inputShape(const ::onnx::ValueInfoProto &info,
                                       const ImportOptions &options) {
  const ::onnx::TypeProto_Tensor &type = info.type().tensor_type();
  auto given = options.inputShapes.find(info.name());
  if (given != options.inputShapes.end()) {
    if (type.has_shape() && type.shape().dim_size() != int(given->second.size()))
      fail(ImportErrorKind::BadOption,
           "--input-shape " + info.name() + " has rank " + std::to_string(given->second.size()) +
               " but the model's input has rank " + std::to_string(type.shape().dim_size()));
    return given->second;
  }
  if (!type.has_shape())
    fail(ImportErrorKind::DataDependentShape,
         "input '" + info.name() + "' has no shape in the model; give it with --input-shape " +
             info.name() + "=DxDx...",
         info.name());
  std::vector<int64_t> shape;
  for (const ::onnx::TensorShapeProto_Dimension &d : type.shape().dim()) {
    if (!d.has_dim_value() || d.dim_value() < 0)
      fail(ImportErrorKind::DataDependentShape,
           "input '" + info.name() + "' has a symbolic dimension" +
               (d.has_dim_param() ? " '" + d.dim_param() + "'" : std::string()) +
               "; give its shape with --input-shape " + info.name() + "=DxDx...",
           info.name());
    shape.push_back(d.dim_value());
  }
  return shape;
}

/// Initializers up to this many elements are read as known values, which shape arithmetic
/// folds; larger ones keep the file's bytes.
constexpr int64_t kMaxKnownInitializer = int64_t(1) << 16;

/// The element type of graph input `info`, which must be a tensor of a type Smelt has.
static DType inputType(const ::onnx::ValueInfoProto &info) {
  if (!info.type().has_tensor_type())
    fail(ImportErrorKind::UnsupportedDtype,
         "input '" + info.name() + "' is not a tensor (a sequence, map or optional)");
  int elemType = info.type().tensor_type().elem_type();
  std::optional<DType> dtype = smeltDType(elemType);
  if (!dtype)
    fail(ImportErrorKind::UnsupportedDtype, "input '" + info.name() + "' has element type " +
                                                onnxTypeName(elemType) +
                                                ", which Smelt does not have");
  return *dtype;
}

/// The tensor `binding` gives graph input `info`, checked against what the model declares.
static Tensor boundInput(Graph &g, const ::onnx::ValueInfoProto &info,
                         const GraphBinding &binding) {
  auto it = binding.inputs.find(info.name());
  if (it == binding.inputs.end()) {
    std::string bound;
    for (const auto &[name, tensor] : binding.inputs)
      bound += (bound.empty() ? "'" : ", '") + name + "'";
    fail(ImportErrorKind::BadOption, "input '" + info.name() +
                                         "' of the model is not bound (the binding names " +
                                         (bound.empty() ? "none" : bound) + ")");
  }
  Tensor t = it->second;
  std::string what = "input '" + info.name() + "'";
  if (&t.graph() != &g)
    fail(ImportErrorKind::BadOption, what + " is bound to a tensor of another graph");
  if (DType dtype = inputType(info); dtype != t.dtype())
    fail(ImportErrorKind::BadOption, what + " is " + dtypeName(dtype) +
                                         " in the model, the bound tensor " + dtypeName(t.dtype()));
  const ::onnx::TypeProto_Tensor &type = info.type().tensor_type();
  bool fits = !type.has_shape() || type.shape().dim_size() == int(t.rank());
  for (int d = 0; fits && type.has_shape() && d < type.shape().dim_size(); ++d)
    fits = !type.shape().dim(d).has_dim_value() || type.shape().dim(d).dim_value() == t.dim(d);
  if (!fits) {
    std::string declared;
    for (const ::onnx::TensorShapeProto_Dimension &d : type.shape().dim())
      declared += (declared.empty() ? "" : "x") + (d.has_dim_value() ? std::to_string(d.dim_value())
                                                   : d.dim_param().empty() ? "?"
                                                                           : d.dim_param());
    fail(ImportErrorKind::BadOption,
         what + " is [" + declared + "] in the model, the bound tensor " + shapeString(t.shape()));
  }
  return t;
}

/// The initializers BatchNormalization nodes read as running statistics (inputs 3 and 4):
/// importInto makes them variables.
static std::set<std::string> runningStatistics(const ::onnx::GraphProto &graph) {
  std::set<std::string> names;
  for (const ::onnx::NodeProto &node : graph.node())
    if (node.op_type() == "BatchNormalization")
      for (int i = 3; i < std::min(node.input_size(), 5); ++i)
        names.insert(node.input(i));
  return names;
}

/// The graph's inputs and initializers as arguments (or `binding`'s tensors), parameters,
/// variables, constants and known values; large initializers' raw data is moved out of
/// `graph`, or stays in its mapped external file.
static void addInputs(Graph &g, ::onnx::GraphProto &graph, const ImportOptions &options,
                      const GraphBinding *binding, ExternalData &external, Values &values) {
  std::set<std::string> initialized, inputs;
  for (const ::onnx::TensorProto &init : graph.initializer())
    initialized.insert(init.name());
  for (const ::onnx::ValueInfoProto &info : graph.input())
    inputs.insert(info.name());
  for (const auto &[name, shape] : options.inputShapes)
    if (!inputs.count(name) || initialized.count(name))
      fail(ImportErrorKind::BadOption, "--input-shape names '" + name +
                                           "', which is not an input of the model's graph");
  if (binding)
    for (const auto &[name, tensor] : binding->inputs)
      if (!inputs.count(name) || initialized.count(name) || options.constantInputs.count(name))
        fail(ImportErrorKind::BadOption,
             "the binding names '" + name + "', which is not an input of the model's graph");
  for (const ::onnx::ValueInfoProto &info : graph.input()) {
    if (initialized.count(info.name()))
      continue;
    if (int type = info.type().tensor_type().elem_type(); isNarrowInteger(type))
      values.narrow[info.name()] = type;
    if (auto c = options.constantInputs.find(info.name()); c != options.constantInputs.end()) {
      values.constants[info.name()] = c->second;
      continue;
    }
    values.tensors[info.name()] =
        binding ? boundInput(g, info, *binding)
                : g.input(info.name(), inputShape(info, options), inputType(info));
  }
  std::set<std::string> statistics;
  if (binding)
    statistics = runningStatistics(graph);
  // A float initializer as a parameter, or a variable for importInto's running statistics.
  auto makeParameter = [&](const std::string &name, const std::vector<int64_t> &shape, DType dtype,
                           rt::HostTensor value) {
    bool variable = statistics.count(name);
    values.tensors[name] = variable ? g.variable(name, shape, Initializer::zeros(), dtype)
                                    : g.parameter(name, shape, Initializer::zeros(), dtype);
    if (binding)
      values.trainable.insert(name);
    if (variable)
      values.variables.insert(name);
    if (options.parameterValues)
      (*options.parameterValues)[name] = std::move(value);
  };
  // Parameters after the inputs, in the file's order.
  for (::onnx::TensorProto &init : *graph.mutable_initializer()) {
    std::string what = "initializer '" + init.name() + "'";
    TensorLayout layout = tensorLayout(init, what);
    if (isNarrowInteger(layout.onnxType))
      values.narrow[init.name()] = layout.onnxType;
    // Integer initializers (shapes, indices) always stay constants: Smelt's parameters are
    // floats, and ops read them at import time.
    bool isParameter = !options.initializersAsConstants && rt::isFloat(layout.dtype);
    bool isExternal = init.data_location() == ::onnx::TensorProto::EXTERNAL;
    if (layout.count > kMaxKnownInitializer && layout.dtype != DType::i1) {
      // Large: its bytes as they are in the file, never as doubles.
      Weight w = isExternal ? external.weight(init, what) : weightValue(init, what);
      if (isParameter)
        makeParameter(init.name(), w.shape, w.dtype, weightTensor(w));
      else
        values.weights[init.name()] = std::move(w);
      continue;
    }
    if (isExternal)
      external.inlineInto(init, what);
    TensorValue v = tensorValue(init, what);
    if (isParameter)
      makeParameter(init.name(), v.shape, v.type, hostTensor(v));
    values.constants[init.name()] = std::move(v);
  }
}

static void importNode(Graph &g, const ::onnx::NodeProto &node, int index, Values &values,
                       int64_t opset, const GraphBinding *binding) {
  std::string where = "node " + std::to_string(index) +
                      (node.name().empty() ? "" : " '" + node.name() + "'") + " (" +
                      node.op_type() + ")";
  try {
    // ONNX Runtime's com.microsoft domain: the quantized ops its quantizer writes.
    bool microsoft = node.domain() == "com.microsoft";
    if (!isDefaultDomain(node.domain()) && !microsoft)
      fail(ImportErrorKind::UnsupportedOp, "op domain '" + node.domain() + "' is not supported");
    static const std::set<std::string> controlFlow = {"If", "Loop", "Scan", "SequenceMap"};
    if (controlFlow.count(node.op_type()))
      fail(ImportErrorKind::ControlFlow,
           "control flow (subgraphs) does not map onto Smelt's static dataflow graphs");
    if (!microsoft)
      checkAgainstSchema(node, opset);
    // The node's ops are located at its name (or its index and type when it has none), which
    // dumps, placement logs, profiles and run-time errors then show.
    mlir::Location at = mlir::NameLoc::get(mlir::StringAttr::get(
        &g.context(), node.name().empty()
                          ? "node " + std::to_string(index) + " (" + node.op_type() + ")"
                          : node.name()));
    g.atLocation(at, [&] {
      NodeImporter n(g, node, index, values, opset, binding);
      if (microsoft || !foldKnownNode(n)) {
        Converter convert =
            microsoft ? findMicrosoftConverter(node.op_type()) : findConverter(node.op_type());
        if (!convert && microsoft)
          fail(ImportErrorKind::UnsupportedOp,
               "Smelt maps only the quantized ops of domain 'com.microsoft' (" +
                   llvm::join(supportedMicrosoftOps(), ", ") + ")");
        if (!convert)
          fail(ImportErrorKind::UnsupportedOp, "Smelt has no mapping for this op");
        g.atomically([&] {
          if (!convertBelowTranspose(n, convert))
            convert(n);
        });
        recordKnownResult(n);
      }
      settleNarrowOutputs(n);
    });
  } catch (const Failure &f) {
    throw Failure{f.kind, where + ": " + f.message, f.value};
  } catch (const BuildError &e) {
    throw Failure{ImportErrorKind::Internal, where + ": Smelt refused the mapped ops: " + e.what(),
                  ""};
  } catch (const std::exception &e) { // a malformed node (a missing attribute value ...)
    throw Failure{ImportErrorKind::BadFile, where + ": " + e.what(), ""};
  }
}

/// Erases what no result needs: the NCHW transposes that foldingTranspose bypassed, Constant
/// nodes read only at import time.
static void eraseDeadOps(mlir::func::FuncOp function) {
  mlir::Block &body = function.getBody().front();
  for (mlir::Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (mlir::isOpTriviallyDead(&op))
      op.erase();
}

/// Fails when graph output `info` declares an element type or a static dimension that the
/// imported graph does not compute (a model whose declared outputs are not what it computes
/// is refused by ONNX Runtime too).
static void checkDeclaredType(const ::onnx::ValueInfoProto &info, const Tensor &computed) {
  if (!info.type().has_tensor_type())
    return;
  const ::onnx::TypeProto_Tensor &type = info.type().tensor_type();
  if (type.elem_type() != ::onnx::TensorProto::UNDEFINED) {
    std::optional<DType> declared = smeltDType(type.elem_type());
    if (!declared || *declared != computed.dtype())
      fail(ImportErrorKind::BadFile,
           "graph output '" + info.name() + "' is declared " + onnxTypeName(type.elem_type()) +
               " but the graph computes " + dtypeName(computed.dtype()));
  }
  if (!type.has_shape())
    return;
  std::vector<int64_t> shape = computed.shape();
  bool rankDiffers = type.shape().dim_size() != int(shape.size());
  for (int d = 0; d < type.shape().dim_size() && !rankDiffers; ++d)
    rankDiffers = type.shape().dim(d).has_dim_value() &&
                  type.shape().dim(d).dim_value() != shape[size_t(d)];
  if (rankDiffers) {
    std::string declared;
    for (const ::onnx::TensorShapeProto_Dimension &d : type.shape().dim())
      declared += (declared.empty() ? "" : "x") +
                  (d.has_dim_value() ? std::to_string(d.dim_value()) : d.dim_param());
    fail(ImportErrorKind::BadFile, "graph output '" + info.name() + "' is declared of shape [" +
                                       declared + "] but the graph computes " +
                                       shapeString(shape));
  }
}

/// Brings the bytes of Constant nodes' external tensors into the nodes (they are read as values).
static void inlineExternalConstants(::onnx::GraphProto &graph, ExternalData &external) {
  for (int i = 0; i < graph.node_size(); ++i) {
    ::onnx::NodeProto &node = *graph.mutable_node(i);
    if (node.op_type() != "Constant")
      continue;
    for (::onnx::AttributeProto &a : *node.mutable_attribute())
      if (a.has_t() && a.t().data_location() == ::onnx::TensorProto::EXTERNAL)
        external.inlineInto(*a.mutable_t(), "node " + std::to_string(i) + " (Constant)'s value");
  }
}

static int64_t defaultOpset(const ::onnx::ModelProto &model) {
  for (const ::onnx::OperatorSetIdProto &id : model.opset_import())
    if (isDefaultDomain(id.domain()))
      return id.version();
  return 1;
}

/// importGraph's work, its ops at the location `g` is scoped to.
static ImportedGraph importGraphAtFile(Graph &g, ::onnx::ModelProto &model, const std::string &path,
                                       const ImportOptions &options, const GraphBinding *binding) {
  ::onnx::GraphProto &graph = *model.mutable_graph();
  Values values;
  ExternalData external(path);
  addInputs(g, graph, options, binding, external, values);
  inlineExternalConstants(graph, external);
  int64_t opset = defaultOpset(model);
  for (int i = 0; i < graph.node_size(); ++i)
    importNode(g, graph.node(i), i, values, opset, binding);
  ImportedGraph imported;
  for (const ::onnx::ValueInfoProto &info : graph.output()) {
    auto t = values.tensors.find(info.name());
    if (t != values.tensors.end())
      imported.outputs.push_back(t->second);
    else if (auto c = values.constants.find(info.name()); c != values.constants.end())
      imported.outputs.push_back(constantTensor(g, c->second));
    else
      fail(ImportErrorKind::BadFile, "graph output '" + info.name() + "' is never computed");
    checkDeclaredType(info, imported.outputs.back());
    imported.names.push_back(info.name());
  }
  return imported;
}

/// Imports `model`'s graph into `g`: its inputs new arguments, or `binding`'s tensors. What it
/// makes outside a node (arguments, constants returned as outputs) is located at the file.
static ImportedGraph importGraph(Graph &g, ::onnx::ModelProto &model, const std::string &path,
                                 const ImportOptions &options, const GraphBinding *binding) {
  return g.atLocation(mlir::FileLineColLoc::get(&g.context(), path, 0, 0),
                      [&] { return importGraphAtFile(g, model, path, options, binding); });
}

static mlir::OwningOpRef<mlir::ModuleOp>
buildModule(const std::string &path, const ImportOptions &options, mlir::MLIRContext &context) {
  ::onnx::ModelProto model = readModel(path);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::ModuleOp::create(mlir::FileLineColLoc::get(&context, path, 0, 0));
  Graph g(*module, "main");
  g.function()->setLoc(module->getLoc());
  ImportedGraph imported = importGraph(g, model, path, options, nullptr);
  g.atLocation(module->getLoc(), [&] { g.setOutputs(imported.outputs, imported.names); });
  eraseDeadOps(g.function());
  return module;
}

/// Runs `import`, turning the importer's failures into an ImportError that names `path`.
template <typename T>
static llvm::Expected<T> reportingErrors(const std::string &path, llvm::function_ref<T()> import) {
  try {
    return import();
  } catch (const Failure &f) {
    return llvm::make_error<ImportError>(f.kind, path + ": " + f.message, f.value);
  } catch (const BuildError &e) {
    return llvm::make_error<ImportError>(ImportErrorKind::Internal, path + ": " + e.what());
  } catch (const std::exception &e) { // out of memory, a malformed model's missing values
    return llvm::make_error<ImportError>(ImportErrorKind::BadFile, path + ": " + e.what());
  }
}

llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importModel(const std::string &path, const ImportOptions &options, mlir::MLIRContext &context) {
  return reportingErrors<mlir::OwningOpRef<mlir::ModuleOp>>(
      path, [&] { return buildModule(path, options, context); });
}

ImportedGraph importInto(Graph &g, const std::string &path, const GraphBinding &binding,
                         const ImportOptions &options) {
  llvm::Expected<ImportedGraph> imported = reportingErrors<ImportedGraph>(path, [&] {
    ::onnx::ModelProto model = readModel(path);
    return g.atomically([&] { return importGraph(g, model, path, options, &binding); });
  });
  if (!imported)
    throw BuildError(llvm::toString(imported.takeError()));
  return std::move(*imported);
}

Tensor ImportedGraph::output(const std::string &name) const {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name)
      return outputs[i];
  std::string known;
  for (const std::string &n : names)
    known += (known.empty() ? "'" : ", '") + n + "'";
  throw BuildError("the imported model has no output '" + name + "' (its outputs: " + known + ")");
}

llvm::Expected<std::vector<ModelInput>> modelInputs(const std::string &path) {
  return reportingErrors<std::vector<ModelInput>>(path, [&] {
    ::onnx::ModelProto model = readModel(path);
    std::set<std::string> initialized;
    for (const ::onnx::TensorProto &init : model.graph().initializer())
      initialized.insert(init.name());
    std::vector<ModelInput> inputs;
    for (const ::onnx::ValueInfoProto &info : model.graph().input()) {
      if (initialized.count(info.name()))
        continue;
      ModelInput input{info.name(), {}, inputType(info)};
      for (const ::onnx::TensorShapeProto_Dimension &d : info.type().tensor_type().shape().dim())
        input.shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
      inputs.push_back(std::move(input));
    }
    return inputs;
  });
}

llvm::Error parseInputShape(const std::string &spec, ImportOptions &options) {
  auto bad = [&](const std::string &why) {
    return llvm::make_error<ImportError>(
        ImportErrorKind::BadOption,
        "--input-shape '" + spec + "': " + why + " (expected NAME=DxDx..., e.g. x=1x3x224x224)");
  };
  size_t eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0)
    return bad("no NAME=");
  std::vector<int64_t> shape;
  llvm::StringRef dims = llvm::StringRef(spec).substr(eq + 1);
  while (!dims.empty()) {
    auto [head, tail] = dims.split('x');
    int64_t d;
    if (head.getAsInteger(10, d) || d < 0)
      return bad(("'" + head + "' is not a dimension size").str());
    if (tail.empty() && dims.ends_with("x"))
      return bad("the shape ends in 'x'");
    shape.push_back(d);
    dims = tail;
  }
  options.inputShapes[spec.substr(0, eq)] = shape;
  return llvm::Error::success();
}

} // namespace smelt::onnx
