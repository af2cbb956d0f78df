// --profile's trace: the compile's passes and phases, one span per executed step with its op,
// shapes and bytes, and the executor's memory as counters, in JSON that parses; and the step
// costs the spans and `smelt bench` share.
#include "codegen/Compile.h"
#include "runtime/CpuExecutor.h"
#include "runtime/StepCost.h"

#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace smelt::test {
namespace {

const char *kDense = R"(
func.func @main(%x: tensor<16x32xf32>, %w: tensor<32x8xf32>, %b: tensor<8xf32>)
    -> tensor<16x8xf32> {
  %0 = smelt.matmul %x, %w : tensor<16x32xf32>, tensor<32x8xf32>
  %1 = smelt.broadcast_in_dim %b, dims = [1] : tensor<8xf32> -> tensor<16x8xf32>
  %2 = smelt.add %0, %1 : tensor<16x8xf32>
  %3 = smelt.relu %2 : tensor<16x8xf32>
  return %3 : tensor<16x8xf32>
}
)";

struct Profiled {
  rt::Trace trace;
  rt::Executable exe;
};

std::vector<rt::HostTensor> inputsOf(const rt::Executable &exe) {
  std::vector<rt::HostTensor> inputs;
  for (rt::BufferId id : exe.inputs) {
    const rt::TensorType &type = exe.buffers[id].type;
    inputs.push_back(rt::HostTensor::fromDoubles(
        type, std::vector<double>(size_t(type.numElements()), 0.5)));
  }
  return inputs;
}

/// kDense compiled and run `runs` times with everything recorded into one trace. Without
/// epilogue folding, so that a kernel (the bias add and relu) follows the library call; with
/// `epilogues`, both run inside the matmul.
void compileAndRun(Profiled &p, int runs, bool epilogues = false) {
  mlir::MLIRContext context;
  codegen::loadDialects(context);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(kDense, mlir::ParserConfig(&context));
  ASSERT_TRUE(module);
  codegen::CompileOptions options;
  options.trace = &p.trace;
  options.pipeline.epilogues = epilogues;
  mlir::FailureOr<rt::Executable> exe = codegen::compile(*module, "main", options);
  ASSERT_TRUE(mlir::succeeded(exe));
  p.exe = *exe;
  rt::Expected<rt::CpuExecutor> executor = rt::CpuExecutor::create(p.exe, &p.trace);
  ASSERT_TRUE(executor) << executor.message();
  std::vector<rt::HostTensor> inputs = inputsOf(p.exe), outputs;
  for (int i = 0; i < runs; ++i)
    ASSERT_TRUE(executor->run(inputs, outputs).ok());
}

std::vector<nlohmann::json> events(const rt::Trace &trace, const std::string &phase) {
  nlohmann::json parsed = nlohmann::json::parse(trace.json()); // throws if malformed
  std::vector<nlohmann::json> out;
  for (const nlohmann::json &e : parsed.at("traceEvents"))
    if (e.at("ph") == phase)
      out.push_back(e);
  return out;
}

