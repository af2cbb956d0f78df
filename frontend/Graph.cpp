// Graph: the function under construction, its arguments and parameters, generic op creation
// checked by the dialect, and the parameter initializer function.
#include "frontend/Graph.h"

#include "frontend/Ops.h"
#include "ir/Autodiff.h"
#include "ir/SmeltDialect.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"

#include <cmath>
#include <filesystem>

using namespace mlir;

namespace smelt {

mlir::RankedTensorType Tensor::type() const {
  return cast<RankedTensorType>(value_.getType());
}

std::vector<int64_t> Tensor::shape() const { return type().getShape().vec(); }

DType Tensor::dtype() const {
  Type t = type().getElementType();
  if (t.isF16())
    return DType::f16;
  if (t.isBF16())
    return DType::bf16;
  if (t.isF64())
    return DType::f64;
  if (t.isInteger(32))
    return DType::i32;
  if (t.isInteger(64))
    return DType::i64;
  if (t.isInteger(1))
    return DType::i1;
  return DType::f32;
}

Graph::Graph(MLIRContext &context, std::string name, uint64_t seed)
    : name_(std::move(name)), seed_(seed), builder_(&context) {
  context.loadDialect<SmeltDialect, func::FuncDialect>();
  module_ = ModuleOp::create(UnknownLoc::get(&context));
  builder_.setInsertionPointToEnd(module_->getBody());
  function_ = func::FuncOp::create(builder_, UnknownLoc::get(&context), name_,
                                   builder_.getFunctionType({}, {}));
  builder_.setInsertionPointToEnd(function_.addEntryBlock());
}

Location Graph::location(Loc loc) {
  return FileLineColLoc::get(&context(), loc.file_name(), loc.line(), loc.column());
}

void throwBuildError(Loc loc, const std::string &message) {
  throw BuildError(std::filesystem::path(loc.file_name()).filename().string() + ":" +
                   std::to_string(loc.line()) + ": " + message);
}

void Graph::fail(Loc loc, const std::string &message) { throwBuildError(loc, message); }

Type Graph::elementType(DType dtype) {
  Builder &b = builder_;
  switch (dtype) {
  case DType::f32:
    return b.getF32Type();
  case DType::f16:
    return b.getF16Type();
  case DType::bf16:
    return b.getBF16Type();
  case DType::f64:
    return b.getF64Type();
  case DType::i32:
    return b.getI32Type();
  case DType::i64:
    return b.getI64Type();
  case DType::i1:
    break;
  }
  return b.getI1Type();
}

Tensor Graph::make(llvm::StringRef opName, ValueRange operands,
                   llvm::ArrayRef<NamedAttribute> attributes, Type resultType, Loc loc) {
  if (finished_)
    fail(loc, "graph @" + name_ + " is finished (setOutputs was called); it takes no more ops");
  // The first diagnostic is the one that names the problem; keep it for the BuildError.
  std::string message;
  ScopedDiagnosticHandler capture(&context(), [&](Diagnostic &diag) {
    if (message.empty())
      message = diag.str();
    return success();
  });
  OperationState state(location(loc), opName);
  state.addOperands(operands);
  state.addAttributes(attributes);
  state.addTypes(resultType ? resultType : builder_.getNoneType());
  Operation *op = builder_.create(state);
  if (!resultType) {
    SmallVector<Type> types;
    auto infer = cast<InferTypeOpInterface>(op);
    if (failed(infer.inferReturnTypes(&context(), op->getLoc(), op->getOperands(),
                                      op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
                                      op->getRegions(), types))) {
      op->erase();
      fail(loc, message);
    }
    op->getResult(0).setType(types[0]);
  }
  if (failed(verify(op))) {
    op->erase();
    fail(loc, message);
  }
  return Tensor(this, op->getResult(0));
}

Tensor Graph::addArgument(const std::string &name, const std::vector<int64_t> &shape,
                          DType dtype, bool isParameter, Loc loc) {
  if (finished_)
    fail(loc, "graph @" + name_ + " is finished; add inputs before setOutputs");
  for (int64_t d : shape)
    if (d < 0)
      fail(loc, "input '" + name + "' has a negative dimension");
  for (unsigned i = 0; i < function_.getNumArguments(); ++i)
    if (auto existing = function_.getArgAttrOfType<StringAttr>(i, "smelt.name");
        existing && existing.getValue() == name)
      fail(loc, "graph @" + name_ + " already has an input or parameter named '" + name + "'");
  unsigned index = function_.getNumArguments();
  SmallVector<NamedAttribute> attrs = {builder_.getNamedAttr("smelt.name",
                                                             builder_.getStringAttr(name))};
  if (isParameter)
    attrs.push_back(builder_.getNamedAttr("smelt.param", builder_.getUnitAttr()));
  Type type = RankedTensorType::get(shape, elementType(dtype));
  (void)function_.insertArgument(index, type, builder_.getDictionaryAttr(attrs), location(loc));
  return Tensor(this, function_.getArgument(index));
}

Tensor Graph::input(const std::string &name, const std::vector<int64_t> &shape, DType dtype,
                    Loc loc) {
  return addArgument(name, shape, dtype, false, loc);
}

Tensor Graph::parameter(const std::string &name, const std::vector<int64_t> &shape,
                        Initializer init, DType dtype, Loc loc) {
  Tensor t = addArgument(name, shape, dtype, true, loc);
  // Each parameter draws from its own stream: the graph seed mixed with its index (splitmix64).
  uint64_t z = seed_ + 0x9e3779b97f4a7c15ull * (parameters_.size() + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  parameters_.push_back({name, shape, dtype, init, (z ^ (z >> 31)) & 0x7fffffffffffffffull});
  return t;
}

std::vector<Tensor> Graph::gradients(Tensor loss, const std::vector<Tensor> &wrt, Loc loc) {
  if (finished_)
    fail(loc, "graph @" + name_ + " is finished; build gradients before setOutputs");
  std::string message;
  ScopedDiagnosticHandler capture(&context(), [&](Diagnostic &diag) {
    if (message.empty())
      message = diag.str();
    return success();
  });
  SmallVector<Value> values;
  for (const Tensor &t : wrt)
    values.push_back(t.value());
  FailureOr<SmallVector<Value>> grads = buildGradients(builder_, loss.value(), values);
  if (failed(grads))
    fail(loc, message);
  std::vector<Tensor> out;
  for (Value g : *grads)
    out.emplace_back(this, g);
  return out;
}

std::vector<Tensor> Graph::parameterTensors() {
  std::vector<Tensor> out;
  for (unsigned i = 0; i < function_.getNumArguments(); ++i)
    if (function_.getArgAttr(i, "smelt.param"))
      out.emplace_back(this, function_.getArgument(i));
  return out;
}

void Graph::setOutputs(const std::vector<Tensor> &outputs, const std::vector<std::string> &names,
                       Loc loc) {
  if (finished_)
    fail(loc, "graph @" + name_ + " already has its outputs");
  if (!names.empty() && names.size() != outputs.size())
    fail(loc, std::to_string(outputs.size()) + " outputs but " + std::to_string(names.size()) +
                  " names");
  SmallVector<Value> values;
  for (const Tensor &t : outputs) {
    if (&t.graph() != this)
      fail(loc, "an output belongs to another graph");
    values.push_back(t.value());
  }
  func::ReturnOp::create(builder_, location(loc), values);
  function_.setFunctionType(builder_.getFunctionType(function_.getArgumentTypes(),
                                                     ValueRange(values).getTypes()));
  for (size_t i = 0; i < names.size(); ++i)
    function_.setResultAttr(i, "smelt.name", builder_.getStringAttr(names[i]));
  finished_ = true;
}

/// Keras' fans: [in, out] for a matrix; receptive field times channels for a conv kernel.
static std::pair<double, double> fans(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return {1, 1};
  if (shape.size() == 1)
    return {double(shape[0]), double(shape[0])};
  double receptive = 1;
  for (size_t i = 0; i + 2 < shape.size(); ++i)
    receptive *= double(shape[i]);
  return {shape[shape.size() - 2] * receptive, shape.back() * receptive};
}

void Graph::buildInitializer(Loc loc) {
  std::string initName = name_ + "_init";
  OpBuilder::InsertionGuard guard(builder_);
  builder_.setInsertionPointToEnd(module_->getBody());
  auto init = func::FuncOp::create(builder_, location(loc), initName,
                                   builder_.getFunctionType({}, {}));
  builder_.setInsertionPointToEnd(init.addEntryBlock());
  bool wasFinished = finished_;
  finished_ = false;
  SmallVector<Value> values;
  for (const ParameterSpec &p : parameters_) {
    auto [fanIn, fanOut] = fans(p.shape);
    Tensor value;
    switch (p.init.kind) {
    case Initializer::Kind::GlorotUniform: {
      double limit = std::sqrt(6.0 / (fanIn + fanOut));
      value = rngUniform(*this, p.shape, p.seed, -limit, limit, p.dtype, std::nullopt, loc);
      break;
    }
    case Initializer::Kind::HeNormal:
      value = rngNormal(*this, p.shape, p.seed, 0.0, std::sqrt(2.0 / fanIn), p.dtype,
                        std::nullopt, loc);
      break;
    case Initializer::Kind::Zeros:
    case Initializer::Kind::Constant:
      value = constant(*this, p.init.value, p.shape, p.dtype, loc);
      break;
    }
    values.push_back(value.value());
  }
  func::ReturnOp::create(builder_, location(loc), values);
  init.setFunctionType(builder_.getFunctionType({}, ValueRange(values).getTypes()));
  for (size_t i = 0; i < parameters_.size(); ++i)
    init.setResultAttr(i, "smelt.name", builder_.getStringAttr(parameters_[i].name));
  finished_ = wasFinished;
}

} // namespace smelt
