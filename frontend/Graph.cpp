// Graph: the function under construction, its arguments and parameters, generic op creation
// checked by the dialect, and the parameter initializer function.
#include "frontend/Graph.h"

#include "frontend/Ops.h"
#include "ir/Bracketed.h"
#include "ir/SmeltDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Pass/PassManager.h"

#include <filesystem>

using namespace mlir;

namespace smelt {

[[noreturn]] static void emptyTensor() {
  throw BuildError("an empty smelt::Tensor (default-constructed, never assigned) was used");
}

Graph &Tensor::graph() const {
  if (!graph_)
    emptyTensor();
  return *graph_;
}

mlir::RankedTensorType Tensor::type() const {
  if (!graph_)
    emptyTensor();
  return cast<RankedTensorType>(value_.getType());
}

std::vector<int64_t> Tensor::shape() const { return type().getShape().vec(); }

int64_t Tensor::dim(int64_t axis, Loc loc) const {
  int64_t r = rank();
  if (axis < -r || axis >= r)
    throwBuildError(loc, "axis " + std::to_string(axis) + " is out of range for shape " +
                             shapeString(shape()));
  return type().getDimSize(axis < 0 ? axis + r : axis);
}

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

std::string shapeString(const std::vector<int64_t> &shape) { return bracketed(shape); }

Type elementType(MLIRContext &context, DType dtype) {
  Builder b(&context);
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

Graph::Graph(MLIRContext &context, std::string name, uint64_t seed, Loc loc)
    : name_(std::move(name)), seed_(seed), builder_(&context) {
  context.loadDialect<SmeltDialect, func::FuncDialect>();
  ownedModule_ = ModuleOp::create(UnknownLoc::get(&context));
  moduleOp_ = *ownedModule_;
  createFunction(loc);
}

Graph::Graph(ModuleOp module, std::string name, uint64_t seed, Loc loc)
    : name_(std::move(name)), seed_(seed), moduleOp_(module), builder_(module.getContext()) {
  module.getContext()->loadDialect<SmeltDialect, func::FuncDialect>();
  createFunction(loc);
}

void Graph::createFunction(Loc loc) {
  // Two graphs in one module must not clash, nor may a graph clash with another's init.
  if (moduleOp_.lookupSymbol(name_))
    fail(loc, "the module already has a symbol @" + name_);
  builder_.setInsertionPointToEnd(moduleOp_.getBody());
  function_ = func::FuncOp::create(builder_, location(loc), name_,
                                   builder_.getFunctionType({}, {}));
  builder_.setInsertionPointToEnd(function_.addEntryBlock());
}

Location Graph::location(Loc loc) {
  if (locationScope_)
    return *locationScope_;
  return FileLineColLoc::get(&context(), loc.file_name(), loc.line(), loc.column());
}

void throwBuildError(Loc loc, const std::string &message) {
  throw BuildError(std::filesystem::path(loc.file_name()).filename().string() + ":" +
                   std::to_string(loc.line()) + ": " + message);
}

void Graph::fail(Loc loc, const std::string &message) { throwBuildError(loc, message); }

Tensor Graph::make(llvm::StringRef opName, ValueRange operands,
                   llvm::ArrayRef<NamedAttribute> attributes, Type resultType, Loc loc) {
  if (finished_)
    fail(loc, "graph @" + name_ + " is finished (setOutputs was called); it takes no more ops");
  // A value of another graph (or of this graph's init function) would verify as an op but
  // break dominance, which only a whole-module verify would notice: refuse it here.
  for (auto [i, v] : llvm::enumerate(operands))
    if (v.getParentBlock() != builder_.getInsertionBlock())
      fail(loc, "operand #" + std::to_string(i) + " of '" + opName.str() +
                    "' belongs to another graph than @" + name_);
  // The first diagnostic is the one that names the problem; keep it for the BuildError.
  std::string message;
  ScopedDiagnosticHandler capture(&context(), [&](Diagnostic &diag) {
    if (message.empty())
      message = diag.str();
    return success();
  });
  auto failWith = [&](Operation *op) {
    op->erase();
    fail(loc, message.empty() ? (llvm::Twine("'") + opName + "' op is invalid").str() : message);
  };
  OperationState state(location(loc), opName);
  state.addOperands(operands);
  state.addAttributes(attributes);
  if (!deviceScope_.empty())
    state.addAttribute("smelt.device", builder_.getStringAttr(deviceScope_));
  state.addTypes(resultType ? resultType : builder_.getNoneType());
  Operation *op = builder_.create(state);
  if (!resultType) {
    auto infer = dyn_cast<InferTypeOpInterface>(op);
    if (!infer) {
      message = (llvm::Twine("'") + opName +
                 "' cannot infer its result type; the builder must pass one")
                    .str();
      failWith(op);
    }
    SmallVector<Type> types;
    if (failed(infer.inferReturnTypes(&context(), op->getLoc(), op->getOperands(),
                                      op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
                                      op->getRegions(), types)) ||
        types.size() != 1)
      failWith(op);
    op->getResult(0).setType(types[0]);
  }
  if (failed(verify(op)))
    failWith(op);
  return Tensor(this, op->getResult(0));
}

Tensor Graph::addArgument(const std::string &name, const std::vector<int64_t> &shape,
                          DType dtype, llvm::StringRef marker, Loc loc) {
  if (finished_)
    fail(loc, "graph @" + name_ + " is finished; add inputs before setOutputs");
  for (int64_t d : shape)
    if (d < 0)
      fail(loc, "'" + name + "' has shape " + shapeString(shape) +
                    ": dimensions must be >= 0");
  for (unsigned i = 0; i < function_.getNumArguments(); ++i)
    if (auto existing = function_.getArgAttrOfType<StringAttr>(i, "smelt.name");
        existing && existing.getValue() == name)
      fail(loc, "graph @" + name_ + " already has an input or parameter named '" + name + "'");
  unsigned index = function_.getNumArguments();
  SmallVector<NamedAttribute> attrs = {builder_.getNamedAttr("smelt.name",
                                                             builder_.getStringAttr(name))};
  if (!marker.empty())
    attrs.push_back(builder_.getNamedAttr(marker, builder_.getUnitAttr()));
  Type type = RankedTensorType::get(shape, elementType(dtype));
  (void)function_.insertArgument(index, type, builder_.getDictionaryAttr(attrs), location(loc));
  return Tensor(this, function_.getArgument(index));
}

Tensor Graph::input(const std::string &name, const std::vector<int64_t> &shape, DType dtype,
                    Loc loc) {
  return addArgument(name, shape, dtype, {}, loc);
}

Tensor Graph::parameter(const std::string &name, const std::vector<int64_t> &shape,
                        Initializer init, DType dtype, Loc loc) {
  return addWeight(name, shape, init, dtype, /*trainable=*/true, loc);
}

Tensor Graph::variable(const std::string &name, const std::vector<int64_t> &shape,
                       Initializer init, DType dtype, Loc loc) {
  return addWeight(name, shape, init, dtype, /*trainable=*/false, loc);
}

Tensor Graph::addWeight(const std::string &name, const std::vector<int64_t> &shape,
                        Initializer init, DType dtype, bool trainable, Loc loc) {
  // Checked now rather than in buildInitializer, so the error points at this call.
  bool random = init.kind == Initializer::Kind::GlorotUniform ||
                init.kind == Initializer::Kind::HeNormal || init.kind == Initializer::Kind::Uniform;
  if (random && !rt::isFloat(dtype))
    fail(loc, "parameter '" + name + "' is " + dtypeName(dtype) +
                  ": a random initializer needs a float dtype");
  for (const ConstantSlice &slice : init.constantSlices)
    if (shape.empty() || slice.begin < 0 || slice.begin >= slice.end ||
        slice.end > shape.back())
      fail(loc, "'" + name + "' of shape " + shapeString(shape) + ": a constant slice [" +
                    std::to_string(slice.begin) + ", " + std::to_string(slice.end) +
                    ") must be a non-empty range of its last axis");
  if (init.kind == Initializer::Kind::Uniform && !(init.value < init.high))
    fail(loc, "parameter '" + name + "': a uniform initializer needs low < high, got [" +
                  std::to_string(init.value) + ", " + std::to_string(init.high) + ")");
  Tensor t = addArgument(name, shape, dtype, trainable ? "smelt.param" : "smelt.variable", loc);
  parameters_.push_back(
      {name, shape, dtype, init, parameterSeed(seed_, parameters_.size()), loc, trainable});
  return t;
}

void Graph::assign(Tensor variable, Tensor value, Loc loc) {
  if (finished_)
    fail(loc, "graph @" + name_ + " is finished; assign variables before setOutputs");
  if (!variable || !value || &variable.graph() != this || &value.graph() != this)
    fail(loc, "assign: the variable and its value must be tensors of @" + name_);
  auto arg = dyn_cast<BlockArgument>(variable.value());
  if (!arg || arg.getOwner() != &function_.getBody().front() ||
      !function_.getArgAttr(arg.getArgNumber(), "smelt.variable"))
    fail(loc, "assign: the tensor assigned to is not a variable (Graph::variable)");
  auto name = function_.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "smelt.name");
  std::string what = "variable '" + name.str() + "'";
  if (variable.type() != value.type())
    fail(loc, "assign: " + what + " is " + shapeString(variable.shape()) + " " +
                  dtypeName(variable.dtype()) + ", its new value " + shapeString(value.shape()) +
                  " " + dtypeName(value.dtype()));
  for (auto &[assigned, next] : assignments_)
    if (assigned == variable.value())
      fail(loc, "assign: " + what + " already has its next value (one assignment per step)");
  assignments_.push_back({variable.value(), value.value()});
}

Tensor Graph::assignedValue(Tensor variable) {
  for (auto &[assigned, next] : assignments_)
    if (assigned == variable.value())
      return Tensor(this, next);
  return variable;
}

void Graph::setSeed(uint64_t seed) {
  seed_ = seed;
  for (size_t i = 0; i < parameters_.size(); ++i)
    parameters_[i].seed = parameterSeed(seed_, i);
}

Graph::Mark Graph::mark() {
  mlir::Block &body = function_.getBody().front();
  return {body.empty() ? nullptr : &body.back(), function_.getNumArguments(), parameters_.size(),
          assignments_.size()};
}

void Graph::rollback(const Mark &mark) {
  // Ops are only ever appended, so everything after the mark is new; erase users first.
  mlir::Block &body = function_.getBody().front();
  while (!body.empty() && &body.back() != mark.lastOp)
    body.back().erase();
  while (function_.getNumArguments() > mark.numArguments)
    (void)function_.eraseArgument(function_.getNumArguments() - 1);
  parameters_.resize(mark.numParameters);
  assignments_.resize(mark.numAssignments);
}

/// Runs `pm` on `module`, turning a failure into a BuildError at `loc` with the first
/// diagnostic. The builder's function has no terminator until setOutputs, so the passes run
/// without the verifier; what they build is verified where it is used, as every op is.
void Graph::runPasses(mlir::PassManager &pm, mlir::ModuleOp module, const std::string &what,
                      Loc loc) {
  std::string message;
  ScopedDiagnosticHandler capture(&context(), [&](Diagnostic &diag) {
    if (message.empty())
      message = diag.str();
    return success();
  });
  pm.enableVerifier(false);
  if (failed(pm.run(module)))
    fail(loc, message.empty() ? what + " failed" : message);
}

void Graph::applyPrecision(PrecisionPolicy policy, Loc loc) {
  if (finished_)
    fail(loc, "graph @" + name_ + " is finished; apply a precision policy before setOutputs");
  // The same pass smelt-opt and the pipeline run; the replaced f32 ops stay (unused) so
  // Tensor handles to them remain valid.
  MixedPrecisionOptions options;
  options.policy = precisionPolicyName(policy).str();
  options.functionName = name_;
  options.keepReplaced = true;
  mlir::PassManager pm(&context());
  pm.addPass(createMixedPrecision(options));
  runPasses(pm, moduleOp_, "smelt-mixed-precision", loc);
}

// Gradients come from the smelt-autodiff pass, the one smelt-opt, lit and training all run:
//  1. a scratch module gets a copy of this function that returns `loss`; for a value of `wrt`
//     that is not an argument, the copy gets a new argument p and reads v + p wherever it read
//     v (a probe: d loss/d p is d loss/d v, and every path through v still counts),
//  2. smelt-autodiff{wrt=<those argument numbers>} adds @<copy>_grad,
//  3. @<copy>_grad's first ops are the copy's, one for one, probes aside: they map onto this
//     function's own ops, and only the backward ops after them are cloned here.
std::vector<Tensor> Graph::gradients(Tensor loss, const std::vector<Tensor> &wrt, Loc loc) {
  if (finished_)
    fail(loc, "graph @" + name_ + " is finished; build gradients before setOutputs");
  for (const Tensor &t : wrt)
    if (&t.graph() != this || &loss.graph() != this)
      fail(loc, "gradients: the loss and every tensor differentiated for must be of @" + name_);
  if (wrt.empty())
    return {};

  constexpr llvm::StringLiteral kProbe = "smelt.gradient_probe";
  mlir::Block &body = function_.getBody().front();
  OwningOpRef<ModuleOp> scratch = ModuleOp::create(function_.getLoc());
  IRMapping toCopy;
  auto copy = cast<func::FuncOp>(function_->clone(toCopy));
  copy.setSymName("gradient_source");
  scratch->push_back(copy);
  mlir::Block &copyBody = copy.getBody().front();
  OpBuilder copyBuilder = OpBuilder::atBlockEnd(&copyBody);
  func::ReturnOp::create(copyBuilder, loss.value().getLoc(), toCopy.lookup(loss.value()));
  // Argument number in the copy of each value differentiated for, and the value each argument
  // stands for here.
  llvm::DenseMap<Value, unsigned> argumentOf;
  SmallVector<Value> standsFor(function_.getArguments().begin(), function_.getArguments().end());
  for (const Tensor &t : wrt) {
    Value v = t.value();
    if (argumentOf.count(v))
      continue;
    if (auto arg = dyn_cast<BlockArgument>(v); arg && arg.getOwner() == &body) {
      argumentOf[v] = arg.getArgNumber();
      continue;
    }
    // Through the function, so its argument attributes and type keep one entry per argument.
    if (failed(copy.insertArgument(copy.getNumArguments(), v.getType(), {}, v.getLoc())))
      fail(loc, "gradients: cannot add an argument for a value differentiated for");
    BlockArgument probe = copy.getArgument(copy.getNumArguments() - 1);
    Value inCopy = toCopy.lookup(v);
    copyBuilder.setInsertionPointAfterValue(inCopy);
    auto probed = AddOp::create(copyBuilder, v.getLoc(), inCopy, probe);
    probed->setAttr(kProbe, copyBuilder.getUnitAttr());
    inCopy.replaceAllUsesExcept(probed, probed);
    argumentOf[v] = probe.getArgNumber();
    standsFor.push_back(v);
  }
  copy.setFunctionType(
      copyBuilder.getFunctionType(copy.getArgumentTypes(), {loss.value().getType()}));
  // The pass returns the gradients in argument-number order.
  SmallVector<unsigned> order;
  for (auto &[value, number] : argumentOf)
    order.push_back(number);
  llvm::sort(order);
  std::string numbers;
  for (unsigned number : order)
    numbers += (numbers.empty() ? "" : ",") + std::to_string(number);

  AutodiffOptions options;
  options.function = "gradient_source";
  options.wrt = numbers;
  mlir::PassManager pm(&context());
  pm.addPass(createAutodiff(options));
  runPasses(pm, *scratch, "gradients: smelt-autodiff", loc);

  auto grad = scratch->lookupSymbol<func::FuncOp>("gradient_source_grad");
  mlir::Block &gradBody = grad.getBody().front();
  IRMapping back;
  for (auto [arg, value] : llvm::zip(gradBody.getArguments(), standsFor))
    back.map(arg, value);
  auto original = body.begin();
  SmallVector<Value> gradients;
  for (Operation &op : gradBody) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (Value g : ret.getOperands().drop_front())
        gradients.push_back(back.lookup(g));
      break;
    }
    if (op.hasAttr(kProbe)) { // reads as the value it probes
      back.map(op.getResult(0), back.lookup(op.getOperand(0)));
      continue;
    }
    if (original != body.end()) {
      if (original->getName() != op.getName())
        fail(loc, "gradients: smelt-autodiff changed the forward ops (" +
                      original->getName().getStringRef().str() + " became " +
                      op.getName().getStringRef().str() + ")");
      back.map(op.getResults(), original->getResults());
      ++original;
      continue;
    }
    builder_.clone(op, back);
  }
  std::vector<Tensor> out;
  for (const Tensor &t : wrt) {
    unsigned position = llvm::find(order, argumentOf[t.value()]) - order.begin();
    out.emplace_back(this, gradients[position]);
  }
  return out;
}

