// The ONNX importer inside the C++ builder: importInto builds a model into a graph that is
// already being built, as a Trainer's model function does, so that an imported model can be
// fine-tuned (docs/training.md). Apart from OnnxImport.h, which needs no builder.
//
//   ModelFunction build = [&](Graph &g, const ModelInputs &in) {
//     onnx::GraphBinding bind{{{"images", in.examples}}, in.training, in.step, in.seed};
//     onnx::ImportedGraph model = onnx::importInto(g, "resnet.onnx", bind, options);
//     return classification(model.output("logits"), in.labels);
//   };

#pragma once

#include "frontend/Graph.h"
#include "frontend/onnx/OnnxImport.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace smelt::onnx {

/// What importInto connects a model's graph inputs to, and the mode it builds the model in.
struct GraphBinding {
  /// The tensor each graph input takes, by name: every input that
  /// ImportOptions::constantInputs does not fix. Each must have the input's element type and
  /// rank, and the sizes of the dimensions the model fixes (a symbolic one takes any).
  std::map<std::string, Tensor> inputs;
  /// Training mode, as PyTorch's model.train(): BatchNormalization normalizes with the batch's
  /// mean and population variance and assigns its running statistics their moving averages
  /// (the node's momentum, ONNX's 0.9 by default); Dropout draws a mask per step. Otherwise
  /// both are as at inference, BatchNormalization with the running statistics.
  bool training = false;
  /// The global step and seed Dropout's masks are drawn from (ModelInputs::step and seed).
  std::optional<Tensor> step;
  uint64_t seed = 0;
};

/// The graph outputs importInto built, in the file's order.
struct ImportedGraph {
  std::vector<std::string> names;
  std::vector<Tensor> outputs;
  /// The output called `name`; a BuildError listing the outputs when there is none.
  Tensor output(const std::string &name) const;
};

/// Builds the model at `path` into `g`, its inputs bound to `binding`'s tensors. The model's
/// float initializers become trainable parameters (Graph::parameter), except the running mean
/// and variance of BatchNormalization nodes, which become variables (Graph::variable) that
/// training-mode steps assign; both are named as in the file, and their values go to
/// `options.parameterValues` (give them to Trainer::initParameters). Integer initializers stay
/// constants. A float initializer that an op reads as a fixed value at import time (Resize's
/// scales, Clip's bounds) keeps its initial value: it is a parameter no op reads. Every
/// failure is a BuildError naming the file and, for a node, its index, name and op type;
/// `g` is left as it was.
ImportedGraph importInto(Graph &g, const std::string &path, const GraphBinding &binding,
                         const ImportOptions &options = {});

} // namespace smelt::onnx
