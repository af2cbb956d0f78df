// broadcast_in_dim, reshape and transpose inside loop fusions, in every dtype, alone and
// composed (the walk's index remapping), against the same ops run unfused.
#include "FusionTestUtil.h"

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

} // namespace
} // namespace smelt::rt::test
