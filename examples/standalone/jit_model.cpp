// An out-of-tree program on an installed Smelt (Smelt::Smelt): builds y = tanh(x·w + b) and
// sumsq = Σ_j y² with the builder, JIT-compiles it, runs it on fresh random inputs and checks it
// against a float64 reference (exit 1 on a mismatch). Given a path, also compiles the model
// ahead of time and writes it there as a .smelt artifact, which run_artifact runs.
#include "codegen/CompileArtifact.h"
#include "frontend/Ops.h"
#include "runtime/CpuExecutor.h"

#include "model_check.h"

#include <cstdio>

int main(int argc, char **argv) {
  using namespace standalone;
  mlir::MLIRContext ctx;
  smelt::Graph g(ctx, "model");
  smelt::Tensor x = g.input("x", {kRows, kIn});
  smelt::Tensor w = g.input("w", {kIn, kOut});
  smelt::Tensor b = g.input("b", {kOut});
  smelt::Tensor y = smelt::tanh(smelt::matmul(x, w) + b);
  g.setOutputs({y, smelt::reduceSum(y * y, {1})}, {"y", "sumsq"});

  auto exe = smelt::codegen::compile(g.module(), "model");
  if (mlir::failed(exe))
    return 1; // the diagnostics were printed
  auto cpu = smelt::rt::CpuExecutor::create(*exe);
  if (!cpu) {
    std::printf("error: %s\n", cpu.message().c_str());
    return 1;
  }
  std::vector<smelt::rt::HostTensor> inputs = randomInputs(), outputs;
  if (smelt::rt::Status s = cpu->run(inputs, outputs); !s.ok()) {
    std::printf("error: %s\n", s.message().c_str());
    return 1;
  }
  std::printf("JIT: y[0] = %s\n", outputs[0].summary(4).c_str());
  if (!matchesReference(inputs, outputs))
    return 1;

  if (argc > 1) {
    auto artifact = smelt::codegen::compileArtifact(g.module(), "model", {}, "cpu");
    if (mlir::failed(artifact))
      return 1;
    if (smelt::rt::Status s = smelt::rt::writeArtifact(argv[1], artifact->executable,
                                                       artifact->extras);
        !s.ok()) {
      std::printf("error: %s\n", s.message().c_str());
      return 1;
    }
    std::printf("wrote %s\n", argv[1]);
  }
  return 0;
}
