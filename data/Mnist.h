// (Fashion-)MNIST splits as tensors: the IDX files read and checked, images scaled to [0, 1].
#pragma once

#include "runtime/HostTensor.h"
#include "runtime/Status.h"

#include <string>

namespace smelt::data {

using rt::Expected;
using rt::HostTensor;
using rt::Status;

struct MnistSplit {
  HostTensor images; // f32 [N, rows * cols], pixel / 255
  HostTensor labels; // i32 [N]
};

/// Loads `<dir>/<split>-images-idx3-ubyte[.gz]` and the matching labels, `split` being "train"
/// or "t10k". Errors name the file; images and labels must agree in count and labels be < 10.
Expected<MnistSplit> loadMnist(const std::string &dir, const std::string &split);

/// Where Fashion-MNIST is: $SMELT_FASHION_MNIST when set (the GPU machine gets a subset carried
/// with the bundle), else Debian's dataset-fashion-mnist folder.
std::string fashionMnistDir();

} // namespace smelt::data
