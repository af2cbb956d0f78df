// Runs a .smelt artifact with Smelt's runtime alone (Smelt::Runtime: no MLIR, no LLVM): loads
// the model jit_model wrote, runs it on fresh random inputs and checks it against the float64
// reference (exit 1 on a mismatch or an unreadable artifact).
#include "runtime/Artifact.h"
#include "runtime/CpuExecutor.h"
#include "runtime/CpuObject.h"

#include "model_check.h"

#include <cstdio>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::printf("usage: run_artifact MODEL.smelt\n");
    return 2;
  }
  smelt::rt::Expected<smelt::rt::LoadedArtifact> artifact = smelt::rt::readArtifact(argv[1]);
  if (!artifact) {
    std::printf("error: %s\n", artifact.message().c_str());
    return 1;
  }
  // The fused kernels are native code in the artifact: load it before running.
  smelt::rt::Executable &exe = artifact->executable;
  if (!exe.kernels.empty()) {
    auto code = smelt::rt::loadCpuObject(artifact->extras.cpuObject, artifact->extras.cpuSymbols);
    if (!code) {
      std::printf("error: %s: %s\n", argv[1], code.message().c_str());
      return 1;
    }
    exe.cpu = *code;
  }
  auto cpu = smelt::rt::CpuExecutor::create(exe);
  if (!cpu) {
    std::printf("error: %s\n", cpu.message().c_str());
    return 1;
  }
  std::vector<smelt::rt::HostTensor> inputs = standalone::randomInputs(), outputs;
  if (smelt::rt::Status s = cpu->run(inputs, outputs); !s.ok()) {
    std::printf("error: %s\n", s.message().c_str());
    return 1;
  }
  std::printf("AOT (%s, by %s): y[0] = %s\n", artifact->extras.target.c_str(),
              artifact->extras.producer.c_str(), outputs[0].summary(4).c_str());
  return standalone::matchesReference(inputs, outputs) ? 0 : 1;
}
