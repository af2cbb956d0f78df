// Op interfaces of the smelt dialect.
#ifndef SMELT_INTERFACES_TD
#define SMELT_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Smelt_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::smelt";
  let description = [{
    An op with a vector-Jacobian product: given the gradient of its result, the gradients of
    its operands. The rule sits next to the op (ir/Vjp.cpp); reverse-mode autodiff
    (ir/Autodiff.h) calls it for every op between the loss and the chosen arguments.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds the gradient of each operand from `resultGrad` at the builder's insertion point
        and appends it to `operandGrads` (one entry per operand; a null Value where an operand
        has no gradient, such as a select's predicate). Fails with a diagnostic on the op when
        a case has no rule.
      }], "::llvm::LogicalResult", "vjp",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Value":$resultGrad,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

#endif // SMELT_INTERFACES_TD
