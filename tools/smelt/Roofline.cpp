// Measuring the roofs: best of a few runs of each, so one unlucky run does not lower a roof.
#include "tools/smelt/Roofline.h"

#include "codegen/Compile.h"
#include "runtime/CpuExecutor.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

namespace smelt::tools {

namespace {

constexpr size_t kCopyBytes = size_t(128) << 20;
constexpr int64_t kGemmSize = 1024;
constexpr int kTries = 3;

double copyBandwidth() {
  // Filled first, so the timed copies touch memory the OS has already mapped.
  std::vector<char> from(kCopyBytes, 1), to(kCopyBytes, 2);
  double best = 1e30;
  for (int i = 0; i < kTries; ++i) {
    auto start = std::chrono::steady_clock::now();
    std::memcpy(to.data(), from.data(), kCopyBytes);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                              .count());
  }
  // Keep the copy observable, or the compiler may drop it.
  volatile char sink = to[kCopyBytes / 2];
  (void)sink;
  return 2.0 * double(kCopyBytes) / best;
}

rt::Expected<double> gemmRate(mlir::MLIRContext &context) {
  std::string type = "tensor<" + std::to_string(kGemmSize) + "x" + std::to_string(kGemmSize) +
                     "xf32>";
  std::string source = "func.func @gemm(%a: " + type + ", %b: " + type + ") -> " + type +
                       " {\n  %0 = smelt.matmul %a, %b : " + type + ", " + type +
                       "\n  return %0 : " + type + "\n}\n";
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler capture(&context, [&](mlir::Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return mlir::success();
  });
  codegen::loadDialects(context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(source, &context);
  mlir::FailureOr<rt::Executable> exe =
      module ? codegen::compile(*module, "gemm") : mlir::FailureOr<rt::Executable>();
  if (!module || failed(exe))
    return rt::Status::error("compiling the roofline GEMM: " + diagnostics);
  rt::Expected<rt::CpuExecutor> executor = rt::CpuExecutor::create(*exe);
  if (!executor)
    return executor.status();
  rt::TensorType f32{rt::DType::f32, {kGemmSize, kGemmSize}};
  std::vector<rt::HostTensor> inputs = {rt::HostTensor::zeros(f32), rt::HostTensor::zeros(f32)};
  for (rt::HostTensor &t : inputs)
    std::fill_n(t.data<float>(), f32.numElements(), 0.5f);
  std::vector<rt::HostTensor> outputs;
  double best = 1e30;
  for (int i = 0; i <= kTries; ++i) { // the first run warms up oneDNN
    if (rt::Status s = executor->run(inputs, outputs); !s.ok())
      return s;
    if (i > 0)
      best = std::min(best, executor->lastStepMicros().at(0) * 1e-6);
  }
  return 2.0 * double(kGemmSize) * double(kGemmSize) * double(kGemmSize) / best;
}

} // namespace

double Roofline::percent(const rt::StepCost &cost, double micros) const {
  if (micros <= 0 || copyBytesPerSecond <= 0 || gemmFlopsPerSecond <= 0)
    return 0;
  double roof = std::max(cost.bytes / copyBytesPerSecond, cost.flops / gemmFlopsPerSecond);
  return 100.0 * roof / (micros * 1e-6);
}

rt::Expected<Roofline> measureRoofline(mlir::MLIRContext &context) {
  Roofline roof;
  roof.copyBytesPerSecond = copyBandwidth();
  roof.copyWhat = "memcpy of " + std::to_string(kCopyBytes >> 20) + " MiB";
  rt::Expected<double> gemm = gemmRate(context);
  if (!gemm)
    return gemm.status();
  roof.gemmFlopsPerSecond = *gemm;
  std::string n = std::to_string(kGemmSize);
  roof.gemmWhat = n + "x" + n + "x" + n + " f32 matmul";
  return roof;
}

} // namespace smelt::tools
