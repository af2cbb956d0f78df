// A program that keeps a JIT-compiled executor in a static made before its first compile, as a
// benchmark caching its executors does, runs it and returns from main: the engine is destroyed
// while the process exits. tests/unit/cpu/jit_at_exit.sh runs it many times; every run must
// exit 0 (the JIT's teardown once compiled its deinitializers after LLVM's statics were gone
// and crashed in about half of the runs).
#include "codegen/Compile.h"
#include "runtime/CpuExecutor.h"

#include "mlir/Parser/Parser.h"

#include <cstdio>
#include <memory>

int main() {
  using namespace smelt;
  static std::unique_ptr<rt::CpuExecutor> cached; // destroyed at exit, after main
  mlir::MLIRContext context;
  codegen::loadDialects(context);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
func.func @main(%x: tensor<4096xf32>) -> tensor<4096xf32> {
  %c = smelt.constant dense<1.5> : tensor<4096xf32>
  %0 = smelt.mul %x, %c : tensor<4096xf32>
  %1 = smelt.tanh %0 : tensor<4096xf32>
  return %1 : tensor<4096xf32>
}
)mlir",
                                                        mlir::ParserConfig(&context));
  if (!module)
    return 2;
  mlir::FailureOr<rt::Executable> exe = codegen::compile(*module);
  if (mlir::failed(exe))
    return 2;
  rt::Expected<rt::CpuExecutor> executor = rt::CpuExecutor::create(*exe);
  if (!executor)
    return 3;
  cached = std::make_unique<rt::CpuExecutor>(std::move(*executor));
  std::vector<rt::HostTensor> outputs;
  rt::HostTensor x = rt::HostTensor::fromDoubles({rt::DType::f32, {4096}},
                                                 std::vector<double>(4096, 0.25));
  if (!cached->run({x}, outputs).ok() || outputs.size() != 1)
    return 4;
  std::printf("tanh(0.375) = %f\n", outputs[0].toDoubles()[0]);
  return 0;
}
