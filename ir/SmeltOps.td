// Ops of the smelt dialect: sources, elementwise, shape, reductions, contractions.
#ifndef SMELT_OPS_TD
#define SMELT_OPS_TD

include "ir/SmeltDialect.td"
include "ir/SmeltInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Every op answers the OpFacts interface: the facts it states with Smelt_FusionRole,
// Smelt_ElementCost, Smelt_Precision, Smelt_GpuKernel and Smelt_NoGradient (ir/OpFacts.h), the
// defaults where it states none. Every op's tensors are within the size limit.
class Smelt_Op<string mnemonic, list<Trait> traits = []>
    : Op<Smelt_Dialect, mnemonic,
         !listconcat([Pure, Smelt_OpFactsInterface, Smelt_TensorsFitInMemory], traits)>;

// Ops whose result type follows from operands and attributes. The shape rules live in
// ir/SmeltOps.cpp as `infer<Name>` functions, so the parser, the verifier and the builder share
// one check and one message.
class Smelt_InferredOp<string mnemonic, list<Trait> traits = []>
    : Smelt_Op<mnemonic, !listconcat([InferTypeOpAdaptor], traits)>;

// An op with a gradient rule (ir/Vjp.cpp).
defvar Smelt_Differentiable = DeclareOpInterfaceMethods<Smelt_DifferentiableOpInterface>;

//===----------------------------------------------------------------------===//
// Sources
//===----------------------------------------------------------------------===//

