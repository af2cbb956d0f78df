// Compiles CUDA C++ with NVRTC: every call checked, a failed compile reported with NVRTC's log
// and the source it compiled, numbered so the log's line numbers can be followed. NVRTC is
// opened with dlopen on the first compile, as the runtime opens the CUDA libraries, not
// linked: loading libnvrtc costs every process 28 MiB resident (its relocations and static
// initializers), which a process that never compiles for a GPU should not pay.
#include "codegen/cuda/Nvrtc.h"

#include "codegen/CudaSources.h"

#include "runtime/CpuThreads.h"
#include "runtime/cuda/DynamicLibrary.h"

#include <nvrtc.h>

#include <mutex>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <vector>

namespace smelt::codegen {

namespace {

/// The NVRTC calls the compile makes, resolved from libnvrtc.so.13 (the CUDA 13 ABI nvrtc.h
/// declares) once per process.
struct NvrtcApi {
  decltype(&::nvrtcVersion) version;
  decltype(&::nvrtcGetErrorString) errorString;
  decltype(&::nvrtcCreateProgram) createProgram;
  decltype(&::nvrtcDestroyProgram) destroyProgram;
  decltype(&::nvrtcCompileProgram) compileProgram;
  decltype(&::nvrtcGetProgramLogSize) programLogSize;
  decltype(&::nvrtcGetProgramLog) programLog;
  decltype(&::nvrtcGetPTXSize) ptxSize;
  decltype(&::nvrtcGetPTX) ptx;
  decltype(&::nvrtcGetCUBINSize) cubinSize;
  decltype(&::nvrtcGetCUBIN) cubin;
};

/// The API, or why there is none (no library found: the files tried; a symbol missing).
const rt::Expected<NvrtcApi> &nvrtc() {
  static const rt::Expected<NvrtcApi> api = []() -> rt::Expected<NvrtcApi> {
    NvrtcApi api{};
    rt::Expected<void *> library = rt::cuda::openCudaTable(
        "NVRTC", "libnvrtc.so.13",
        {{reinterpret_cast<void **>(&api.version), "nvrtcVersion"},
         {reinterpret_cast<void **>(&api.errorString), "nvrtcGetErrorString"},
         {reinterpret_cast<void **>(&api.createProgram), "nvrtcCreateProgram"},
         {reinterpret_cast<void **>(&api.destroyProgram), "nvrtcDestroyProgram"},
         {reinterpret_cast<void **>(&api.compileProgram), "nvrtcCompileProgram"},
         {reinterpret_cast<void **>(&api.programLogSize), "nvrtcGetProgramLogSize"},
         {reinterpret_cast<void **>(&api.programLog), "nvrtcGetProgramLog"},
         {reinterpret_cast<void **>(&api.ptxSize), "nvrtcGetPTXSize"},
         {reinterpret_cast<void **>(&api.ptx), "nvrtcGetPTX"},
         {reinterpret_cast<void **>(&api.cubinSize), "nvrtcGetCUBINSize"},
         {reinterpret_cast<void **>(&api.cubin), "nvrtcGetCUBIN"}},
        "Smelt needs NVRTC 13");
    if (!library)
      return library.status();
    return api;
  }();
  return api;
}

rt::Status check(const NvrtcApi &api, nvrtcResult result, const char *call) {
  if (result == NVRTC_SUCCESS)
    return {};
  return rt::Status::error(std::string(call) + " failed: " + api.errorString(result));
}

// Returns the failed call's Status from the enclosing function.
#define SMELT_NVRTC_CHECK(call)                                                                    \
  if (rt::Status status = check(api, api.call, "nvrtc " #call); !status.ok())                      \
  return status

/// Destroys the program however the compile ends.
struct Program {
  const NvrtcApi &api;
  nvrtcProgram handle = nullptr;
  ~Program() {
    if (handle)
      api.destroyProgram(&handle); // nothing to report from a destructor
  }
};

/// NVRTC's sizes count the terminating NUL; a std::string does not.
void dropNul(std::string &text) { text.resize(std::strlen(text.c_str())); }

std::string numbered(const std::string &source) {
  std::string text;
  size_t start = 0;
  for (int line = 1; start < source.size(); ++line) {
    size_t end = source.find('\n', start);
    if (end == std::string::npos)
      end = source.size();
    std::string number = std::to_string(line);
    text += std::string(number.size() < 5 ? 5 - number.size() : 0, ' ') + number + "  " +
            source.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return text;
}

} // namespace

std::string nvrtcVersionString() {
  int major = 0, minor = 0;
  if (!nvrtc() || nvrtc()->version(&major, &minor) != NVRTC_SUCCESS)
    return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

rt::Expected<std::string> cudaIncludeDir() {
  std::vector<std::string> candidates;
  if (const char *dir = std::getenv("SMELT_CUDA_INCLUDE"))
    candidates.push_back(dir);
  for (const char *root : {"CUDA_HOME", "CUDA_PATH"})
    if (const char *dir = std::getenv(root))
      candidates.push_back(std::string(dir) + "/include");
  if (const char *path = std::getenv("SMELT_CUDA_LIBRARY_PATH")) {
    std::stringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');)
      if (!dir.empty())
        candidates.push_back(dir + "/nvidia/cu13/include");
  }
#ifdef SMELT_CUDA_INCLUDE_DIR
  candidates.push_back(SMELT_CUDA_INCLUDE_DIR);
#endif
  std::string tried;
  for (const std::string &dir : candidates) {
    std::error_code ignored;
    if (std::filesystem::exists(dir + "/cuda_fp16.h", ignored))
      return dir;
    tried += (tried.empty() ? "" : ", ") + dir;
  }
  return rt::Status::error("no CUDA include folder with cuda_fp16.h for NVRTC (tried: " +
                           (tried.empty() ? std::string("nothing") : tried) +
                           "); set SMELT_CUDA_INCLUDE to the toolkit's include folder");
}

rt::Expected<rt::CudaCode> compileWithNvrtc(const std::string &source, const std::string &arch,
                                            bool fmad) {
  if (!nvrtc())
    return nvrtc().status();
  const NvrtcApi &api = *nvrtc();
  rt::Expected<std::string> include = cudaIncludeDir();
  if (!include)
    return include.status();
  Program program{api};
  SMELT_NVRTC_CHECK(
      createProgram(&program.handle, source.c_str(), "smelt_kernels.cu", 0, nullptr, nullptr));
  std::string archOption = "--gpu-architecture=" + arch, includeOption = "-I" + *include;
  std::vector<const char *> options = {archOption.c_str(), "--std=c++17", includeOption.c_str(),
                                       fmad ? "--fmad=true" : "--fmad=false"};
  // NVRTC optimizes the kernels on the process's CPU threads (the GPT train step's module:
  // 5.4 s on one thread, 3.7 s on two); without it NVRTC uses one.
  int threads = rt::cpuThreadsOrDefault();
  std::string splitOption = "--split-compile=" + std::to_string(threads);
  if (threads > 1)
    options.push_back(splitOption.c_str());
  nvrtcResult compiled = api.compileProgram(program.handle, int(options.size()), options.data());

  size_t logSize = 0;
  SMELT_NVRTC_CHECK(programLogSize(program.handle, &logSize));
  std::string log(logSize, '\0');
  SMELT_NVRTC_CHECK(programLog(program.handle, log.data()));
  dropNul(log);
  if (compiled != NVRTC_SUCCESS)
    return rt::Status::error(
        "NVRTC " + nvrtcVersionString() + " could not compile the CUDA source for " + arch + " (" +
        api.errorString(compiled) + "):\n" + log + "\nThe source:\n" + numbered(source));

  rt::CudaCode code;
  code.arch = arch;
  code.source = source;
  size_t ptxSize = 0;
  SMELT_NVRTC_CHECK(ptxSize(program.handle, &ptxSize));
  code.ptx.assign(ptxSize, '\0');
  SMELT_NVRTC_CHECK(ptx(program.handle, code.ptx.data()));
  dropNul(code.ptx);
  if (arch.rfind("sm_", 0) == 0) {
    size_t cubinSize = 0;
    SMELT_NVRTC_CHECK(cubinSize(program.handle, &cubinSize));
    code.cubin.resize(cubinSize);
    SMELT_NVRTC_CHECK(cubin(program.handle, reinterpret_cast<char *>(code.cubin.data())));
  }
  if (rt::Status kept = keepCudaSource(code); !kept.ok())
    return kept;
  return code;
}

} // namespace smelt::codegen
