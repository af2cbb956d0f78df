// The elements of a smelt.constant as bytes, whichever attribute holds them: a dense attribute
// (small values, splats, what the builder makes) or a dense_resource blob (weights the ONNX
// importer moves in without a copy, results of folds over them). The folders and codegen read
// constants through this and make new ones with it.
#pragma once

#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/BuiltinTypes.h"

#include <optional>
#include <vector>

namespace smelt {

/// Bytes of one element of `type` in a constant's raw form (i1: none, MLIR packs bits).
std::optional<size_t> rawElementWidth(mlir::Type type);

/// The little-endian bytes of `value`'s elements, one after another in row-major order, when
/// it holds them so: a dense_resource whose blob is present, or a dense attribute that is not
/// a splat and not i1. Otherwise none: read it through its values.
std::optional<llvm::ArrayRef<char>> rawElementBytes(mlir::ElementsAttr value);

/// A constant of `type` holding `bytes` (row-major, little-endian). Past `kResourceBytes` the
/// bytes move into a dense_resource blob: a dense attribute would be hashed and copied to be
/// uniqued, and printed inline.
mlir::ElementsAttr elementsFromBytes(mlir::ShapedType type, std::vector<char> bytes);
constexpr size_t kResourceBytes = size_t(1) << 16;

} // namespace smelt
