// The executor's checks of fusion steps: each broken Executable is an error that names the
// step and the kernel, never a call into code with the wrong buffers.
#include "FusionTestUtil.h"

#include "codegen/BuildExecutable.h"
#include "codegen/Compile.h"

#include "mlir/Parser/Parser.h"

namespace smelt::rt::test {
namespace {

const char *kAddOne = R"(
func.func @f(%x: tensor<4x3xf32>, %y: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %r = smelt.fusion loop (%x, %y) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32> {
  ^bb0(%a: tensor<4x3xf32>, %b: tensor<4x3xf32>):
    %0 = smelt.add %a, %b : tensor<4x3xf32>
    smelt.yield %0 : tensor<4x3xf32>
  }
  return %r : tensor<4x3xf32>
}
)";

/// kAddOne compiled with its kernel (withCode) or by buildExecutable alone.
Executable addOne(bool withCode) {
  mlir::MLIRContext context;
  codegen::loadDialects(context);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(kAddOne, mlir::ParserConfig(&context));
  auto function = *module->getOps<mlir::func::FuncOp>().begin();
  mlir::FailureOr<Executable> exe =
      withCode ? codegen::buildWithKernels(function) : codegen::buildExecutable(function);
  EXPECT_TRUE(mlir::succeeded(exe));
  return std::move(*exe);
}

std::string createError(const Executable &exe) {
  Expected<CpuExecutor> executor = CpuExecutor::create(exe);
  return executor ? "" : executor.message();
}

void expectError(const Executable &exe, const std::string &part) {
  std::string message = createError(exe);
  EXPECT_NE(message.find("'fusion'"), std::string::npos) << message;
  EXPECT_NE(message.find(part), std::string::npos) << "expected '" << part << "' in: " << message;
}

TEST(FusedExecutor, RunsAWellFormedFusionStep) {
  Executable exe = addOne(true);
  EXPECT_EQ(createError(exe), "");
  EXPECT_EQ(exe.kernels[0].inputs.size(), 2u);
  EXPECT_EQ(exe.kernels[0].results.size(), 1u);
}

TEST(FusedExecutor, FusionWithoutCpuCodeIsAnError) {
  expectError(addOne(false), "kernel 0 ('f_fusion0') has no CPU code");
}

TEST(FusedExecutor, KernelIndexOutOfRangeIsAnError) {
  Executable exe = addOne(true);
  exe.steps[0].params = KernelParams{3};
  expectError(exe, "kernel #3 does not exist (the executable has 1)");
  exe.steps[0].params = NoParams{};
  expectError(exe, "its parameters are not those of 'fusion'");
}

TEST(FusedExecutor, KernelMissingFromTheCpuCodeIsAnError) {
  Executable exe = addOne(true);
  auto code = std::make_shared<CpuCode>(*exe.cpu);
  code->entries.clear();
  exe.cpu = code;
  expectError(exe, "has no entry in the CPU code (0 entries)");
}

TEST(FusedExecutor, WrongOperandOrResultCountsAreErrors) {
  Executable exe = addOne(true);
  exe.steps[0].operands.pop_back();
  expectError(exe, "reads 2 buffers and writes 1, but the step passes 1 operands and 1 results");
  exe = addOne(true);
  exe.steps[0].results.clear();
  expectError(exe, "a step writes at least one result, this one 0");
}

TEST(FusedExecutor, BuffersOfOtherTypesThanTheKernelsAreErrors) {
  // A kernel indexes its buffers by the shapes it was compiled for: a smaller operand would be
  // read past its end, a smaller result written past it.
  Executable exe = addOne(true);
  TensorType compiled = exe.buffers[exe.steps[0].operands[0]].type;
  exe.buffers[exe.steps[0].operands[0]].type.shape = {2};
  expectError(exe, "was compiled for operand #0 of type " + compiled.str() + ", but the step "
                   "passes b0");
  exe = addOne(true);
  exe.buffers[exe.steps[0].results[0]].type.dtype = DType::f64;
  expectError(exe, "was compiled for result #0 of type");
}

TEST(FusedExecutor, ResultsWrittenInPlaceMustNameAnOperandOfTheirType) {
  // smelt-donate-in-place's choice, as a damaged or hand-made artifact could state it: an entry
  // per result, each -1 or an operand of the result's type that no other result takes.
  Executable exe = addOne(true);
  auto inPlace = [&](std::vector<int64_t> entries) {
    exe.steps[0].params = KernelParams{0, std::move(entries)};
  };
  inPlace({1});
  EXPECT_EQ(createError(exe), "");
  inPlace({-1});
  EXPECT_EQ(createError(exe), "");
  inPlace({0, 1});
  expectError(exe, "in_place has 2 entries for 1 results");
  inPlace({2});
  expectError(exe, "result #0 is written in place of operand #2, which does not exist");
  inPlace({-2});
  expectError(exe, "result #0 is written in place of operand #-2, which does not exist");
  exe.buffers[exe.steps[0].operands[1]].type.dtype = DType::f64;
  exe.kernels[0].inputs[1].dtype = DType::f64;
  inPlace({1});
  expectError(exe, "result #0 (tensor<4x3xf32>) is written in place of operand #1 of another "
                   "type (tensor<4x3xf64>)");
}

TEST(FusedExecutor, UnitsThatDoNotCoverTheResultAreAnError) {
  Executable exe = addOne(true);
  exe.kernels[0].units = 5;
  expectError(exe, "computes 5 units, but result #0 is tensor<");
}

} // namespace
} // namespace smelt::rt::test
