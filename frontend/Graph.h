// The C++ builder: a Graph builds one function of a smelt module, a Tensor is a typed handle
// to a value in it. Shapes are checked by the dialect's own rules (the same code the verifier
// runs), and a mistake throws BuildError naming the caller's file and line:
//
//   mlir::MLIRContext ctx;
//   smelt::Graph g(ctx, "forward");
//   smelt::Tensor x = g.input("images", {256, 784});
//   smelt::Tensor h = smelt::dense(x, 512, "dense1", smelt::Activation::Relu);
//   smelt::Tensor logits = smelt::dense(h, 10, "logits");
//   g.setOutputs({logits}, {"logits"});
//   g.buildInitializer();   // @forward_init returns every parameter's seeded initial value
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <source_location>
#include <stdexcept>
#include <string>
#include <vector>

namespace smelt {

using Loc = std::source_location;

enum class DType { f32, f16, bf16, f64, i32, i64, i1 };

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

  Graph &graph() const { return *graph_; }
  mlir::Value value() const { return value_; }
  mlir::RankedTensorType type() const;
  std::vector<int64_t> shape() const;
  int64_t rank() const { return type().getRank(); }
  int64_t dim(int64_t axis) const { return type().getDimSize(axis); }
  int64_t numElements() const { return type().getNumElements(); }
  DType dtype() const;

private:
  Graph *graph_ = nullptr;
  mlir::Value value_;
};

/// How a parameter gets its first value (Keras' initializers; fans as Keras computes them).
struct Initializer {
  enum class Kind { GlorotUniform, HeNormal, Zeros, Constant } kind = Kind::Zeros;
  double value = 0;
  static Initializer glorotUniform() { return {Kind::GlorotUniform}; }
  /// Keras draws He normal from a truncated normal; Smelt has no truncation op yet, so this is
  /// a plain normal with stddev sqrt(2 / fan_in).
  static Initializer heNormal() { return {Kind::HeNormal}; }
  static Initializer zeros() { return {Kind::Zeros}; }
  static Initializer constant(double v) { return {Kind::Constant, v}; }
};

struct ParameterSpec {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype;
  Initializer init;
  uint64_t seed;
};

class Graph {
public:
  /// A graph building function `name` in a module of its own. `seed` makes parameter
  /// initialization reproducible.
  explicit Graph(mlir::MLIRContext &context, std::string name = "main", uint64_t seed = 0);

  /// A new function argument (`smelt.name` = name).
  Tensor input(const std::string &name, const std::vector<int64_t> &shape,
               DType dtype = DType::f32, Loc loc = Loc::current());
  /// A trainable parameter: an argument marked `smelt.param`, initialized by @<name>_init.
  Tensor parameter(const std::string &name, const std::vector<int64_t> &shape, Initializer init,
                   DType dtype = DType::f32, Loc loc = Loc::current());
  /// The gradients of the rank-0 `loss` with respect to each of `wrt` (reverse-mode autodiff,
  /// ir/Autodiff.h), built into this graph so optimizer steps can use them.
  std::vector<Tensor> gradients(Tensor loss, const std::vector<Tensor> &wrt,
                                Loc loc = Loc::current());
  /// The parameters created so far, as tensors of this graph, in creation order.
  std::vector<Tensor> parameterTensors();
  /// Ends the function: returns `outputs`, named `names` (`smelt.name` on the results).
  void setOutputs(const std::vector<Tensor> &outputs, const std::vector<std::string> &names = {},
                  Loc loc = Loc::current());
  /// Adds @<name>_init: no arguments, every parameter's initial value in parameter order.
  void buildInitializer(Loc loc = Loc::current());

  mlir::ModuleOp module() { return *module_; }
  mlir::func::FuncOp function() { return function_; }
  mlir::MLIRContext &context() { return *module_->getContext(); }
  const std::string &name() const { return name_; }
  const std::vector<ParameterSpec> &parameters() const { return parameters_; }

  /// Creates op `opName` and checks it with the dialect: the result type is inferred when
  /// `resultType` is null, then the op is verified. Throws BuildError with the dialect's message
  /// at `loc` on failure. Every op helper goes through here.
  Tensor make(llvm::StringRef opName, mlir::ValueRange operands,
              llvm::ArrayRef<mlir::NamedAttribute> attributes, mlir::Type resultType, Loc loc);

  mlir::Type elementType(DType dtype);
  mlir::Location location(Loc loc);
  mlir::OpBuilder &builder() { return builder_; }
  [[noreturn]] void fail(Loc loc, const std::string &message);

private:
  Tensor addArgument(const std::string &name, const std::vector<int64_t> &shape, DType dtype,
                     bool isParameter, Loc loc);

  std::string name_;
  uint64_t seed_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
  mlir::func::FuncOp function_;
  mlir::OpBuilder builder_;
  std::vector<ParameterSpec> parameters_;
  bool finished_ = false;
};

} // namespace smelt
