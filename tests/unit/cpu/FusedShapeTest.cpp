// broadcast_in_dim, reshape and transpose inside loop fusions, in every dtype, alone and
// composed (the walk's index remapping), against the same ops run unfused.
#include "FusionTestUtil.h"

#include "runtime/CpuThreads.h"

namespace smelt::rt::test {
namespace {

using Shape = std::vector<int64_t>;

/// A fusion of one input computing `${BODY}` (its last value %y) into one result.
const char *kShapeOp = R"(
func.func @f(%x: ${IN}) -> ${OUT} {
  %r = smelt.fusion loop (%x) : (${IN}) -> ${OUT} {
  ^bb0(%a: ${IN}):
    ${BODY}
    smelt.yield %y : ${OUT}
  }
  return %r : ${OUT}
}
)";

std::string dims(const Shape &list) {
  std::string text;
  for (size_t i = 0; i < list.size(); ++i)
    text += (i ? ", " : "") + std::to_string(list[i]);
  return "[" + text + "]";
}

void expectShapeOp(const std::string &body, const Shape &in, const Shape &out, DType dtype) {
  std::string inType = tensorType(in, dtype), outType = tensorType(out, dtype);
  std::string text =
      substitute(substitute(kShapeOp, {{"BODY", body}}), {{"IN", inType}, {"OUT", outType}});
  expectFusedMatchesUnfused(text, {randomTensor(dtype, in)}, body + " on " + inType);
}

TEST(FusedShape, BroadcastInDimInEveryDType) {
  const struct {
    Shape in, out, dims;
  } cases[] = {
      {{4}, {3, 4}, {1}},       {{3}, {3, 4}, {0}},
      {{1, 4}, {5, 4}, {0, 1}}, {{3, 1}, {3, 5}, {0, 1}},
      {{}, {2, 3}, {}},         {{1}, {6}, {0}},
      {{1, 1}, {4, 5}, {0, 1}}, {{3, 4}, {3, 4}, {0, 1}},
      {{4}, {2, 3, 4}, {2}},    {{2, 1, 4}, {2, 3, 5, 4}, {0, 1, 3}},
      {{3}, {3, 1, 2}, {0}},
  };
  for (DType dtype : kAllDTypes)
    for (const auto &c : cases)
      expectShapeOp("%y = smelt.broadcast_in_dim %a, dims = " + dims(c.dims) + " : ${IN} -> ${OUT}",
                    c.in, c.out, dtype);
}

TEST(FusedShape, ReshapeInEveryDType) {
  const struct {
    Shape in, out;
  } cases[] = {{{3, 4}, {12}}, {{12}, {2, 6}}, {{2, 3, 4}, {6, 4}}, {{2, 3, 4}, {4, 3, 2}},
               {{1, 5}, {5}},  {{}, {1, 1}},   {{6}, {6, 1}}};
  for (DType dtype : kAllDTypes)
    for (const auto &c : cases)
      expectShapeOp("%y = smelt.reshape %a : ${IN} -> ${OUT}", c.in, c.out, dtype);
}

TEST(FusedShape, TransposeInEveryDType) {
  const struct {
    Shape in, permutation, out;
  } cases[] = {{{3, 4}, {1, 0}, {4, 3}},
               {{2, 3, 4}, {2, 0, 1}, {4, 2, 3}},
               {{2, 3, 4}, {1, 2, 0}, {3, 4, 2}},
               {{2, 3, 4, 5}, {3, 1, 0, 2}, {5, 3, 2, 4}},
               {{1, 4}, {1, 0}, {4, 1}}};
  for (DType dtype : kAllDTypes)
    for (const auto &c : cases)
      expectShapeOp("%y = smelt.transpose %a, permutation = " + dims(c.permutation) + " : ${IN}",
                    c.in, c.out, dtype);
}

TEST(FusedShape, ComposedShapeOpsRemapIndices) {
  const struct {
    const char *body;
    Shape in, out;
  } cases[] = {
      {"%t = smelt.transpose %a, permutation = [1, 0] : ${IN}\n"
       "    %y = smelt.reshape %t : tensor<5x3x${E}> -> ${OUT}",
       {3, 5},
       {15}},
      {"%t = smelt.reshape %a : ${IN} -> tensor<3x4x${E}>\n"
       "    %y = smelt.transpose %t, permutation = [1, 0] : tensor<3x4x${E}>",
       {12},
       {4, 3}},
      {"%t = smelt.broadcast_in_dim %a, dims = [1] : ${IN} -> tensor<3x4x${E}>\n"
       "    %y = smelt.transpose %t, permutation = [1, 0] : tensor<3x4x${E}>",
       {4},
       {4, 3}},
      {"%t = smelt.transpose %a, permutation = [1, 0] : ${IN}\n"
       "    %y = smelt.broadcast_in_dim %t, dims = [1, 2] : tensor<4x3x${E}> -> ${OUT}",
       {3, 4},
       {2, 4, 3}},
      {"%t = smelt.reshape %a : ${IN} -> tensor<2x3x${E}>\n"
       "    %u = smelt.broadcast_in_dim %t, dims = [0, 2] : tensor<2x3x${E}> -> "
       "tensor<2x4x3x${E}>\n"
       "    %y = smelt.reshape %u : tensor<2x4x3x${E}> -> ${OUT}",
       {6},
       {8, 3}},
  };
  for (DType dtype : kAllDTypes)
    for (const auto &c : cases)
      expectShapeOp(substitute(c.body, {{"E", std::string(dtypeName(dtype))}}), c.in, c.out, dtype);
}

/// `values` of `shape` transposed by `permutation`, in float64: result dimension i is
/// operand dimension permutation[i].
std::vector<double> transposed(const std::vector<double> &values, const Shape &shape,
                               const Shape &permutation) {
  size_t rank = shape.size();
  Shape strides(rank, 1), out(rank);
  for (size_t d = rank - 1; d-- > 0;)
    strides[d] = strides[d + 1] * shape[d + 1];
  for (size_t d = 0; d < rank; ++d)
    out[d] = shape[size_t(permutation[d])];
  std::vector<double> result(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    int64_t rest = int64_t(i), from = 0;
    for (size_t d = rank; d-- > 0;) {
      from += (rest % out[d]) * strides[size_t(permutation[d])];
      rest /= out[d];
    }
    result[i] = values[size_t(from)];
  }
  return result;
}

// reshape -> transpose -> reshape, as a channel shuffle is written: the walk maps the result's
// coordinates through each reshape group by group (FusionWalk::reshapedCoords), so groups that
// split, merge, or only carry size-1 dimensions must all land on the right element.
TEST(FusedShape, ReshapesAroundATransposeMapCoordinatesByGroups) {
  const struct {
    Shape in, middle, permutation, out;
  } cases[] = {
      {{1, 6, 5, 7}, {1, 2, 3, 5, 7}, {0, 2, 1, 3, 4}, {1, 6, 5, 7}}, // channel shuffle
      {{3, 1, 4, 2}, {3, 4, 1, 2, 1}, {1, 0, 4, 3, 2}, {12, 2}},
      {{2, 3, 4, 5}, {6, 20}, {1, 0}, {4, 5, 3, 2}},
      {{1, 12, 1}, {2, 1, 6}, {2, 1, 0}, {3, 1, 2, 2, 1}},
  };
  for (const auto &c : cases) {
    Shape turned;
    for (int64_t d : c.permutation)
      turned.push_back(c.middle[size_t(d)]);
    std::string body = "%m = smelt.reshape %a : ${IN} -> " + tensorType(c.middle, DType::f32) +
                       "\n    %t = smelt.transpose %m, permutation = " + dims(c.permutation) +
                       " : " + tensorType(c.middle, DType::f32) +
                       "\n    %y = smelt.reshape %t : " + tensorType(turned, DType::f32) +
                       " -> ${OUT}";
    std::string text = substitute(substitute(kShapeOp, {{"BODY", body}}),
                                  {{"IN", tensorType(c.in, DType::f32)},
                                   {"OUT", tensorType(c.out, DType::f32)}});
    std::optional<Compiled> compiled = compileBoth(text);
    ASSERT_TRUE(compiled) << body;
    HostTensor x = randomTensor(DType::f32, c.in);
    std::vector<HostTensor> got = runExecutable(compiled->fused, {x});
    ASSERT_EQ(got.size(), 1u) << body;
    expectMatch(got[0],
                HostTensor::fromDoubles(TensorType{DType::f32, c.out},
                                        transposed(x.toDoubles(), c.middle, c.permutation)),
                1e-7, body);
  }
}

const char *kBiasAdd = R"(
func.func @f(%x: tensor<6x5x${E}>, %b: tensor<5x${E}>, %c: tensor<${E}>) -> tensor<6x5x${E}> {
  %r = smelt.fusion loop (%x, %b, %c) : (tensor<6x5x${E}>, tensor<5x${E}>, tensor<${E}>) -> tensor<6x5x${E}> {
  ^bb0(%xs: tensor<6x5x${E}>, %bs: tensor<5x${E}>, %cs: tensor<${E}>):
    %0 = smelt.broadcast_in_dim %bs, dims = [1] : tensor<5x${E}> -> tensor<6x5x${E}>
    %1 = smelt.broadcast_in_dim %cs, dims = [] : tensor<${E}> -> tensor<6x5x${E}>
    %2 = smelt.add %xs, %0 : tensor<6x5x${E}>
    %3 = smelt.mul %2, %1 : tensor<6x5x${E}>
    %4 = smelt.relu %3 : tensor<6x5x${E}>
    smelt.yield %4 : tensor<6x5x${E}>
  }
  return %r : tensor<6x5x${E}>
}
)";

