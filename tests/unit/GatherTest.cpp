// gather, scatter_add and the embedding layer against float64 references on fresh random
// inputs, fused and unfused: repeated indices add up, indices out of range clamp into the table
// (docs/ops.md), f16/bf16 sums keep small gradients, gradients match central differences, and
// scatter_add gives the same bits on one thread and on two.
#include "TestUtil.h"

#include "frontend/Layers.h"
#include "runtime/CpuThreads.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace smelt::test {
namespace {

constexpr DType kIndexTypes[] = {DType::i32, DType::i64};

/// Indices drawn from [-3, rows + 3), more of them than rows (so rows repeat), with the first
/// two far out of range on each side: past int32 for i64, so a kernel that narrowed the index
/// before clamping it would read a wrapped row.
rt::HostTensor randomIndices(const std::vector<int64_t> &shape, DType dtype, int64_t rows) {
  rt::TensorType type{toRt(dtype), shape};
  std::uniform_int_distribution<int64_t> pick(-3, rows + 2);
  std::vector<double> values(size_t(type.numElements()));
  for (double &v : values)
    v = double(pick(rng()));
  double far = dtype == DType::i64 ? std::ldexp(1.0, 40) + 7 : 2147483647.0;
  values[0] = -far;
  values[1] = far;
  return rt::HostTensor::fromDoubles(type, values);
}

int64_t clampedRow(double index, int64_t rows) {
  return std::clamp<int64_t>(int64_t(index), 0, rows - 1);
}

TEST(Gather, EveryDTypeAgainstFloat64WithRepeatsAndClamping) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  const int64_t rows = 11;
  for (DType tableType : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64})
    for (DType indexType : kIndexTypes)
      for (bool fuse : {true, false}) {
        SCOPED_TRACE(std::string(dtypeName(tableType)) + " table, " + dtypeName(indexType) +
                     (fuse ? " indices, fused" : " indices, unfused"));
        mlir::MLIRContext ctx;
        Graph g(ctx, "f");
        Tensor table = g.input("table", {rows, 3, 5}, tableType);
        Tensor ids = g.input("ids", {4, 6}, indexType);
        // A float gather feeds a neg, so fused it sits in its consumer's kernel; integers are
        // gathered alone.
        Tensor out = gather(table, ids);
        bool isFloat = tableType != DType::i32 && tableType != DType::i64;
        g.setOutputs({isFloat ? neg(out) : out});
        rt::HostTensor t = randomTensor({rows, 3, 5}, tableType);
        rt::HostTensor i = randomIndices({4, 6}, indexType, rows);
        PipelineOptions options;
        options.fuse = fuse;
        std::vector<rt::HostTensor> got = run(g, {t, i}, "", options);
        ASSERT_EQ(got.size(), 1u);
        ASSERT_EQ(got[0].type().shape, (std::vector<int64_t>{4, 6, 3, 5}));
        std::vector<double> tv = t.toDoubles(), iv = i.toDoubles(), expected;
        for (double index : iv)
          for (int64_t k = 0; k < 15; ++k) {
            double v = tv[size_t(clampedRow(index, rows) * 15 + k)];
            expected.push_back(isFloat ? -v : v);
          }
        EXPECT_EQ(got[0].toDoubles(), expected); // a copy (and a negation) is exact
      }
}

TEST(Gather, ClampsIndicesOutOfRangeKnownAnswer) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor table = g.input("table", {3, 2});
  Tensor ids = g.input("ids", {5}, DType::i64);
  g.setOutputs({gather(table, ids)});
  rt::HostTensor t = rt::HostTensor::fromDoubles({rt::DType::f32, {3, 2}}, {1, 2, 3, 4, 5, 6});
  rt::HostTensor i = rt::HostTensor::fromDoubles({rt::DType::i64, {5}}, {-7, 0, 2, 3, 1e12});
  std::vector<rt::HostTensor> got = run(g, {t, i});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].toDoubles(), (std::vector<double>{1, 2, 1, 2, 5, 6, 5, 6, 5, 6}));
}