def Smelt_ConstantOp : Smelt_InferredOp<"constant", [ConstantLike, Smelt_FusionRole<"Source">,
    Smelt_GpuKernel<"::smelt::kAllElements">, Smelt_NoGradient]> {
  let summary = "a tensor literal";
  let description = [{
    A tensor whose elements are given by `value`.

    ```mlir
    %c = smelt.constant dense<[1.0, 2.0]> : tensor<2xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Smelt_Tensor:$result);
  let assemblyFormat = "$value attr-dict";
  let hasFolder = 1;
}

def Smelt_IotaOp : Smelt_Op<"iota", [Smelt_FusionRole<"Source">, Smelt_NoGradient]> {
  let summary = "indices along one dimension";
  let description = [{
    Each element holds its index along `dimension`.

    ```mlir
    %i = smelt.iota dim = 1 : tensor<2x3xi64>   // [[0, 1, 2], [0, 1, 2]]
    ```
  }];
  let arguments = (ins I64Attr:$dimension);
  let results = (outs Smelt_NumberTensor:$result);
  let assemblyFormat = "`dim` `=` $dimension attr-dict `:` type($result)";
  let hasVerifier = 1;
}

// Fusible: a kernel draws each element where it is used (a dropout mask inside the kernel that
// applies it), on the CPU and the GPU alike, bit for bit the same.
def Smelt_RngUniformOp : Smelt_Op<"rng_uniform", [Smelt_NoGradient,
    Smelt_FusionRole<"Elementwise">, Smelt_ElementCost<32>,
    Smelt_GpuKernel<"::smelt::kF32 | ::smelt::kF16 | ::smelt::kBF16 | ::smelt::kF64 | " #
                    "::smelt::kI64">]> {
  let summary = "counter-based uniform random numbers";
  let description = [{
    Uniform numbers in [`low`, `high`) from Philox4x32-10 keyed by `seed` and counted by element
    index (docs/ops.md), so every device draws the same numbers for the same seed. The optional
    rank-0 i64 `offset` fills the counter's upper words: a training step passes its step number
    so dropout draws a new mask each step from one compiled function.

    ```mlir
    %u = smelt.rng_uniform seed = 7, low = 0.0, high = 1.0 : tensor<256x512xf32>
    ```
  }];
  let arguments = (ins I64Attr:$seed, F64Attr:$low, F64Attr:$high,
                   Optional<Smelt_I64Scalar>:$offset);
  let results = (outs Smelt_FloatTensor:$result);
  let assemblyFormat = [{
    `seed` `=` $seed `,` `low` `=` $low `,` `high` `=` $high (`offset` $offset^)? attr-dict
    `:` type($result)
  }];
  let hasVerifier = 1;
}

// Fusible like rng_uniform: a kernel draws each element from its Philox words, so initial weights
// are drawn on the device that holds them.
def Smelt_RngNormalOp : Smelt_Op<"rng_normal", [Smelt_NoGradient,
    Smelt_FusionRole<"Elementwise">, Smelt_ElementCost<64>,
    Smelt_GpuKernel<"::smelt::kF32 | ::smelt::kF16 | ::smelt::kBF16 | ::smelt::kF64 | " #
                    "::smelt::kI64">]> {
  let summary = "counter-based normal random numbers";
  let description = [{
    Normal numbers with `mean` and `stddev` (Box-Muller over Philox4x32-10, docs/ops.md); the
    optional rank-0 i64 `offset` fills the counter's upper words, as for rng_uniform.

    ```mlir
    %n = smelt.rng_normal seed = 7, mean = 0.0, stddev = 1.0 : tensor<784x512xf32>
    ```
  }];
  let arguments = (ins I64Attr:$seed, F64Attr:$mean, F64Attr:$stddev,
                   Optional<Smelt_I64Scalar>:$offset);
  let results = (outs Smelt_FloatTensor:$result);
  let assemblyFormat = [{
    `seed` `=` $seed `,` `mean` `=` $mean `,` `stddev` `=` $stddev (`offset` $offset^)? attr-dict
    `:` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// `facts` are the op's cost and precision class; by default a cheap op that follows its
// operands' precision. Its gradient rule is in ir/Vjp.cpp.
class Smelt_UnaryOp<string mnemonic, Constraint tensorType, string what,
                    list<Trait> facts = [Smelt_Precision<"Infer">]>
    : Smelt_InferredOp<mnemonic, !listconcat([Elementwise, Smelt_Differentiable,
                                              Smelt_FusionRole<"Elementwise">], facts)> {
  let summary = "elementwise " # what;
  let description = "Applies " # what # " to each element.\n\n```mlir\n%y = smelt." # mnemonic #
                    " %x : tensor<4x8xf32>\n```";
  let arguments = (ins tensorType:$x);
  let results = (outs tensorType:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(::mlir::MLIRContext *,
        std::optional<::mlir::Location>, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      types.push_back(adaptor.getX().getType());
      return ::mlir::success();
    }
  }];
}

def Smelt_NegOp : Smelt_UnaryOp<"neg", Smelt_NumberTensor, "negation">;
def Smelt_AbsOp : Smelt_UnaryOp<"abs", Smelt_NumberTensor, "absolute value">;
def Smelt_ReluOp : Smelt_UnaryOp<"relu", Smelt_NumberTensor, "max(x, 0)">;
// Mixed precision keeps exp, log, sqrt, rsqrt, erf, sin and cos in f32 (the default class):
// exp overflows f16 above 11, log and sqrt lose the digits a loss needs, and sin/cos of a
// position index need more bits than bf16 has. tanh and logistic are bounded: they follow.
def Smelt_ExpOp : Smelt_UnaryOp<"exp", Smelt_FloatTensor, "e^x", [Smelt_ElementCost<20>]>;
def Smelt_LogOp : Smelt_UnaryOp<"log", Smelt_FloatTensor, "the natural logarithm",
                                [Smelt_ElementCost<20>]>;
def Smelt_TanhOp : Smelt_UnaryOp<"tanh", Smelt_FloatTensor, "the hyperbolic tangent",
                                 [Smelt_ElementCost<20>, Smelt_Precision<"Infer">]>;
def Smelt_LogisticOp : Smelt_UnaryOp<"logistic", Smelt_FloatTensor, "the sigmoid 1/(1+e^-x)",
                                     [Smelt_ElementCost<20>, Smelt_Precision<"Infer">]>;
def Smelt_SqrtOp : Smelt_UnaryOp<"sqrt", Smelt_FloatTensor, "the square root",
                                 [Smelt_ElementCost<4>]>;
def Smelt_RsqrtOp : Smelt_UnaryOp<"rsqrt", Smelt_FloatTensor, "the reciprocal square root",
                                  [Smelt_ElementCost<4>]>;
def Smelt_ErfOp : Smelt_UnaryOp<"erf", Smelt_FloatTensor, "the error function",
                                [Smelt_ElementCost<20>]>;
def Smelt_SinOp : Smelt_UnaryOp<"sin", Smelt_FloatTensor, "the sine", [Smelt_ElementCost<20>]>;
def Smelt_CosOp : Smelt_UnaryOp<"cos", Smelt_FloatTensor, "the cosine", [Smelt_ElementCost<20>]>;

// Binary ops take operands of one type; the builder inserts broadcast_in_dim for NumPy
// broadcasting, so the IR states every broadcast. The custom type directive prints one type
// when both operands share it, which they must.
class Smelt_BinaryOp<string mnemonic, Constraint tensorType, string what,
                     list<Trait> facts = [Smelt_Precision<"Infer">]>
    : Smelt_InferredOp<mnemonic, !listconcat([Elementwise, Smelt_Differentiable,
                                              Smelt_FusionRole<"Elementwise">], facts)> {
  let summary = "elementwise " # what;
  let description = "Computes " # what # " of each pair of elements; both operands have the " #
                    "same type.\n\n```mlir\n%z = smelt." # mnemonic #
                    " %x, %y : tensor<4x8xf32>\n```";
  let arguments = (ins tensorType:$lhs, tensorType:$rhs);
  let results = (outs tensorType:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` custom<SameTypes>(type($lhs), type($rhs))";
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(::mlir::MLIRContext *,
        std::optional<::mlir::Location> location, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return inferSameTypes(location, getOperationName(), {"lhs", "rhs"},
                            {adaptor.getLhs(), adaptor.getRhs()}, types);
    }
  }];
}

def Smelt_AddOp : Smelt_BinaryOp<"add", Smelt_NumberTensor, "the sum">;
def Smelt_SubOp : Smelt_BinaryOp<"sub", Smelt_NumberTensor, "the difference">;
def Smelt_MulOp : Smelt_BinaryOp<"mul", Smelt_NumberTensor, "the product">;
def Smelt_DivOp : Smelt_BinaryOp<"div", Smelt_NumberTensor,
                                 "the quotient (integers truncate; x/0 is 0)",
                                 [Smelt_ElementCost<4>, Smelt_Precision<"Infer">]>;
def Smelt_MaxOp : Smelt_BinaryOp<"max", Smelt_NumberTensor, "the maximum">;
def Smelt_MinOp : Smelt_BinaryOp<"min", Smelt_NumberTensor, "the minimum">;
def Smelt_PowOp : Smelt_BinaryOp<"pow", Smelt_FloatTensor, "lhs raised to rhs",
                                 [Smelt_ElementCost<40>]>;

def Smelt_CompareOp : Smelt_InferredOp<"compare", [Elementwise, Smelt_FusionRole<"Elementwise">,
    Smelt_Precision<"Infer">, Smelt_NoGradient]> {
  let summary = "elementwise comparison";
  let description = [{
    Compares each pair of elements with `direction` (eq, ne, lt, le, gt, ge), giving i1.

    ```mlir
    %m = smelt.compare lt, %x, %y : tensor<4xf32>
    ```
  }];
  let arguments = (ins Smelt_CompareDirection:$direction, Smelt_Tensor:$lhs, Smelt_Tensor:$rhs);
  let results = (outs Smelt_PredTensor:$result);
  let assemblyFormat = [{
    $direction `,` $lhs `,` $rhs attr-dict `:` custom<SameTypes>(type($lhs), type($rhs))
  }];
}

def Smelt_SelectOp : Smelt_InferredOp<"select", [Elementwise, Smelt_Differentiable,
    Smelt_FusionRole<"Elementwise">, Smelt_Precision<"Infer">]> {
  let summary = "elementwise choice";
  let description = [{
    Takes `on_true` where `pred` holds and `on_false` elsewhere; all three have one shape.

    ```mlir
    %z = smelt.select %m, %x, %y : tensor<4xi1>, tensor<4xf32>
    ```
  }];
  let arguments = (ins Smelt_PredTensor:$pred, Smelt_Tensor:$on_true, Smelt_Tensor:$on_false);
  let results = (outs Smelt_Tensor:$result);
  let assemblyFormat = [{
    $pred `,` $on_true `,` $on_false attr-dict `:` type($pred) `,`
    custom<SameTypes>(type($on_true), type($on_false))
  }];
}

// Not marked Elementwise: that trait's generic shape check would run before, and hide, the
// verifier's message naming both types.
def Smelt_ConvertOp : Smelt_Op<"convert", [Smelt_Differentiable, Smelt_FusionRole<"Elementwise">]> {
  let summary = "elementwise change of element type";
  let description = [{
    Converts each element to the result's element type: floats round to nearest even, float to
    integer truncates toward zero and saturates (NaN gives 0), anything to i1 is `x != 0`.

    ```mlir
    %h = smelt.convert %x : tensor<4xf32> -> tensor<4xbf16>
    ```
  }];
  let arguments = (ins Smelt_Tensor:$x);
  let results = (outs Smelt_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Shape
//===----------------------------------------------------------------------===//

def Smelt_BroadcastInDimOp : Smelt_Op<"broadcast_in_dim", [Smelt_Differentiable,
    Smelt_FusionRole<"Remap">, Smelt_Precision<"Infer">]> {
  let summary = "broadcast to a larger shape";
  let description = [{
    Operand dimension i becomes result dimension `dims[i]` (strictly increasing); an operand
    dimension of size 1 is repeated, any other must equal its result dimension. Other result
    dimensions are new.

    ```mlir
    %b = smelt.broadcast_in_dim %bias, dims = [1] : tensor<512xf32> -> tensor<256x512xf32>
    ```
  }];
  let arguments = (ins Smelt_Tensor:$x, DenseI64ArrayAttr:$broadcast_dimensions);
  let results = (outs Smelt_Tensor:$result);
  let assemblyFormat = [{
    $x `,` `dims` `=` $broadcast_dimensions attr-dict `:` type($x) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

// A reshape only renames the bytes, so every device has it.
def Smelt_ReshapeOp : Smelt_Op<"reshape", [Smelt_Differentiable, Smelt_FusionRole<"Remap">,
    Smelt_Precision<"Infer">, Smelt_GpuKernel<"::smelt::kAllElements">]> {
  let summary = "same elements, new shape";
  let description = [{
    Reinterprets the row-major elements with the result's shape; the element count is kept.

    ```mlir
    %f = smelt.reshape %img : tensor<256x28x28x1xf32> -> tensor<256x784xf32>
    ```
  }];
  let arguments = (ins Smelt_Tensor:$x);
  let results = (outs Smelt_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Smelt_TransposeOp : Smelt_InferredOp<"transpose", [Smelt_Differentiable,
    Smelt_FusionRole<"Remap">, Smelt_Precision<"Infer">]> {
  let summary = "permute dimensions";
  let description = [{
    Result dimension i is operand dimension `permutation[i]`.

    ```mlir
    %t = smelt.transpose %x, permutation = [1, 0] : tensor<3x4xf32>   // tensor<4x3xf32>
    ```
  }];
  let arguments = (ins Smelt_Tensor:$x, DenseI64ArrayAttr:$permutation);
  let results = (outs Smelt_Tensor:$result);
  let assemblyFormat = "$x `,` `permutation` `=` $permutation attr-dict `:` type($x)";
  let hasFolder = 1;
}

// slice, concat and pad only move elements, so a kernel reads them at mapped coordinates (XLA's
// elemental emitter): a slice at start + stride * i, a concat from the operand its coordinate
// falls in, a pad from its operand or the constant. Read outside its piece, an operand is read
// at a clamped index and the value is discarded by a select, so reads stay in bounds.
def Smelt_SliceOp : Smelt_InferredOp<"slice", [Smelt_Differentiable, Smelt_FusionRole<"Remap">,
    Smelt_Precision<"Infer">]> {
  let summary = "a strided box of elements";
  let description = [{
    Takes indices start, start + stride, ... below limit in each dimension.

    ```mlir
    %s = smelt.slice %x [0:2:1, 1:4:2] : tensor<3x4xf32>   // tensor<2x2xf32>
    ```
  }];
  let arguments = (ins Smelt_Tensor:$x, DenseI64ArrayAttr:$start_indices,
                   DenseI64ArrayAttr:$limit_indices, DenseI64ArrayAttr:$strides);
  let results = (outs Smelt_Tensor:$result);
  let assemblyFormat = [{
    $x custom<SliceRanges>($start_indices, $limit_indices, $strides) attr-dict `:` type($x)
  }];
  let hasFolder = 1; // of a constant (ir/ConstantFolds.cpp)
}

def Smelt_ConcatOp : Smelt_InferredOp<"concat", [Smelt_Differentiable, Smelt_FusionRole<"Remap">,
    Smelt_ElementCost<1>, Smelt_Precision<"Infer">]> {
  let summary = "join tensors along one dimension";
  let description = [{
    Operands agree in element type and in every dimension but `dimension`.

    ```mlir
    %c = smelt.concat %a, %b dim = 0 : tensor<2x3xf32>, tensor<5x3xf32>   // tensor<7x3xf32>
    ```
  }];
  let arguments = (ins Variadic<Smelt_Tensor>:$inputs, I64Attr:$dimension);
  let results = (outs Smelt_Tensor:$result);
  let assemblyFormat = "$inputs `dim` `=` $dimension attr-dict `:` type($inputs)";
  let hasFolder = 1; // of constants (ir/ConstantFolds.cpp)
}

def Smelt_PadOp : Smelt_InferredOp<"pad", [Smelt_Differentiable, Smelt_FusionRole<"Remap">,
    Smelt_ElementCost<1>, Smelt_Precision<"Infer">]> {
  let summary = "grow each dimension with a constant";
  let description = [{
    Adds `low[i]` elements before and `high[i]` after dimension i, all equal to `value`.

    ```mlir
    %p = smelt.pad %x low = [1, 0] high = [1, 2] value = 0.0 : tensor<2x2xf32>  // tensor<4x4xf32>
    ```
  }];
  let arguments = (ins Smelt_Tensor:$x, DenseI64ArrayAttr:$low, DenseI64ArrayAttr:$high,
                   F64Attr:$value);
  let results = (outs Smelt_Tensor:$result);
  let assemblyFormat = [{
    $x `low` `=` $low `high` `=` $high `value` `=` $value attr-dict `:` type($x)
  }];
}

//===----------------------------------------------------------------------===//
// Gather and scatter: rows of a table picked by integer indices
//===----------------------------------------------------------------------===//

// Fusible as XLA's elemental emitter makes gathers: an element of the result reads its index
// from `indices` and then one element of `table`, so it only moves elements (a Remap), with a
// compare and a select or two to clamp the index.
def Smelt_GatherOp : Smelt_InferredOp<"gather", [Smelt_Differentiable, Smelt_FusionRole<"Remap">,
    Smelt_ElementCost<2>, Smelt_Precision<"Infer">]> {
  let summary = "rows of a table picked by indices (an embedding lookup)";
  let description = [{
    `table` is [V, D1..Dk] and `indices` [B1..Bm] (i32 or i64); the result is
    [B1..Bm, D1..Dk] with result[b, d] = table[clamp(indices[b], 0, V - 1), d]. An index out
    of [0, V) is clamped into it, as XLA and JAX do, so a kernel never reads out of bounds.

    ```mlir
    %e = smelt.gather %table[%ids] : tensor<1000x64xf32>, tensor<8x16xi32>   // tensor<8x16x64xf32>
    ```
  }];
  let arguments = (ins Smelt_NumberTensor:$table, Smelt_Tensor:$indices);
  let results = (outs Smelt_NumberTensor:$result);
  let assemblyFormat = "$table `[` $indices `]` attr-dict `:` type($table) `,` type($indices)";
}

// Not fusible: several elements of `updates` add into one element of the result. A runtime
// step on the CPU (runtime/cpu/ScatterAdd.cpp); on a GPU a kernel of its own
// (codegen/cuda/CudaScatterAddKernel.cpp). Both add each result element's updates in index
// order from one thread, so the sums are deterministic and the same bits on either device.
def Smelt_ScatterAddOp : Smelt_InferredOp<"scatter_add", [Smelt_Differentiable,
    Smelt_GpuKernel<"::smelt::kF32 | ::smelt::kF16 | ::smelt::kBF16 | ::smelt::kF64 | " #
                    "::smelt::kI32 | ::smelt::kI64">]> {
  let summary = "sums of rows added at indices (the gradient of gather)";
  let description = [{
    `updates` is [B1..Bm, D1..Dk] and `indices` [B1..Bm] (i32 or i64); the result is
    [`size`, D1..Dk]: zeros, then result[clamp(indices[b], 0, size - 1)] += updates[b] for
    every b in row-major order. Repeated indices add up; f16 and bf16 sums are kept in f32 and
    rounded once.

    ```mlir
    %g = smelt.scatter_add %dy[%ids] size = 1000 : tensor<8x16x64xf32>, tensor<8x16xi32>
    ```
  }];
  let arguments = (ins Smelt_FloatTensor:$updates, Smelt_Tensor:$indices, I64Attr:$size);
  let results = (outs Smelt_FloatTensor:$result);
  let assemblyFormat = [{
    $updates `[` $indices `]` `size` `=` $size attr-dict `:` type($updates) `,` type($indices)
  }];
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

def Smelt_ReduceOp : Smelt_InferredOp<"reduce", [Smelt_Differentiable, Smelt_FusionRole<"Reduce">]> {
  let summary = "sum, max or min over dimensions";
  let description = [{
    Combines elements over `axes` (strictly increasing) with `kind`; those dimensions are
    dropped from the result.

    ```mlir
    %s = smelt.reduce sum %x axes = [1] : tensor<256x10xf32>   // tensor<256xf32>
    ```
  }];
  let arguments = (ins Smelt_ReduceKind:$kind, Smelt_NumberTensor:$x,
                   DenseI64ArrayAttr:$axes);
  let results = (outs Smelt_NumberTensor:$result);
  let assemblyFormat = "$kind $x `axes` `=` $axes attr-dict `:` type($x)";
}

// Not fusible (a reduction to an index, not a value). A runtime step on the CPU
// (runtime/cpu/Argmax.cpp); on a GPU a kernel of its own (codegen/cuda/CudaArgmaxKernel.cpp).
def Smelt_ArgmaxOp : Smelt_InferredOp<"argmax", [Smelt_NoGradient,
    Smelt_GpuKernel<"::smelt::kF32 | ::smelt::kF16 | ::smelt::kBF16 | ::smelt::kF64 | " #
                    "::smelt::kI32 | ::smelt::kI64">]> {
  let summary = "index of the largest element along one dimension";
  let description = [{
    Gives the i64 index of the maximum along `axis`, which is dropped; ties go to the first
    index and NaN counts as largest.

    ```mlir
    %k = smelt.argmax %logits axis = 1 : tensor<256x10xf32>   // tensor<256xi64>
    ```
  }];
  let arguments = (ins Smelt_NumberTensor:$x, I64Attr:$axis);
  let results = (outs Smelt_IndexTensor:$result);
  let assemblyFormat = "$x `axis` `=` $axis attr-dict `:` type($x)";
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

// cuBLASLt on the GPU; f32 accumulation in bf16/f16, which mixed precision is for.
def Smelt_MatmulOp : Smelt_InferredOp<"matmul", [Smelt_Differentiable, Smelt_Precision<"Allow">,
    Smelt_GpuKernel<"::smelt::kF32 | ::smelt::kF16 | ::smelt::kBF16 | ::smelt::kF64">]> {
  let summary = "batched matrix product";
  let description = [{
    `lhs` is [..., M, K] and `rhs` is [..., K, N] with equal leading batch dimensions, giving
    [..., M, N]. `transpose_lhs` / `transpose_rhs` swap the last two dimensions of an operand
    first, so the IR never needs an explicit transpose for a backward pass.

    An epilogue, which smelt-fuse folds in after autodiff (the builder never writes one): a
    `bias` [N] added to every row, then an `activation`, computed inside the library call
    (oneDNN post-ops, cuBLASLt epilogues). Such a matmul has no gradient rule.

    ```mlir
    %y = smelt.matmul %x, %w : tensor<256x784xf32>, tensor<784x512xf32>
    %g = smelt.matmul %x, %dy transpose_lhs : tensor<256x784xf32>, tensor<256x512xf32>
    %h = smelt.matmul %x, %w bias %b activation relu
        : tensor<256x784xf32>, tensor<784x512xf32>, tensor<512xf32>
    ```
  }];
  let arguments = (ins Smelt_FloatTensor:$lhs, Smelt_FloatTensor:$rhs,
                   Optional<Smelt_FloatTensor>:$bias, UnitAttr:$transpose_lhs,
                   UnitAttr:$transpose_rhs, OptionalAttr<Smelt_Epilogue>:$activation);
  let results = (outs Smelt_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)? (`transpose_rhs` $transpose_rhs^)?
    (`bias` $bias^)? (`activation` $activation^)?
    attr-dict `:` type($lhs) `,` type($rhs) (`,` type($bias)^)?
  }];
  let hasVerifier = 1;
}

// Window attributes of convolutions: two strides, four paddings (top, bottom, left, right),
// two dilations, and XLA's feature_group_count G: the input's C channels and the filter's F
// output channels split into G consecutive groups, group k convolving input channels
// [k*C/G, (k+1)*C/G) into output channels [k*F/G, (k+1)*F/G) with its own filter columns, so
// the HWIO filter is [KH, KW, C/G, F]. G == C is a depthwise convolution. Printed only when
// it is not 1.
defvar Smelt_ConvWindow = (ins DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                          DenseI64ArrayAttr:$dilation,
                          DefaultValuedAttr<I64Attr, "1">:$feature_group_count);
// The filter's layout, printed only when it is not hwio.
defvar Smelt_FilterLayoutArg =
    (ins DefaultValuedAttr<Smelt_FilterLayout, "::smelt::FilterLayout::hwio">:$filter_layout);
defvar Smelt_PoolWindow = (ins DenseI64ArrayAttr:$window, DenseI64ArrayAttr:$strides,
                          DenseI64ArrayAttr:$padding);

// Convolutions and pooling are cuDNN calls on the GPU.
def Smelt_Conv2DOp : Smelt_InferredOp<"conv2d", [Smelt_Differentiable, Smelt_Precision<"Allow">,
    Smelt_GpuKernel<"::smelt::kF32 | ::smelt::kF16 | ::smelt::kBF16">]> {
  let summary = "2-D convolution, NHWC input and HWIO filter";
  let description = [{
    Cross-correlates an NHWC `input` with an HWIO `filter` [KH, KW, C/G, F], giving NHWC
    [N, OH, OW, F] with OH = (H + top + bottom - dh*(KH-1) - 1) / sh + 1; G is the
    feature_group_count (1 unless given: a depthwise convolution has G == C). With
    `filter_layout = ohwi` the filter is [F, KH, KW, C/G] (cuDNN's KRSC; the gradients take the
    same attribute). An epilogue, as
    matmul's: a `bias` [F] added at every pixel, then an `activation` (oneDNN post-ops on the
    CPU; smelt-fuse folds them, only there).

    ```mlir
    %y = smelt.conv2d %x, %w strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1]
        : tensor<8x28x28x1xf32>, tensor<3x3x1x32xf32>   // tensor<8x28x28x32xf32>
    %z = smelt.conv2d %x, %w strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1]
        bias %b activation relu : tensor<8x28x28x1xf32>, tensor<3x3x1x32xf32>, tensor<32xf32>
    %d = smelt.conv2d %y, %dw strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1]
        feature_group_count = 32 : tensor<8x28x28x32xf32>, tensor<3x3x1x32xf32>
    ```
  }];
  let arguments = !con((ins Smelt_FloatTensor:$input, Smelt_FloatTensor:$filter,
                        Optional<Smelt_FloatTensor>:$bias),
                       Smelt_ConvWindow, (ins OptionalAttr<Smelt_Epilogue>:$activation),
                       Smelt_FilterLayoutArg);
  let results = (outs Smelt_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $filter `strides` `=` $strides `padding` `=` $padding `dilation` `=` $dilation
    (`feature_group_count` `=` $feature_group_count^)? (`filter_layout` `=` $filter_layout^)?
    (`bias` $bias^)? (`activation` $activation^)?
    attr-dict `:` type($input) `,` type($filter) (`,` type($bias)^)?
  }];
  let hasVerifier = 1;
}

def Smelt_Conv2DBackwardInputOp : Smelt_Op<"conv2d_backward_input", [Smelt_Differentiable, Smelt_Precision<"Allow">,
    Smelt_GpuKernel<"::smelt::kF32 | ::smelt::kF16 | ::smelt::kBF16">]> {
  let summary = "gradient of conv2d with respect to its input";
  let description = [{
    Given the gradient of a conv2d's result and its filter, the gradient of its input, whose
    type is the result type (the forward input's shape cannot always be recovered from strides).

    ```mlir
    %dx = smelt.conv2d_backward_input %dy, %w strides = [1, 1] padding = [1, 1, 1, 1]
        dilation = [1, 1] : tensor<8x28x28x32xf32>, tensor<3x3x1x32xf32> -> tensor<8x28x28x1xf32>
    ```
  }];
  let arguments = !con((ins Smelt_FloatTensor:$grad_output, Smelt_FloatTensor:$filter),
                       Smelt_ConvWindow, Smelt_FilterLayoutArg);
  let results = (outs Smelt_FloatTensor:$result);
  let assemblyFormat = "$grad_output `,` $filter `strides` `=` $strides `padding` `=` $padding `dilation` `=` $dilation (`feature_group_count` `=` $feature_group_count^)? (`filter_layout` `=` $filter_layout^)? attr-dict `:` type($grad_output) `,` type($filter) `->` type($result)";
  let hasVerifier = 1;
}

def Smelt_Conv2DBackwardFilterOp : Smelt_Op<"conv2d_backward_filter", [Smelt_Precision<"Allow">,
    Smelt_GpuKernel<"::smelt::kF32 | ::smelt::kF16 | ::smelt::kBF16">]> {
  let summary = "gradient of conv2d with respect to its filter";
  let description = [{
    Given a conv2d's input and the gradient of its result, the gradient of its HWIO filter,
    whose type is the result type.

    ```mlir
    %dw = smelt.conv2d_backward_filter %x, %dy strides = [1, 1] padding = [1, 1, 1, 1]
        dilation = [1, 1] : tensor<8x28x28x1xf32>, tensor<8x28x28x32xf32> -> tensor<3x3x1x32xf32>
    ```
  }];
  let arguments = !con((ins Smelt_FloatTensor:$input, Smelt_FloatTensor:$grad_output),
                       Smelt_ConvWindow, Smelt_FilterLayoutArg);
  let results = (outs Smelt_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad_output `strides` `=` $strides `padding` `=` $padding `dilation` `=` $dilation (`feature_group_count` `=` $feature_group_count^)? (`filter_layout` `=` $filter_layout^)? attr-dict `:` type($input) `,` type($grad_output) `->` type($result)";
  let hasVerifier = 1;
}

def Smelt_MaxPool2DOp : Smelt_InferredOp<"max_pool2d", [Smelt_Differentiable,
    Smelt_Precision<"Infer">, Smelt_GpuKernel<"::smelt::kF32 | ::smelt::kF16 | ::smelt::kBF16">]> {
  let summary = "2-D max pooling, NHWC";
  let description = [{
    The maximum of each window; padding never wins. OH = (H + top + bottom - kh) / sh + 1.

    ```mlir
    %p = smelt.max_pool2d %x window = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0]
        : tensor<8x28x28x32xf32>   // tensor<8x14x14x32xf32>
    ```
  }];
  let arguments = !con((ins Smelt_FloatTensor:$input), Smelt_PoolWindow);
  let results = (outs Smelt_FloatTensor:$result);
  let assemblyFormat = "$input `window` `=` $window `strides` `=` $strides `padding` `=` $padding attr-dict `:` type($input)";
}

def Smelt_AvgPool2DOp : Smelt_InferredOp<"avg_pool2d", [Smelt_Differentiable,
    Smelt_Precision<"Infer">, Smelt_GpuKernel<"::smelt::kF32 | ::smelt::kF16 | ::smelt::kBF16">]> {
  let summary = "2-D average pooling, NHWC";
  let description = [{
    The mean of each window over the elements inside the input (padding is not counted).

    ```mlir
    %p = smelt.avg_pool2d %x window = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0]
        : tensor<8x28x28x32xf32>   // tensor<8x14x14x32xf32>
    ```
  }];
  let arguments = !con((ins Smelt_FloatTensor:$input), Smelt_PoolWindow);
  let results = (outs Smelt_FloatTensor:$result);
  let assemblyFormat = "$input `window` `=` $window `strides` `=` $strides `padding` `=` $padding attr-dict `:` type($input)";
}

def Smelt_MaxPool2DBackwardOp : Smelt_InferredOp<"max_pool2d_backward", [Smelt_Precision<"Infer">,
    Smelt_GpuKernel<"::smelt::kF32 | ::smelt::kF16 | ::smelt::kBF16">]> {
  let summary = "gradient of max_pool2d";
  let description = [{
    Routes each element of `grad_output` to the first maximum of its window in `input`.

    ```mlir
    %dx = smelt.max_pool2d_backward %x, %dy window = [2, 2] strides = [2, 2]
        padding = [0, 0, 0, 0] : tensor<8x28x28x32xf32>, tensor<8x14x14x32xf32>
    ```
  }];
  let arguments = !con((ins Smelt_FloatTensor:$input, Smelt_FloatTensor:$grad_output),
                       Smelt_PoolWindow);
  let results = (outs Smelt_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad_output `window` `=` $window `strides` `=` $strides `padding` `=` $padding attr-dict `:` type($input) `,` type($grad_output)";
}

def Smelt_AvgPool2DBackwardOp : Smelt_Op<"avg_pool2d_backward", [Smelt_Precision<"Infer">,
    Smelt_GpuKernel<"::smelt::kF32 | ::smelt::kF16 | ::smelt::kBF16">]> {
  let summary = "gradient of avg_pool2d";
  let description = [{
    Spreads each element of `grad_output` evenly over its window; the result type is the
    forward input's.

    ```mlir
    %dx = smelt.avg_pool2d_backward %dy window = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0]
        : tensor<8x14x14x32xf32> -> tensor<8x28x28x32xf32>
    ```
  }];
  let arguments = !con((ins Smelt_FloatTensor:$grad_output), Smelt_PoolWindow);
  let results = (outs Smelt_FloatTensor:$result);
  let assemblyFormat = "$grad_output `window` `=` $window `strides` `=` $strides `padding` `=` $padding attr-dict `:` type($grad_output) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Placement
//===----------------------------------------------------------------------===//

def Smelt_CopyOp : Smelt_Op<"copy", [SameOperandsAndResultType,
    Smelt_GpuKernel<"::smelt::kAllElements">]> {
  let summary = "the same tensor on another device";
  let description = [{
    Its result is `x` placed where the copy itself is placed (its `smelt.device`):
    smelt-place-devices inserts one wherever a value crosses between devices. On one device
    it is a plain copy.

    ```mlir
    %g = smelt.copy %x {smelt.device = "gpu:0"} : tensor<256x784xf32>
    ```
  }];
  let arguments = (ins Smelt_Tensor:$x);
  let results = (outs Smelt_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

//===----------------------------------------------------------------------===//
// Collectives: data-parallel replicas
//===----------------------------------------------------------------------===//

// NCCL on the GPU.
def Smelt_AllReduceOp : Smelt_InferredOp<"all_reduce", [Smelt_Differentiable,
    Smelt_GpuKernel<"::smelt::kF32 | ::smelt::kF16 | ::smelt::kBF16 | ::smelt::kF64 | " #
                    "::smelt::kI32 | ::smelt::kI64">]> {
  let summary = "sum or mean of each operand over all replicas";
  let description = [{
    Every replica runs the same function on its own data; each result is the elementwise sum
    (or mean) of its operand over all `replicas` replicas, the same on every replica. A data-
    parallel training step all-reduces its gradients (mean) before the optimizer, so the
    parameters stay identical everywhere. Several operands make one collective over a flat
    buffer of all of them (a bucket, written by smelt-bucket-all-reduce); they share an element
    type. The executor starts it as soon as its operands are ready and waits for it before the
    first step that reads a result, so it overlaps with the steps in between. Its gradient is
    the same all_reduce of the results' gradients.

    ```mlir
    %g = smelt.all_reduce mean %grad replicas = 2 : tensor<784x512xf32>
    %a, %b = smelt.all_reduce sum %x, %y replicas = 4 : tensor<512xf32>, tensor<10xf32>
    ```
  }];
  let arguments = (ins Smelt_AllReduceKind:$kind, Variadic<Smelt_NumberTensor>:$xs,
                   I64Attr:$replicas);
  let results = (outs Variadic<Smelt_NumberTensor>:$results);
  let assemblyFormat = "$kind $xs `replicas` `=` $replicas attr-dict `:` type($xs)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

// On a GPU the executor writes the index into the result on its stream.
def Smelt_ReplicaIdOp : Smelt_Op<"replica_id", [Smelt_GpuKernel<"::smelt::kI64">]> {
  let summary = "this replica's index";
  let description = [{
    The index in [0, replicas) of the replica running the function, as a rank-0 i64: what
    makes replicas draw different random numbers (dropout) from one compiled function. 0 when
    the function runs alone.

    ```mlir
    %r = smelt.replica_id : tensor<i64>
    ```
  }];
  let results = (outs Smelt_I64Scalar:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Structure: fusion regions (written by smelt-fuse, one kernel each)
//===----------------------------------------------------------------------===//

def Smelt_FusionKind : I32EnumAttr<"FusionKind", "shape of a fusion's kernel", [
    I32EnumAttrCase<"loop", 0>, I32EnumAttrCase<"reduction", 1>]> {
  let cppNamespace = "::smelt";
}

// A fusion is NVRTC code on the GPU whatever it holds (smelt-fuse admits only ops codegen
// renders for every element type).
def Smelt_FusionOp : Smelt_Op<"fusion", [IsolatedFromAbove, SingleBlock,
    Smelt_GpuKernel<"::smelt::kAllElements">]> {
  let summary = "a region of ops that becomes one kernel";
  let description = [{
    The body computes the results from the block arguments (the `inputs`) with elementwise,
    convert, broadcast_in_dim, reshape, transpose, gather, iota, rng_uniform, rng_normal and scalar constant
    ops, and
    for a `reduction` fusion with reduces as the roots. A `loop` fusion yields values of one shape
    (its iteration space; dtypes may differ); a `reduction` fusion yields only reduces, all
    over the same operand shape and axes. Codegen renders the body once per back end
    (codegen/FusionWalk.h): CUDA C++ for the GPU, LLVM through MLIR for the CPU.

    ```mlir
    %y = smelt.fusion loop (%x, %b) : (tensor<256x512xf32>, tensor<512xf32>) -> tensor<256x512xf32> {
    ^bb0(%xs: tensor<256x512xf32>, %bs: tensor<512xf32>):
      %0 = smelt.broadcast_in_dim %bs, dims = [1] : tensor<512xf32> -> tensor<256x512xf32>
      %1 = smelt.add %xs, %0 : tensor<256x512xf32>
      %2 = smelt.relu %1 : tensor<256x512xf32>
      smelt.yield %2 : tensor<256x512xf32>
    }
    ```
  }];
  let arguments = (ins Smelt_FusionKind:$kind, Variadic<Smelt_Tensor>:$inputs);
  let results = (outs Variadic<Smelt_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $kind `(` $inputs `)` attr-dict `:` functional-type($inputs, $results) $body
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The yield that ends the body.
    YieldOp getYield();
    /// The shape every element of the kernel is computed over: the yielded shape of a loop
    /// fusion, the reduced operand's shape of a reduction fusion.
    ::llvm::ArrayRef<int64_t> getIterationShape();
  }];
}

def Smelt_YieldOp : Op<Smelt_Dialect, "yield",
    [Pure, Terminator, HasParent<"FusionOp">]> {
  let summary = "the results of a fusion body";
  let description = [{
    Ends a `smelt.fusion` body; its operands become the fusion's results, in order.

    ```mlir
    smelt.yield %2, %3 : tensor<256x512xf32>, tensor<256x512xf32>
    ```
  }];
  let arguments = (ins Variadic<Smelt_Tensor>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}

#endif // SMELT_OPS_TD
