// Loads (Fashion-)MNIST IDX files, gzip or plain, into f32 image and i32 label tensors.
#include "data/Mnist.h"

#include "data/Idx.h"

#include <fmt/format.h>

#include <cstdlib>

#include <filesystem>

namespace smelt::data {

using namespace rt;

namespace {
/// The file for `stem`, compressed or not, preferring the one that exists.
std::string findFile(const std::string &dir, const std::string &stem) {
  std::string plain = dir + "/" + stem;
  return std::filesystem::exists(plain) ? plain : plain + ".gz";
}
} // namespace

Expected<MnistSplit> loadMnist(const std::string &dir, const std::string &split) {
  std::string imagesPath = findFile(dir, split + "-images-idx3-ubyte");
  std::string labelsPath = findFile(dir, split + "-labels-idx1-ubyte");
  Expected<IdxArray> images = readIdx(imagesPath);
  if (!images)
    return images.status();
  Expected<IdxArray> labels = readIdx(labelsPath);
  if (!labels)
    return labels.status();
  if (images->dims.size() != 3)
    return Status::error(fmt::format("{}: expected 3 dimensions (count, rows, cols), got {}",
                                     imagesPath, images->dims.size()));
  if (labels->dims.size() != 1 || labels->dims[0] != images->dims[0])
    return Status::error(fmt::format("{}: {} labels do not match the {} images of {}",
                                     labelsPath, labels->dims[0], images->dims[0], imagesPath));
  int64_t count = images->dims[0], pixels = images->dims[1] * images->dims[2];
  MnistSplit out{HostTensor::zeros({DType::f32, {count, pixels}}),
                 HostTensor::zeros({DType::i32, {count}})};
  float *x = out.images.data<float>();
  for (size_t i = 0; i < images->data.size(); ++i)
    x[i] = float(images->data[i]) / 255.0f;
  int32_t *y = out.labels.data<int32_t>();
  for (int64_t i = 0; i < count; ++i) {
    if (labels->data[i] > 9)
      return Status::error(fmt::format("{}: label {} at byte offset {} is not a class 0..9",
                                       labelsPath, labels->data[i], 8 + i));
    y[i] = labels->data[i];
  }
  return out;
}

std::string fashionMnistDir() {
  const char *dir = std::getenv("SMELT_FASHION_MNIST");
  return dir && *dir ? dir : "/usr/share/datasets/fashion-mnist";
}

} // namespace smelt::data
