// Compiles CUDA C++ with NVRTC: every call checked, a failed compile reported with NVRTC's log
// and the source it compiled, numbered so the log's line numbers can be followed.
#include "codegen/cuda/Nvrtc.h"

#include "codegen/CudaSources.h"

#include "runtime/CpuThreads.h"

#include <nvrtc.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <vector>

namespace smelt::codegen {

namespace {

rt::Status check(nvrtcResult result, const char *call) {
  if (result == NVRTC_SUCCESS)
    return {};
  return rt::Status::error(std::string(call) + " failed: " + nvrtcGetErrorString(result));
}

// Returns the failed call's Status from the enclosing function.
#define SMELT_NVRTC_CHECK(call)                                                                    \
  if (rt::Status status = check(call, #call); !status.ok())                                        \
  return status

/// Destroys the program however the compile ends.
struct Program {
  nvrtcProgram handle = nullptr;
  ~Program() {
    if (handle)
      nvrtcDestroyProgram(&handle); // nothing to report from a destructor
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
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
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
  rt::Expected<std::string> include = cudaIncludeDir();
  if (!include)
    return include.status();
  Program program;
  SMELT_NVRTC_CHECK(
      nvrtcCreateProgram(&program.handle, source.c_str(), "smelt_kernels.cu", 0, nullptr, nullptr));
  std::string archOption = "--gpu-architecture=" + arch, includeOption = "-I" + *include;
  std::vector<const char *> options = {archOption.c_str(), "--std=c++17", includeOption.c_str(),
                                       fmad ? "--fmad=true" : "--fmad=false"};
  // NVRTC optimizes the kernels on the process's CPU threads (the GPT train step's module:
  // 5.4 s on one thread, 3.7 s on two); without it NVRTC uses one.
  int threads = rt::cpuThreadsOrDefault();
  std::string splitOption = "--split-compile=" + std::to_string(threads);
  if (threads > 1)
    options.push_back(splitOption.c_str());
  nvrtcResult compiled = nvrtcCompileProgram(program.handle, int(options.size()), options.data());

  size_t logSize = 0;
  SMELT_NVRTC_CHECK(nvrtcGetProgramLogSize(program.handle, &logSize));
  std::string log(logSize, '\0');
  SMELT_NVRTC_CHECK(nvrtcGetProgramLog(program.handle, log.data()));
  dropNul(log);
  if (compiled != NVRTC_SUCCESS)
    return rt::Status::error(
        "NVRTC " + nvrtcVersionString() + " could not compile the CUDA source for " + arch + " (" +
        nvrtcGetErrorString(compiled) + "):\n" + log + "\nThe source:\n" + numbered(source));

  rt::CudaCode code;
  code.arch = arch;
  code.source = source;
  size_t ptxSize = 0;
  SMELT_NVRTC_CHECK(nvrtcGetPTXSize(program.handle, &ptxSize));
  code.ptx.assign(ptxSize, '\0');
  SMELT_NVRTC_CHECK(nvrtcGetPTX(program.handle, code.ptx.data()));
  dropNul(code.ptx);
  if (arch.rfind("sm_", 0) == 0) {
    size_t cubinSize = 0;
    SMELT_NVRTC_CHECK(nvrtcGetCUBINSize(program.handle, &cubinSize));
    code.cubin.resize(cubinSize);
    SMELT_NVRTC_CHECK(nvrtcGetCUBIN(program.handle, reinterpret_cast<char *>(code.cubin.data())));
  }
  if (rt::Status kept = keepCudaSource(code); !kept.ok())
    return kept;
  return code;
}

} // namespace smelt::codegen
