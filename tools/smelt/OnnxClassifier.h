// `smelt train --model=FILE.onnx`: an ONNX classifier fine-tuned on Fashion-MNIST. Its model
// function imports the file into the training and evaluation steps (onnx::importInto: weights
// as parameters, BatchNormalization's running statistics as variables that the training steps
// update, Dropout active while training), and the run starts from the file's weights.
#pragma once

#include "runtime/HostTensor.h"
#include "runtime/Status.h"
#include "train/Model.h"

#include <map>
#include <memory>
#include <string>

namespace smelt::tools {

struct OnnxClassifier {
  train::ModelSpec spec;
  /// The file's weights by name, parameters and running statistics: filled when the Trainer
  /// builds its steps, for Trainer::initParameters.
  std::shared_ptr<std::map<std::string, rt::HostTensor>> weights;
};

/// The classifier in `path`: one float input whose dimensions after the batch hold `example`'s
/// elements (a Fashion-MNIST image, [1, 28, 28] or [784]), the first output the logits
/// [batch, classes]. An error names the file and what does not fit.
rt::Expected<OnnxClassifier> onnxClassifier(const std::string &path,
                                            const train::TensorSpec &example);

} // namespace smelt::tools
