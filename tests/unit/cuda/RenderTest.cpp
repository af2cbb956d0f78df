// Rendering checks: the lines of the generated CUDA that carry each design decision (vector
// access and its tail, index arithmetic for broadcasts and transposes, the reduction layouts,
// accumulator types, exact-semantics helpers) and the launch written into the FusedKernel.
#include "CudaTestUtil.h"

#include <regex>

namespace smelt::cuda_test {
namespace {

/// One case rendered: the text of its first kernel (from its comment line on) and its launch.
struct Rendered {
  std::string source, kernel;
  rt::FusedKernel entry;
};

Rendered renderCase(const std::string &name) {
  Rendered rendered;
  for (const FusionCase &c : fusionCases()) {
    if (name != c.name)
      continue;
    ParsedModule parsed = parseModule(c.mlir);
    if (!parsed.main)
      return rendered;
    rendered.source = render(parsed);
    rendered.kernel = rendered.source.substr(rendered.source.find("// main_fusion0:"));
    rendered.entry = parsed.kernels.front();
    return rendered;
  }
  ADD_FAILURE() << "no fusion case " << name;
  return rendered;
}

size_t count(const std::string &text, const std::string &part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1))
    ++n;
  return n;
}

#define EXPECT_HAS(text, part)                                                                     \
  EXPECT_NE((text).find(part), std::string::npos) << "no `" << (part) << "` in\n" << (text)
#define EXPECT_LACKS(text, part)                                                                   \
  EXPECT_EQ((text).find(part), std::string::npos) << "`" << (part) << "` in\n" << (text)
#define EXPECT_MATCHES(text, pattern)                                                              \
  EXPECT_TRUE(std::regex_search(text, std::regex(pattern)))                                        \
      << "nothing matches /" << (pattern) << "/ in\n"                                              \
      << (text)

TEST(CudaRender, PreludeHasHeadersTypesAndHelpers) {
  Rendered r = renderCase("ElementwiseChain");
  EXPECT_HAS(r.source, "#include <cuda_fp16.h>");
  EXPECT_HAS(r.source, "#include <cuda_bf16.h>");
  EXPECT_HAS(r.source, "typedef long long int64_t;");
  EXPECT_HAS(r.source, "smelt_div(T a, T b)");
  EXPECT_HAS(r.source, "smelt_to_int(F x)");
}

TEST(CudaRender, ElementwiseChainMovesFloat4AndFinishesWithAScalarTail) {
  Rendered r = renderCase("ElementwiseChain");
  EXPECT_HAS(r.kernel,
             "// main_fusion0: loop over 33x65: constant+mul+add+tanh+neg+max+logistic+sub");
  EXPECT_HAS(r.kernel, "extern \"C\" __global__ void __launch_bounds__(256) main_fusion0(const "
                       "float *__restrict__ in0, const float *__restrict__ in1, float "
                       "*__restrict__ out0) {");
  EXPECT_HAS(r.kernel, "for (int32_t vi = first; vi < 536; vi += stride) {");
  EXPECT_HAS(
      r.kernel,
      "const SmeltVec<float, 4> l0 = reinterpret_cast<const SmeltVec<float, 4> *>(in0)[vi];");
  EXPECT_HAS(
      r.kernel,
      "const SmeltVec<float, 4> l1 = reinterpret_cast<const SmeltVec<float, 4> *>(in1)[vi];");
  EXPECT_HAS(r.kernel, "reinterpret_cast<SmeltVec<float, 4> *>(out0)[vi] = s0;");
  EXPECT_HAS(r.kernel, "for (int32_t i = 2144 + first; i < 2145; i += stride) {");
  EXPECT_MATCHES(r.kernel, R"(const float v\d+ = l0\.v\[3\];)");
  EXPECT_MATCHES(r.kernel, R"(const float v\d+ = \(v\d+ \+ 0\.5f\);)");
  EXPECT_MATCHES(r.kernel, R"(const float v\d+ = smelt_max\(v\d+, v\d+\);)");
  EXPECT_EQ(count(r.kernel, "tanhf("), 5u) << "four lanes and the tail, one tanh each";
  EXPECT_EQ(count(r.kernel, "smelt_logistic("), 5u);
  EXPECT_EQ(r.entry.cudaBlock, 256);
  EXPECT_EQ(r.entry.cudaGrid, 3); // 536 vector steps in blocks of 256
}

