// The ModelSpec of `smelt train --model=FILE.onnx`: checks the file's input against the data,
// then imports the model into each step the Trainer builds.
#include "tools/smelt/OnnxClassifier.h"

#include "frontend/Ops.h"
#include "frontend/onnx/ImportInto.h"

#include "llvm/Support/Path.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace smelt::tools {

rt::Expected<OnnxClassifier> onnxClassifier(const std::string &path,
                                            const train::TensorSpec &example) {
  llvm::Expected<std::vector<onnx::ModelInput>> inputs = onnx::modelInputs(path);
  if (!inputs)
    return rt::Status::error(llvm::toString(inputs.takeError()));
  if (inputs->size() != 1)
    return rt::Status::error(fmt::format("{}: the model has {} graph inputs; a classifier "
                                         "trained on images takes one",
                                         path, inputs->size()));
  onnx::ModelInput input = inputs->front();
  int64_t elements = 1, wanted = 1;
  for (size_t d = 1; d < input.shape.size(); ++d)
    elements *= input.shape[d] < 0 ? 0 : input.shape[d];
  for (int64_t d : example.shape)
    wanted *= d;
  std::vector<int64_t> perExample(input.shape.begin() + (input.shape.empty() ? 0 : 1),
                                  input.shape.end());
  if (input.shape.size() < 2 || elements != wanted || input.dtype != example.dtype)
    return rt::Status::error(fmt::format(
        "{}: input '{}' is {} [{}] (-1: symbolic); the data's examples are {} of {} values, "
        "which it must take after a batch dimension with every other dimension fixed",
        path, input.name, dtypeName(input.dtype), fmt::join(input.shape, "x"),
        dtypeName(example.dtype), wanted));
  auto weights = std::make_shared<std::map<std::string, rt::HostTensor>>();
  train::ModelFunction build = [path, input, perExample, weights](Graph &g,
                                                                  const train::ModelInputs &in) {
    std::vector<int64_t> shape = {in.examples.dim(0)};
    shape.insert(shape.end(), perExample.begin(), perExample.end());
    onnx::ImportOptions options;
    options.parameterValues = weights.get();
    onnx::GraphBinding binding{
        {{input.name, reshape(in.examples, shape)}}, in.training, in.step, in.seed};
    onnx::ImportedGraph model = onnx::importInto(g, path, binding, options);
    if (model.outputs.empty())
      throw BuildError(path + ": the model has no outputs; a classifier's first is its logits");
    Tensor logits = model.outputs[0];
    if (logits.rank() != 2 || logits.dim(0) != in.examples.dim(0))
      throw BuildError(path + ": output '" + model.names[0] + "' is " +
                       shapeString(logits.shape()) +
                       "; a classifier's first output is its "
                       "logits [batch, classes]");
    return train::classification(logits, in.labels);
  };
  std::string name = llvm::sys::path::filename(path).str();
  return OnnxClassifier{train::ModelSpec(name, example, {{}, DType::i32}, std::move(build)),
                        weights};
}

} // namespace smelt::tools
