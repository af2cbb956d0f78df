// Fused-kernel test helpers: parse, inline fusions for the unfused twin (one kernel per op),
// compile, run, compare; and single ops compiled as kernels of their own.
#include "FusionTestUtil.h"
#include "tests/unit/KernelOps.h"

#include "codegen/BuildExecutable.h"
#include "codegen/Compile.h"

#include "ir/SmeltDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

namespace smelt::rt::test {

const DType kAllDTypes[7] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                             DType::i32, DType::i64, DType::i1};
const DType kFloatDTypes[4] = {DType::f32, DType::f64, DType::f16, DType::bf16};

std::string tensorType(const std::vector<int64_t> &shape, DType dtype) {
  std::string text = "tensor<";
  for (int64_t size : shape)
    text += std::to_string(size) + "x";
  return text + std::string(dtypeName(dtype)) + ">";
}

std::string substitute(std::string text, const std::map<std::string, std::string> &vars) {
  for (const auto &[name, value] : vars) {
    std::string key = "${" + name + "}";
    for (size_t at = text.find(key); at != std::string::npos;
         at = text.find(key, at + value.size()))
      text.replace(at, key.size(), value);
  }
  return text;
}

namespace {

/// Replaces each smelt.fusion by a copy of its body: what the function computes without fusion.
void inlineFusions(mlir::func::FuncOp function) {
  for (FusionOp fusion : codegen::fusionsInOrder(function)) {
    mlir::IRMapping map;
    mlir::Block &body = fusion.getBody().front();
    map.map(body.getArguments(), fusion.getInputs());
    mlir::OpBuilder builder(fusion);
    for (mlir::Operation &op : body.without_terminator())
      builder.clone(op, map);
    for (auto [result, value] : llvm::zip(fusion.getResults(), fusion.getYield().getValues()))
      result.replaceAllUsesWith(map.lookupOrDefault(value));
    fusion.erase();
  }
}

std::optional<Executable> compileText(const std::string &mlir, bool fused) {
  mlir::MLIRContext context;
  codegen::loadDialects(context);
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler capture(&context, [&](mlir::Diagnostic &d) {
    llvm::raw_string_ostream os(diagnostics);
    os << d.getLocation() << ": " << d << "\n";
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(mlir, mlir::ParserConfig(&context));
  if (!module) {
    ADD_FAILURE() << "parse failed:\n" << diagnostics << "in:\n" << mlir;
    return std::nullopt;
  }
  auto function = *module->getOps<mlir::func::FuncOp>().begin();
  if (!fused) {
    inlineFusions(function);
    mlir::PassManager pm(&context);
    pm.addPass(createFuse(FuseOptions{/*reportPath=*/"", /*oneOpPerKernel=*/true}));
    if (mlir::failed(pm.run(*module))) {
      ADD_FAILURE() << "smelt-fuse{one-op-per-kernel} failed:\n" << diagnostics;
      return std::nullopt;
    }
  }
  mlir::FailureOr<Executable> exe = codegen::buildWithKernels(function);
  if (mlir::failed(exe)) {
    ADD_FAILURE() << (fused ? "fused" : "unfused") << " compile failed:\n"
                  << diagnostics << "in:\n"
                  << mlir;
    return std::nullopt;
  }
  return std::move(*exe);
}

} // namespace

std::optional<Compiled> compileBoth(const std::string &mlir) {
  std::optional<Executable> fused = compileText(mlir, true);
  std::optional<Executable> unfused = compileText(mlir, false);
  if (!fused || !unfused)
    return std::nullopt;
  EXPECT_FALSE(fused->kernels.empty()) << "no fusion in:\n" << mlir;
  for (const FusedKernel &kernel : unfused->kernels)
    EXPECT_LE(smelt::test::opsBeyondSources(kernel), 1) << "unfused kernel " << kernel.ops;
  return Compiled{std::move(*fused), std::move(*unfused)};
}

/// Inputs of the training step: images in [0, 1], labels (and tokens) 0..9, step 1, positive
/// parameters and optimizer state (Adam's second moment must be).
std::vector<HostTensor> trainInputs(const Executable &exe) {
  std::vector<HostTensor> inputs;
  for (BufferId id : exe.inputs) {
    const TensorType &type = exe.buffers[id].type;
    if (type.dtype == DType::i32)
      inputs.push_back(randomTensor(type.dtype, type.shape, [] { return draw(0, 9.49, 0); }));
    else if (type.dtype == DType::i64)
      inputs.push_back(HostTensor::fromDoubles(type, {1}));
    else
      inputs.push_back(randomTensor(type.dtype, type.shape, [] { return draw(0.01, 0.2); }));
  }
  return inputs;
}

std::vector<HostTensor> runExecutable(const Executable &exe,
                                      const std::vector<HostTensor> &inputs) {
  Expected<CpuExecutor> executor = CpuExecutor::create(exe);
  if (!executor) {
    ADD_FAILURE() << "executor: " << executor.message();
    return {};
  }
  std::vector<HostTensor> outputs;
  if (Status s = executor->run(inputs, outputs); !s.ok()) {
    ADD_FAILURE() << "run: " << s.message();
    return {};
  }
  return outputs;
}

void expectMatch(const HostTensor &got, const HostTensor &ref, double tol,
                 const std::string &what) {
  ASSERT_EQ(got.type(), ref.type()) << what;
  std::vector<double> g = got.toDoubles(), r = ref.toDoubles(), finiteGot, finiteRef;
  size_t mismatches = 0;
  std::string first;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isfinite(r[i]) && std::isfinite(g[i])) {
      finiteGot.push_back(g[i]);
      finiteRef.push_back(r[i]);
    } else if (!(std::isnan(r[i]) && std::isnan(g[i])) && g[i] != r[i]) {
      if (mismatches++ == 0)
        first = "element " + std::to_string(i) + ": " + std::to_string(g[i]) + " vs " +
                std::to_string(r[i]);
    }
  }
  EXPECT_EQ(mismatches, 0u) << what << ": non-finite values differ, first at " << first
                            << " (SMELT_TEST_SEED=" << baseSeed() << ")";
  EXPECT_LE(relError(finiteGot, finiteRef), tol)
      << what << ": fused vs unfused " << got.type().str() << " (SMELT_TEST_SEED=" << baseSeed()
      << ")";
}

