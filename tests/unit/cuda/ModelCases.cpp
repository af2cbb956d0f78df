// The models' steps the CUDA checks compile: the MLP, the CNN, the ResNet with batch norm and a
// small char-level GPT, each under each precision policy, as train::buildTrainStep builds it and the default pipeline
// fuses it.
#include "CudaCorpus.h"

#include "train/BuiltinModels.h"
#include "train/Trainer.h"

#include "mlir/Pass/PassManager.h"

namespace smelt::cuda_test {

const std::vector<ModelCase> &modelCases() {
  static const std::vector<ModelCase> cases = {
      {"mlp", PrecisionPolicy::f32}, {"mlp", PrecisionPolicy::mixed_bf16},
      {"mlp", PrecisionPolicy::mixed_f16}, {"cnn", PrecisionPolicy::f32},
      {"cnn", PrecisionPolicy::mixed_bf16}, {"cnn", PrecisionPolicy::mixed_f16},
      {"resnet", PrecisionPolicy::f32}, {"resnet", PrecisionPolicy::mixed_bf16},
      {"gpt", PrecisionPolicy::f32}, {"gpt", PrecisionPolicy::mixed_bf16},
  };
  return cases;
}

std::string modelCaseName(const ModelCase &c) {
  return std::string(c.model) + "_" + precisionPolicyName(c.precision).str();
}

std::vector<mlir::OwningOpRef<mlir::ModuleOp>> fusedModelSteps(mlir::MLIRContext &context,
                                                               const ModelCase &c,
                                                               const std::string &devices) {
  train::TrainConfig config;
  config.model = c.model;
  if (config.model.name == "gpt") {
    // Every kind of kernel the GPT has (embedding, attention with its causal mask, layer
    // norm, GELU, dropout), small enough for the emulator: 1 block of width 32, context 16.
    config.model = train::gptModel(
        GptConfig{.vocab = 19, .context = 16, .width = 32, .layers = 1, .heads = 2});
    config.batch = 8;
  }
  if (config.model.name == "resnet")
    config.batch = 16; // the kernels' code does not depend on it
  config.precision = c.precision;
  std::vector<std::unique_ptr<Graph>> graphs;
  graphs.push_back(train::buildTrainStep(context, config));
  graphs.push_back(train::buildEvalStep(context, config, config.batch));
  std::vector<mlir::OwningOpRef<mlir::ModuleOp>> modules;
  for (std::unique_ptr<Graph> &graph : graphs) {
    mlir::PassManager pm(&context);
    PipelineOptions options;
    if (!devices.empty())
      options.devices = devices;
    buildDefaultPipeline(pm, options);
    if (mlir::failed(pm.run(graph->module())))
      return {};
    modules.emplace_back(graph->module().clone()); // outlives the graph
  }
  return modules;
}

} // namespace smelt::cuda_test
