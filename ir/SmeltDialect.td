// The smelt dialect: a dataflow graph of tensor ops with static shapes, XLA-style.
#ifndef SMELT_DIALECT_TD
#define SMELT_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"

def Smelt_Dialect : Dialect {
  let name = "smelt";
  let cppNamespace = "::smelt";
  let summary = "A dataflow graph of tensor ops with static shapes.";
  let hasConstantMaterializer = 1;
  let description = [{
    Values are builtin ranked tensors with static shapes of f32, f16, bf16, f64, i32, i64 or i1.
    Every op infers or checks its result type, and its verifier names the offending operand,
    shapes and attribute. docs/ops.md gives the exact semantics the back ends implement.
  }];
}

//===----------------------------------------------------------------------===//
// Types and enums
//===----------------------------------------------------------------------===//

def Smelt_Element : AnyTypeOf<[F32, F16, BF16, F64, I32, I64, I1]>;
def Smelt_Float : AnyTypeOf<[F32, F16, BF16, F64]>;
def Smelt_Number : AnyTypeOf<[F32, F16, BF16, F64, I32, I64]>;

def Smelt_Tensor : StaticShapeTensorOf<[F32, F16, BF16, F64, I32, I64, I1]>;
def Smelt_FloatTensor : StaticShapeTensorOf<[F32, F16, BF16, F64]>;
def Smelt_NumberTensor : StaticShapeTensorOf<[F32, F16, BF16, F64, I32, I64]>;
def Smelt_PredTensor : StaticShapeTensorOf<[I1]>;
def Smelt_IndexTensor : StaticShapeTensorOf<[I64]>;
// A rank-0 i64 tensor whose type the assembly format can rebuild, so it need not be spelled.
def Smelt_I64Scalar : 0DTensorOf<[I64]> {
  let builderCall = "::mlir::RankedTensorType::get({}, $_builder.getI64Type())";
}

def Smelt_CompareDirection : I32EnumAttr<"CompareDirection", "comparison of compare", [
    I32EnumAttrCase<"eq", 0>, I32EnumAttrCase<"ne", 1>, I32EnumAttrCase<"lt", 2>,
    I32EnumAttrCase<"le", 3>, I32EnumAttrCase<"gt", 4>, I32EnumAttrCase<"ge", 5>]> {
  let cppNamespace = "::smelt";
}

def Smelt_ReduceKind : I32EnumAttr<"ReduceKind", "combiner of reduce", [
    I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"max", 1>, I32EnumAttrCase<"min", 2>]> {
  let cppNamespace = "::smelt";
}

// What a matmul or conv2d applies to its result after the bias, in the library call itself
// (smelt-fuse folds it there): the same functions as the relu, tanh and logistic ops; relu6
// is min(max(x, 0), 6), hardswish x * min(max(x / 6 + 0.5, 0), 1) and swish x * logistic(x), as
// ONNX's Clip(0, 6), HardSwish and x * Sigmoid(x) import (MobileNet's and EfficientNet's).
def Smelt_Epilogue : I32EnumAttr<"Epilogue", "activation in a contraction's epilogue", [
    I32EnumAttrCase<"relu", 0>, I32EnumAttrCase<"tanh", 1>, I32EnumAttrCase<"logistic", 2>,
    I32EnumAttrCase<"relu6", 3>, I32EnumAttrCase<"hardswish", 4>, I32EnumAttrCase<"swish", 5>]> {
  let cppNamespace = "::smelt";
}

// The layout of a convolution's filter. hwio, [KH, KW, C/G, F], is Smelt's: the builder's, the
// importer's and oneDNN's on the CPU. ohwi, [F, KH, KW, C/G], is cuDNN's KRSC:
// smelt-gpu-conv-layouts gives it to the convolutions placed on a GPU, with the filter's
// transposes as ops of their own, which fuse into kernels or fold into constants at compile
// time, so that cuDNN reads the filter as it is.
def Smelt_FilterLayout : I32EnumAttr<"FilterLayout", "layout of a convolution's filter", [
    I32EnumAttrCase<"hwio", 0>, I32EnumAttrCase<"ohwi", 1>]> {
  let cppNamespace = "::smelt";
}

def Smelt_AllReduceKind : I32EnumAttr<"AllReduceKind", "combiner of all_reduce", [
    I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"mean", 1>]> {
  let cppNamespace = "::smelt";
}

#endif // SMELT_DIALECT_TD
