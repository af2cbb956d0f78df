// keepCudaSource: a module's CUDA source kept by the hashes of its images (CudaSources.h).
#include "codegen/CudaSources.h"

#include "runtime/ContentHash.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/Path.h"

#include <cstdlib>

namespace smelt::codegen {

rt::Status keepCudaSource(const rt::CudaCode &code) {
  const char *folder = std::getenv("SMELT_CUDA_SOURCE_DIR");
  if (!folder || !*folder || code.source.empty())
    return rt::Status();
  if (std::error_code error = llvm::sys::fs::create_directories(folder))
    return rt::Status::error(std::string("SMELT_CUDA_SOURCE_DIR: cannot create ") + folder +
                             ": " + error.message());
  std::vector<std::vector<uint8_t>> images;
  if (!code.cubin.empty())
    images.push_back(code.cubin);
  if (!code.ptx.empty())
    images.emplace_back(code.ptx.begin(), code.ptx.end());
  for (const std::vector<uint8_t> &image : images) {
    llvm::SmallString<256> path(folder);
    llvm::sys::path::append(path, rt::sha256Hex(image) + ".cu");
    if (llvm::sys::fs::exists(path))
      continue; // the same image: the same source
    llvm::Error written = llvm::writeToOutput(path, [&](llvm::raw_ostream &out) {
      out << code.source;
      return llvm::Error::success();
    });
    if (written)
      return rt::Status::error("SMELT_CUDA_SOURCE_DIR: cannot write " + std::string(path) + ": " +
                               llvm::toString(std::move(written)));
  }
  return rt::Status();
}

} // namespace smelt::codegen
