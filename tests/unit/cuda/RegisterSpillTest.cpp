// No kernel of the built-in models' training steps spills registers: the MLP, the CNN and the
// GPT at their `smelt train` sizes, in f32 and mixed_bf16, fused by the default pipeline and
// compiled by NVRTC for sm_90, then assembled by `ptxas -v`, whose report gives each function's
// registers and spill bytes. A spill is a store to local memory and a load back on every use:
// in a kernel that streams from memory it costs as much traffic as another input. (Sibling-
// merged Adam updates of the GPT once streamed 113 buffers in one kernel, held 255 registers
// and spilled up to 552 bytes.)
#include "CudaTestUtil.h"

#include "train/BuiltinModels.h"
#include "train/Trainer.h"

#include "mlir/Pass/PassManager.h"

#include <iostream>
#include <regex>
#include <sstream>

namespace smelt::cuda_test {
namespace {

struct SpillCase {
  const char *model;
  PrecisionPolicy precision;
};

std::string caseName(const SpillCase &c) {
  return std::string(c.model) + "_" + precisionPolicyName(c.precision).str();
}

/// What ptxas said about one function (an entry, or a shared body it calls).
struct FunctionReport {
  std::string name;
  int registers = 0;
  int spillStores = 0, spillLoads = 0;
};

/// Each function's registers and spill bytes from `ptxas -v`'s report.
std::vector<FunctionReport> parseReport(const std::string &said) {
  static const std::regex properties(R"(Function properties for (\w+))");
  static const std::regex spills(R"((\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex registers(R"(Used (\d+) registers)");
  std::vector<FunctionReport> functions;
  std::istringstream lines(said);
  std::smatch match;
  for (std::string line; std::getline(lines, line);) {
    if (std::regex_search(line, match, properties))
      functions.push_back({match[1].str()});
    else if (functions.empty())
      continue;
    else if (std::regex_search(line, match, spills))
      functions.back().spillStores = std::stoi(match[1]),
      functions.back().spillLoads = std::stoi(match[2]);
    else if (std::regex_search(line, match, registers))
      functions.back().registers = std::stoi(match[1]);
  }
  return functions;
}

/// The training step's module (@train_step and @train_step_init) after the default pipeline.
mlir::OwningOpRef<mlir::ModuleOp> trainStep(mlir::MLIRContext &context, const SpillCase &c) {
  train::TrainConfig config;
  config.model = c.model;
  if (config.model.name == "gpt") {
    // `smelt train --model=gpt`'s defaults (4 layers, width 128, 4 heads, context 64) and
    // batch; the vocabulary is the printable ASCII a text of English has.
    config.model = train::gptModel(GptConfig{.vocab = 96});
    config.batch = 32;
  }
  config.precision = c.precision;
  std::unique_ptr<Graph> graph = train::buildTrainStep(context, config);
  mlir::PassManager pm(&context);
  buildDefaultPipeline(pm, PipelineOptions{});
  if (mlir::failed(pm.run(graph->module())))
    return {};
  return graph->module().clone();
}

class CudaRegisterSpills : public testing::TestWithParam<SpillCase> {};

TEST_P(CudaRegisterSpills, NoKernelOfTheTrainStepSpills) {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = trainStep(context, GetParam());
  ASSERT_TRUE(module) << "the default pipeline failed";
  size_t checked = 0;
  int mostRegisters = 0;
  for (auto function : module->getOps<mlir::func::FuncOp>()) {
    mlir::FailureOr<codegen::CudaFunctionCode> compiled =
        codegen::compileCudaFunction(function, "sm_90");
    ASSERT_TRUE(mlir::succeeded(compiled)) << function.getSymName().str();
    if (compiled->kernels.empty())
      continue;
    PtxasRun run = runPtxas(compiled->code.ptx, "sm_90", "-v");
    ASSERT_TRUE(run.ok) << run.output;
    std::vector<FunctionReport> functions = parseReport(run.output);
    // Every entry is reported (a shared body adds a report of its own).
    ASSERT_GE(functions.size(), compiled->kernels.size()) << run.output;
    for (const FunctionReport &f : functions) {
      // A shared body's name comes mangled ("_ZN..._train_step_fusion171_bodyEPK...").
      auto kernel = llvm::find_if(compiled->kernels, [&](const rt::FusedKernel &k) {
        return f.name == k.name || f.name.find(k.name + "_body") != std::string::npos;
      });
      std::string what = f.name;
      if (kernel != compiled->kernels.end())
        what += " (" + kernel->ops.substr(0, 120) + (kernel->ops.size() > 120 ? "..." : "") + ", " +
                std::to_string(kernel->inputs.size() + kernel->results.size()) + " buffers)";
      EXPECT_TRUE(f.spillStores == 0 && f.spillLoads == 0)
          << what << " spills: " << f.spillStores << " bytes of stores, " << f.spillLoads
          << " of loads, " << f.registers << " registers";
      mostRegisters = std::max(mostRegisters, f.registers);
    }
    checked += functions.size();
  }
  EXPECT_GE(checked, 10u) << "the training step fuses into a few dozen kernels";
  std::cout << caseName(GetParam()) << ": " << checked << " functions, at most " << mostRegisters
            << " registers\n";
}

INSTANTIATE_TEST_SUITE_P(Models, CudaRegisterSpills,
                         testing::Values(SpillCase{"mlp", PrecisionPolicy::f32},
                                         SpillCase{"mlp", PrecisionPolicy::mixed_bf16},
                                         SpillCase{"cnn", PrecisionPolicy::f32},
                                         SpillCase{"cnn", PrecisionPolicy::mixed_bf16},
                                         SpillCase{"gpt", PrecisionPolicy::f32},
                                         SpillCase{"gpt", PrecisionPolicy::mixed_bf16}),
                         [](const testing::TestParamInfo<SpillCase> &info) {
                           return caseName(info.param);
                         });

} // namespace
} // namespace smelt::cuda_test