TEST(CudaRender, BiasIsReadAtItsColumnWhileTheMatrixMovesAsVectors) {
  Rendered r = renderCase("BiasRelu");
  EXPECT_HAS(r.kernel, "reinterpret_cast<const SmeltVec<float, 4> *>(in0)[vi]");
  EXPECT_LACKS(r.kernel, "(in1)[vi]");
  EXPECT_MATCHES(r.kernel, R"(const int32_t (v\d+) = v\d+ % 512;[\s\S]*in1\[\1\])");
  EXPECT_HAS(r.kernel, "smelt_relu(");
  EXPECT_LACKS(r.kernel, "for (int32_t i = ") << "131072 elements leave no tail";
  EXPECT_EQ(r.entry.cudaGrid, 128); // 32768 float4 steps in blocks of 256
}

// 21 buffers moved as float4 would hold 84 registers of lanes at once (sibling-merged Adam
// updates of a GPT spilled so): two lanes a vector keep them to 42.
TEST(CudaRender, ManyStreamedBuffersTakeNarrowerVectors) {
  Rendered r = renderCase("AdamUpdatesManyBuffers");
  EXPECT_HAS(r.kernel, "for (int32_t vi = first; vi < 2049; vi += stride) {");
  EXPECT_HAS(
      r.kernel,
      "const SmeltVec<float, 2> l12 = reinterpret_cast<const SmeltVec<float, 2> *>(in12)[vi];");
  EXPECT_HAS(r.kernel, "reinterpret_cast<SmeltVec<float, 2> *>(out8)[vi] = s8;");
  EXPECT_LACKS(r.kernel, "SmeltVec<float, 4>");
  EXPECT_LACKS(r.kernel, "(in0)[vi]") << "the learning rate is one element, read as it is";
  EXPECT_HAS(r.kernel, "for (int32_t i = 4098 + first; i < 4099; i += stride) {");
  EXPECT_EQ(r.entry.cudaGrid, 9); // 2049 vector steps in blocks of 256
}

TEST(CudaRender, TransposeStaysScalarAndPermutesCoordinates) {
  Rendered r = renderCase("Transpose");
  EXPECT_LACKS(r.kernel, "SmeltVec");
  EXPECT_HAS(r.kernel, "for (int32_t i = first; i < 3840; i += stride) {");
  // Output 80x48 at i: column i % 48, row i / 48; the input 48x80 is read at column * 80 + row.
  EXPECT_MATCHES(r.kernel, R"(const int32_t (v\d+) = i % 48;)");
  EXPECT_MATCHES(r.kernel, R"(const int32_t v\d+ = v\d+ \* 80;)");
  EXPECT_MATCHES(r.kernel, R"(in0\[v\d+\])");
  EXPECT_HAS(r.kernel, "* 2.0f)");
  EXPECT_EQ(r.entry.cudaGrid, 15);
}

TEST(CudaRender, ShortRowsGetAWarpPerResult) {
  Rendered r = renderCase("ReduceSumLastAxis");
  EXPECT_HAS(r.kernel, "const int32_t o = (int32_t)blockIdx.x * 8 + threadIdx.x / 32;");
  EXPECT_HAS(r.kernel, "if (o >= 256) return;");
  EXPECT_HAS(r.kernel, "float a0 = 0.0f;");
  EXPECT_HAS(r.kernel, "for (int32_t r = threadIdx.x % 32; r < 1000; r += 32) {");
  EXPECT_MATCHES(r.kernel, R"(a0 = SmeltSum::combine\(a0, \(float\)\(v\d+\)\);)");
  EXPECT_HAS(r.kernel, "a0 = smelt_warp_reduce<SmeltSum>(a0);");
  EXPECT_HAS(r.kernel, "out0[o] = (float)(a0);");
  EXPECT_EQ(r.entry.cudaBlock, 256);
  EXPECT_EQ(r.entry.cudaGrid, 32);
}

TEST(CudaRender, LongRowsGetABlockPerResultAndMaxStartsAtMinusInfinity) {
  Rendered r = renderCase("ReduceMaxLongRows");
  EXPECT_HAS(r.kernel, "const int32_t o = (int32_t)blockIdx.x;");
  EXPECT_HAS(r.kernel, "float a0 = (-SMELT_INF_F);");
  EXPECT_HAS(r.kernel, "for (int32_t r = threadIdx.x; r < 5000; r += 1024) {");
  EXPECT_HAS(r.kernel, "__shared__ float s0[32];");
  EXPECT_HAS(r.kernel, "a0 = smelt_block_reduce<SmeltMax, float>(a0, (-SMELT_INF_F), s0);");
  EXPECT_HAS(r.kernel, "if (threadIdx.x == 0) {");
  EXPECT_EQ(r.entry.cudaBlock, 1024) << "40 results cannot fill 132 SMs: more threads each";
  EXPECT_EQ(r.entry.cudaGrid, 40);
}