TEST(FusedShape, BroadcastsFeedElementwiseOps) {
  for (DType dtype : kAllDTypes) {
    if (dtype == DType::i1)
      continue;
    expectFusedMatchesUnfused(
        substitute(kBiasAdd, {{"E", std::string(dtypeName(dtype))}}),
        {randomTensor(dtype, {6, 5}), randomTensor(dtype, {5}), randomTensor(dtype, {})},
        std::string("bias add ") + std::string(dtypeName(dtype)));
  }
}

// A body that reads at coordinates runs as a loop over rows around one along the last
// dimension (codegen/cpu/LoopKernel.cpp); threads split the elements wherever the counts
// fall, so a range starts and ends inside rows (73455 / 2 and / 4 are not multiples of 59).
const char *kGateAndTranspose = R"(
func.func @f(%x: tensor<3x5x83x59xf32>, %g: tensor<59xf32>, %t: tensor<83x59x3x5xf32>) -> (tensor<3x5x83x59xf32>, tensor<3x5x83x59xf32>) {
  %r:2 = smelt.fusion loop (%x, %g, %t) : (tensor<3x5x83x59xf32>, tensor<59xf32>, tensor<83x59x3x5xf32>) -> (tensor<3x5x83x59xf32>, tensor<3x5x83x59xf32>) {
  ^bb0(%xs: tensor<3x5x83x59xf32>, %gs: tensor<59xf32>, %ts: tensor<83x59x3x5xf32>):
    %0 = smelt.broadcast_in_dim %gs, dims = [3] : tensor<59xf32> -> tensor<3x5x83x59xf32>
    %1 = smelt.mul %xs, %0 : tensor<3x5x83x59xf32>
    %2 = smelt.transpose %ts, permutation = [2, 3, 0, 1] : tensor<83x59x3x5xf32>
    %3 = smelt.add %2, %1 : tensor<3x5x83x59xf32>
    smelt.yield %1, %3 : tensor<3x5x83x59xf32>, tensor<3x5x83x59xf32>
  }
  return %r#0, %r#1 : tensor<3x5x83x59xf32>, tensor<3x5x83x59xf32>
}
)";