TEST(Profile, TraceHasPassesPhasesStepsAndMemory) {
  Profiled p;
  compileAndRun(p, 2);
  ASSERT_FALSE(HasFailure());
  std::vector<nlohmann::json> spans = events(p.trace, "X");
  auto count = [&](const std::string &category, const std::string &name) {
    return std::count_if(spans.begin(), spans.end(), [&](const nlohmann::json &e) {
      return e.at("cat") == category && (name.empty() || e.at("name") == name);
    });
  };
  EXPECT_EQ(count("pass", "smelt-fuse"), 1);
  EXPECT_EQ(count("compile", "pipeline @main"), 1);
  EXPECT_EQ(count("compile", "codegen and LLVM JIT @main"), 1);
  EXPECT_EQ(count("run", "run @main"), 2);
  EXPECT_EQ(count("copy", "copy outputs"), 2);
  // Every step of every run, with the args a reader needs to tell them apart.
  ASSERT_EQ(p.exe.steps.size(), 2u); // matmul, then the fused bias + relu
  EXPECT_EQ(count("library", "matmul"), 2);
  EXPECT_EQ(count("kernel", "main_fusion0"), 2);
  for (const nlohmann::json &e : spans) {
    if (e.at("cat") != "kernel" && e.at("cat") != "library")
      continue;
    const nlohmann::json &args = e.at("args");
    for (const char *key : {"op", "shapes", "bytes", "flops", "device", "location"})
      EXPECT_TRUE(args.contains(key)) << key << " missing in " << e.dump();
    if (e.at("name") == "matmul") {
      EXPECT_EQ(args.at("shapes"), "tensor<16x32xf32>, tensor<32x8xf32> -> tensor<16x8xf32>");
      EXPECT_EQ(args.at("bytes"), std::to_string(4 * (16 * 32 + 32 * 8 + 16 * 8)));
      EXPECT_EQ(args.at("flops"), std::to_string(2 * 16 * 8 * 32));
    }
  }
  // Steps of one run follow each other on one track: cpu:0's stream.
  std::vector<nlohmann::json> steps;
  for (const nlohmann::json &e : spans)
    if (e.at("cat") == "kernel" || e.at("cat") == "library")
      steps.push_back(e);
  for (size_t i = 1; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].at("tid"), steps[0].at("tid"));
    EXPECT_GE(steps[i].at("ts").get<double>(),
              steps[i - 1].at("ts").get<double>() + steps[i - 1].at("dur").get<double>());
  }

  // Memory: the constants from create, then per run a sample after each step (constants and
  // the run's arena, which holds every buffer smelt-assign-buffers laid out: the compiled peak),
  // the output copies on top, then the constants alone once the run has given its arena back.
  // The second run writes its result into the first run's output tensor, so nothing is copied
  // on top.
  std::vector<nlohmann::json> counters = events(p.trace, "C");
  size_t perRun = p.exe.steps.size() + 2;
  ASSERT_EQ(counters.size(), 1u + 2 * perRun);
  auto inUse = [&](size_t i) { return counters[i].at("args").at("in use").get<double>(); };
  double constants = inUse(0), output = 16 * 8 * 4, peak = 0;
  double compiledPeak = double(p.exe.peakBytes.at("cpu:0"));
  for (size_t run = 0; run < 2; ++run) {
    size_t first = 1 + run * perRun, copies = first + p.exe.steps.size();
    for (size_t step = first; step < copies; ++step)
      EXPECT_EQ(inUse(step), compiledPeak) << "constants and the arena, during the steps";
    EXPECT_EQ(inUse(copies), compiledPeak + (run == 0 ? 1 : 0) * output)
        << "in run 0 the output's copy is on top";
    EXPECT_EQ(inUse(copies + 1), constants);
  }
  for (size_t i = 0; i < counters.size(); ++i) {
    EXPECT_EQ(counters[i].at("name"), "memory");
    peak = std::max(peak, inUse(i));
    EXPECT_EQ(counters[i].at("args").at("peak").get<double>(), peak);
  }
}

TEST(Profile, NoTraceNoEvents) {
  Profiled p;
  compileAndRun(p, 1);
  ASSERT_FALSE(HasFailure());
  rt::Expected<rt::CpuExecutor> executor = rt::CpuExecutor::create(p.exe, &p.trace);
  ASSERT_TRUE(executor);
  executor->setTrace(nullptr);
  size_t before = p.trace.eventCount();
  std::vector<rt::HostTensor> inputs = inputsOf(p.exe), outputs;
  ASSERT_TRUE(executor->run(inputs, outputs).ok());
  EXPECT_EQ(p.trace.eventCount(), before);
  EXPECT_EQ(executor->lastStepMicros().size(), p.exe.steps.size());
}

TEST(Profile, StepCostsCountBytesAndFlops) {
  Profiled p;
  compileAndRun(p, 0);
  ASSERT_FALSE(HasFailure());
  rt::StepCost matmul = rt::stepCost(p.exe, p.exe.steps[0]);
  EXPECT_EQ(matmul.kind, "library");
  EXPECT_EQ(matmul.flops, 2.0 * 16 * 8 * 32);
  rt::StepCost fused = rt::stepCost(p.exe, p.exe.steps[1]);
  EXPECT_EQ(fused.kind, "kernel");
  EXPECT_EQ(fused.name, "main_fusion0");
  EXPECT_EQ(fused.ops, p.exe.kernels[0].ops);
  // Operands (the matmul's result and the bias) plus the result.
  EXPECT_EQ(fused.bytes, 4.0 * (16 * 8 + 8 + 16 * 8));
  // add and relu compute, broadcast_in_dim only moves data: two FLOPs per element.
  EXPECT_EQ(fused.flops, 2.0 * 16 * 8);

  // Folded into the matmul, they cost the same FLOPs there and the bias's bytes.
  Profiled folded;
  compileAndRun(folded, 0, /*epilogues=*/true);
  ASSERT_FALSE(HasFailure());
  ASSERT_EQ(folded.exe.steps.size(), 1u);
  rt::StepCost epilogue = rt::stepCost(folded.exe, folded.exe.steps[0]);
  EXPECT_EQ(epilogue.ops, "matmul+bias+relu");
  EXPECT_EQ(epilogue.flops, 2.0 * 16 * 8 * 32 + 2.0 * 16 * 8);
  EXPECT_EQ(epilogue.bytes, 4.0 * (16 * 32 + 32 * 8 + 8 + 16 * 8));
}