TEST(CudaRender, KeptInnermostAxisGivesColumns) {
  Rendered r = renderCase("ReduceSumAxis0");
  EXPECT_HAS(r.kernel, "const int32_t o = (int32_t)blockIdx.x * 32 + threadIdx.x % 32;");
  EXPECT_HAS(r.kernel, "const int32_t end = o < 300 ? 1000 : 0;");
  EXPECT_HAS(r.kernel, "for (int32_t r = threadIdx.x / 32; r < end; r += 32) {");
  EXPECT_HAS(r.kernel, "__shared__ float s0[1024];");
  EXPECT_HAS(r.kernel, "a0 = smelt_column_reduce<SmeltSum>(a0, s0);");
  EXPECT_HAS(r.kernel, "if (threadIdx.x < 32 && o < 300) {");
  EXPECT_EQ(r.entry.cudaBlock, 1024);
  EXPECT_EQ(r.entry.cudaGrid, 10);
}

// 16 columns of 100000 rows would be one block: 195 blocks take 513 rows each, leave their 32
// column partials in the module's workspace, and the last to arrive combines them in order.
TEST(CudaRender, FewColumnsOfLongRangeSplitTheRangeOverBlocks) {
  Rendered r = renderCase("ReduceSumColumnsSplit");
  EXPECT_HAS(r.source, "__device__ volatile float main_fusion0_partial0[6240];"); // 195 x 32
  EXPECT_HAS(r.source, "__device__ unsigned int main_fusion0_arrived[1];");
  EXPECT_HAS(r.kernel, "const int32_t begin = (int32_t)(blockIdx.x % 195) * 513;");
  EXPECT_HAS(r.kernel, "const int32_t stop = begin + 513 < 100000 ? begin + 513 : 100000;");
  EXPECT_HAS(r.kernel, "const int32_t o = (int32_t)(blockIdx.x / 195) * 32 + threadIdx.x % 32;");
  EXPECT_HAS(r.kernel, "const int32_t end = o < 16 ? stop : begin;");
  EXPECT_HAS(r.kernel, "for (int32_t r = begin + threadIdx.x / 32; r < end; r += 32) {");
  EXPECT_HAS(r.kernel, "main_fusion0_partial0[blockIdx.x * 32 + threadIdx.x] = a0;");
  EXPECT_HAS(r.kernel,
             "if (!smelt_last_block(&main_fusion0_arrived[(blockIdx.x / 195)], 195)) return;");
  EXPECT_HAS(r.kernel, "for (int32_t p = threadIdx.x / 32; p < 195; p += 32) {");
  EXPECT_HAS(r.kernel, "a0 = SmeltSum::combine(a0, (float)main_fusion0_partial0[at * 32 + "
                       "threadIdx.x % 32]);");
  EXPECT_EQ(count(r.kernel, "smelt_column_reduce<SmeltSum>(a0, s0);"), 2u)
      << "the block's rows, then the parts' partials";
  EXPECT_EQ(count(r.kernel, "__shared__ float s0[1024];"), 1u);
  EXPECT_EQ(r.entry.cudaBlock, 1024);
  EXPECT_EQ(r.entry.cudaGrid, 195);
}

// One result of 3M elements: 183 blocks of 1024 threads, 16394 elements each.
TEST(CudaRender, OneResultOfALongRangeSplitsItOverBlocks) {
  Rendered r = renderCase("ReduceSumAllSplit");
  EXPECT_HAS(r.source, "__device__ volatile float main_fusion0_partial0[183];");
  EXPECT_HAS(r.kernel, "const int32_t o = (int32_t)(blockIdx.x / 183);");
  EXPECT_HAS(r.kernel, "for (int32_t r = begin + threadIdx.x; r < stop; r += 1024) {");
  EXPECT_HAS(r.kernel, "if (threadIdx.x == 0) {\n    main_fusion0_partial0[blockIdx.x] = a0;");
  EXPECT_HAS(r.kernel, "for (int32_t p = threadIdx.x; p < 183; p += 1024) {");
  EXPECT_EQ(count(r.kernel, "smelt_block_reduce<SmeltSum, float>(a0, 0.0f, s0);"), 2u);
  EXPECT_EQ(r.entry.cudaBlock, 1024);
  EXPECT_EQ(r.entry.cudaGrid, 183);
}

