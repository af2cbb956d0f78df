// The C++ builder's core: a Graph builds one function of a smelt module, a Tensor is a typed
// handle to a value in it, BuildError is what a mistake throws.
//
// Shapes are checked by the dialect's own rules (each op is created generically, its result
// type inferred by the op's InferTypeOpInterface and the op verified), never re-implemented
// here, so the builder and `smelt-opt` can never disagree. A mistake throws BuildError naming
// the caller's file and line and the dialect's message; every public function takes a
// defaulted std::source_location for that, and the same location becomes the op's MLIR
// location, so IR dumps point at user code.
//
// Where things are: Ops.h has one function per op plus NumPy-broadcasting operators, Layers.h
// the Keras-like layers and stable composites, Initializers.h the parameter initializers,
// Optimizers.h optimizer updates as graph code, Models.h ready-made models.
//
// Usage, an MLP forward pass plus its JAX-style init function:
//
//   mlir::MLIRContext ctx;
//   smelt::Graph g(ctx, "forward", /*seed=*/1);
//   smelt::Tensor x = g.input("images", {256, 784});
//   smelt::Tensor h = smelt::dense(x, 512, "dense1", smelt::Activation::Relu);
//   smelt::Tensor logits = smelt::dense(h, 10, "logits");      // [256, 10]
//   smelt::Tensor probs = smelt::softmax(logits);               // stable: exp(x - max) / sum
//   g.setOutputs({logits, probs}, {"logits", "probs"});
//   g.buildInitializer();   // @forward_init() returns every parameter's seeded initial value
//   g.module().print(llvm::outs());
//
//   try { smelt::matmul(x, h); }   // K mismatch: 784 vs 256
//   catch (const smelt::BuildError &e) { /* "model.cpp:12: 'smelt.matmul' op contracting..." */ }
//
// @forward takes (images, dense1/kernel, dense1/bias, logits/kernel, logits/bias): inputs and
// parameters are arguments in creation order, named by `smelt.name`, parameters marked
// `smelt.param`.
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include "frontend/DType.h"
#include "frontend/Initializers.h"
#include "passes/Passes.h"

#include <optional>
#include <source_location>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace smelt {

using Loc = std::source_location;

/// A graph-building mistake (shape mismatch, bad axis, wrong dtype). The message starts with
/// the user's "file:line: " and carries the dialect's description of the problem.
class BuildError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Throws BuildError with "<file>:<line>: " of `loc` in front of `message`.
[[noreturn]] void throwBuildError(std::source_location loc, const std::string &message);

class Graph;

/// A value of a Graph: a static-shape tensor.
class Tensor {
public:
  Tensor() = default;
  Tensor(Graph *graph, mlir::Value value) : graph_(graph), value_(value) {}

  /// False for a default-constructed Tensor; using one throws BuildError.
  explicit operator bool() const { return graph_ != nullptr; }
  Graph &graph() const;
  mlir::Value value() const { return value_; }
  mlir::RankedTensorType type() const;
  std::vector<int64_t> shape() const;
  int64_t rank() const { return type().getRank(); }
  /// The size of dimension `axis` (negative counts from the end).
  int64_t dim(int64_t axis, Loc loc = Loc::current()) const;
  int64_t numElements() const { return type().getNumElements(); }
  DType dtype() const;

private:
  Graph *graph_ = nullptr;
  mlir::Value value_;
};

/// What buildInitializer needs to know about a parameter or a variable.
struct ParameterSpec {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype;
  Initializer init;
  uint64_t seed;          // parameterSeed(graph seed, index)
  Loc loc = Loc::current(); // where parameter() was called: the init ops point there
  /// False for a variable (Graph::variable): state that no gradient moves.
  bool trainable = true;
};

/// "[3, 4]": how messages print shapes.
std::string shapeString(const std::vector<int64_t> &shape);
/// The MLIR element type of `dtype`.
mlir::Type elementType(mlir::MLIRContext &context, DType dtype);

