// What passes and back ends know about an op, declared on the op in ODS (ir/SmeltOps.td) as
// parameterized traits and read through the OpFacts interface (ir/SmeltInterfaces.td): its
// role in fusion and cost per element (smelt-fuse), its precision class (smelt-mixed-precision),
// the element types a GPU kernel exists for (smelt-place-devices) and whether it stops
// gradients (smelt-autodiff). An op that states nothing gets the defaults below, so adding an
// op is its ODS line plus one line in each back end's element table.
#pragma once

#include "mlir/IR/OpDefinition.h"

#include <cstdint>

namespace smelt {

/// How an op takes part in fusion.
enum class FusionRole {
  None,        // a library call or an op no kernel renders (matmul, conv2d, rng_normal ...)
  Source,      // iota, splat constant: free to recompute in any kernel
  Elementwise, // unary, binary, compare, select, convert
  Remap,       // broadcast_in_dim, reshape, transpose, slice, concat, pad, gather: only move
               // elements (gather to a row it reads from its indices)
  Reduce,      // reduce: the root of a reduction kernel, never inside another
};

/// What mixed precision may do with an op whose operands are f32 (Keras' and XLA's lists).
enum class PrecisionClass {
  Allow, // computes well in bf16/f16 and is the point of it: matmul, convolutions
  Infer, // follows its operands: low precision when one of them already is
  Deny,  // stays f32: ranges or digits bf16/f16 cannot hold (exp, log, sums ...)
};

/// Element types as bits, for the types a device has a kernel for.
enum ElementBits : unsigned {
  kF32 = 1u << 0,
  kF16 = 1u << 1,
  kBF16 = 1u << 2,
  kF64 = 1u << 3,
  kI32 = 1u << 4,
  kI64 = 1u << 5,
  kI1 = 1u << 6,
  kAllElements = (1u << 7) - 1,
};
/// The bit of `type`'s element type (0 for a type Smelt has no bit for).
unsigned elementBit(mlir::Type type);

namespace OpTrait {

// The traits that carry the facts; ODS writes them as Smelt_FusionRole<"Remap">,
// Smelt_ElementCost<20>, Smelt_Precision<"Deny">, Smelt_GpuKernel<"kF32 | kF16">, Smelt_NoGradient.

template <FusionRole Role> struct FusionRoleIs {
  template <typename ConcreteOp> class Impl : public mlir::OpTrait::TraitBase<ConcreteOp, Impl> {
  public:
    static constexpr FusionRole kFusionRole = Role;
  };
};

template <int64_t Cost> struct ElementCostIs {
  template <typename ConcreteOp> class Impl : public mlir::OpTrait::TraitBase<ConcreteOp, Impl> {
  public:
    static constexpr int64_t kElementCost = Cost;
  };
};

template <PrecisionClass Class> struct PrecisionIs {
  template <typename ConcreteOp> class Impl : public mlir::OpTrait::TraitBase<ConcreteOp, Impl> {
  public:
    static constexpr PrecisionClass kPrecisionClass = Class;
  };
};

template <unsigned Types> struct GpuKernelFor {
  template <typename ConcreteOp> class Impl : public mlir::OpTrait::TraitBase<ConcreteOp, Impl> {
  public:
    static constexpr unsigned kGpuKernelTypes = Types;
  };
};

template <typename ConcreteOp>
class NoGradient : public mlir::OpTrait::TraitBase<ConcreteOp, NoGradient> {};

} // namespace OpTrait

namespace detail {

// The OpFacts interface's default implementations: an op's trait where it has one, else the
// rule every op follows.

template <typename Op> constexpr FusionRole fusionRoleOf() {
  if constexpr (requires { Op::kFusionRole; })
    return Op::kFusionRole;
  else
    return FusionRole::None;
}

template <typename Op> constexpr int64_t elementCostOf() {
  if constexpr (requires { Op::kElementCost; })
    return Op::kElementCost;
  else
    return fusionRoleOf<Op>() == FusionRole::Source || fusionRoleOf<Op>() == FusionRole::Remap
               ? 0
               : 1;
}

template <typename Op> constexpr PrecisionClass precisionClassOf() {
  if constexpr (requires { Op::kPrecisionClass; })
    return Op::kPrecisionClass;
  else
    return PrecisionClass::Deny;
}

template <typename Op> constexpr unsigned gpuKernelTypesOf() {
  if constexpr (requires { Op::kGpuKernelTypes; })
    return Op::kGpuKernelTypes;
  else
    return 0;
}

} // namespace detail
} // namespace smelt
