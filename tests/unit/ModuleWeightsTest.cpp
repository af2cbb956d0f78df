// A bytecode module's weights are held once on their way from the file to a run: its
// dense_resource constants, parsed by codegen::parseModuleFile, reach the executable as views of
// the file's bytes, not a copy. Values against a float64 reference on fresh random data.
#include "TestUtil.h"

#include "codegen/Compile.h"
#include "ir/ConstantData.h"
#include "ir/SmeltDialect.h"
#include "runtime/Executor.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace smelt::test {
namespace {

constexpr int64_t kRows = 64, kCols = 512; // 128 KiB of f32 weights: a dense_resource blob

std::string tempPath(const std::string &name) {
  return (std::filesystem::temp_directory_path() /
          ("smelt-weights-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

/// y = x + w, w a constant of fresh random values, written to `path` as bytecode.
std::vector<float> writeBytecodeModel(const std::string &path) {
  mlir::MLIRContext context;
  codegen::loadDialects(context);
  std::string type = "tensor<" + std::to_string(kRows) + "x" + std::to_string(kCols) + "xf32>";
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(
      "func.func @main(%x: " + type + ") -> " + type + " {\n  %w = smelt.constant dense<1.0> : " +
          type + "\n  %y = smelt.add %x, %w : " + type + "\n  return %y : " + type + "\n}\n",
      &context);
  EXPECT_TRUE(module);
  std::vector<float> weights(size_t(kRows * kCols));
  for (float &w : weights)
    w = float(draw(-2, 2));
  std::vector<char> bytes(weights.size() * sizeof(float));
  std::memcpy(bytes.data(), weights.data(), bytes.size());
  module->walk([&](ConstantOp constant) {
    constant->setAttr("value", elementsFromBytes(mlir::cast<mlir::ShapedType>(constant.getType()),
                                                 std::move(bytes)));
  });
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(mlir::succeeded(mlir::writeBytecodeToFile(*module, os)));
  return weights;
}

TEST(ModuleWeights, ABytecodeModulesWeightsReachTheExecutableWithoutACopy) {
  SCOPED_TRACE("seed " + std::to_string(rngSeed()));
  std::string path = tempPath("model.mlirbc");
  std::vector<float> weights = writeBytecodeModel(path);

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = codegen::parseModuleFile(context, path);
  ASSERT_TRUE(module);
  const char *parsed = nullptr;
  module->walk([&](ConstantOp constant) {
    if (auto raw = rawElementBytes(mlir::cast<mlir::ElementsAttr>(constant.getValue())))
      parsed = raw->data();
  });
  ASSERT_NE(parsed, nullptr) << "the constant is not a dense_resource with its bytes";
  mlir::FailureOr<rt::Executable> exe = codegen::compile(*module);
  ASSERT_TRUE(mlir::succeeded(exe));
  module = nullptr; // the executable keeps the file's bytes alive without the module
  std::filesystem::remove(path);
  ASSERT_EQ(exe->constants.size(), 1u);
  EXPECT_EQ(static_cast<const void *>(exe->constants[0].bytes.data()),
            static_cast<const void *>(parsed))
      << "the executable copied the weights";

  rt::HostTensor x = randomTensor({kRows, kCols}, DType::f32);
  rt::Expected<std::unique_ptr<rt::Executor>> executor = rt::Executor::create(*exe);
  ASSERT_TRUE(executor.ok()) << executor.message();
  std::vector<rt::HostTensor> outputs;
  ASSERT_TRUE((*executor)->run({&x}, outputs).ok());
  ASSERT_EQ(outputs.size(), 1u);
  std::vector<double> got = outputs[0].toDoubles(), in = x.toDoubles();
  for (size_t i = 0; i < weights.size(); ++i)
    ASSERT_EQ(got[i], double(float(in[i] + double(weights[i])))) << "element " << i;
}

} // namespace
} // namespace smelt::test