class Graph {
public:
  /// A graph building function `name` in a module of its own. `seed` makes parameter
  /// initialization reproducible.
  explicit Graph(mlir::MLIRContext &context, std::string name = "main", uint64_t seed = 0,
                 Loc loc = Loc::current());
  /// A graph building function `name` into `module`, which the caller owns (several graphs
  /// may share one module, e.g. a forward and a training step).
  Graph(mlir::ModuleOp module, std::string name, uint64_t seed = 0, Loc loc = Loc::current());
  // Tensors point at their Graph: it must stay where it is.
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;

  /// A new function argument (`smelt.name` = name).
  Tensor input(const std::string &name, const std::vector<int64_t> &shape,
               DType dtype = DType::f32, Loc loc = Loc::current());
  /// A trainable parameter: an argument marked `smelt.param`, initialized by @<name>_init.
  Tensor parameter(const std::string &name, const std::vector<int64_t> &shape, Initializer init,
                   DType dtype = DType::f32, Loc loc = Loc::current());
  /// Non-gradient state (Keras' non-trainable weights, Flax's `batch_stats`): an argument
  /// marked `smelt.variable`, initialized by @<name>_init like a parameter, never
  /// differentiated. A model reads it as any tensor and gives it its next value with assign();
  /// the Trainer carries it from step to step, averages it over replicas, checkpoints it and
  /// feeds it to evaluation (a batch norm's moving averages).
  Tensor variable(const std::string &name, const std::vector<int64_t> &shape, Initializer init,
                  DType dtype = DType::f32, Loc loc = Loc::current());
  /// Makes `value` the next value of `variable` (a tensor variable() returned, of the same
  /// type): whoever runs the function (the Trainer's step) returns it in place of the current
  /// one. One assignment per variable and function; a second is a BuildError.
  void assign(Tensor variable, Tensor value, Loc loc = Loc::current());
  /// The value assign() gave `variable`, or `variable` itself when it has none.
  Tensor assignedValue(Tensor variable);
  /// The gradients of the rank-0 `loss` with respect to each of `wrt` (reverse-mode autodiff:
  /// the smelt-autodiff pass, run on a copy of this function), built into this graph so
  /// optimizer steps can use them.
  std::vector<Tensor> gradients(Tensor loss, const std::vector<Tensor> &wrt,
                                Loc loc = Loc::current());
  /// Rewrites the ops built so far under a mixed-precision policy (the smelt-mixed-precision
  /// pass, run on this function):
  /// matmuls and convolutions compute in bf16/f16, what follows them where safe, the rest in
  /// f32. Call it after the model and loss and before gradients(), which then flow back
  /// through the casts to the f32 parameters. Tensors built before keep their f32 types.
  void applyPrecision(PrecisionPolicy policy, Loc loc = Loc::current());
  /// Runs `build` with every op it creates requesting `device` ("cpu:0", "gpu:0"): the
  /// smelt.device attribute smelt-place-devices honours (or, softly, overrides with a reason
  /// when the device or a kernel for the op is missing). Scopes nest; the innermost wins.
  template <typename Fn> auto onDevice(const std::string &device, Fn &&build) -> decltype(build()) {
    return scoped(deviceScope_, device, build);
  }
  /// Runs `build` with every op it creates at `location` instead of its caller's source line:
  /// the ONNX importer gives a node's ops the node's name, so that dumps, placement logs and
  /// run-time errors name the model's node rather than the importer's code. Scopes nest.
  template <typename Fn> auto atLocation(mlir::Location location, Fn &&build) -> decltype(build()) {
    return scoped(locationScope_, std::optional<mlir::Location>(location), build);
  }
  /// The parameters created so far, as tensors of this graph, in creation order.
  std::vector<Tensor> parameterTensors();
  /// The variables created so far, as tensors of this graph, in creation order.
  std::vector<Tensor> variableTensors();
  /// Ends the function: returns `outputs`, named `names` (`smelt.name` on the results).
  void setOutputs(const std::vector<Tensor> &outputs, const std::vector<std::string> &names = {},
                  Loc loc = Loc::current());
  /// Adds @<name>_init: no arguments, every parameter's and variable's initial value in
  /// creation order (results named like them). Call it once, after the last parameter.
  void buildInitializer(Loc loc = Loc::current());

