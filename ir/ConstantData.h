// The elements of a smelt.constant as bytes, whichever attribute holds them: a dense attribute
// (small values, splats, what the builder makes) or a dense_resource blob (weights the ONNX
// importer moves in without a copy, results of folds over them). The folders and codegen read
// constants through this and make new ones with it.
#pragma once

#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinTypes.h"

#include <memory>
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

/// A dense_resource blob over bytes at `data` that `owner` keeps alive, recorded so that
/// codegen can share them with the executable it builds (sharedOwnerOf) instead of copying
/// a model's weights; the record goes with the blob. What the importer and the folds make.
/// `fileMapped`: the bytes are a read-only mapping of a file (a model's external weights).
mlir::AsmResourceBlob sharedBlob(llvm::ArrayRef<char> data, size_t alignment,
                                 std::shared_ptr<const void> owner, bool fileMapped = false);
/// Records that `file`, the bytes a module was parsed from, stays alive and unchanged while
/// `owner` lives: a bytecode file's dense_resource blobs point into it (MLIR's reader does not
/// copy them), and codegen then shares a constant there as it shares a sharedBlob's.
/// `fileMapped`: the bytes are a read-only mapping of the file.
void shareSourceBytes(llvm::ArrayRef<char> file, std::shared_ptr<const void> owner,
                      bool fileMapped);
/// The owner of a sharedBlob's bytes starting at `data`, or of a shared source file's bytes
/// holding `data`; else null (the bytes of a dense attribute, or of a module parsed from
/// text, belong to MLIR: they are copied).
std::shared_ptr<const void> sharedOwnerOf(const void *data);
/// Lets the whole pages of `bytes` leave memory when they are a sharedBlob's or a shared source
/// file's mapping
/// (read again, they come back from the file); a no-op for any other bytes. For the source of
/// a fold (a Conv's OIHW filter transposed to HWIO), which nothing reads afterwards: without
/// it a model's weights are resident twice while it compiles.
void releaseMappedPages(llvm::ArrayRef<char> bytes);
/// The same for bytes the caller knows to be in a read-only file mapping.
void releaseFilePages(llvm::ArrayRef<char> bytes);

} // namespace smelt
