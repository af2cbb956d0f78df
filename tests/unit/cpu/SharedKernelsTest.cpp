// Kernels shared between equivalent fusions and compiled on several threads at once
// (codegen/EquivalentFusions.h, codegen/cpu/CpuKernels.cpp): which fusions are equivalent; that
// each fusion still computes its own inputs through a shared kernel (against float64); that one
// compile thread and three give the same bits, JIT-linked and as a shared library, for a
// transformer's whole training step too; and that the profile shows each thread's phases.
#include "FusionTestUtil.h"

#include "codegen/BuildExecutable.h"
#include "codegen/Compile.h"
#include "codegen/EquivalentFusions.h"
#include "codegen/Target.h"
#include "runtime/CpuThreads.h"
#include "train/BuiltinModels.h"
#include "train/Trainer.h"
#include "runtime/Trace.h"

#include "mlir/Parser/Parser.h"

#include <cmath>
#include <cstring>
#include <numeric>
#include <regex>

namespace smelt::rt::test {
namespace {

/// A fusion of two tensor<1000xf32> inputs: tanh(a * b - c), or tanh(c - a * b) when `flipped`.
std::string fusion(const std::string &result, const std::string &inputs, const char *c,
                   bool flipped = false) {
  return substitute(R"(
  ${R} = smelt.fusion loop (${IN}) : (tensor<1000xf32>, tensor<1000xf32>) -> tensor<1000xf32> {
  ^bb0(%a: tensor<1000xf32>, %b: tensor<1000xf32>):
    %c = smelt.constant dense<${C}> : tensor<1000xf32>
    %m = smelt.mul %a, %b : tensor<1000xf32>
    %s = smelt.sub ${SUB} : tensor<1000xf32>
    %e = smelt.tanh %s : tensor<1000xf32>
    smelt.yield %e : tensor<1000xf32>
  })",
                    {{"R", result}, {"IN", inputs}, {"C", c}, {"SUB", flipped ? "%c, %m" : "%m, %c"}});
}

// @f's five fusions: #1 and #4 are #0's body on other inputs (#4 on #0's and #1's results);
// #2 differs from #0 in a constant, #3 in which value the subtraction takes first.
const std::string kFiveFusions =
    "func.func @f(%x: tensor<1000xf32>, %y: tensor<1000xf32>, %z: tensor<1000xf32>) -> "
    "(tensor<1000xf32>, tensor<1000xf32>, tensor<1000xf32>, tensor<1000xf32>, "
    "tensor<1000xf32>) {" +
    fusion("%0", "%x, %y", "1.5") + fusion("%1", "%y, %z", "1.5") + fusion("%2", "%z, %x", "2.5") +
    fusion("%3", "%x, %z", "1.5", /*flipped=*/true) + fusion("%4", "%0, %1", "1.5") +
    "\n  return %0, %1, %2, %3, %4 : tensor<1000xf32>, tensor<1000xf32>, tensor<1000xf32>, "
    "tensor<1000xf32>, tensor<1000xf32>\n}\n";

/// @f's results in float64 from the inputs as stored.
std::vector<std::vector<double>> reference(const std::vector<HostTensor> &inputs) {
  std::vector<double> x = inputs[0].toDoubles(), y = inputs[1].toDoubles(),
                      z = inputs[2].toDoubles();
  std::vector<std::vector<double>> r(5, std::vector<double>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    r[0][i] = std::tanh(x[i] * y[i] - 1.5);
    r[1][i] = std::tanh(y[i] * z[i] - 1.5);
    r[2][i] = std::tanh(z[i] * x[i] - 2.5);
    r[3][i] = std::tanh(1.5 - x[i] * z[i]);
    r[4][i] = std::tanh(r[0][i] * r[1][i] - 1.5);
  }
  return r;
}

/// @f's Executable as it stands (no pipeline), its kernels JIT-linked by the CPU target, or
/// linked into a shared library and loaded from its bytes as an artifact's are when `library`
/// is given.
std::optional<Executable> build(mlir::func::FuncOp function, std::vector<uint8_t> *library,
                                Trace *trace = nullptr) {
  mlir::FailureOr<Executable> exe = codegen::buildExecutable(function);
  if (mlir::failed(exe))
    return std::nullopt;
  std::vector<mlir::Operation *> ops = codegen::kernelOpsInOrder(function);
  std::vector<size_t> kernels(ops.size());
  std::iota(kernels.begin(), kernels.end(), 0);
  codegen::TargetOptions options;
  options.cpuObject = library;
  options.trace = trace;
  if (mlir::failed(
          codegen::createCpuTarget()->compile(function, ops, kernels, options, *exe, nullptr)))
    return std::nullopt;
  return std::move(*exe);
}

/// Restores the process's compile and run thread count when the test ends.
class SharedKernels : public ::testing::Test {
protected:
  void SetUp() override {
    Expected<int> threads = cpuThreads();
    ASSERT_TRUE(threads) << threads.message();
    before_ = *threads;
  }
  void TearDown() override { setCpuThreads(before_); }

