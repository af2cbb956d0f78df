// Shape ops against index-by-index references: broadcast_in_dim (size-1 dims, rank 0, new
// leading dims), reshape, a 3-D transpose and iota, each compiled as a kernel of its own; the
// library calls strided slice, concat of three along a middle axis and pad; and the parameter
// errors that would otherwise make those read or write out of bounds (the verifier rejects bad
// attributes of the kernel ops: tests/ir/invalid.mlir).
#include "FusionTestUtil.h"

namespace smelt::rt::test {
namespace {

using Ints = std::vector<int64_t>;

/// The reference of an op that reads input element `source(index)` for each result index
/// (or -1 for "the fill value").
std::vector<double> gather(const HostTensor &x, const Ints &resultShape,
                           const std::function<int64_t(const Ints &)> &source, double fill = 0) {
  std::vector<double> in = x.toDoubles(),
                      out(size_t(TensorType{DType::f32, resultShape}.numElements()));
  forEachIndex(resultShape, [&](const Ints &index, int64_t flat) {
    int64_t from = source(index);
    out[size_t(flat)] = from < 0 ? fill : in[size_t(from)];
  });
  return out;
}

int64_t flatIndex(const Ints &index, const Ints &shape) {
  Ints strides = stridesOf(shape);
  int64_t flat = 0;
  for (size_t i = 0; i < index.size(); ++i)
    flat += index[i] * strides[i];
  return flat;
}

TEST(Shape, BroadcastInDimEdgeCases) {
  struct Case {
    Ints in, out, dims;
  };
  const Case cases[] = {
      {{3, 1}, {2, 3, 4}, {1, 2}}, // a size-1 dim stretches; a new leading dim
      {{}, {2, 3}, {}},            // rank 0 to everything
      {{1}, {5}, {0}},             // size 1 to 5
      {{4}, {3, 2, 4}, {2}},       // two new leading dims
      {{2, 1, 3}, {2, 5, 3}, {0, 1, 2}},
      {{3}, {3, 2}, {0}}, // a new trailing dim
  };
  for (const Case &c : cases)
    for (DType dtype : {DType::f32, DType::bf16, DType::f64, DType::i64, DType::i1}) {
      HostTensor x = randomTensor(dtype, c.in);
      std::vector<double> ref = gather(x, c.out, [&](const Ints &index) {
        Ints at;
        for (size_t i = 0; i < c.dims.size(); ++i)
          at.push_back(c.in[i] == 1 ? 0 : index[size_t(c.dims[i])]);
        return flatIndex(at, c.in);
      });
      expectClose(
          runKernelOp("broadcast_in_dim", {x}, {dtype, c.out}, {{"broadcast_dimensions", c.dims}}), ref,
          "broadcast " + x.type().str(), 0);
    }
}

TEST(Shape, ReshapeKeepsRowMajorOrder) {
  HostTensor x = randomTensor(DType::f16, {2, 3, 4});
  expectClose(runKernelOp("reshape", {x}, {DType::f16, {4, 6}}), x.toDoubles(), "reshape", 0);
  expectClose(runKernelOp("reshape", {x}, {DType::f16, {24}}), x.toDoubles(), "flatten", 0);
}

TEST(Shape, Transpose3DPermutations) {
  Ints shape = {2, 3, 5};
  for (Ints perm : {Ints{2, 0, 1}, Ints{1, 2, 0}, Ints{0, 2, 1}, Ints{2, 1, 0}})
    for (DType dtype : {DType::f32, DType::f16, DType::i32, DType::i1}) {
      HostTensor x = randomTensor(dtype, shape);
      Ints out = {shape[perm[0]], shape[perm[1]], shape[perm[2]]};
      std::vector<double> ref = gather(x, out, [&](const Ints &index) {
        Ints at(3);
        for (size_t i = 0; i < 3; ++i)
          at[size_t(perm[i])] = index[i];
        return flatIndex(at, shape);
      });
      expectClose(runKernelOp("transpose", {x}, {dtype, out}, {{"permutation", perm}}), ref, "transpose",
                  0);
    }
}

TEST(Shape, SliceWithStrides) {
  Ints shape = {7, 9, 4}, start = {1, 0, 3}, limit = {7, 9, 4}, strides = {2, 4, 1};
  Ints out;
  for (size_t i = 0; i < shape.size(); ++i)
    out.push_back((limit[i] - start[i] + strides[i] - 1) / strides[i]); // 3, 3, 1
  HostTensor x = randomTensor(DType::f64, shape);
  std::vector<double> ref = gather(x, out, [&](const Ints &index) {
    Ints at;
    for (size_t i = 0; i < index.size(); ++i)
      at.push_back(start[i] + index[i] * strides[i]);
    return flatIndex(at, shape);
  });
  expectClose(runOp("slice", {x}, {DType::f64, out},
                    {{"start_indices", start}, {"limit_indices", limit}, {"strides", strides}}),
              ref, "slice", 0);
}

TEST(Shape, ConcatThreeAlongAMiddleAxis) {
  std::vector<HostTensor> parts;
  std::vector<std::vector<double>> values;
  for (int64_t size : {2, 1, 3}) {
    parts.push_back(randomTensor(DType::bf16, {3, size, 4}));
    values.push_back(parts.back().toDoubles());
  }
  Ints out = {3, 6, 4};
  std::vector<double> ref;
  forEachIndex(out, [&](const Ints &index, int64_t) {
    int64_t along = index[1];
    size_t k = 0;
    for (; along >= parts[k].type().shape[1]; ++k)
      along -= parts[k].type().shape[1];
    ref.push_back(values[k][size_t(flatIndex({index[0], along, index[2]}, parts[k].type().shape))]);
  });
  expectClose(runOp("concat", parts, {DType::bf16, out}, {{"axis", int64_t(1)}}), ref,
              "concat", 0);
}

TEST(Shape, PadWithValue) {
  Ints shape = {3, 4}, low = {1, 0}, high = {2, 3}, out = {6, 7};
  for (DType dtype : {DType::f32, DType::f16, DType::i32}) {
    HostTensor x = randomTensor(dtype, shape);
    std::vector<double> ref = gather(
        x, out,
        [&](const Ints &index) -> int64_t {
          Ints at;
          for (size_t i = 0; i < index.size(); ++i) {
            at.push_back(index[i] - low[i]);
            if (at[i] < 0 || at[i] >= shape[i])
              return -1;
          }
          return flatIndex(at, shape);
        },
        isFloat(dtype) ? -1.5 : -1.0);
    expectClose(runOp("pad", {x}, {dtype, out},
                      {{"low", low}, {"high", high}, {"value", isFloat(dtype) ? -1.5 : -1.25}}),
                ref, "pad", 0);
  }
}

TEST(Shape, IotaAlongEachDimension) {
  Ints shape = {3, 4, 2};
  for (int64_t dim = 0; dim < 3; ++dim)
    for (DType dtype : {DType::f32, DType::bf16, DType::i64}) {
      std::vector<double> ref;
      forEachIndex(shape, [&](const Ints &index, int64_t) { ref.push_back(index[dim]); });
      expectClose(runKernelOp("iota", {}, {dtype, shape}, {{"dimension", dim}}), ref, "iota", 0);
    }
}

TEST(Shape, RejectsParametersThatDoNotFit) {
  TensorType x{DType::f32, {2, 3}};
  auto expectError = [](const std::string &message, const std::string &part) {
    EXPECT_NE(message.find(part), std::string::npos) << message;
  };
  // An operand wider than the result outside the concat dimension would overrun it.
  expectError(createError("concat", {x, {DType::f32, {2, 5}}}, {DType::f32, {4, 3}},
                          {{"axis", int64_t(0)}}),
              "operand #1 differs from the result outside dimension 0");
  expectError(
      createError(
          "slice", {x}, {DType::f32, {1, 3}},
          {{"start_indices", Ints{1, 0}}, {"limit_indices", Ints{3, 3}}, {"strides", Ints{1, 1}}}),
      "range 1:3:1 of dimension 0");
  expectError(createError("pad", {x}, x, {{"low", Ints{0}}, {"high", Ints{0, 0}}}),
              "low = [0] needs 2 values");
}

} // namespace
} // namespace smelt::rt::test
