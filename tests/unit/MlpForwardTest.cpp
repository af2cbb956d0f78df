// The seed MLP (784-512-512-10, ReLU, batch 256) built with the builder, run on the CPU over
// real Fashion-MNIST test images, against a float64 reference with the same parameters.
#include "TestUtil.h"

#include "frontend/Models.h"
#include "data/Mnist.h"

#include <cstring>

namespace smelt::test {
namespace {

TEST(MlpForward, FashionMnistBatchesMatchFloat64) {
  rt::Expected<data::MnistSplit> data = data::loadMnist("/usr/share/datasets/fashion-mnist", "t10k");
  ASSERT_TRUE(data.ok()) << data.message();
  const std::vector<int64_t> layers = {784, 512, 512, 10};
  const int64_t batch = 256;
  uint64_t seed = rngSeed() % 100000;
  SCOPED_TRACE("parameter seed " + std::to_string(seed));
  mlir::MLIRContext ctx;
  Graph g(ctx, "forward", seed);
  g.setOutputs({mlpClassifier(g, g.input("images", {batch, 784}), layers)});
  g.buildInitializer();
  std::vector<rt::HostTensor> params = run(g, {}, "forward_init");
  ASSERT_EQ(params.size(), 6u);

  // Three batches from different parts of the test set.
  for (int64_t start : {int64_t(0), int64_t(4096), int64_t(10000 - batch)}) {
    rt::HostTensor x = rt::HostTensor::zeros({rt::DType::f32, {batch, 784}});
    std::memcpy(x.raw(), data->images.data<float>() + start * 784, x.byteSize());
    std::vector<rt::HostTensor> inputs = {x};
    for (const rt::HostTensor &p : params)
      inputs.push_back(p);
    std::vector<rt::HostTensor> out = run(g, inputs);
    ASSERT_EQ(out.size(), 1u);

    std::vector<double> act = x.toDoubles();
    for (size_t l = 0; l + 1 < layers.size(); ++l) {
      std::vector<double> w = params[2 * l].toDoubles(), b = params[2 * l + 1].toDoubles();
      int64_t in = layers[l], units = layers[l + 1];
      std::vector<double> next(size_t(batch * units));
      for (int64_t i = 0; i < batch; ++i)
        for (int64_t j = 0; j < units; ++j) {
          double s = b[j];
          for (int64_t k = 0; k < in; ++k)
            s += act[i * in + k] * w[k * units + j];
          next[i * units + j] = l + 2 < layers.size() ? std::max(s, 0.0) : s;
        }
      act = std::move(next);
    }
    EXPECT_LE(relError(out[0].toDoubles(), act), 1e-5) << "batch at " << start;
  }
}

} // namespace
} // namespace smelt::test
