// Op interfaces of the smelt dialect.
#ifndef SMELT_INTERFACES_TD
#define SMELT_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Smelt_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::smelt";
  let description = [{
    An op with a vector-Jacobian product: given the gradient of its result, the gradients of
    its operands. The rule sits next to the op (ir/Vjp.cpp); reverse-mode autodiff
    (smelt-autodiff, passes/Autodiff.cpp) calls it for every op between the loss and the chosen arguments.
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

//===----------------------------------------------------------------------===//
// Op facts (ir/OpFacts.h): what passes and back ends ask of an op, stated once on the op
//===----------------------------------------------------------------------===//

// Its part in a fused kernel (smelt-fuse): "Source", "Elementwise", "Remap" or "Reduce".
class Smelt_FusionRole<string role>
    : ParamNativeOpTrait<"FusionRoleIs", "::smelt::FusionRole::" # role> {
  let cppNamespace = "::smelt::OpTrait";
}
// Arithmetic per element in "simple op" units (add = 1): smelt-fuse weighs recomputation by it.
class Smelt_ElementCost<int cost> : ParamNativeOpTrait<"ElementCostIs", !cast<string>(cost)> {
  let cppNamespace = "::smelt::OpTrait";
}
// Its class under mixed precision: "Allow", "Infer" or "Deny" (the default).
class Smelt_Precision<string class_>
    : ParamNativeOpTrait<"PrecisionIs", "::smelt::PrecisionClass::" # class_> {
  let cppNamespace = "::smelt::OpTrait";
}
// The element types a GPU library call (cuBLASLt, cuDNN, NCCL), copy or one-op kernel (argmax,
// scatter_add) exists for, as ElementBits ("::smelt::kF32 | ::smelt::kF16"): every element
// type the op reads or writes must be among them (rng_uniform's i64 is its offset). Fusible
// ops need none: they run on the GPU as part of a fused kernel.
class Smelt_GpuKernel<string types> : ParamNativeOpTrait<"GpuKernelFor", types> {
  let cppNamespace = "::smelt::OpTrait";
}
// Piecewise constant or a source: reverse mode stops the gradient here instead of failing.
def Smelt_NoGradient : NativeOpTrait<"NoGradient"> {
  let cppNamespace = "::smelt::OpTrait";
}

// Every operand and result fits the size limit of ir/TensorSize.h (checked when verifying).
def Smelt_TensorsFitInMemory : NativeOpTrait<"TensorsFitInMemory"> {
  let cppNamespace = "::smelt::OpTrait";
}

def Smelt_OpFactsInterface : OpInterface<"OpFacts"> {
  let cppNamespace = "::smelt";
  let description = [{
    The facts above, read by passes through one interface that every smelt op has. An op that
    states a fact with a trait gets it; one that does not gets the default in ir/OpFacts.h.
  }];
  let methods = [
    StaticInterfaceMethod<"How the op takes part in fusion.", "::smelt::FusionRole",
      "getFusionRole", (ins), [{}], [{ return ::smelt::detail::fusionRoleOf<ConcreteOp>(); }]>,
    StaticInterfaceMethod<"Arithmetic per element (add = 1, remaps 0).", "int64_t",
      "getElementCost", (ins), [{}], [{ return ::smelt::detail::elementCostOf<ConcreteOp>(); }]>,
    StaticInterfaceMethod<"Its class under mixed precision.", "::smelt::PrecisionClass",
      "getPrecisionClass", (ins), [{}],
      [{ return ::smelt::detail::precisionClassOf<ConcreteOp>(); }]>,
    StaticInterfaceMethod<"ElementBits of the types its GPU call, copy or kernel exists for.",
      "unsigned", "getGpuKernelTypes", (ins), [{}],
      [{ return ::smelt::detail::gpuKernelTypesOf<ConcreteOp>(); }]>,
    StaticInterfaceMethod<"Whether reverse mode stops the gradient at this op.", "bool",
      "stopsGradient", (ins), [{}],
      [{ return ConcreteOp::template hasTrait<::smelt::OpTrait::NoGradient>(); }]>,
  ];
}

#endif // SMELT_INTERFACES_TD
