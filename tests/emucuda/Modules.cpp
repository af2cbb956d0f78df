// Modules and launches on the emulated devices. A CUBIN or PTX image cannot run on a CPU, so
// the driver runs the CUDA C++ it was compiled from: codegen keeps each module's source in
// $SMELT_CUDA_SOURCE_DIR as <sha256 of the image>.cu (codegen/cuda/Nvrtc.cpp), and loading the
// image builds that source with the host compiler and the SIMT emulator's prelude into a shared
// library beside it (<hash>.simt.so, reused by later loads; each load opens its own copy, with
// its own __device__ variables), exactly as the SIMT corpus tests build theirs
// (tests/unit/simt). A launch is checked against sm_90's limits, the kernel's __launch_bounds__
// and (from a CUBIN) its registers, its parameters are copied at the call, and when the work
// runs each device pointer is translated to where its bytes live and the kernel runs on the
// SIMT emulator.
#include "Core.h"

#include "Simt.h"

#include <openssl/sha.h>

#include <dlfcn.h>
#include <elf.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace smelt::emucuda {

struct Module;

struct Kernel {
  Module *module = nullptr;
  std::string name;
  void (*entry)(void *const *params) = nullptr;
  int parameters = 0;
  unsigned launchBounds = 1024;
  unsigned registers = 0; // a thread's, from the CUBIN; 0 when unknown (PTX)
};

struct Module {
  std::string hash;
  void *library = nullptr;
  std::map<std::string, std::unique_ptr<Kernel>> kernels;
};