TEST(ScatterAdd, EveryFloatAgainstFloat64WithRepeatsAndClamping) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  const int64_t rows = 11;
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16})
    for (DType indexType : kIndexTypes) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " updates, " + dtypeName(indexType));
      mlir::MLIRContext ctx;
      Graph g(ctx, "f");
      Tensor updates = g.input("updates", {4, 6, 3, 5}, dtype);
      Tensor ids = g.input("ids", {4, 6}, indexType);
      g.setOutputs({scatterAdd(updates, ids, rows)});
      rt::HostTensor u = randomTensor({4, 6, 3, 5}, dtype);
      rt::HostTensor i = randomIndices({4, 6}, indexType, rows);
      std::vector<rt::HostTensor> got = run(g, {u, i});
      ASSERT_EQ(got.size(), 1u);
      ASSERT_EQ(got[0].type().shape, (std::vector<int64_t>{rows, 3, 5}));
      std::vector<double> uv = u.toDoubles(), iv = i.toDoubles();
      std::vector<double> expected(size_t(rows * 15), 0.0);
      for (size_t b = 0; b < iv.size(); ++b)
        for (int64_t k = 0; k < 15; ++k)
          expected[size_t(clampedRow(iv[b], rows) * 15 + k)] += uv[b * 15 + size_t(k)];
      EXPECT_LE(relError(got[0].toDoubles(), expected), tolerance(dtype));
      // The rows nobody's index reaches stay exactly zero.
      std::vector<double> gv = got[0].toDoubles();
      for (int64_t r = 0; r < rows; ++r) {
        if (std::any_of(iv.begin(), iv.end(), [&](double x) { return clampedRow(x, rows) == r; }))
          continue;
        for (int64_t k = 0; k < 15; ++k)
          EXPECT_EQ(gv[size_t(r * 15 + k)], 0.0) << "row " << r;
      }
    }
}

// 1 + n small updates of 2^-(mantissa bits + 2): each alone is a quarter of an ulp of 1, so a
// sum kept in the dtype stays 1; kept in f32 and rounded once it is exactly 1.5.
TEST(ScatterAdd, KeepsSmallGradientsInF16AndBf16) {
  for (auto [dtype, bits] : {std::pair{DType::bf16, 7}, std::pair{DType::f16, 10}}) {
    SCOPED_TRACE(dtypeName(dtype));
    int64_t small = int64_t(1) << (bits + 1); // small * 2^-(bits + 2) = 0.5
    mlir::MLIRContext ctx;
    Graph g(ctx, "f");
    Tensor updates = g.input("updates", {small + 1, 2}, dtype);
    Tensor ids = g.input("ids", {small + 1}, DType::i32);
    g.setOutputs({scatterAdd(updates, ids, 3)});
    std::vector<double> u = {1.0, -1.0}, i = {1};
    for (int64_t k = 0; k < small; ++k) {
      u.insert(u.end(), {std::ldexp(1.0, -(bits + 2)), -std::ldexp(1.0, -(bits + 2))});
      i.push_back(1);
    }
    std::vector<rt::HostTensor> got =
        run(g, {rt::HostTensor::fromDoubles({toRt(dtype), {small + 1, 2}}, u),
                rt::HostTensor::fromDoubles({rt::DType::i32, {small + 1}}, i)});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].toDoubles(), (std::vector<double>{0, 0, 1.5, -1.5, 0, 0}));
  }
}

TEST(ScatterAdd, SameBitsOnOneThreadAndOnTwo) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  for (DType dtype : {DType::f32, DType::bf16}) {
    mlir::MLIRContext ctx;
    Graph g(ctx, "f");
    Tensor updates = g.input("updates", {3000, 96}, dtype);
    Tensor ids = g.input("ids", {3000}, DType::i64);
    g.setOutputs({scatterAdd(updates, ids, 40)});
    mlir::FailureOr<rt::Executable> exe = codegen::compile(g.module(), "f");
    ASSERT_TRUE(succeeded(exe));
    rt::Expected<rt::CpuExecutor> cpu = rt::CpuExecutor::create(*exe);
    ASSERT_TRUE(cpu.ok()) << cpu.message();
    // Values of mixed magnitude, so the order of the additions shows in the bits.
    std::vector<rt::HostTensor> inputs = {
        randomTensor({3000, 96}, dtype, [] { return draw(-2, 2) * std::pow(10.0, draw(-3, 3)); }),
        randomIndices({3000}, DType::i64, 40)};
    rt::Expected<int> before = rt::cpuThreads();
    ASSERT_TRUE(before) << before.message();
    std::vector<rt::HostTensor> one, two;
    rt::setCpuThreads(1);
    ASSERT_TRUE(cpu->run(inputs, one).ok());
    rt::setCpuThreads(2);
    ASSERT_TRUE(cpu->run(inputs, two).ok());
    rt::setCpuThreads(*before);
    ASSERT_EQ(one.size(), 1u);
    ASSERT_EQ(two.size(), 1u);
    EXPECT_EQ(std::memcmp(one[0].data<uint8_t>(), two[0].data<uint8_t>(), one[0].byteSize()), 0)
        << dtypeName(dtype);
  }
}