namespace {

/// `value` as an MLIR attribute of op `op`'s attribute `name`: keywords are the dialect's enums.
std::string attributeText(const std::string &name, const AttrValue &value) {
  if (const int64_t *v = std::get_if<int64_t>(&value))
    return std::to_string(*v) + " : i64";
  if (const double *v = std::get_if<double>(&value))
    return fmt::format("{:e} : f64", *v);
  if (const auto *v = std::get_if<std::vector<int64_t>>(&value))
    return v->empty() ? "array<i64>" : fmt::format("array<i64: {}>", fmt::join(*v, ", "));
  const std::string &keyword = std::get<std::string>(value);
  std::optional<uint32_t> number;
  if (name == "direction")
    if (auto direction = symbolizeCompareDirection(keyword))
      number = uint32_t(*direction);
  if (name == "kind")
    if (auto kind = symbolizeReduceKind(keyword))
      number = uint32_t(*kind);
  if (!number)
    ADD_FAILURE() << "no keyword '" << keyword << "' for attribute '" << name << "'";
  return std::to_string(number.value_or(0)) + " : i32";
}

} // namespace

HostTensor runKernelOp(const std::string &op, const std::vector<HostTensor> &inputs,
                       const TensorType &result, const Attrs &attrs) {
  std::vector<std::string> args, argTypes, props;
  for (size_t i = 0; i < inputs.size(); ++i) {
    args.push_back("%arg" + std::to_string(i));
    argTypes.push_back(tensorType(inputs[i].type().shape, inputs[i].type().dtype));
  }
  for (const auto &[name, value] : attrs)
    props.push_back(name + " = " + attributeText(name, value));
  std::string resultType = tensorType(result.shape, result.dtype);
  std::vector<std::string> params;
  for (size_t i = 0; i < args.size(); ++i)
    params.push_back(args[i] + ": " + argTypes[i]);
  std::string properties =
      props.empty() ? "" : fmt::format(" <{{{}}}>", fmt::join(props, ", "));
  std::string text = fmt::format(
      "func.func @main({}) -> {} {{\n  %0 = \"smelt.{}\"({}){} : ({}) -> {}\n"
      "  return %0 : {}\n}}\n",
      fmt::join(params, ", "), resultType, op, fmt::join(args, ", "), properties,
      fmt::join(argTypes, ", "), resultType, resultType);
  mlir::MLIRContext context;
  codegen::loadDialects(context);
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler capture(&context, [&](mlir::Diagnostic &d) {
    llvm::raw_string_ostream os(diagnostics);
    os << d << "\n";
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, mlir::ParserConfig(&context));
  PipelineOptions options;
  options.fuse = false;
  mlir::FailureOr<Executable> exe = mlir::failure();
  if (module)
    exe = codegen::compile(*module, "", options);
  if (mlir::failed(exe)) {
    ADD_FAILURE() << op << ": compile failed:\n" << diagnostics << "in:\n" << text;
    return HostTensor::zeros(result);
  }
  EXPECT_EQ(exe->kernels.size(), 1u) << op << " is not one kernel";
  std::vector<HostTensor> outputs = runExecutable(*exe, inputs);
  return outputs.empty() ? HostTensor::zeros(result) : std::move(outputs[0]);
}

std::vector<HostTensor> expectFusedMatchesUnfused(const std::string &mlir,
                                                  const std::vector<HostTensor> &inputs,
                                                  const std::string &what) {
  std::optional<Compiled> compiled = compileBoth(mlir);
  if (!compiled)
    return {};
  std::vector<HostTensor> fused = runExecutable(compiled->fused, inputs);
  std::vector<HostTensor> unfused = runExecutable(compiled->unfused, inputs);
  EXPECT_EQ(fused.size(), unfused.size()) << what;
  if (fused.size() != unfused.size())
    return {};
  for (size_t i = 0; i < fused.size(); ++i)
    expectMatch(fused[i], unfused[i],
                smelt::test::referenceTolerance(unfused[i].type().dtype),
                what + " result #" + std::to_string(i));
  return fused;
}

} // namespace smelt::rt::test