namespace {

std::mutex modulesLock;
std::set<Module *> modules;

/// The image's bytes: a CUBIN is an ELF file whose extent its headers give; PTX is text.
std::string imageBytes(const void *image) {
  auto *bytes = static_cast<const unsigned char *>(image);
  if (std::memcmp(bytes, ELFMAG, SELFMAG) == 0 && bytes[EI_CLASS] == ELFCLASS64) {
    Elf64_Ehdr header;
    std::memcpy(&header, bytes, sizeof header);
    uint64_t end = std::max<uint64_t>(header.e_shoff + uint64_t(header.e_shnum) * header.e_shentsize,
                                      header.e_phoff + uint64_t(header.e_phnum) * header.e_phentsize);
    for (unsigned i = 0; i < header.e_shnum; ++i) {
      Elf64_Shdr section;
      std::memcpy(&section, bytes + header.e_shoff + i * header.e_shentsize, sizeof section);
      if (section.sh_type != SHT_NOBITS)
        end = std::max<uint64_t>(end, section.sh_offset + section.sh_size);
    }
    return std::string(reinterpret_cast<const char *>(bytes), end);
  }
  return std::string(reinterpret_cast<const char *>(bytes));
}

/// Each kernel's registers a thread, from a CUBIN: ptxas records them in `.nv.info` as
/// EIATTR_REGCOUNT (attribute 0x2f, format EIFMT_SVAL: a symbol index and the count), and each
/// kernel's `.text.<name>` section names its symbol in sh_info. Empty for anything else (PTX,
/// a CUBIN laid out otherwise): the launch is then not checked against the register file.
std::map<std::string, unsigned> registerCounts(const std::string &image) {
  std::map<std::string, unsigned> counts;
  auto *bytes = reinterpret_cast<const unsigned char *>(image.data());
  if (image.size() < sizeof(Elf64_Ehdr) || std::memcmp(bytes, ELFMAG, SELFMAG) != 0)
    return counts;
  Elf64_Ehdr header;
  std::memcpy(&header, bytes, sizeof header);
  if (header.e_shentsize != sizeof(Elf64_Shdr) || header.e_shstrndx >= header.e_shnum ||
      header.e_shoff + uint64_t(header.e_shnum) * sizeof(Elf64_Shdr) > image.size())
    return counts;
  std::vector<Elf64_Shdr> sections(header.e_shnum);
  std::memcpy(sections.data(), bytes + header.e_shoff, header.e_shnum * sizeof(Elf64_Shdr));
  const Elf64_Shdr &names = sections[header.e_shstrndx];
  auto nameOf = [&](const Elf64_Shdr &section) -> std::string {
    uint64_t at = names.sh_offset + section.sh_name;
    if (at >= image.size())
      return "";
    return std::string(reinterpret_cast<const char *>(bytes + at),
                       strnlen(reinterpret_cast<const char *>(bytes + at), image.size() - at));
  };
  std::map<uint32_t, unsigned> bySymbol;
  std::map<uint32_t, std::string> kernelOfSymbol;
  for (const Elf64_Shdr &section : sections) {
    std::string name = nameOf(section);
    if (name.rfind(".text.", 0) == 0)
      kernelOfSymbol[uint32_t(section.sh_info)] = name.substr(6);
    if (name != ".nv.info" || section.sh_offset + section.sh_size > image.size())
      continue;
    for (uint64_t at = section.sh_offset, end = at + section.sh_size; at + 2 <= end;) {
      unsigned format = bytes[at], attribute = bytes[at + 1];
      if (format == 0x04) { // EIFMT_SVAL: a 16-bit size, then the value
        if (at + 4 > end)
          break;
        uint16_t size;
        std::memcpy(&size, bytes + at + 2, 2);
        if (attribute == 0x2f && size == 8 && at + 12 <= end) { // EIATTR_REGCOUNT
          uint32_t symbol, count;
          std::memcpy(&symbol, bytes + at + 4, 4);
          std::memcpy(&count, bytes + at + 8, 4);
          bySymbol[symbol] = count;
        }
        at += 4 + size;
      } else if (format == 0x01) { // EIFMT_NVAL: no value
        at += 2;
      } else if (format == 0x02 || format == 0x03) { // EIFMT_BVAL, EIFMT_HVAL
        at += 4;
      } else {
        break; // a format this reader does not know: stop rather than misread
      }
    }
  }
  for (const auto &[symbol, count] : bySymbol)
    if (auto it = kernelOfSymbol.find(symbol); it != kernelOfSymbol.end())
      counts[it->second] = count;
  return counts;
}

std::string sha256Hex(const std::string &bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char *>(bytes.data()), bytes.size(), digest);
  static const char *hex = "0123456789abcdef";
  std::string text;
  for (unsigned char byte : digest) {
    text += hex[byte >> 4];
    text += hex[byte & 15];
  }
  return text;
}

bool readFile(const std::string &path, std::string &text) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  text = buffer.str();
  return true;
}

/// The folder this library was loaded from: the kernels' libraries link to it by path.
std::string driverDirectory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void *>(&driverDirectory), &info) && info.dli_fname) {
    // As loaded, which is relative where SMELT_CUDA_LIBRARY_PATH was (build/emucuda): made
    // absolute, or the kernels' RUNPATH would name a folder relative to wherever they run.
    std::error_code error;
    std::filesystem::path path = std::filesystem::canonical(info.dli_fname, error);
    if (!error)
      return path.parent_path().string();
  }
  return EMUCUDA_DRIVER_DIR;
}

/// Each kernel of the rendered source and its __launch_bounds__.
std::map<std::string, unsigned> kernelsOf(const std::string &source) {
  static const std::regex kernel(
      R"(extern "C" __global__ void (?:__launch_bounds__\((\d+)\) )?(\w+)\()");
  std::map<std::string, unsigned> found;
  for (auto it = std::sregex_iterator(source.begin(), source.end(), kernel);
       it != std::sregex_iterator(); ++it)
    found[(*it)[2].str()] = (*it)[1].matched ? unsigned(std::stoul((*it)[1].str())) : 1024u;
  return found;
}

