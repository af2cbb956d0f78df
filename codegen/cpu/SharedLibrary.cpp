// Object files -> shared library bytes with the system linker, run as `c++ -shared` (the driver
// knows where the C library's startup files and libm are; LLVM has no linker of its own here).
#include "codegen/cpu/ObjectCode.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

namespace smelt::codegen::cpu {

std::optional<std::vector<uint8_t>> linkSharedLibrary(const std::vector<std::vector<char>> &objects,
                                                      std::string &error) {
  llvm::ErrorOr<std::string> driver = llvm::sys::findProgramByName("c++");
  if (!driver) {
    error = "cannot link the CPU kernels into a shared library: no C++ compiler driver "
            "('c++') on the PATH (install g++ or clang)";
    return std::nullopt;
  }
  llvm::SmallString<128> dir;
  if (std::error_code ec = llvm::sys::fs::createUniqueDirectory("smelt-cpu-object", dir)) {
    error = "cannot create a temporary directory to link the CPU kernels: " + ec.message();
    return std::nullopt;
  }
  llvm::scope_exit removeDir([&] { llvm::sys::fs::remove_directories(dir); });
  auto in = [&](const std::string &name) {
    llvm::SmallString<128> path(dir);
    llvm::sys::path::append(path, name);
    return std::string(path);
  };
  std::string libraryPath = in("kernels.so"), log = in("link.log");
  std::vector<std::string> objectPaths;
  for (const std::vector<char> &object : objects) {
    std::string objectPath = in("kernels-" + std::to_string(objectPaths.size()) + ".o");
    std::error_code ec;
    llvm::raw_fd_ostream os(objectPath, ec);
    if (!ec) {
      os.write(object.data(), object.size());
      os.close();
      ec = os.error();
      // The stream's destructor aborts on an error nobody cleared.
      os.clear_error();
    }
    if (ec) {
      error = objectPath + ": cannot write the object file: " + ec.message();
      return std::nullopt;
    }
    objectPaths.push_back(std::move(objectPath));
  }
  // --as-needed keeps libstdc++ (which the driver adds) out of the library's dependencies; a
  // non-executable stack, because glibc refuses to dlopen a library that asks for one; no
  // startup files, so the library has no constructors or destructors: loading it runs none of
  // its code (the runtime's ELF checks refuse one that would, see runtime/ElfImage.h).
  llvm::SmallVector<llvm::StringRef> args = {*driver,         "-shared",
                                             "-nostartfiles", "-Wl,--as-needed",
                                             "-Wl,-z,noexecstack", "-o",
                                             libraryPath};
  args.append(objectPaths.begin(), objectPaths.end());
  args.push_back("-lm");
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(log),
                                                llvm::StringRef(log)};
  std::string why;
  int rc = llvm::sys::ExecuteAndWait(*driver, args, std::nullopt, redirects, 0, 0, &why);
  if (rc != 0) {
    auto messages = llvm::MemoryBuffer::getFile(log);
    error = "linking the CPU kernels with '" + *driver + " -shared' failed" +
            (why.empty() ? "" : ": " + why) +
            (messages ? ":\n" + (*messages)->getBuffer().str() : std::string());
    return std::nullopt;
  }
  auto library = llvm::MemoryBuffer::getFile(libraryPath, /*IsText=*/false,
                                             /*RequiresNullTerminator=*/false);
  if (!library) {
    error = libraryPath + ": cannot read the linked library: " + library.getError().message();
    return std::nullopt;
  }
  llvm::StringRef bytes = (*library)->getBuffer();
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

} // namespace smelt::codegen::cpu
