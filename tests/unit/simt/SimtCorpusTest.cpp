// Every kernel of the CUDA corpus, as the renderer writes it for NVRTC, run by the SIMT emulator
// in both fiber orders on fresh random inputs, against the CPU back end's fused kernel of the same
// fusion (not the unfused ops: inside a fused kernel f16 and bf16 values stay f32), or, for an
// argmax or scatter_add with a kernel of its own, the CPU's routine for the op. One test per
// function of the corpus module (smelt-simt-corpus wrote it beside the kernels' translation
// unit): a fusion case, the op x dtype corpus, a model step.
#include "CudaTestUtil.h"
#include "RuntimeTestUtil.h"
#include "SimtTestUtil.h"

#include "codegen/BuildExecutable.h"
#include "codegen/Compile.h"
#include "codegen/FusionWalk.h"
#include "runtime/CpuExecutor.h"

#include "mlir/Parser/Parser.h"

#include <chrono>
#include <fstream>
#include <sstream>

namespace smelt::simt::test {
namespace {

/// The corpus module, parsed once per process.
struct CorpusModule {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  CorpusModule() {
    codegen::loadDialects(context);
    std::ifstream file(SMELT_SIMT_CORPUS_MLIR);
    std::stringstream text;
    text << file.rdbuf();
    module = mlir::parseSourceString<mlir::ModuleOp>(text.str(), &context);
  }
};

CorpusModule &corpusModule() {
  static CorpusModule parsed;
  return parsed;
}

/// Inputs are drawn as the fusion case says, or as a case with the defaults says.
cuda_test::FusionCase distributionFor(const std::string &function) {
  for (const cuda_test::FusionCase &c : cuda_test::fusionCases())
    if (function == std::string("case_") + c.name)
      return c;
  return cuda_test::FusionCase{function.c_str(), ""};
}

/// The table must describe the module it was generated with: the same kernels, in the same
/// order, over the same buffers (else the build is stale or the generator wrong).
void expectTableDescribes(const CorpusKernel &kernel, mlir::func::FuncOp function,
                          mlir::Operation *op, size_t index) {
  EXPECT_EQ(kernel.name, codegen::kernelName(function, op, index));
  std::vector<mlir::Value> values(op->getOperands().begin(), op->getOperands().end());
  values.insert(values.end(), op->getResults().begin(), op->getResults().end());
  ASSERT_EQ(kernel.args.size(), values.size()) << kernel.name;
  EXPECT_EQ(kernel.parameters, int(values.size())) << kernel.name;
  EXPECT_EQ(kernel.inputs, op->getNumOperands()) << kernel.name;
  for (auto [arg, value] : llvm::zip(kernel.args, values)) {
    auto type = mlir::cast<mlir::RankedTensorType>(value.getType());
    EXPECT_EQ(std::string(arg.dtype), rt::dtypeName(codegen::elementDType(value))) << kernel.name;
    EXPECT_EQ(arg.elements, type.getNumElements()) << kernel.name;
  }
}

class SimtCorpus : public testing::TestWithParam<std::string> {};

TEST_P(SimtCorpus, EmulatedKernelsMatchTheCpuBackEnd) {
  const std::string &name = GetParam();
  ASSERT_TRUE(corpusModule().module) << "cannot parse " << SMELT_SIMT_CORPUS_MLIR;
  auto function = corpusModule().module->lookupSymbol<mlir::func::FuncOp>(name);
  ASSERT_TRUE(function) << "@" << name << " is not in " << SMELT_SIMT_CORPUS_MLIR;
  std::vector<mlir::Operation *> ops = codegen::kernelOpsInOrder(function);
  std::vector<const CorpusKernel *> kernels;
  for (const CorpusKernel &kernel : corpus())
    if (kernel.function == name)
      kernels.push_back(&kernel);
  ASSERT_EQ(kernels.size(), ops.size());
  for (size_t k = 0; k < kernels.size(); ++k)
    expectTableDescribes(*kernels[k], function, ops[k], k);
  if (HasFailure())
    return;

  // The reference: the function's fusions compiled by the CPU back end, run once.
  mlir::FailureOr<rt::Executable> exe = codegen::buildWithKernels(function);
  ASSERT_TRUE(mlir::succeeded(exe));
  rt::Expected<rt::CpuExecutor> executor = rt::CpuExecutor::create(*exe);
  ASSERT_TRUE(executor.ok()) << executor.message();
  cuda_test::FusionCase distribution = distributionFor(name);
  std::vector<rt::HostTensor> inputs, reference;
  for (mlir::Type type : function.getArgumentTypes()) {
    auto tensor = mlir::cast<mlir::RankedTensorType>(type);
    inputs.push_back(cuda_test::caseInput(distribution, *codegen::dtypeOf(tensor.getElementType()),
                                          tensor.getShape()));
  }
  rt::Status ran = executor->run(inputs, reference);
  ASSERT_TRUE(ran.ok()) << ran.message();

  double seconds = 0;
  size_t nextInput = 0, nextResult = 0;
  for (auto [kernel, op] : llvm::zip(kernels, ops)) {
    std::vector<rt::HostTensor> kernelInputs(inputs.begin() + nextInput,
                                             inputs.begin() + nextInput + kernel->inputs);
    nextInput += kernel->inputs;
    std::vector<Emulated> runs;
    auto start = std::chrono::steady_clock::now();
    for (Order order : {Order::Forward, Order::Reversed})
      runs.push_back(emulate(*kernel, kernelInputs, order));
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (size_t r = 0; r + kernel->inputs < kernel->args.size(); ++r) {
      std::string what = std::string(kernel->name) + " result #" + std::to_string(r);
      for (auto [order, run] : llvm::zip(std::array{Order::Forward, Order::Reversed}, runs)) {
        ASSERT_EQ(run.error, "") << kernel->name << " in " << orderName(order) << " order";
        cuda_test::expectDeviceResultMatches(run.results[r], reference[nextResult],
                                             what + " in " + orderName(order) + " order");
      }
      // Each thread computes the same in either order, unless threads race.
      EXPECT_EQ(firstDifference(runs[0].results[r], runs[1].results[r]), "")
          << what << " differs between the two orders";
      // scatter_add adds in index order on both devices: the CPU's bits exactly.
      if (mlir::isa<ScatterAddOp>(op)) {
        EXPECT_EQ(firstDifference(runs[0].results[r], reference[nextResult]), "")
            << what << " is not the CPU's sum bit for bit";
      }
      ++nextResult;
    }
  }
  std::cout << "emulated " << kernels.size() << " kernels of @" << name << " twice in " << seconds
            << " s\n";
}

INSTANTIATE_TEST_SUITE_P(Functions, SimtCorpus, testing::ValuesIn(corpusFunctions()),
                         [](const testing::TestParamInfo<std::string> &info) {
                           return info.param;
                         });

} // namespace
} // namespace smelt::simt::test