  mlir::MLIRContext context_;
  mlir::OwningOpRef<mlir::ModuleOp> parse() {
    codegen::loadDialects(context_);
    return mlir::parseSourceString<mlir::ModuleOp>(kFiveFusions, mlir::ParserConfig(&context_));
  }

private:
  int before_ = 1;
};

TEST_F(SharedKernels, EquivalentFusionsAreTheSameBodyOnAnyInputs) {
  auto module = parse();
  ASSERT_TRUE(module);
  auto function = *module->getOps<mlir::func::FuncOp>().begin();
  EXPECT_EQ(codegen::firstEquivalentFusions(codegen::fusionsInOrder(function)),
            (std::vector<size_t>{0, 0, 2, 3, 0}));

  // Bodies whose ops give the same result types but read arguments of other types (a convert
  // from f32 or from f16) are different kernels.
  auto converts = mlir::parseSourceString<mlir::ModuleOp>(R"(
func.func @g(%x: tensor<8xf32>, %h: tensor<8xf16>, %y: tensor<8xf32>) -> (tensor<8xf64>, tensor<8xf64>, tensor<8xf64>) {
  %0 = smelt.fusion loop (%x) : (tensor<8xf32>) -> tensor<8xf64> {
  ^bb0(%a: tensor<8xf32>):
    %c = smelt.convert %a : tensor<8xf32> -> tensor<8xf64>
    smelt.yield %c : tensor<8xf64>
  }
  %1 = smelt.fusion loop (%h) : (tensor<8xf16>) -> tensor<8xf64> {
  ^bb0(%a: tensor<8xf16>):
    %c = smelt.convert %a : tensor<8xf16> -> tensor<8xf64>
    smelt.yield %c : tensor<8xf64>
  }
  %2 = smelt.fusion loop (%y) : (tensor<8xf32>) -> tensor<8xf64> {
  ^bb0(%a: tensor<8xf32>):
    %c = smelt.convert %a : tensor<8xf32> -> tensor<8xf64>
    smelt.yield %c : tensor<8xf64>
  }
  return %0, %1, %2 : tensor<8xf64>, tensor<8xf64>, tensor<8xf64>
}
)",
                                                          mlir::ParserConfig(&context_));
  ASSERT_TRUE(converts);
  auto g = *converts->getOps<mlir::func::FuncOp>().begin();
  EXPECT_EQ(codegen::firstEquivalentFusions(codegen::fusionsInOrder(g)),
            (std::vector<size_t>{0, 1, 0}));
}