  /// The graph seed; each parameter's seed is parameterSeed(seed, its index), so changing it
  /// re-seeds the parameters created so far too.
  uint64_t seed() const { return seed_; }
  void setSeed(uint64_t seed);

  mlir::ModuleOp module() { return moduleOp_; }
  mlir::func::FuncOp function() { return function_; }
  mlir::MLIRContext &context() { return *moduleOp_->getContext(); }
  const std::string &name() const { return name_; }
  /// The parameters and variables (ParameterSpec::trainable false), in creation order.
  const std::vector<ParameterSpec> &parameters() const { return parameters_; }
  /// True once setOutputs was called: the function takes no more ops or arguments.
  bool finished() const { return finished_; }

  /// Runs `build` (a layer, a composite) all or nothing: when it throws, every op, argument
  /// and parameter it added is removed again before the exception goes on, so a failed layer
  /// leaves no orphan parameters that the init function and callers would have to supply.
  template <typename Fn> auto atomically(Fn &&build) -> decltype(build()) {
    Mark mark = this->mark();
    try {
      return build();
    } catch (...) {
      rollback(mark);
      throw;
    }
  }

  /// Creates op `opName` and checks it with the dialect: the result type is inferred (the op's
  /// InferTypeOpInterface) when `resultType` is null, then the op is verified. On failure the
  /// op is erased and BuildError thrown with the dialect's first message at `loc`. Every op
  /// helper goes through here.
  Tensor make(llvm::StringRef opName, mlir::ValueRange operands,
              llvm::ArrayRef<mlir::NamedAttribute> attributes, mlir::Type resultType, Loc loc);

  mlir::Type elementType(DType dtype) { return smelt::elementType(context(), dtype); }
  mlir::Location location(Loc loc);
  mlir::OpBuilder &builder() { return builder_; }
  [[noreturn]] void fail(Loc loc, const std::string &message);
  /// Runs `pm` (smelt's passes, as smelt-opt runs them) on `module`; a failure is a BuildError
  /// at `loc` carrying the first diagnostic.
  void runPasses(mlir::PassManager &pm, mlir::ModuleOp module, const std::string &what, Loc loc);

private:
  /// Runs `build` with `scope` set to `value`, and puts the outer value back however it ends.
  template <typename T, typename Fn> static auto scoped(T &scope, T value, Fn &build) {
    T outer = std::exchange(scope, std::move(value));
    struct Restore {
      T &scope, outer;
      ~Restore() { scope = std::move(outer); }
    } restore{scope, std::move(outer)};
    return build();
  }
  /// How far the graph was built: its last op, argument count and parameter count.
  struct Mark {
    mlir::Operation *lastOp;
    unsigned numArguments;
    size_t numParameters;
    size_t numAssignments;
  };
  Mark mark();
  void rollback(const Mark &mark);
  void createFunction(Loc loc);
  /// `marker`: the argument's unit attribute ("smelt.param", "smelt.variable"), or empty.
  Tensor addArgument(const std::string &name, const std::vector<int64_t> &shape, DType dtype,
                     llvm::StringRef marker, Loc loc);
  /// A parameter or variable: checked `init`, an argument marked `marker`, its ParameterSpec.
  Tensor addWeight(const std::string &name, const std::vector<int64_t> &shape, Initializer init,
                   DType dtype, bool trainable, Loc loc);
  std::vector<Tensor> argumentsMarked(llvm::StringRef marker);

  std::string name_;
  uint64_t seed_;
  mlir::OwningOpRef<mlir::ModuleOp> ownedModule_; // null when building into a given module
  mlir::ModuleOp moduleOp_;
  mlir::func::FuncOp function_;
  mlir::OpBuilder builder_;
  std::vector<ParameterSpec> parameters_;
  /// (variable, its next value), in the order assign() was called.
  std::vector<std::pair<mlir::Value, mlir::Value>> assignments_;
  bool finished_ = false;
  std::string deviceScope_; // requested device of new ops; empty: the default
  std::optional<mlir::Location> locationScope_; // location of new ops; none: the caller's line
};

} // namespace smelt
