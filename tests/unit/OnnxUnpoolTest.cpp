// MaxPool's Indices output and MaxUnpool (frontend/onnx/UnpoolOps.cpp): one-node models written
// with ONNX's protobuf classes, imported, compiled and run on the CPU, against loops on fresh
// random inputs. The data takes few distinct values, so that windows hold ties and the first tap
// in scan order must win; windows overlap, are padded and cut by ceil_mode; both storage
// orders; 1-D, 2-D and 3-D; and MaxUnpool of those indices, output_shape's zeros included.
#include "OnnxTestGraph.h"
#include "TestUtil.h"

#include "runtime/CpuExecutor.h"

#include <fmt/format.h>

#include <cmath>

namespace smelt::test {
namespace {

using Ints = std::vector<int64_t>;
using Values = std::vector<double>;

struct PoolCase {
  Ints shape; // [N, C, D...]
  Ints kernel, strides, pads;
  bool ceil = false, columnMajor = false;

  int64_t rank() const { return int64_t(kernel.size()); }
  Ints outShape() const {
    Ints out = {shape[0], shape[1]};
    for (int64_t i = 0; i < rank(); ++i) {
      int64_t span =
          shape[size_t(2 + i)] + pads[size_t(i)] + pads[size_t(i + rank())] - kernel[size_t(i)];
      int64_t s = strides[size_t(i)];
      out.push_back((ceil ? (span + s - 1) / s : span / s) + 1);
    }
    return out;
  }
};

/// A model: MaxPool with both outputs, then MaxUnpool of them (its output_shape `unpoolShape`
/// when not empty); outputs y, indices, unpooled.
struct PoolModel : TempModelFile {
  PoolModel(const PoolCase &c, const Ints &unpoolShape) : TempModelFile("smelt-unpool") {
    ::onnx::ModelProto model;
    ::onnx::GraphProto &graph = startModel(model, 12, "unpool");
    addValueInfo(*graph.mutable_input(), "x", c.shape, ::onnx::TensorProto::FLOAT);
    for (const char *out : {"y", "indices", "unpooled"})
      graph.add_output()->set_name(out);
    ::onnx::NodeProto *pool = addNode(graph, "MaxPool", {"x"}, {"y", "indices"});
    addInts(*pool, "kernel_shape", c.kernel);
    addInts(*pool, "strides", c.strides);
    addInts(*pool, "pads", c.pads);
    addInt(*pool, "ceil_mode", c.ceil);
    addInt(*pool, "storage_order", c.columnMajor);
    std::vector<std::string> inputs = {"y", "indices"};
    if (!unpoolShape.empty()) {
      addInt64Initializer(graph, "shape", unpoolShape);
      inputs.push_back("shape");
    }
    ::onnx::NodeProto *unpool = addNode(graph, "MaxUnpool", inputs, {"unpooled"});
    addInts(*unpool, "kernel_shape", c.kernel);
    addInts(*unpool, "strides", c.strides);
    write(model);
  }
};

TEST(OnnxUnpool, MaxPoolIndicesAndMaxUnpoolMatchLoops) {
  std::vector<PoolCase> cases = {
      {{2, 3, 6, 7}, {2, 2}, {2, 2}, {0, 0, 0, 0}},
      {{1, 2, 7, 6}, {3, 3}, {2, 1}, {1, 0, 1, 1}, true},        // overlapping, padded, ceil
      {{1, 2, 5, 6}, {3, 2}, {1, 2}, {0, 1, 1, 0}, false, true}, // column-major indices
      {{2, 2, 9}, {3}, {2}, {1, 1}},                             // 1-D
      {{1, 2, 4, 5, 4}, {2, 3, 2}, {2, 1, 2}, {0, 1, 0, 0, 0, 1}},
  };
  int unpoolsChecked = 0;
  for (const PoolCase &c : cases) {
    SCOPED_TRACE(fmt::format("x {} kernel {} strides {} pads {} ceil {} storage_order {} "
                             "(SMELT_TEST_SEED={})",
                             shapeString(c.shape), shapeString(c.kernel), shapeString(c.strides),
                             shapeString(c.pads), c.ceil, c.columnMajor, rngSeed()));
    int64_t r = c.rank();
    Ints out = c.outShape(), spatial(c.shape.begin() + 2, c.shape.end());
    // Values from a few levels: ties in most windows.
    Values x;
    for (int64_t i = 0; i < elementCount(c.shape); ++i)
      x.push_back(std::floor(draw(0, 4, 0)));
    int64_t planes = c.shape[0] * c.shape[1], planeSize = elementCount(spatial);
    int64_t outSize = elementCount(Ints(out.begin() + 2, out.end()));
    Values y, indices;
    for (int64_t p = 0; p < planes; ++p)
      for (int64_t o = 0; o < outSize; ++o) {
        Ints at(static_cast<size_t>(r));
        for (int64_t i = r - 1, rest = o; i >= 0; rest /= out[size_t(2 + i)], --i)
          at[size_t(i)] = rest % out[size_t(2 + i)];
        double best = -INFINITY;
        int64_t bestIndex = 0;
        for (int64_t t = 0; t < elementCount(c.kernel); ++t) {
          Ints pos(static_cast<size_t>(r));
          bool inside = true;
          for (int64_t i = r - 1, rest = t; i >= 0; rest /= c.kernel[size_t(i)], --i) {
            pos[size_t(i)] = at[size_t(i)] * c.strides[size_t(i)] - c.pads[size_t(i)] +
                             rest % c.kernel[size_t(i)];
            inside = inside && pos[size_t(i)] >= 0 && pos[size_t(i)] < spatial[size_t(i)];
          }
          if (!inside)
            continue;
          int64_t rowMajor = 0, columnMajor = 0;
          for (int64_t i = 0; i < r; ++i)
            rowMajor = rowMajor * spatial[size_t(i)] + pos[size_t(i)];
          for (int64_t i = r - 1; i >= 0; --i)
            columnMajor = columnMajor * spatial[size_t(i)] + pos[size_t(i)];
          double v = x[size_t(p * planeSize + rowMajor)];
          if (v > best) { // the first tap holding the maximum
            best = v;
            bestIndex = p * planeSize + (c.columnMajor ? columnMajor : rowMajor);
          }
        }
        y.push_back(best);
        indices.push_back(double(bestIndex));
      }
    // MaxUnpool, as ONNX's reference: each value at its index in zeros of the inferred shape
    // ((O - 1) * stride + kernel, no pads given to it), then zeros after it up to output_shape,
    // one larger along the last axis here. Indices past the inferred shape (where the pool's
    // input was larger) are undefined: checked only where there are none.
    Ints inferred = {c.shape[0], c.shape[1]};
    for (int64_t i = 0; i < r; ++i)
      inferred.push_back((out[size_t(2 + i)] - 1) * c.strides[size_t(i)] + c.kernel[size_t(i)]);
    Ints unpoolShape = inferred;
    unpoolShape.back() += 1;
    Values scattered(size_t(elementCount(inferred)), 0.0), unpooled;
    bool defined = true;
    for (size_t k = 0; k < y.size(); ++k)
      if (int64_t(indices[k]) < int64_t(scattered.size()))
        scattered[size_t(indices[k])] = y[k];
      else
        defined = false;
    for (size_t k = 0; k < scattered.size(); ++k) {
      unpooled.push_back(scattered[k]);
      if ((int64_t(k) + 1) % inferred.back() == 0)
        unpooled.push_back(0.0); // the added column
    }
    PoolModel model(c, unpoolShape);
    std::optional<rt::CpuExecutor> cpu = compileOnnxFile(model.path);
    ASSERT_TRUE(cpu);
    std::vector<rt::HostTensor> inputs = {rt::HostTensor::fromDoubles({DType::f32, c.shape}, x)},
                                outputs;
    rt::Status s = cpu->run(inputs, outputs);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(outputs.size(), 3u);
    EXPECT_EQ(outputs[0].toDoubles(), y);
    EXPECT_EQ(outputs[1].type().dtype, DType::i64);
    EXPECT_EQ(outputs[1].toDoubles(), indices);
    if (defined) {
      ++unpoolsChecked;
      EXPECT_EQ(outputs[2].type().shape, unpoolShape);
      EXPECT_EQ(outputs[2].toDoubles(), unpooled);
    }
  }
  EXPECT_GE(unpoolsChecked, 3);
}

} // namespace
} // namespace smelt::test
