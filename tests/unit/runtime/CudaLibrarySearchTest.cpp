// Where the runtime looks for the CUDA libraries it dlopens (cuda::cudaLibraryCandidates): a
// fake SMELT_CUDA_LIBRARY_PATH, a fake pip wheel layout and a fake virtualenv, each holding a
// small real shared library under a made-up soname, so the order is checked, and a dlopen
// through it, with no GPU and no CUDA library.
#include "runtime/cuda/DynamicLibrary.h"
#include "tests/unit/ScopedEnvironment.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

namespace smelt::rt::cuda::test {
namespace {

namespace fs = std::filesystem;

using smelt::test::ScopedEnvironment;

/// A temporary folder; `install` copies the test library into it under `relative` (a path
/// ending in the soname), as a wheel or the toolkit would have put a CUDA library there.
class FakeRoot {
public:
  explicit FakeRoot(const std::string &tag)
      : root_(fs::temp_directory_path() /
              ("smelt-cuda-search-" + tag + "-" + std::to_string(getpid()))) {
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~FakeRoot() { fs::remove_all(root_); }
  std::string install(const std::string &relative) const {
    fs::path file = root_ / relative;
    fs::create_directories(file.parent_path());
    fs::copy_file(SMELT_TEST_SHARED_LIBRARY_PATH, file, fs::copy_options::overwrite_existing);
    return file.string();
  }
  std::string path() const { return root_.string(); }

private:
  fs::path root_;
};

TEST(CudaLibrarySearch, SmeltPathThenWheelLayoutThenSitePackagesThenTheSoname) {
  const std::string soname = "libsmelt-fake-search.so.7";
  FakeRoot plain("plain"), wheels("wheels"), venv("venv");
  std::string direct = plain.install(soname);
  // nvidia/cu13/lib is where CUDA 13's NVRTC and cuBLAS wheels put their libraries,
  // nvidia/nccl/lib and nvidia/cudnn/lib the others'.
  std::string wheel = wheels.install("nvidia/cu13/lib/" + soname);
  std::string site = venv.install("lib/python3.12/site-packages/nvidia/nccl/lib/" + soname);
  ScopedEnvironment path("SMELT_CUDA_LIBRARY_PATH", plain.path() + "::" + wheels.path());
  ScopedEnvironment virtualEnv("VIRTUAL_ENV", venv.path());

  std::vector<std::string> expected = {direct, wheel, site, soname};
  EXPECT_EQ(cudaLibraryCandidates(soname), expected);
}

// A job that runs the venv's Python without activating it (VIRTUAL_ENV unset) still has the
// CUDA wheels the image keeps in /opt/NAME/.venv (the GPU machine's layout).
TEST(CudaLibrarySearch, UnactivatedVirtualEnvironmentsUnderOptAreSearched) {
  const std::string soname = "libsmelt-fake-venv.so.3";
  FakeRoot opt("opt");
  std::string dotVenv =
      opt.install("torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib/" + soname);
  std::string plainVenv = opt.install("jax/lib/python3.11/site-packages/nvidia/cu13/lib/" + soname);
  ScopedEnvironment virtualEnv("VIRTUAL_ENV", "/nonexistent/venv");
  std::vector<std::string> found = cudaLibraryCandidates(soname, {opt.path()});
  std::vector<std::string> expected = {plainVenv, dotVenv, soname};
  EXPECT_EQ(found, expected);
}

TEST(CudaLibrarySearch, MissingFoldersAreSkippedAndTheSonameComesLast) {
  ScopedEnvironment path("SMELT_CUDA_LIBRARY_PATH", "/nonexistent/smelt:/nonexistent/other");
  ScopedEnvironment virtualEnv("VIRTUAL_ENV", "/nonexistent/venv");
  std::vector<std::string> expected = {"libsmelt-fake-absent.so.1"};
  EXPECT_EQ(cudaLibraryCandidates("libsmelt-fake-absent.so.1"), expected);
}

// Two paths to one file (the toolkit's lib64 is often a link to lib) are tried once.
TEST(CudaLibrarySearch, AFileReachedTwiceIsListedOnce) {
  const std::string soname = "libsmelt-fake-twice.so.2";
  FakeRoot root("twice");
  std::string file = root.install("lib/" + soname);
  fs::create_directory_symlink(root.path() + "/lib", root.path() + "/lib64");
  ScopedEnvironment path("SMELT_CUDA_LIBRARY_PATH", root.path() + "/lib:" + root.path() + "/lib64");
  std::vector<std::string> expected = {file, soname};
  EXPECT_EQ(cudaLibraryCandidates(soname), expected);
}

TEST(CudaLibrarySearch, OpensTheWheelsCopyAndResolvesItsSymbols) {
  const std::string soname = "libsmelt-fake-open.so.3";
  FakeRoot wheels("open");
  std::string wheel = wheels.install("nvidia/cudnn/lib/" + soname);
  ScopedEnvironment path("SMELT_CUDA_LIBRARY_PATH", wheels.path());

  Expected<void *> opened = openCudaLibrary("fake", soname);
  ASSERT_TRUE(opened) << opened.message();
  EXPECT_EQ(loadedLibraryPath(*opened), wheel);
  void *entry = nullptr;
  EXPECT_TRUE(resolveSymbol(*opened, entry, "smelt_test_square", soname.c_str(), "").ok());
  EXPECT_NE(entry, nullptr);
  Status missing = resolveSymbol(*opened, entry, "cudnnGetVersion", soname.c_str(),
                                 "it is older than this program needs");
  EXPECT_NE(missing.message().find("has no cudnnGetVersion; it is older"), std::string::npos)
      << missing.message();
}

TEST(CudaLibrarySearch, NotFoundAnywhereNamesEveryAttempt) {
  const std::string soname = "libsmelt-fake-broken.so.4";
  FakeRoot root("broken");
  // A file under the right name that is not a shared library: tried, refused, then the soname.
  std::string broken = root.path() + "/" + soname;
  { std::ofstream(broken) << "not an ELF file"; }
  ScopedEnvironment path("SMELT_CUDA_LIBRARY_PATH", root.path());
  Expected<void *> opened = openCudaLibrary("fake", soname);
  ASSERT_FALSE(opened);
  EXPECT_NE(opened.message().find("no fake library: dlopen(\"" + broken + "\")"),
            std::string::npos)
      << opened.message();
  EXPECT_NE(opened.message().find("; dlopen(\"" + soname + "\")"), std::string::npos)
      << opened.message();
}

} // namespace
} // namespace smelt::rt::cuda::test