/// The translation unit the host compiler builds: the prelude, the source unchanged, and for
/// each kernel an entry taking cuLaunchKernel's parameter array.
std::string emulatorSource(const std::string &source, const std::map<std::string, unsigned> &kernels) {
  std::string text = "// Built by the emulated CUDA driver (tests/emucuda/Modules.cpp).\n"
                     "#include \"SimtPrelude.h\"\n#include <utility>\n";
  text += source;
  text += R"(
namespace smelt_emucuda {
template <typename... P> constexpr int count(void (*)(P...)) { return sizeof...(P); }
template <typename... P, std::size_t... I>
void call(void (*kernel)(P...), void *const *params, std::index_sequence<I...>) {
  kernel(*static_cast<P *>(params[I])...);
}
} // namespace smelt_emucuda
#define SMELT_EMUCUDA_ENTRY(name)                                                          \
  extern "C" void smelt_emucuda_entry_##name(void *const *params) {                        \
    smelt_emucuda::call(name, params, std::make_index_sequence<smelt_emucuda::count(name)>()); \
  }                                                                                        \
  extern "C" const int smelt_emucuda_parameters_##name = smelt_emucuda::count(name);
)";
  for (const auto &[name, bounds] : kernels)
    text += "SMELT_EMUCUDA_ENTRY(" + name + ")\n";
  return text;
}

/// Builds `cpp` into `library` (through a temporary name, so concurrent processes never load
/// half a file); "" or the compiler's complaint.
std::string build(const std::string &cpp, const std::string &library) {
  std::string temporary = library + ".tmp" + std::to_string(getpid());
  std::string log = temporary + ".log";
  std::string driver = driverDirectory();
  std::string command = std::string(EMUCUDA_CXX) +
                        " -std=c++17 -shared -fPIC -O1 -fno-strict-aliasing -ffp-contract=off -w"
                        " -I" EMUCUDA_SIMT_DIR " -I" EMUCUDA_CUDA_INCLUDE " -x c++ '" + cpp +
                        "' -x none -o '" + temporary + "' '" + driver + "/libcuda.so.1' -Wl,-rpath,'" +
                        driver + "' > '" + log + "' 2>&1";
  int status = std::system(command.c_str());
  std::string output;
  readFile(log, output);
  std::remove(log.c_str());
  if (status != 0) {
    std::remove(temporary.c_str());
    return "the host compiler failed (" + command + "):\n" + output.substr(0, 4000);
  }
  if (std::rename(temporary.c_str(), library.c_str()) != 0)
    return "cannot rename " + temporary + " to " + library;
  return "";
}

} // namespace