TEST(Profile, ScatterAddCostsAnAddPerUpdate) {
  mlir::MLIRContext context;
  codegen::loadDialects(context);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"(
func.func @main(%u: tensor<6x5x16xbf16>, %i: tensor<6x5xi32>) -> tensor<100x16xbf16> {
  %0 = smelt.scatter_add %u[%i] size = 100 : tensor<6x5x16xbf16>, tensor<6x5xi32>
  return %0 : tensor<100x16xbf16>
}
)",
                                                        mlir::ParserConfig(&context));
  ASSERT_TRUE(module);
  mlir::FailureOr<rt::Executable> exe = codegen::compile(*module, "main");
  ASSERT_TRUE(mlir::succeeded(exe));
  ASSERT_EQ(exe->steps.size(), 1u);
  rt::StepCost cost = rt::stepCost(*exe, exe->steps[0]);
  EXPECT_EQ(cost.name, "scatter_add");
  EXPECT_EQ(cost.flops, 6.0 * 5 * 16);
  EXPECT_EQ(cost.bytes, 2.0 * 6 * 5 * 16 + 4.0 * 6 * 5 + 2.0 * 100 * 16);
}

// Each of the three convolutions does 2 * N*OH*OW*F * KH*KW*C multiply-adds, whichever layout
// its filter is in (the GPU's OHWI keeps F first).
TEST(Profile, ConvolutionsCostTheSameFlopsInEitherFilterLayout) {
  mlir::MLIRContext context;
  codegen::loadDialects(context);
  for (const char *layout : {"", "filter_layout = ohwi"}) {
    bool ohwi = *layout != 0;
    std::string filter = ohwi ? "tensor<8x3x3x2xf32>" : "tensor<3x3x2x8xf32>";
    std::string attrs =
        std::string("strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1] ") + layout;
    std::string text =
        "func.func @main(%x: tensor<4x6x6x2xf32>, %w: " + filter +
        ", %dy: tensor<4x6x6x8xf32>) -> (tensor<4x6x6x8xf32>, tensor<4x6x6x2xf32>, " + filter +
        ") {\n"
        "  %y = smelt.conv2d %x, %w " +
        attrs + " : tensor<4x6x6x2xf32>, " + filter + "\n" +
        "  %dx = smelt.conv2d_backward_input %dy, %w " + attrs + " : tensor<4x6x6x8xf32>, " +
        filter + " -> tensor<4x6x6x2xf32>\n" + "  %dw = smelt.conv2d_backward_filter %x, %dy " +
        attrs + " : tensor<4x6x6x2xf32>, tensor<4x6x6x8xf32> -> " + filter + "\n" +
        "  return %y, %dx, %dw : tensor<4x6x6x8xf32>, tensor<4x6x6x2xf32>, " + filter + "\n}\n";
    auto module = mlir::parseSourceString<mlir::ModuleOp>(text, mlir::ParserConfig(&context));
    ASSERT_TRUE(module) << text;
    mlir::FailureOr<rt::Executable> exe = codegen::compile(*module, "main");
    ASSERT_TRUE(mlir::succeeded(exe));
    int convolutions = 0;
    for (const rt::Step &step : exe->steps) {
      if (step.op != rt::StepOp::Conv2D && step.op != rt::StepOp::Conv2DBackwardInput &&
          step.op != rt::StepOp::Conv2DBackwardFilter)
        continue;
      ++convolutions;
      EXPECT_EQ(rt::stepCost(*exe, step).flops, 2.0 * (4 * 6 * 6 * 8) * (3 * 3 * 2))
          << step.name() << (ohwi ? " (ohwi)" : " (hwio)");
    }
    EXPECT_EQ(convolutions, 3);
  }
}

} // namespace
} // namespace smelt::test
