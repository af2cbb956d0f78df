// The README's builder example, compiled by CI so the README cannot drift from the API: a small
// classifier built, initialized and run on random images, with one deliberate shape error.
#include "codegen/Compile.h"
#include "frontend/Layers.h"
#include "runtime/CpuExecutor.h"

#include <cstdio>

int main() {
  mlir::MLIRContext ctx;
  smelt::Graph g(ctx, "forward", /*seed=*/1);
  smelt::Tensor x = g.input("images", {32, 784});
  smelt::Tensor h = smelt::dense(x, 128, "dense1", smelt::Activation::Relu);
  smelt::Tensor logits = smelt::dense(h, 10, "logits");

  // Shape errors throw smelt::BuildError naming this file and line; the graph stays usable.
  try {
    smelt::matmul(x, h);
  } catch (const smelt::BuildError &e) {
    std::printf("caught: %s\n", e.what());
  }

  g.setOutputs({logits, smelt::softmax(logits)}, {"logits", "probs"});
  g.buildInitializer(); // @forward_init: the parameters' seeded initial values

  auto init = smelt::codegen::compile(g.module(), "forward_init"); // FailureOr<rt::Executable>
  auto forward = smelt::codegen::compile(g.module(), "forward");
  if (mlir::failed(init) || mlir::failed(forward))
    return 1; // the diagnostics were printed
  auto initCpu = smelt::rt::CpuExecutor::create(*init); // rt::Expected<CpuExecutor>
  auto cpu = smelt::rt::CpuExecutor::create(*forward);
  std::vector<smelt::rt::HostTensor> params, outputs;
  if (!initCpu || !cpu || !initCpu->run(std::vector<smelt::rt::HostTensor>{}, params).ok())
    return 1;

  // Arguments in creation order: the images, then the parameters.
  std::vector<smelt::rt::HostTensor> args = {smelt::rt::HostTensor::fromDoubles(
      {smelt::rt::DType::f32, {32, 784}}, std::vector<double>(32 * 784, 0.5))};
  args.insert(args.end(), params.begin(), params.end());
  if (smelt::rt::Status s = cpu->run(args, outputs); !s.ok()) {
    std::printf("error: %s\n", s.message().c_str());
    return 1;
  }
  std::printf("probs of image 0: %s\n", outputs[1].summary(3).c_str());
  return 0;
}
