// An artifact written by `smelt compile` (dense.mlir, at build time) runs with the runtime alone:
// this binary links no MLIR and no LLVM, and loading the artifact's CPU code must not pull them
// in either. Its results match a float64 reference.
#include "RuntimeTestUtil.h"

#include "runtime/Artifact.h"
#include "runtime/CpuExecutor.h"
#include "runtime/CpuObject.h"

#include <gtest/gtest.h>

#include <cmath>
#include <link.h>
#include <string>

namespace smelt::rt::test {
namespace {

/// The shared objects loaded in this process whose path contains `part`.
std::vector<std::string> loadedObjectsNamed(const std::string &part) {
  std::pair<std::string, std::vector<std::string>> search{part, {}};
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *data) {
        auto *s = static_cast<decltype(search) *>(data);
        std::string name = info->dlpi_name ? info->dlpi_name : "";
        if (name.find(s->first) != std::string::npos)
          s->second.push_back(name);
        return 0;
      },
      &search);
  return search.second;
}

TEST(AotRuntime, RunsArtifactFromSmeltCompileWithRuntimeOnly) {
  Expected<LoadedArtifact> artifact = readArtifact(SMELT_AOT_ARTIFACT);
  ASSERT_TRUE(artifact) << artifact.message();
  Executable &exe = artifact->executable;
  EXPECT_EQ(artifact->extras.target, "cpu");
  ASSERT_FALSE(exe.kernels.empty()) << "dense.mlir should have fused kernels";
  ASSERT_EQ(artifact->extras.cpuSymbols.size(), exe.kernels.size());
  Expected<std::shared_ptr<const CpuCode>> cpu =
      loadCpuObject(artifact->extras.cpuObject, artifact->extras.cpuSymbols);
  ASSERT_TRUE(cpu) << cpu.message();
  exe.cpu = *cpu;
  // The library's dependencies were loaded with it: none may be the compiler's.
  for (const char *part : {"libMLIR", "libLLVM"})
    EXPECT_EQ(loadedObjectsNamed(part), std::vector<std::string>{}) << part;

  // Inputs by their names in the artifact; results named as the function's results.
  ASSERT_EQ(exe.inputs.size(), 3u);
  EXPECT_EQ(exe.inputNames, (std::vector<std::string>{"x", "w", "b"}));
  ASSERT_EQ(exe.outputs.size(), 3u);
  EXPECT_EQ(exe.outputNames, (std::vector<std::string>{"y", "rowsum", "result2"}));

  std::vector<HostTensor> inputs = {randomTensor(DType::f32, {16, 32}),
                                    randomTensor(DType::f32, {32, 8}),
                                    randomTensor(DType::f32, {8})};
  Expected<CpuExecutor> executor = CpuExecutor::create(exe);
  ASSERT_TRUE(executor) << executor.message();
  std::vector<HostTensor> outputs;
  Status s = executor->run(inputs, outputs);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(outputs.size(), 3u);

  std::vector<double> x = inputs[0].toDoubles(), w = inputs[1].toDoubles(),
                      b = inputs[2].toDoubles(), y(16 * 8), rowsum(16, 0.0);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      double acc = b[j];
      for (int k = 0; k < 32; ++k)
        acc += x[i * 32 + k] * w[k * 8 + j];
      y[i * 8 + j] = std::max(acc, 0.0);
      rowsum[i] += y[i * 8 + j];
    }
  expectClose(outputs[0], y, "y");
  expectClose(outputs[1], rowsum, "rowsum");
  // argmax of the float32 results themselves: a near tie in float64 may differ.
  std::vector<double> got = outputs[0].toDoubles();
  for (int i = 0; i < 16; ++i) {
    int64_t best = 0;
    for (int j = 1; j < 8; ++j)
      if (got[i * 8 + j] > got[i * 8 + best])
        best = j;
    EXPECT_EQ(outputs[2].data<int64_t>()[i], best) << "row " << i;
  }
}

} // namespace
} // namespace smelt::rt::test
