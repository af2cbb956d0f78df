// A main for a libFuzzer target built without libFuzzer (by the project's own compiler): runs
// the target once on each file named, or found below a folder named, so that ctest keeps the
// target compiling and its checks passing on the seeds between fuzzing runs (scripts/fuzz.sh).
// A finding aborts, as under libFuzzer. Exit 77 (ctest's skip) when no input exists.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void runOn(const std::filesystem::path &file) {
  std::ifstream in(file, std::ios::binary);
  std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
}

int main(int argc, char **argv) {
  size_t inputs = 0;
  for (int i = 1; i < argc; ++i) {
    std::error_code error;
    if (std::filesystem::is_regular_file(argv[i], error)) {
      runOn(argv[i]);
      ++inputs;
      continue;
    }
    if (!std::filesystem::is_directory(argv[i], error))
      continue;
    for (const auto &entry : std::filesystem::recursive_directory_iterator(argv[i], error))
      if (entry.is_regular_file()) {
        runOn(entry.path());
        ++inputs;
      }
  }
  std::printf("%zu inputs, no finding\n", inputs);
  return inputs ? 0 : 77;
}