TEST(FusedShape, RowLoopsSplitAcrossThreadsInsideRows) {
  std::optional<Compiled> compiled = compileBoth(kGateAndTranspose);
  ASSERT_TRUE(compiled);
  TensorType type{DType::f32, {3, 5, 83, 59}};
  Expected<int> before = cpuThreads();
  ASSERT_TRUE(before) << before.message();
  for (int threads : {1, 2, 3, 4}) {
    setCpuThreads(threads);
    // Fresh inputs for every run: a result buffer may be the last run's memory again, and an
    // element left unwritten must not find the right value there.
    std::vector<HostTensor> inputs = {randomTensor(DType::f32, {3, 5, 83, 59}),
                                      randomTensor(DType::f32, {59}),
                                      randomTensor(DType::f32, {83, 59, 3, 5})};
    // The float64 reference, element by element (the unfused kernels are loop kernels too).
    std::vector<double> x = inputs[0].toDoubles(), g = inputs[1].toDoubles(),
                        t = inputs[2].toDoubles(), gated(x.size()), sum(x.size());
    for (int64_t a = 0, i = 0; a < 3; ++a)
      for (int64_t b = 0; b < 5; ++b)
        for (int64_t c = 0; c < 83; ++c)
          for (int64_t d = 0; d < 59; ++d, ++i) {
            gated[size_t(i)] = x[size_t(i)] * g[size_t(d)];
            sum[size_t(i)] = gated[size_t(i)] + t[size_t(((c * 59 + d) * 3 + a) * 5 + b)];
          }
    std::vector<HostTensor> got = runExecutable(compiled->fused, inputs);
    ASSERT_EQ(got.size(), 2u);
    std::string what = "on " + std::to_string(threads) + " threads";
    expectMatch(got[0], HostTensor::fromDoubles(type, gated), 1e-6, "gate " + what);
    expectMatch(got[1], HostTensor::fromDoubles(type, sum), 1e-6, "transpose " + what);
  }
  setCpuThreads(*before);
}

} // namespace
} // namespace smelt::rt::test
