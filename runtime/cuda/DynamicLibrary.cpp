// The CUDA libraries' search order, dlopen over it, and symbol lookup (DynamicLibrary.h).
#include "runtime/cuda/DynamicLibrary.h"

#include <fmt/format.h>

#include <dlfcn.h>
#include <glob.h>
#include <link.h>
#include <sys/stat.h>

#include <cstdlib>
#include <set>
#include <utility>

namespace smelt::rt::cuda {
namespace {

/// Every path matching `pattern`, sorted (glob's order), none when nothing matches.
std::vector<std::string> matching(const std::string &pattern) {
  std::vector<std::string> paths;
  glob_t found{};
  if (glob(pattern.c_str(), 0, nullptr, &found) == 0)
    for (size_t i = 0; i < found.gl_pathc; ++i)
      paths.emplace_back(found.gl_pathv[i]);
  globfree(&found);
  return paths;
}

std::string environment(const char *variable) {
  const char *value = std::getenv(variable);
  return value ? value : "";
}

/// The site-packages folders pip may have installed NVIDIA's wheels into, most specific first:
/// the active environments, the user's and the system's, then virtual environments nobody
/// activated under each of `venvParents` (/opt/NAME/{,.venv/,venv/}lib/python3*: where images
/// keep PyTorch's or JAX's venv, whose CUDA wheels a job uses without activating it).
std::vector<std::string> sitePackagesPatterns(const std::vector<std::string> &venvParents) {
  std::vector<std::string> patterns;
  for (const char *prefix : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (std::string root = environment(prefix); !root.empty())
      patterns.push_back(root + "/lib/python3*/site-packages");
  if (std::string home = environment("HOME"); !home.empty())
    patterns.push_back(home + "/.local/lib/python3*/site-packages");
  for (const char *root : {"/usr/local/lib", "/usr/local/lib64", "/usr/lib", "/opt/conda/lib"})
    patterns.push_back(std::string(root) + "/python3*/*-packages");
  for (const std::string &parent : venvParents)
    for (const char *venv : {"/*/", "/*/.venv/", "/*/venv/"})
      patterns.push_back(parent + venv + "lib/python3*/site-packages");
  return patterns;
}

} // namespace

std::vector<std::string> cudaLibraryCandidates(const std::string &soname,
                                               const std::vector<std::string> &venvParents) {
  std::vector<std::string> candidates;
  std::set<std::pair<dev_t, ino_t>> seen; // the files themselves, whatever path reached them
  auto add = [&](const std::string &path) {
    struct stat file{};
    if (stat(path.c_str(), &file) == 0 && seen.insert({file.st_dev, file.st_ino}).second)
      candidates.push_back(path);
  };
  auto addWheels = [&](const std::string &root) {
    for (const std::string &path : matching(root + "/nvidia/*/lib/" + soname))
      add(path);
  };

  std::string searchPath = environment("SMELT_CUDA_LIBRARY_PATH");
  for (size_t begin = 0; begin <= searchPath.size();) {
    size_t end = searchPath.find(':', begin);
    if (end == std::string::npos)
      end = searchPath.size();
    if (std::string dir = searchPath.substr(begin, end - begin); !dir.empty()) {
      add(dir + "/" + soname);
      addWheels(dir);
    }
    begin = end + 1;
  }
  for (const std::string &pattern : sitePackagesPatterns(venvParents))
    for (const std::string &site : matching(pattern))
      addWheels(site);
  for (const char *dir : {"/usr/local/cuda/lib64", "/usr/local/cuda/lib"})
    add(std::string(dir) + "/" + soname);
  for (const std::string &path : matching("/usr/local/cuda-*/lib64/" + soname))
    add(path);
  candidates.push_back(soname);
  return candidates;
}

Expected<void *> openCudaLibrary(const std::string &name, const std::string &soname) {
  std::string tried;
  for (const std::string &path : cudaLibraryCandidates(soname)) {
    if (void *library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL))
      return library;
    const char *why = dlerror();
    tried += fmt::format("{}dlopen(\"{}\"): {}", tried.empty() ? "" : "; ", path,
                         why ? why : "unknown reason");
  }
  return Status::error(fmt::format("no {} library: {}", name, tried));
}

std::string loadedLibraryPath(void *library) {
  struct link_map *map = nullptr;
  if (dlinfo(library, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name)
    return "";
  return map->l_name;
}

Expected<void *> openCudaTable(const std::string &name, const std::string &soname,
                               std::initializer_list<std::pair<void **, const char *>> entries,
                               const char *why) {
  Expected<void *> library = openCudaLibrary(name, soname);
  if (!library)
    return library;
  for (auto [entry, symbol] : entries)
    SMELT_RETURN_IF_ERROR(resolveSymbol(*library, *entry, symbol, soname.c_str(), why));
  return library;
}

} // namespace smelt::rt::cuda