TEST(CudaRender, MiddleAxisIsColumnsAndBf16AccumulatesInFloat) {
  Rendered r = renderCase("ReduceMiddleAxis");
  EXPECT_HAS(r.kernel, "smelt_column_reduce<SmeltSum>");
  EXPECT_HAS(r.kernel, "__bfloat162float(in0[");
  EXPECT_HAS(r.kernel, "out0[o] = __float2bfloat16_rn((float)(a0));");
  EXPECT_EQ(r.entry.cudaBlock, 256) << "50 reduced elements: no need for 1024 threads";
  EXPECT_EQ(r.entry.cudaGrid, 8); // 240 results, 32 per block
}

TEST(CudaRender, BroadcastInsideAReductionReadsTheRowValue) {
  Rendered r = renderCase("SoftmaxDenominator");
  EXPECT_HAS(r.kernel, "in1[o]");
  EXPECT_HAS(r.kernel, "expf(");
  EXPECT_HAS(r.kernel, "smelt_warp_reduce<SmeltSum>");
}

TEST(CudaRender, MultiOutputLoopStoresEveryDtypeAsVectors) {
  Rendered r = renderCase("MultiOutputLoop");
  EXPECT_HAS(r.kernel,
             "float *__restrict__ out0, __half *__restrict__ out1, uint8_t *__restrict__ out2)");
  EXPECT_HAS(r.kernel, "SmeltVec<__half, 4> s1;");
  EXPECT_HAS(r.kernel, "SmeltVec<uint8_t, 4> s2;");
  EXPECT_MATCHES(r.kernel, R"(s1\.v\[2\] = __float2half_rn\(v\d+\);)");
  EXPECT_MATCHES(r.kernel, R"(s2\.v\[3\] = \(uint8_t\)\(v\d+\);)");
  EXPECT_MATCHES(r.kernel, R"(const float v\d+ = __half2float\(__float2half_rn\(v\d+\)\);)");
  EXPECT_EQ(count(r.kernel, "expf("), 4u) << "exp feeds two results but is computed once a lane";
}

TEST(CudaRender, MultiOutputReductionSharesItsBody) {
  Rendered r = renderCase("MultiOutputReduction");
  EXPECT_EQ(count(r.kernel, "expf("), 1u);
  EXPECT_HAS(r.kernel, "float a1 = SMELT_INF_F;");
  EXPECT_HAS(r.kernel, "a0 = smelt_warp_reduce<SmeltSum>(a0);");
  EXPECT_HAS(r.kernel, "a1 = smelt_warp_reduce<SmeltMin>(a1);");
  EXPECT_HAS(r.kernel, "out1[o] = (float)(a1);");
}

TEST(CudaRender, HalfAndBf16ConvertRoundOnce) {
  Rendered r = renderCase("HalfConverts");
  EXPECT_HAS(r.kernel, "reinterpret_cast<const SmeltVec<__half, 8> *>(in0)[vi]");
  EXPECT_HAS(r.kernel, "reinterpret_cast<const SmeltVec<__nv_bfloat16, 8> *>(in1)[vi]");
  EXPECT_HAS(r.kernel, "__half2float(l0.v[7])");
  EXPECT_MATCHES(r.kernel, R"(__bfloat162float\(__float2bfloat16_rn\(v\d+\)\))");
  EXPECT_MATCHES(r.kernel, R"(__half2float\(__float2half_rn\(v\d+\)\))");
  EXPECT_HAS(r.kernel, "for (int32_t i = 1000 + first; i < 1003; i += stride) {");
}

TEST(CudaRender, CompareAndSelect) {
  Rendered r = renderCase("CompareSelect");
  EXPECT_MATCHES(r.kernel,
                 R"(const bool (v\d+) = \(v\d+ < v\d+\);[\s\S]*= \(\1 \? v\d+ : v\d+\);)");
  EXPECT_MATCHES(r.kernel, R"(const bool v\d+ = \(v\d+ >= v\d+\);)");
}

TEST(CudaRender, IntegerArithmeticWrapsAndDivisionIsTotal) {
  Rendered r = renderCase("IntegerDiv");
  EXPECT_MATCHES(r.kernel, R"(const int32_t v\d+ = smelt_div\(v\d+, v\d+\);)");
  EXPECT_MATCHES(r.kernel, R"(smelt_mul\(v\d+, \(-2147483647 - 1\)\))");
  EXPECT_MATCHES(r.kernel, R"(const int64_t v\d+ = \(int64_t\)\(v\d+\);)");
  EXPECT_HAS(r.kernel, "SmeltVec<int64_t, 2>");
}

