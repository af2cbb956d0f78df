// Object files -> machine code in process, through ORC's LLJIT. The JIT owns the code;
// rt::CpuCode keeps it alive and the runtime calls through plain function pointers.
#include "codegen/cpu/Jit.h"

#include "codegen/cpu/HostMachine.h"

#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Support/MemoryBuffer.h"

#include <atomic>
#include <cstdlib>
#include <mutex>

namespace smelt::codegen::cpu {

namespace {

/// Set while the process exits, from before any JIT kept in a static made earlier than the
/// first JIT compile (a benchmark's cached executor) is destroyed.
std::atomic<bool> exiting{false};

/// A JIT torn down during exit can run after LLVM's lazily built statics (made by our first
/// compile and so destroyed before statics made earlier) are gone. A JIT destroyed while the
/// process exits is left to the exit instead; its kernels have no destructors to run.
void destroyUnlessExiting(llvm::orc::LLJIT *jit) {
  if (!exiting.load())
    delete jit;
}

/// Registers the exit flag's setter once, before the first JIT is made: handlers run in the
/// reverse order of registration, so it runs before the destructors of statics made earlier.
void watchForExit() {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit([] { exiting.store(true); }); });
}

} // namespace

std::shared_ptr<rt::CpuCode> jitLink(const std::vector<std::vector<char>> &objects,
                                     llvm::ArrayRef<std::string> names, std::string &error) {
  watchForExit();
  std::optional<llvm::orc::JITTargetMachineBuilder> machine = hostMachineBuilder(error);
  if (!machine)
    return nullptr;
  // No platform: the objects have no initializers or destructors, and without one the JIT
  // compiles nothing of its own (the generic platform's atexit code, which it compiles when it
  // is destroyed).
  auto jit = llvm::orc::LLJITBuilder()
                 .setJITTargetMachineBuilder(std::move(*machine))
                 .setPlatformSetUp(llvm::orc::setUpInactivePlatform)
                 .create();
  if (!jit) {
    error = "cannot start the JIT: " + llvm::toString(jit.takeError());
    return nullptr;
  }
  // The kernels call libm (erf, tanh on f64), which the process has.
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      (*jit)->getDataLayout().getGlobalPrefix());
  if (!process) {
    error = "the JIT cannot search this process's symbols: " +
            llvm::toString(process.takeError());
    return nullptr;
  }
  (*jit)->getMainJITDylib().addGenerator(std::move(*process));
  for (auto [i, object] : llvm::enumerate(objects)) {
    auto buffer = llvm::MemoryBuffer::getMemBufferCopy(
        llvm::StringRef(object.data(), object.size()), "smelt-cpu-kernels-" + std::to_string(i));
    if (llvm::Error e = (*jit)->addObjectFile(std::move(buffer))) {
      error = "the JIT cannot load the kernels' object code: " + llvm::toString(std::move(e));
      return nullptr;
    }
  }
  auto code = std::make_shared<rt::CpuCode>();
  for (const std::string &name : names) {
    auto address = (*jit)->lookup(name);
    if (!address) {
      error = "kernel '" + name +
              "' is missing from the JIT-compiled code: " + llvm::toString(address.takeError());
      return nullptr;
    }
    code->entries.push_back(address->toPtr<rt::CpuKernelFn>());
  }
  code->owner = std::shared_ptr<llvm::orc::LLJIT>(jit->release(), destroyUnlessExiting);
  return code;
}

} // namespace smelt::codegen::cpu