/// Differentiates `loss` with respect to `wrt`, which are the function's arguments number
/// `positions`, runs it on `args` and compares each gradient with central differences of the
/// loss in float64.
void expectGradientsMatch(Graph &g, Tensor loss, const std::vector<Tensor> &wrt,
                          const std::vector<size_t> &positions, std::vector<rt::HostTensor> args) {
  std::vector<Tensor> outputs = g.gradients(loss, wrt);
  outputs.insert(outputs.begin(), loss);
  g.setOutputs(outputs);
  mlir::FailureOr<rt::Executable> exe = codegen::compile(g.module(), g.name());
  ASSERT_TRUE(succeeded(exe));
  rt::Expected<rt::CpuExecutor> cpu = rt::CpuExecutor::create(*exe);
  ASSERT_TRUE(cpu.ok()) << cpu.message();
  std::vector<rt::HostTensor> out;
  ASSERT_TRUE(cpu->run(args, out).ok());
  ASSERT_EQ(out.size(), 1 + wrt.size());
  auto lossAt = [&] {
    std::vector<rt::HostTensor> o;
    EXPECT_TRUE(cpu->run(args, o).ok());
    return o[0].at(0);
  };
  for (size_t k = 0; k < wrt.size(); ++k) {
    rt::HostTensor &x = args[positions[k]];
    std::vector<double> numeric =
        centralDifferences(x.data<double>(), x.type().numElements(), lossAt);
    EXPECT_LE(relError(out[1 + k].toDoubles(), numeric), 1e-6) << "argument " << positions[k];
  }
}

TEST(Gather, GradientsMatchCentralDifferences) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  // loss = sum(tanh(gather(table, ids)) * r) + sum(scatter_add(u, ids) * s): the table's
  // gradient is a scatter_add, the updates' a gather.
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor table = g.input("table", {7, 3}, DType::f64);
  Tensor ids = g.input("ids", {5, 4}, DType::i32);
  Tensor r = g.input("r", {5, 4, 3}, DType::f64);
  Tensor u = g.input("u", {5, 4, 3}, DType::f64);
  Tensor s = g.input("s", {7, 3}, DType::f64);
  Tensor loss = reduceSum(tanh(gather(table, ids)) * r, {0, 1, 2}) +
                reduceSum(scatterAdd(u, ids, 7) * s, {0, 1});
  expectGradientsMatch(g, loss, {table, u}, {0, 3},
                       {randomTensor({7, 3}, DType::f64), randomIndices({5, 4}, DType::i32, 7),
                        randomTensor({5, 4, 3}, DType::f64), randomTensor({5, 4, 3}, DType::f64),
                        randomTensor({7, 3}, DType::f64)});
}

TEST(Gather, EmbeddingLayerGradientsMatchCentralDifferences) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  // Token and position embeddings added, as GPT-2's input: tanh(tokens[ids] + positions) * r.
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor ids = g.input("ids", {3, 5}, DType::i64);
  Tensor tokens = embedding(ids, 9, 4, "tokens", Initializer::uniform(-0.05, 0.05), DType::f64);
  Tensor positions = g.input("positions", {5}, DType::i64);
  Tensor place = embedding(positions, 5, 4, "places", Initializer::uniform(-0.05, 0.05),
                           DType::f64);
  Tensor r = g.input("r", {3, 5, 4}, DType::f64);
  Tensor loss = reduceSum(tanh(tokens + place) * r, {0, 1, 2});
  std::vector<Tensor> tables = g.parameterTensors();
  ASSERT_EQ(tables.size(), 2u);
  // Arguments in the order they were made: ids, tokens/embeddings, positions,
  // places/embeddings, r.
  expectGradientsMatch(g, loss, tables, {1, 3},
                       {randomIndices({3, 5}, DType::i64, 9), randomTensor({9, 4}, DType::f64),
                        rt::HostTensor::fromDoubles({rt::DType::i64, {5}}, {0, 1, 2, 3, 4}),
                        randomTensor({5, 4}, DType::f64), randomTensor({3, 5, 4}, DType::f64)});
}

} // namespace
} // namespace smelt::test