TEST(CudaRender, FloatToIntegerSaturates) {
  Rendered r = renderCase("FloatToInt");
  EXPECT_HAS(r.kernel, "smelt_to_int<int32_t>(");
  EXPECT_HAS(r.kernel, "smelt_to_int<int64_t>(");
}

TEST(CudaRender, IntegerSumsAccumulateInInt64) {
  Rendered r = renderCase("ReduceIntegerSum");
  EXPECT_HAS(r.kernel, "int64_t a0 = 0ll;");
  EXPECT_MATCHES(r.kernel, R"(a0 = SmeltSum::combine\(a0, \(int64_t\)\(v\d+\)\);)");
  EXPECT_HAS(r.kernel, "a0 = smelt_block_reduce<SmeltSum, int64_t>(a0, 0ll, s0);");
  EXPECT_HAS(r.kernel, "out0[o] = (int32_t)(a0);");
}

TEST(CudaRender, IotaUsesCoordinatesAndReshapeKeepsTheLinearIndex) {
  Rendered r = renderCase("IotaReshape");
  EXPECT_HAS(r.kernel, "reinterpret_cast<const SmeltVec<float, 4> *>(in0)[vi]");
  EXPECT_MATCHES(r.kernel,
                 R"(const int32_t (v\d+) = v\d+ % 8;[\s\S]*const float v\d+ = \(float\)\(\1\);)");
}

TEST(CudaRender, GatherClampsTheIndexElementAndReadsThatRow) {
  Rendered r = renderCase("EmbeddingPlusPositions");
  // The index element at the result's leading coordinates, clamped in its own type into
  // [0, 49], times the row's 64 elements, plus the column.
  EXPECT_MATCHES(r.kernel, R"(const int32_t (v\d+) = in1\[v\d+\];)");
  EXPECT_MATCHES(r.kernel, R"(const int32_t (v\d+) = \(int32_t\)\((v\d+) < \(int32_t\)0 \? )"
                           R"(\(int32_t\)0 : \2 > \(int32_t\)49 \? \(int32_t\)49 : \2\);)"
                           R"([\s\S]*const int32_t v\d+ = \1 \* 64;)");
  EXPECT_LACKS(r.kernel, "(in0)[vi]") << "the table is never read at the loop index";
}

TEST(CudaRender, DoublesUseDoubleMath) {
  Rendered r = renderCase("DoubleChain");
  EXPECT_HAS(r.kernel, "SmeltVec<double, 2>");
  EXPECT_MATCHES(r.kernel, R"(const double v\d+ = fabs\(v\d+\);)");
  EXPECT_MATCHES(r.kernel, R"(const double v\d+ = sqrt\(v\d+\);)");
  EXPECT_MATCHES(r.kernel, R"(const double v\d+ = pow\(v\d+, v\d+\);)");
  EXPECT_HAS(r.kernel, "for (int32_t i = 300 + first; i < 301; i += stride) {");
}

// A hand-written fusion far deeper than smelt-fuse makes (it caps kernels at 256 ops): the walk
// keeps its own stack, so 20,000 chained ops render where recursion overflowed the thread's
// stack from about 14,000 (issue 21).
TEST(CudaRender, ChainOf20000OpsRendersWithoutRecursion) {
  const int n = 20000;
  const std::string t = "tensor<4x33xf32>";
  std::string text = "func.func @main(%x: " + t + ") -> " + t + " {\n  %r = smelt.fusion loop (%x) : (" +
                     t + ") -> " + t + " {\n  ^bb0(%a: " + t + "):\n";
  std::string last = "%a";
  for (int i = 0; i < n; ++i) {
    std::string value = "%v" + std::to_string(i);
    text += "    " + value + (i % 2 ? " = smelt.tanh " + last : " = smelt.add " + last + ", %a") +
            " : " + t + "\n";
    last = value;
  }
  text += "    smelt.yield " + last + " : " + t + "\n  }\n  return %r : " + t + "\n}\n";
  ParsedModule parsed = parseModule(text);
  ASSERT_TRUE(parsed.main);
  std::string source = render(parsed);
  // Every tanh once per vector lane (4 floats; 132 elements leave no scalar tail).
  EXPECT_EQ(count(source, "tanhf("), size_t(4 * n / 2));
}

} // namespace
} // namespace smelt::cuda_test