CUresult loadModule(CUmodule *handle, const void *image) {
  if (!currentContext())
    return CUDA_ERROR_INVALID_CONTEXT;
  if (!handle || !image)
    return CUDA_ERROR_INVALID_VALUE;
  std::string bytes = imageBytes(image);
  std::string hash = sha256Hex(bytes);
  std::map<std::string, unsigned> registers = registerCounts(bytes);
  const char *folder = std::getenv("SMELT_CUDA_SOURCE_DIR");
  if (!folder || !*folder) {
    diagnose("cuModuleLoadData: the emulated driver runs a module's kernels from its CUDA "
             "source, which codegen keeps in $SMELT_CUDA_SOURCE_DIR; it is not set");
    return CUDA_ERROR_INVALID_IMAGE;
  }
  std::string base = std::string(folder) + "/" + hash;
  std::string source;
  if (!readFile(base + ".cu", source)) {
    diagnose("cuModuleLoadData: no source for the image with SHA-256 " + hash + " in " + folder +
             " (was it compiled with SMELT_CUDA_SOURCE_DIR set to that folder?)");
    return CUDA_ERROR_INVALID_IMAGE;
  }
  std::map<std::string, unsigned> kernels = kernelsOf(source);
  std::string library = base + ".simt.so";
  std::lock_guard<std::mutex> guard(modulesLock);
  struct stat existing{};
  if (stat(library.c_str(), &existing) != 0) {
    // This process's own copy: another (ctest -j) may be building the same module now.
    std::string cpp = base + ".simt." + std::to_string(getpid()) + ".cpp";
    std::ofstream(cpp) << emulatorSource(source, kernels);
    std::string why = build(cpp, library);
    std::remove(cpp.c_str());
    if (!why.empty()) {
      diagnose("cuModuleLoadData: " + why);
      return CUDA_ERROR_INVALID_IMAGE;
    }
  }
  // Each load gets the module's own __device__ variables, as on a GPU (a split reduction's
  // partials and counts): dlopen of one file twice gives one copy, which two devices running
  // the module at once would share. So each load opens a private copy of the library, unlinked
  // once open.
  static unsigned loads = 0;
  std::string copy = library + ".load" + std::to_string(getpid()) + "." + std::to_string(loads++);
  std::error_code copied;
  std::filesystem::copy_file(library, copy, std::filesystem::copy_options::overwrite_existing,
                             copied);
  if (copied) {
    diagnose("cuModuleLoadData: cannot copy " + library + ": " + copied.message());
    return CUDA_ERROR_INVALID_IMAGE;
  }
  void *loaded = dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::remove(copy.c_str());
  if (!loaded) {
    const char *why = dlerror();
    diagnose("cuModuleLoadData: dlopen(" + library + "): " + (why ? why : "?"));
    return CUDA_ERROR_INVALID_IMAGE;
  }
  auto module = std::make_unique<Module>();
  module->hash = hash;
  module->library = loaded;
  for (const auto &[name, bounds] : kernels) {
    auto kernel = std::make_unique<Kernel>();
    kernel->module = module.get();
    kernel->name = name;
    kernel->launchBounds = bounds;
    if (auto it = registers.find(name); it != registers.end())
      kernel->registers = it->second;
    kernel->entry = reinterpret_cast<void (*)(void *const *)>(
        dlsym(loaded, ("smelt_emucuda_entry_" + name).c_str()));
    auto *parameters =
        static_cast<const int *>(dlsym(loaded, ("smelt_emucuda_parameters_" + name).c_str()));
    if (!kernel->entry || !parameters) {
      diagnose("cuModuleLoadData: " + library + " has no entry for " + name);
      dlclose(loaded);
      return CUDA_ERROR_INVALID_IMAGE;
    }
    kernel->parameters = *parameters;
    module->kernels[name] = std::move(kernel);
  }
  *handle = reinterpret_cast<CUmodule>(module.get());
  modules.insert(module.release());
  return CUDA_SUCCESS;
}

CUresult unloadModule(CUmodule handle) {
  std::lock_guard<std::mutex> guard(modulesLock);
  auto *module = reinterpret_cast<Module *>(handle);
  if (!modules.erase(module))
    return CUDA_ERROR_INVALID_HANDLE;
  // The library stays loaded: queued launches may still call into it (the real driver's unload
  // of a module with work in flight is undefined; here it is harmless).
  return CUDA_SUCCESS;
}

CUresult moduleFunction(CUfunction *function, CUmodule handle, const char *name) {
  std::lock_guard<std::mutex> guard(modulesLock);
  auto *module = reinterpret_cast<Module *>(handle);
  if (!function || !name)
    return CUDA_ERROR_INVALID_VALUE;
  if (!modules.count(module))
    return CUDA_ERROR_INVALID_HANDLE;
  auto it = module->kernels.find(name);
  if (it == module->kernels.end())
    return CUDA_ERROR_NOT_FOUND;
  *function = reinterpret_cast<CUfunction>(it->second.get());
  return CUDA_SUCCESS;
}