TEST_F(SharedKernels, EveryFusionComputesItsOwnInputsOnAnyNumberOfThreads) {
  auto module = parse();
  ASSERT_TRUE(module);
  auto function = *module->getOps<mlir::func::FuncOp>().begin();
  std::vector<HostTensor> inputs;
  for (int i = 0; i < 3; ++i)
    inputs.push_back(randomTensor(DType::f32, {1000}));
  std::vector<std::vector<double>> expected = reference(inputs);

  std::vector<std::vector<HostTensor>> results;
  for (int threads : {1, 3}) {
    setCpuThreads(threads);
    std::optional<Executable> jit = build(function, nullptr);
    ASSERT_TRUE(jit);
    // Three distinct kernels, #1 and #4 other names of #0's.
    const std::string &ir = jit->cpu->llvmIR;
    auto count = [&](const char *pattern) {
      std::regex regex(pattern);
      return std::distance(std::sregex_iterator(ir.begin(), ir.end(), regex),
                           std::sregex_iterator());
    };
    EXPECT_EQ(count("\\ndefine void @"), 3) << ir;
    EXPECT_EQ(count("\\n@\\S+ = alias "), 2) << ir;
    results.push_back(runExecutable(*jit, inputs));

    std::vector<uint8_t> library;
    std::optional<Executable> aot = build(function, &library);
    ASSERT_TRUE(aot);
    EXPECT_FALSE(library.empty());
    results.push_back(runExecutable(*aot, inputs));
  }
  for (const std::vector<HostTensor> &outputs : results) {
    ASSERT_EQ(outputs.size(), 5u);
    for (size_t r = 0; r < 5; ++r) {
      std::vector<double> got = outputs[r].toDoubles();
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i)
        worst = std::max(worst, std::abs(got[i] - expected[r][i]));
      EXPECT_LE(worst, 1e-6) << "result #" << r << " (SMELT_TEST_SEED=" << baseSeed() << ")";
    }
  }
  // The JIT on one thread, then the shared library, then both on three: the same bits.
  for (size_t run = 1; run < results.size(); ++run)
    for (size_t r = 0; r < 5; ++r)
      EXPECT_EQ(std::memcmp(results[run][r].raw(), results[0][r].raw(), results[0][r].byteSize()),
                0)
          << "run " << run << ", result #" << r;
}

// A two-layer GPT's training step repeats its layers' kernels: compiled on one thread and on
// three (other parts, other modules), every output is the same to the bit.
TEST_F(SharedKernels, AGptStepIsTheSameBitsOnOneThreadAndThree) {
  train::TrainConfig config;
  config.model =
      train::gptModel(GptConfig{.vocab = 10, .context = 16, .width = 32, .layers = 2, .heads = 4});
  config.batch = 8;
  std::unique_ptr<Graph> graph = train::buildTrainStep(context_, config);
  std::vector<Executable> exes;
  for (int threads : {1, 3}) {
    setCpuThreads(threads);
    mlir::FailureOr<Executable> exe = codegen::compile(graph->module(), "train_step");
    ASSERT_TRUE(mlir::succeeded(exe));
    exes.push_back(std::move(*exe));
  }
  std::vector<HostTensor> inputs = trainInputs(exes[0]);
  std::vector<HostTensor> one = runExecutable(exes[0], inputs), three = runExecutable(exes[1], inputs);
  ASSERT_EQ(one.size(), three.size());
  ASSERT_FALSE(one.empty());
  for (size_t i = 0; i < one.size(); ++i)
    EXPECT_EQ(std::memcmp(one[i].raw(), three[i].raw(), one[i].byteSize()), 0)
        << exes[0].buffers[exes[0].outputs[i]].name;
}

TEST_F(SharedKernels, TheProfileShowsEachCompileThreadsPhases) {
  auto module = parse();
  ASSERT_TRUE(module);
  setCpuThreads(2);
  Trace trace;
  auto function = *module->getOps<mlir::func::FuncOp>().begin();
  ASSERT_TRUE(build(function, nullptr, &trace));
  std::string json = trace.json();
  for (const char *phase : {"emit and lower", "LLVM optimization", "machine code", "JIT link"})
    EXPECT_NE(json.find(phase), std::string::npos) << phase << " missing from\n" << json;
  for (const char *thread : {"cpu codegen 0", "cpu codegen 1"})
    EXPECT_NE(json.find(thread), std::string::npos) << thread << " missing from\n" << json;
}

} // namespace
} // namespace smelt::rt::test
