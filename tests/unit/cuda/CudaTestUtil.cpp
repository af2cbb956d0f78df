// CUDA test helpers: parsing with captured diagnostics, rendering, ptxas through a pipe, random
// inputs and the comparison of a device's results with the CPU's.
#include "CudaTestUtil.h"
#include "RuntimeTestUtil.h"

#include "codegen/BuildExecutable.h"
#include "codegen/Compile.h"
#include "codegen/cuda/CudaRenderer.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <unistd.h>

namespace smelt::cuda_test {

ParsedModule parseModule(const std::string &text) {
  ParsedModule parsed;
  parsed.context = std::make_unique<mlir::MLIRContext>();
  codegen::loadDialects(*parsed.context);
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler capture(parsed.context.get(), [&](mlir::Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return mlir::success();
  });
  parsed.module = mlir::parseSourceString<mlir::ModuleOp>(text, parsed.context.get());
  if (!parsed.module) {
    ADD_FAILURE() << "the test module does not parse:\n" << diagnostics << text;
    return parsed;
  }
  parsed.main = parsed.module->lookupSymbol<mlir::func::FuncOp>("main");
  if (!parsed.main) {
    ADD_FAILURE() << "the test module has no @main";
    return parsed;
  }
  parsed.fusions = codegen::fusionsInOrder(parsed.main);
  parsed.kernelOps = codegen::kernelOpsInOrder(parsed.main);
  for (auto [i, op] : llvm::enumerate(parsed.kernelOps))
    parsed.kernels.push_back(codegen::describeKernel(op, codegen::kernelName(parsed.main, op, i)));
  return parsed;
}

std::string render(ParsedModule &parsed) {
  std::string source = codegen::renderCudaModule(parsed.kernelOps, parsed.kernels);
  if (std::getenv("SMELT_DUMP_CUDA"))
    std::cerr << source;
  return source;
}

namespace {

std::string findPtxas() {
  std::vector<std::string> candidates;
  if (const char *path = std::getenv("SMELT_PTXAS"))
    candidates.push_back(path);
#ifdef SMELT_PTXAS_PATH
  candidates.push_back(SMELT_PTXAS_PATH);
#endif
  candidates.push_back("/usr/local/cuda/bin/ptxas");
  for (const std::string &path : candidates)
    if (access(path.c_str(), X_OK) == 0)
      return path;
  return "";
}

} // namespace

PtxasRun runPtxas(const std::string &ptx, const std::string &arch, const std::string &flags) {
  std::string ptxas = findPtxas();
  if (ptxas.empty()) {
    ADD_FAILURE() << "no ptxas to check the PTX with: set SMELT_PTXAS or install the CUDA "
                     "toolkit at /usr/local/cuda";
    return {false, "no ptxas"};
  }
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("smelt-ptxas-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::path input = dir / "kernels.ptx", output = dir / "kernels.cubin";
  std::ofstream(input) << ptx;
  std::string command = ptxas + " -arch=" + arch + " " + flags + (flags.empty() ? "" : " ") +
                        input.string() + " -o " + output.string() + " 2>&1";
  PtxasRun run;
  FILE *pipe = popen(command.c_str(), "r");
  if (!pipe)
    return {false, "could not run " + command};
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe))
    run.output.append(buffer, n);
  int status = pclose(pipe);
  std::filesystem::remove_all(dir);
  run.ok = status == 0;
  if (!run.ok && run.output.empty())
    run.output = command + " failed with status " + std::to_string(status);
  return run;
}

std::string ptxasErrors(const std::string &ptx, const std::string &arch) {
  PtxasRun run = runPtxas(ptx, arch);
  return run.ok ? "" : run.output;
}

rt::HostTensor caseInput(const FusionCase &c, rt::DType dtype, llvm::ArrayRef<int64_t> shape) {
  std::mt19937_64 &random = rt::test::rng();
  std::uniform_real_distribution<double> unit(0, 1);
  const double specials[] = {NAN, INFINITY, -INFINITY, 3e9, -3e9, 0.0};
  return rt::test::randomTensor(dtype, shape.vec(), [&] {
    if (rt::isFloat(dtype) && unit(random) < c.specials)
      return specials[random() % std::size(specials)];
    return rt::test::draw(random, c.lo, c.hi, c.minMagnitude);
  });
}

void expectDeviceResultMatches(const rt::HostTensor &got, const rt::HostTensor &ref,
                               const std::string &what) {
  rt::DType dtype = ref.type().dtype;
  std::vector<double> g = got.toDoubles(), r = ref.toDoubles();
  ASSERT_EQ(g.size(), r.size()) << what;
  double diff2 = 0, ref2 = 0;
  size_t exactMisses = 0;
  std::string firstMiss;
  for (size_t i = 0; i < r.size(); ++i) {
    bool exact = !rt::isFloat(dtype) || !std::isfinite(r[i]) || !std::isfinite(g[i]);
    if (!exact) {
      diff2 += (g[i] - r[i]) * (g[i] - r[i]);
      ref2 += r[i] * r[i];
    } else if (!(g[i] == r[i] || (std::isnan(g[i]) && std::isnan(r[i])))) {
      if (exactMisses++ == 0)
        firstMiss = "element " + std::to_string(i) + ": device " + std::to_string(g[i]) +
                    ", CPU " + std::to_string(r[i]);
    }
  }
  EXPECT_EQ(exactMisses, 0u) << what << ": first at " << firstMiss;
  double tolerance = dtype == rt::DType::f64   ? 1e-12
                     : dtype == rt::DType::f32 ? 1e-5
                     : dtype == rt::DType::f16 ? 4e-3
                                               : 3e-2;
  if (rt::isFloat(dtype)) {
    EXPECT_LE(std::sqrt(diff2) / std::max(std::sqrt(ref2), 1e-30), tolerance)
        << what << " (seed " << rt::test::baseSeed() << ")";
  }
}

} // namespace smelt::cuda_test
