// Raw bytes of constants and constants from raw bytes (ConstantData.h).
#include "ir/ConstantData.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"

#include <sys/mman.h>
#include <unistd.h>

#include <mutex>
#include <unordered_map>
#include <vector>

namespace smelt {

using namespace mlir;

std::optional<size_t> rawElementWidth(Type type) {
  unsigned bits = type.getIntOrFloatBitWidth();
  if (bits < 8 || bits % 8)
    return std::nullopt;
  return bits / 8;
}

std::optional<llvm::ArrayRef<char>> rawElementBytes(ElementsAttr value) {
  if (!rawElementWidth(value.getElementType()))
    return std::nullopt;
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return std::nullopt;
    return blob->getData();
  }
  if (auto dense = dyn_cast<DenseElementsAttr>(value); dense && !dense.isSplat())
    return dense.getRawData();
  return std::nullopt;
}

ElementsAttr elementsFromBytes(ShapedType type, std::vector<char> bytes) {
  if (bytes.size() <= kResourceBytes)
    return DenseElementsAttr::getFromRawBuffer(type, bytes);
  // The blob owns the vector's buffer: no copy. 8 bytes is the widest element's alignment,
  // which operator new gives.
  auto owned = std::make_shared<const std::vector<char>>(std::move(bytes));
  return DenseResourceElementsAttr::get(
      type, "smelt_folded", sharedBlob(*owned, alignof(uint64_t), owned));
}

namespace {
std::mutex ownersMutex;
struct Owner {
  std::weak_ptr<const void> owner; // weak: the blob holds it, and so does an executable
  bool fileMapped;
};
/// By the address of a sharedBlob's bytes.
std::unordered_map<const void *, Owner> &owners() {
  static auto *map = new std::unordered_map<const void *, Owner>();
  return *map;
}
/// Shared source files, by their bytes: a few per process (one per module parsed).
struct SourceFile {
  const char *begin, *end;
  Owner owner;
};
std::vector<SourceFile> &sourceFiles() {
  static auto *files = new std::vector<SourceFile>();
  return *files;
}
/// The record of `data`: its sharedBlob's, else the shared source file's that holds it. Under
/// ownersMutex.
const Owner *ownerRecord(const void *data) {
  if (auto it = owners().find(data); it != owners().end())
    return &it->second;
  auto *at = static_cast<const char *>(data);
  for (const SourceFile &file : sourceFiles())
    if (file.begin <= at && at < file.end && !file.owner.owner.expired())
      return &file.owner;
  return nullptr;
}
} // namespace

AsmResourceBlob sharedBlob(llvm::ArrayRef<char> data, size_t alignment,
                           std::shared_ptr<const void> owner, bool fileMapped) {
  {
    std::lock_guard<std::mutex> lock(ownersMutex);
    owners()[data.data()] = Owner{owner, fileMapped};
  }
  return UnmanagedAsmResourceBlob::allocateWithAlign(
      data, alignment, [owner](void *address, size_t, size_t) mutable {
        std::lock_guard<std::mutex> lock(ownersMutex);
        // Another blob over the same bytes may have replaced the record: drop only ours.
        auto it = owners().find(address);
        if (it != owners().end() && !it->second.owner.owner_before(owner) &&
            !owner.owner_before(it->second.owner))
          owners().erase(it);
        owner.reset();
      });
}

void shareSourceBytes(llvm::ArrayRef<char> file, std::shared_ptr<const void> owner,
                      bool fileMapped) {
  std::lock_guard<std::mutex> lock(ownersMutex);
  // Files whose owner is gone are dropped: their bytes may be memory again for anything.
  std::erase_if(sourceFiles(), [](const SourceFile &f) { return f.owner.owner.expired(); });
  sourceFiles().push_back({file.data(), file.data() + file.size(), Owner{owner, fileMapped}});
}

std::shared_ptr<const void> sharedOwnerOf(const void *data) {
  std::lock_guard<std::mutex> lock(ownersMutex);
  const Owner *record = ownerRecord(data);
  return record ? record->owner.lock() : nullptr;
}

void releaseMappedPages(llvm::ArrayRef<char> bytes) {
  {
    std::lock_guard<std::mutex> lock(ownersMutex);
    const Owner *record = ownerRecord(bytes.data());
    if (!record || !record->fileMapped)
      return; // heap memory: MADV_DONTNEED would zero it
  }
  releaseFilePages(bytes);
}

void releaseFilePages(llvm::ArrayRef<char> bytes) {
  uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  uintptr_t begin = (uintptr_t(bytes.data()) + page - 1) & ~(page - 1);
  uintptr_t end = (uintptr_t(bytes.data()) + bytes.size()) & ~(page - 1);
  if (begin < end)
    madvise(reinterpret_cast<void *>(begin), end - begin, MADV_DONTNEED);
}

} // namespace smelt