CUresult launch(CUfunction function, unsigned gridX, unsigned gridY, unsigned gridZ,
                unsigned blockX, unsigned blockY, unsigned blockZ, unsigned sharedBytes,
                CUstream stream, void **params, void **extra) {
  if (!currentContext())
    return CUDA_ERROR_INVALID_CONTEXT;
  auto *kernel = reinterpret_cast<Kernel *>(function);
  {
    std::lock_guard<std::mutex> guard(modulesLock);
    if (!kernel || !modules.count(kernel->module))
      return CUDA_ERROR_INVALID_HANDLE;
  }
  std::string what = "kernel " + kernel->name + " <<<" + std::to_string(gridX) + ", " +
                     std::to_string(blockX) + ">>>";
  // sm_90's limits (what the real launch refuses), then the emulator's own (1-D launches,
  // static shared memory only: all the renderer writes).
  if (gridX == 0 || gridY == 0 || gridZ == 0 || blockX == 0 || blockY == 0 || blockZ == 0 ||
      gridX > 2147483647u || gridY > 65535 || gridZ > 65535 || blockX > 1024 || blockY > 1024 ||
      blockZ > 64 || uint64_t(blockX) * blockY * blockZ > 1024) {
    diagnose("cuLaunchKernel: " + what + ": grid or block outside sm_90's limits");
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (uint64_t(blockX) * blockY * blockZ > kernel->launchBounds) {
    diagnose("cuLaunchKernel: " + what + ": more threads than its __launch_bounds__(" +
             std::to_string(kernel->launchBounds) + ")");
    return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  }
  // sm_90's register file: 64K registers a block, given out to warps in units of 256.
  if (kernel->registers) {
    uint64_t threads = uint64_t(blockX) * blockY * blockZ, warps = (threads + 31) / 32;
    uint64_t perWarp = (uint64_t(kernel->registers) * 32 + 255) / 256 * 256;
    if (warps * perWarp > 65536) {
      diagnose("cuLaunchKernel: " + what + ": " + std::to_string(kernel->registers) +
               " registers a thread for " + std::to_string(threads) +
               " threads need more than sm_90's 65536 a block");
      return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    }
  }
  if (sharedBytes > 232448) {
    diagnose("cuLaunchKernel: " + what + ": " + std::to_string(sharedBytes) +
             " bytes of dynamic shared memory, over sm_90's 227 KiB");
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (gridY != 1 || gridZ != 1 || blockY != 1 || blockZ != 1 || sharedBytes != 0 || extra) {
    diagnose("cuLaunchKernel: " + what + ": the emulator runs 1-D launches with static shared "
             "memory and kernelParams only");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (kernel->parameters > 0 && !params)
    return CUDA_ERROR_INVALID_VALUE;
  // Parameters are copied at the call, as the driver does; every one the renderer writes is
  // a pointer.
  std::vector<uintptr_t> values(size_t(kernel->parameters));
  for (int i = 0; i < kernel->parameters; ++i)
    std::memcpy(&values[i], params[i], sizeof(uintptr_t));
  static std::mutex orderLock;
  static std::mt19937_64 orders(scheduleSeed());
  simt::Order order = simt::Order::Forward;
  if (schedule() == Schedule::Late) {
    std::lock_guard<std::mutex> guard(orderLock);
    order = orders() & 1 ? simt::Order::Reversed : simt::Order::Forward;
  }
  return enqueue(stream, what, [kernel, values, gridX, blockX, order, what]() {
    std::vector<uintptr_t> translated(values.size());
    std::vector<void *> pointers(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      auto *pointer = reinterpret_cast<const void *>(values[i]);
      translated[i] = pointer ? reinterpret_cast<uintptr_t>(hostView(
                                    pointer, 1, what + ", parameter " + std::to_string(i)))
                              : 0;
      pointers[i] = &translated[i];
    }
    std::string error = simt::launch(gridX, blockX, order,
                                     [&]() { kernel->entry(pointers.data()); });
    if (!error.empty())
      throw Fault(CUDA_ERROR_LAUNCH_FAILED, what + ": " + error);
  });
}

} // namespace smelt::emucuda
