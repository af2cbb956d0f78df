// slice, pad and concat inside loop fusions (the walk's mapped coordinates, clamped reads and
// selects, and the CPU loop split at a concat's or a pad's boundaries along the last
// dimension), in every dtype, against references that move the elements index by index in
// float64 on the host, on fresh random inputs.
#include "FusionTestUtil.h"

#include "runtime/CpuThreads.h"

namespace smelt::rt::test {
namespace {

using Shape = std::vector<int64_t>;

/// A host tensor of doubles in row-major order: what the references compute on.
struct Array {
  Shape shape;
  std::vector<double> values;

  int64_t at(const Shape &index) const {
    int64_t flat = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      flat = flat * shape[d] + index[d];
    return flat;
  }
};

Array arrayOf(const HostTensor &tensor) { return {tensor.type().shape, tensor.toDoubles()}; }

/// The array of `shape` whose element at each index is `element(index)`.
Array build(const Shape &shape, const std::function<double(const Shape &)> &element) {
  Array out{shape, {}};
  forEachIndex(shape, [&](const Shape &index, int64_t) { out.values.push_back(element(index)); });
  return out;
}

Array slice(const Array &x, const Shape &start, const Shape &limit, const Shape &stride) {
  Shape shape;
  for (size_t d = 0; d < x.shape.size(); ++d)
    shape.push_back((limit[d] - start[d] + stride[d] - 1) / stride[d]);
  return build(shape, [&](const Shape &index) {
    Shape from(index.size());
    for (size_t d = 0; d < index.size(); ++d)
      from[d] = start[d] + index[d] * stride[d];
    return x.values[size_t(x.at(from))];
  });
}

Array pad(const Array &x, const Shape &low, const Shape &high, double fill) {
  Shape shape;
  for (size_t d = 0; d < x.shape.size(); ++d)
    shape.push_back(x.shape[d] + low[d] + high[d]);
  return build(shape, [&](const Shape &index) {
    Shape from(index.size());
    for (size_t d = 0; d < index.size(); ++d) {
      from[d] = index[d] - low[d];
      if (from[d] < 0 || from[d] >= x.shape[d])
        return fill;
    }
    return x.values[size_t(x.at(from))];
  });
}

Array concat(const std::vector<Array> &parts, int64_t dim) {
  Shape shape = parts.front().shape;
  shape[size_t(dim)] = 0;
  for (const Array &part : parts)
    shape[size_t(dim)] += part.shape[size_t(dim)];
  return build(shape, [&](const Shape &index) {
    Shape from = index;
    for (const Array &part : parts) {
      if (from[size_t(dim)] < part.shape[size_t(dim)])
        return part.values[size_t(part.at(from))];
      from[size_t(dim)] -= part.shape[size_t(dim)];
    }
    ADD_FAILURE() << "index past the concat";
    return 0.0;
  });
}

HostTensor tensorOf(const Array &array, DType dtype) {
  return HostTensor::fromDoubles(TensorType{dtype, array.shape}, array.values);
}

std::string list(const Shape &values) {
  std::string text;
  for (size_t i = 0; i < values.size(); ++i)
    text += (i ? ", " : "") + std::to_string(values[i]);
  return "[" + text + "]";
}

/// A loop fusion of `inputs` computing `body` (its last value %y, of type `out`).
std::string fusionOf(const std::vector<std::string> &inputs, const std::string &body,
                     const std::string &out) {
  std::string params, args, types, blockArgs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string sep = i ? ", " : "";
    params += sep + "%x" + std::to_string(i) + ": " + inputs[i];
    args += sep + "%x" + std::to_string(i);
    types += sep + inputs[i];
    blockArgs += sep + "%a" + std::to_string(i) + ": " + inputs[i];
  }
  return "func.func @f(" + params + ") -> " + out + " {\n  %r = smelt.fusion loop (" + args +
         ") : (" + types + ") -> " + out + " {\n  ^bb0(" + blockArgs + "):\n" + body +
         "\n    smelt.yield %y : " + out + "\n  }\n  return %r : " + out + "\n}\n";
}

/// Compiles `mlir`, runs its fused kernels on `inputs` and expects `expected` exactly (the ops
/// only move elements).
void expectFused(const std::string &mlir, const std::vector<HostTensor> &inputs,
                 const HostTensor &expected, const std::string &what) {
  std::optional<Compiled> compiled = compileBoth(mlir);
  ASSERT_TRUE(compiled) << what;
  std::vector<HostTensor> got = runExecutable(compiled->fused, inputs);
  ASSERT_EQ(got.size(), 1u) << what;
  expectMatch(got[0], expected, 0, what);
}

/// A pad's constant that every dtype holds exactly (i1: true).
double fillFor(DType dtype) { return dtype == DType::i1 ? 1 : isFloat(dtype) ? -2.5 : 7; }

TEST(FusedSlicePadConcat, StridedSlicesInEveryDType) {
  const struct {
    Shape in, start, limit, stride;
  } cases[] = {
      {{9, 7}, {1, 0}, {8, 7}, {2, 1}},
      {{5, 6, 11}, {0, 2, 3}, {5, 6, 11}, {1, 3, 4}},
      {{4, 33}, {0, 5}, {4, 29}, {1, 1}},
      {{8}, {3}, {4}, {1}},
      {{2, 1, 5}, {1, 0, 0}, {2, 1, 5}, {1, 1, 2}},
  };
  for (DType dtype : kAllDTypes)
    for (const auto &c : cases) {
      HostTensor x = randomTensor(dtype, c.in);
      Array expected = slice(arrayOf(x), c.start, c.limit, c.stride);
      std::string body = "    %y = smelt.slice %a0 [";
      for (size_t d = 0; d < c.in.size(); ++d)
        body += (d ? ", " : "") + std::to_string(c.start[d]) + ":" + std::to_string(c.limit[d]) +
                ":" + std::to_string(c.stride[d]);
      body += "] : " + tensorType(c.in, dtype);
      std::string out = tensorType(expected.shape, dtype);
      expectFused(fusionOf({tensorType(c.in, dtype)}, body, out), {x}, tensorOf(expected, dtype),
                  body);
    }
}

TEST(FusedSlicePadConcat, PadsInEveryDType) {
  const struct {
    Shape in, low, high;
  } cases[] = {
      {{3, 5}, {1, 2}, {2, 0}},          // the last dimension padded before only
      {{4, 6}, {0, 3}, {0, 5}},          // both sides of the last dimension: three pieces a row
      {{2, 3, 4}, {1, 0, 0}, {0, 2, 0}}, // leading dimensions only: selects per row
      {{7}, {0}, {9}},
      {{1, 1}, {3, 3}, {3, 3}},
      {{0, 3}, {2, 1}, {1, 1}}, // an empty operand: every element is the constant
  };
  for (DType dtype : kAllDTypes)
    for (const auto &c : cases) {
      HostTensor x = randomTensor(dtype, c.in);
      double fill = fillFor(dtype);
      Array expected = pad(arrayOf(x), c.low, c.high, fill);
      std::string body = "    %y = smelt.pad %a0 low = " + list(c.low) + " high = " + list(c.high) +
                         " value = " + std::to_string(fill) + " : " + tensorType(c.in, dtype);
      expectFused(fusionOf({tensorType(c.in, dtype)}, body, tensorType(expected.shape, dtype)), {x},
                  tensorOf(expected, dtype), body);
    }
}

TEST(FusedSlicePadConcat, ConcatsInEveryDType) {
  const struct {
    std::vector<Shape> parts;
    int64_t dim;
  } cases[] = {
      {{{3, 4}, {3, 1}, {3, 7}}, 1},          // along the last dimension: a loop per piece
      {{{2, 3, 5}, {2, 1, 5}, {2, 4, 5}}, 1}, // along a middle one: selects by the row
      {{{1, 6}, {4, 6}}, 0},
      {{{3, 2}, {3, 0}, {3, 5}}, 1}, // an empty operand is never read
      {{{5}}, 0},
  };
  for (DType dtype : kAllDTypes)
    for (const auto &c : cases) {
      std::vector<HostTensor> inputs;
      std::vector<Array> parts;
      std::vector<std::string> types;
      std::string operands, operandTypes;
      for (size_t i = 0; i < c.parts.size(); ++i) {
        inputs.push_back(randomTensor(dtype, c.parts[i]));
        parts.push_back(arrayOf(inputs.back()));
        types.push_back(tensorType(c.parts[i], dtype));
        operands += (i ? ", %a" : "%a") + std::to_string(i);
        operandTypes += (i ? ", " : "") + types.back();
      }
      Array expected = concat(parts, c.dim);
      std::string body = "    %y = smelt.concat " + operands + " dim = " + std::to_string(c.dim) +
                         " : " + operandTypes;
      expectFused(fusionOf(types, body, tensorType(expected.shape, dtype)), inputs,
                  tensorOf(expected, dtype), body);
    }
}

// Wider than the CPU fuses on its own (passes/FusionUtils.h) and than the loop splits (eight
// pieces): a chain of selects, which the GPU's kernels use for any concat.
TEST(FusedSlicePadConcat, WideConcatSelectsAmongTwelveOperands) {
  std::vector<HostTensor> inputs;
  std::vector<Array> parts;
  std::vector<std::string> types;
  std::string operands, operandTypes;
  for (int64_t i = 0; i < 12; ++i) {
    Shape shape{5, 1 + i % 3};
    inputs.push_back(randomTensor(DType::f32, shape));
    parts.push_back(arrayOf(inputs.back()));
    types.push_back(tensorType(shape, DType::f32));
    operands += (i ? ", %a" : "%a") + std::to_string(i);
    operandTypes += (i ? ", " : "") + types.back();
  }
  Array expected = concat(parts, 1);
  std::string body = "    %y = smelt.concat " + operands + " dim = 1 : " + operandTypes;
  expectFused(fusionOf(types, body, tensorType(expected.shape, DType::f32)), inputs,
              tensorOf(expected, DType::f32), "twelve operands");
}

// An LSTM step's shape of work: gates sliced from one projection, computed, and their
// gradients' pieces joined by a concat along the last dimension, with a pad and a strided
// slice on the way; on 1 to 4 threads, whose ranges start and stop inside rows and pieces.
TEST(FusedSlicePadConcat, ComposedMovesSplitAcrossThreads) {
  const char *text = R"(
func.func @f(%x: tensor<37x48xf32>, %h: tensor<37x9xf32>, %s: tensor<37x40xf32>) -> tensor<37x68xf32> {
  %r = smelt.fusion loop (%x, %h, %s) : (tensor<37x48xf32>, tensor<37x9xf32>, tensor<37x40xf32>) -> tensor<37x68xf32> {
  ^bb0(%a: tensor<37x48xf32>, %b: tensor<37x9xf32>, %c: tensor<37x40xf32>):
    %i = smelt.slice %a [0:37:1, 0:16:1] : tensor<37x48xf32>
    %g = smelt.slice %a [0:37:1, 16:32:1] : tensor<37x48xf32>
    %o = smelt.slice %a [0:37:1, 32:48:1] : tensor<37x48xf32>
    %0 = smelt.logistic %i : tensor<37x16xf32>
    %1 = smelt.tanh %g : tensor<37x16xf32>
    %2 = smelt.mul %0, %1 : tensor<37x16xf32>
    %3 = smelt.pad %b low = [0, 3] high = [0, 4] value = 0.5 : tensor<37x9xf32>
    %4 = smelt.add %3, %o : tensor<37x16xf32>
    %5 = smelt.slice %c [0:37:1, 1:40:2] : tensor<37x40xf32>
    %y = smelt.concat %2, %4, %0, %5 dim = 1 : tensor<37x16xf32>, tensor<37x16xf32>, tensor<37x16xf32>, tensor<37x20xf32>
    smelt.yield %y : tensor<37x68xf32>
  }
  return %r : tensor<37x68xf32>
}
)";
  std::optional<Compiled> compiled = compileBoth(text);
  ASSERT_TRUE(compiled);
  Expected<int> before = cpuThreads();
  ASSERT_TRUE(before) << before.message();
  for (int threads : {1, 2, 3, 4}) {
    setCpuThreads(threads);
    std::vector<HostTensor> inputs = {randomTensor(DType::f32, {37, 48}),
                                      randomTensor(DType::f32, {37, 9}),
                                      randomTensor(DType::f32, {37, 40})};
    Array x = arrayOf(inputs[0]), h = arrayOf(inputs[1]), s = arrayOf(inputs[2]);
    auto gate = [&](int64_t from) { return slice(x, {0, from}, {37, from + 16}, {1, 1}); };
    auto map = [](Array a, double (*f)(double)) {
      for (double &v : a.values)
        v = f(v);
      return a;
    };
    Array input = map(gate(0), [](double v) { return 1 / (1 + std::exp(-v)); });
    Array cell = map(gate(16), [](double v) { return std::tanh(v); });
    Array product = input, sum = pad(h, {0, 3}, {0, 4}, 0.5);
    Array output = gate(32);
    for (size_t i = 0; i < product.values.size(); ++i) {
      product.values[i] *= cell.values[i];
      sum.values[i] += output.values[i];
    }
    Array expected = concat({product, sum, input, slice(s, {0, 1}, {37, 40}, {1, 2})}, 1);
    std::vector<HostTensor> got = runExecutable(compiled->fused, inputs);
    ASSERT_EQ(got.size(), 1u);
    expectMatch(got[0], tensorOf(expected, DType::f32), 1e-6,
                "on " + std::to_string(threads) + " threads");
  }
  setCpuThreads(*before);
}

} // namespace
} // namespace smelt::rt::test