std::vector<Tensor> Graph::argumentsMarked(llvm::StringRef marker) {
  std::vector<Tensor> out;
  for (unsigned i = 0; i < function_.getNumArguments(); ++i)
    if (function_.getArgAttr(i, marker))
      out.emplace_back(this, function_.getArgument(i));
  return out;
}

std::vector<Tensor> Graph::parameterTensors() { return argumentsMarked("smelt.param"); }

std::vector<Tensor> Graph::variableTensors() { return argumentsMarked("smelt.variable"); }

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

void Graph::buildInitializer(Loc loc) {
  std::string initName = name_ + "_init";
  if (moduleOp_.lookupSymbol(initName))
    fail(loc, "the module already has a symbol @" + initName +
                  " (buildInitializer is called once per graph)");
  OpBuilder::InsertionGuard guard(builder_);
  builder_.setInsertionPointToEnd(moduleOp_.getBody());
  auto init = func::FuncOp::create(builder_, location(loc), initName,
                                   builder_.getFunctionType({}, {}));
  builder_.setInsertionPointToEnd(init.addEntryBlock());
  // make() refuses ops once the graph is finished; the init function is a separate one.
  bool wasFinished = finished_;
  finished_ = false;
  SmallVector<Value> values;
  try {
    for (const ParameterSpec &p : parameters_)
      values.push_back(initialValue(*this, p).value());
  } catch (...) {
    finished_ = wasFinished;
    init.erase();
    throw;
  }
  func::ReturnOp::create(builder_, location(loc), values);
  init.setFunctionType(builder_.getFunctionType({}, ValueRange(values).getTypes()));
  for (size_t i = 0; i < parameters_.size(); ++i)
    init.setResultAttr(i, "smelt.name", builder_.getStringAttr(parameters_[i].name));
  finished_ = wasFinished;
}

} // namespace smelt
