// AOT artifacts: a round trip keeps every field; an artifact runs bit-identically on the
// CpuExecutor, its CPU code (a shared library built with the tests) included; and truncated,
// corrupt, foreign or newer files, and counts that claim huge sizes, are rejected with a message
// naming the file, the part and the byte, never a crash.
#include "ArtifactEdit.h"
#include "RuntimeTestUtil.h"

#include "runtime/Artifact.h"
#include "runtime/CpuObject.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

namespace smelt::rt::test {
namespace {

using Ints = std::vector<int64_t>;
using Bytes = std::vector<uint8_t>;
namespace fs = std::filesystem;

Bytes readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Bytes randomBytes(size_t n) {
  Bytes bytes(n);
  for (uint8_t &b : bytes)
    b = uint8_t(rng()());
  return bytes;
}

Bytes bytesOf(const HostTensor &t) {
  const uint8_t *p = static_cast<const uint8_t *>(t.raw());
  return Bytes(p, p + t.byteSize());
}

Constant randomConstant(const Executable &exe, BufferId id) {
  return {id, bytesOf(randomTensor(exe.buffers[id].type.dtype, exe.buffers[id].type.shape))};
}

/// A step's parameters as text, floats by their bits, so NaN and -0.0 compare exactly.
std::string paramsBits(const Step &step) {
  std::string text;
  std::visit(
      [&](auto params) {
        params.fields([&](const char *name, const auto &v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, double>)
            text += fmt::format("{}=f64:{:016x} ", name, std::bit_cast<uint64_t>(v));
          else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
            text += fmt::format("{}=[{}] ", name, fmt::join(v, ","));
          else
            text += fmt::format("{}={} ", name, int64_t(v));
        });
      },
      step.params);
  return text;
}

// ---------------------------------------------------------------------------------------------
// Executables
// ---------------------------------------------------------------------------------------------

/// The types of buffers `ids`: what a kernel reading or writing them was compiled for.
std::vector<TensorType> typesOf(const Executable &exe, std::vector<BufferId> ids) {
  std::vector<TensorType> types;
  for (BufferId id : ids)
    types.push_back(exe.buffers[size_t(id)].type);
  return types;
}

/// Data to round-trip, not a program: buffers of every dtype and rank 0..3 (one with a zero
/// dimension), constants of every dtype, steps with every attribute kind at its edges,
/// multi-result fusion steps and their kernels, and CUDA code with random CUBIN bytes.
Executable everything() {
  Executable exe;
  exe.name = fmt::format("everything_{}", rng()() % 1000);
  const DType dtypes[] = {DType::f32, DType::f16, DType::bf16, DType::f64,
                          DType::i32, DType::i64, DType::i1};
  for (int i = 0; i < 25; ++i) {
    Ints shape(rng()() % 4);
    for (int64_t &d : shape)
      d = int64_t(1 + rng()() % 5);
    if (i == 13)
      shape = {3, 0, 2};
    exe.buffers.push_back({{dtypes[i % 7], shape}, fmt::format("%{} at m.mlir:{}:3", i, i + 1)});
  }
  exe.inputs = {0, 1};
  for (BufferId id = 2; id <= 8; ++id) // one constant of each dtype
    exe.constants.push_back(randomConstant(exe, id));
  exe.kernels = {{"main_fusion0", "loop", 37, typesOf(exe, {9, 2}), typesOf(exe, {10, 11}),
                  "broadcast_in_dim+add+mul", 2, 256, 4},
                 {"main_fusion1", "reduction", 5, typesOf(exe, {10}), typesOf(exe, {12, 13, 3}),
                  "exp+reduce", 2, 128, 5}};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  auto step = [&](StepOp op, StepParams params, std::vector<BufferId> operands,
                  std::vector<BufferId> results, std::string location) {
    Step s;
    s.op = op;
    s.params = std::move(params);
    s.operands = std::move(operands);
    s.results = std::move(results);
    s.location = std::move(location);
    exe.steps.push_back(std::move(s));
  };
  // Every parameter kind at its edges: flags, integers, floats (NaN, -0.0, -inf, a draw),
  // empty and extreme integer lists, an enum.
  step(StepOp::Pad, PadParams{{}, {-1, 0, kMax}, nan}, {0}, {9}, "m.mlir:20:5");
  step(StepOp::Fusion, KernelParams{0}, {9, 2}, {10, 11}, "m.mlir:21:5");
  step(StepOp::Fusion, KernelParams{1}, {10}, {12, 13, 3}, "");
  step(StepOp::Matmul, MatmulParams{true, false, {true, Activation::logistic}}, {0, 1, 5}, {14},
       "m.mlir:22:5");
  step(StepOp::RngNormal, NormalParams{kMin, -0.0, -std::numeric_limits<double>::infinity()}, {},
       {15}, "m.mlir:23:5");
  step(StepOp::RngUniform, UniformParams{kMax, draw(-1e6, 1e6), 1e300}, {}, {16}, "");
  step(StepOp::AllReduce, AllReduceParams{ReduceKind::mean, kMax}, {15}, {17}, "m.mlir:24:5");
  step(StepOp::Slice, SliceParams{{kMin}, {0}, {1, 2, 3, 4}}, {16}, {18}, "");
  step(StepOp::Copy, NoParams{}, {18}, {19}, "m.mlir:25:5");
  step(StepOp::ReplicaId, NoParams{}, {}, {20}, "");
  step(StepOp::AvgPool2DBackward, PoolParams{{1, 2}, {3, 4}, {5, 6, 7, 8}}, {9}, {21}, "");
  step(StepOp::Conv2DBackwardFilter, ConvParams{{1, 1}, {0, 0, 0, 0}, {2, 2}}, {0, 1}, {22}, "");
  step(StepOp::Conv2D, ConvParams{{2, 1}, {1, 0, 0, 1}, {1, 3}, {false, Activation::relu}}, {0, 1},
       {24}, "m.mlir:26:5");
  step(StepOp::Concat, AxisParams{kMin}, {0, 1}, {23}, "");
  exe.outputs = {12, 0, 4, 12};
  // A result that is an argument and one returned twice still have names of their own.
  exe.inputNames = {"x", "arg1"};
  exe.outputNames = {"logits", "same_as_x", "result2", "logits_again"};
  Bytes cubin = randomBytes(777);
  exe.cuda = std::make_shared<CudaCode>(
      CudaCode{"sm_90", "extern \"C\" __global__ void main_fusion0(float **args) {}",
               ".version 8.8\n.target sm_90\n", cubin});
  return exe;
}

ArtifactExtras extrasFor(const Executable &exe, const std::string &target) {
  ArtifactExtras extras;
  extras.cpuObject = randomBytes(300);
  for (const FusedKernel &k : exe.kernels)
    extras.cpuSymbols.push_back(k.name);
  extras.target = target;
  extras.producer = "ArtifactTest";
  return extras;
}

void expectSameExecutable(const Executable &got, const Executable &want) {
  EXPECT_EQ(got.name, want.name);
  ASSERT_EQ(got.buffers.size(), want.buffers.size());
  for (size_t i = 0; i < want.buffers.size(); ++i) {
    EXPECT_EQ(got.buffers[i].type, want.buffers[i].type) << "buffer " << i;
    EXPECT_EQ(got.buffers[i].name, want.buffers[i].name) << "buffer " << i;
  }
  EXPECT_EQ(got.inputs, want.inputs);
  EXPECT_EQ(got.outputs, want.outputs);
  EXPECT_EQ(got.inputNames, want.inputNames);
  EXPECT_EQ(got.outputNames, want.outputNames);
  ASSERT_EQ(got.constants.size(), want.constants.size());
  for (size_t i = 0; i < want.constants.size(); ++i) {
    EXPECT_EQ(got.constants[i].buffer, want.constants[i].buffer) << "constant " << i;
    EXPECT_EQ(got.constants[i].bytes, want.constants[i].bytes) << "constant " << i;
  }
  ASSERT_EQ(got.kernels.size(), want.kernels.size());
  for (size_t i = 0; i < want.kernels.size(); ++i) {
    const FusedKernel &g = got.kernels[i], &w = want.kernels[i];
    EXPECT_EQ(std::tie(g.name, g.kind, g.units, g.inputs, g.results, g.ops, g.computeOps,
                       g.cudaBlock, g.cudaGrid),
              std::tie(w.name, w.kind, w.units, w.inputs, w.results, w.ops, w.computeOps,
                       w.cudaBlock, w.cudaGrid))
        << "kernel " << i;
  }
  ASSERT_EQ(got.steps.size(), want.steps.size());
  for (size_t i = 0; i < want.steps.size(); ++i) {
    const Step &g = got.steps[i], &w = want.steps[i];
    EXPECT_EQ(std::tie(g.op, g.operands, g.results, g.location, g.device),
              std::tie(w.op, w.operands, w.results, w.location, w.device))
        << "step " << i;
    EXPECT_EQ(g.params.index(), w.params.index()) << "step " << i;
    EXPECT_EQ(paramsBits(g), paramsBits(w)) << "step " << i;
  }
  ASSERT_EQ(bool(got.cuda), bool(want.cuda));
  if (want.cuda) {
    EXPECT_EQ(got.cuda->arch, want.cuda->arch);
    EXPECT_EQ(got.cuda->source, want.cuda->source);
    EXPECT_EQ(got.cuda->ptx, want.cuda->ptx);
    EXPECT_EQ(got.cuda->cubin, want.cuda->cubin);
  }
  EXPECT_FALSE(got.cpu) << "CPU code is loaded by the caller, not by the reader";
}

/// A program of library calls the CpuExecutor runs, parameters of every kind and constants of
/// five dtypes: s = slice(concat(x @ w^T, uniform)), its argmax, x @ w^T's rows added at the
/// argmax (scatter_add) and pads of the constants; also returns an input and a constant.
Executable plainProgram(uint64_t seed) {
  Executable exe;
  exe.name = "plain";
  BufferId x = appendBuffer(exe, {DType::f32, {4, 8}}, "%x");
  BufferId w = appendBuffer(exe, {DType::f32, {5, 8}}, "%w");
  BufferId bias = appendBuffer(exe, {DType::f64, {5}}, "%bias");
  BufferId mask = appendBuffer(exe, {DType::i1, {4, 5}}, "%mask");
  BufferId k = appendBuffer(exe, {DType::i32, {4, 5}}, "%k");
  BufferId h = appendBuffer(exe, {DType::bf16, {4}}, "%h");
  exe.inputs = {x};
  for (BufferId id : {w, bias, mask, k, h})
    exe.constants.push_back(randomConstant(exe, id));
  auto step = [&](const char *op, std::vector<BufferId> operands, TensorType result,
                  Attrs attrs = {}) {
    return appendStep(exe, op, std::move(operands), result, attrs, "plain.mlir");
  };
  BufferId m = step("matmul", {x, w}, {DType::f32, {4, 5}}, {{"transpose_rhs", int64_t(1)}});
  BufferId r = step("rng_uniform", {}, {DType::f32, {4, 5}},
                    {{"seed", int64_t(seed >> 1)}, {"low", -1.0}, {"high", 1.0}});
  BufferId c = step("concat", {m, r}, {DType::f32, {8, 5}}, {{"axis", int64_t(0)}});
  BufferId s = step("slice", {c}, {DType::f32, {4, 3}},
                    {{"start_indices", Ints{1, 0}}, {"limit_indices", Ints{8, 5}},
                     {"strides", Ints{2, 2}}});
  BufferId a = step("argmax", {s}, {DType::i64, {4}}, {{"axis", int64_t(1)}});
  BufferId sa = step("scatter_add", {m, a}, {DType::f32, {3, 5}});
  BufferId b = step("slice", {bias}, {DType::f64, {4}},
                    {{"start_indices", Ints{1}}, {"limit_indices", Ints{5}}, {"strides", Ints{1}}});
  BufferId pb = step("pad", {b}, {DType::f64, {7}},
                     {{"low", Ints{1}}, {"high", Ints{2}}, {"value", 0.5}});
  BufferId pk = step("pad", {k}, {DType::i32, {5, 6}},
                     {{"low", Ints{0, 1}}, {"high", Ints{1, 0}}, {"value", -3.0}});
  BufferId ph = step("pad", {h}, {DType::bf16, {6}},
                     {{"low", Ints{2}}, {"high", Ints{0}}, {"value", 1.5}});
  BufferId mm = step("copy", {mask}, {DType::i1, {4, 5}});
  exe.outputs = {pb, s, a, x, w, pk, ph, mm, sa};
  return exe;
}

/// Runs `exe` on `inputs` through a fresh CpuExecutor; failures are test failures.
std::vector<HostTensor> runOn(const Executable &exe, const std::vector<HostTensor> &inputs) {
  Expected<CpuExecutor> exec = CpuExecutor::create(exe);
  EXPECT_TRUE(exec.ok()) << exec.message();
  std::vector<HostTensor> outputs;
  if (exec.ok()) {
    Status s = exec->run(inputs, outputs);
    EXPECT_TRUE(s.ok()) << s.message();
  }
  return outputs;
}

void expectBitIdentical(const std::vector<HostTensor> &got, const std::vector<HostTensor> &want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].type(), want[i].type()) << "output " << i;
    EXPECT_EQ(bytesOf(got[i]), bytesOf(want[i])) << "output " << i;
  }
}

/// The shared library of ArtifactTestKernels.cpp, as bytes.
Bytes testKernelLibrary() {
  Bytes bytes = readBytes(SMELT_TEST_KERNELS_PATH);
  EXPECT_FALSE(bytes.empty()) << "cannot read " << SMELT_TEST_KERNELS_PATH;
  return bytes;
}

/// a, b -> (a * b, (a + b)^2 + c) with both kernels in the test library (the first one runs
/// twice) and c a constant.
Executable fusedProgram(int64_t n) {
  Executable exe;
  exe.name = "fused";
  TensorType vec{DType::f32, {n}};
  for (const char *name : {"%a", "%b", "%c", "sum", "product", "square", "add", "times_c"})
    exe.buffers.push_back({vec, name});
  exe.inputs = {0, 1};
  exe.constants = {randomConstant(exe, 2)};
  exe.kernels = {{"smelt_test_add_mul", "loop", n, {vec, vec}, {vec, vec}, "add+mul", 2, 0, 0},
                 {"smelt_test_square", "loop", n, {vec}, {vec}, "mul", 1, 0, 0}};
  auto fusion = [&](int64_t kernel, std::vector<BufferId> operands, std::vector<BufferId> results,
                    std::string location) {
    Step step;
    step.op = StepOp::Fusion;
    step.params = KernelParams{kernel};
    step.operands = std::move(operands);
    step.results = std::move(results);
    step.location = std::move(location);
    exe.steps.push_back(std::move(step));
  };
  fusion(0, {0, 1}, {3, 4}, "f.mlir:1:1");
  fusion(1, {3}, {5}, "f.mlir:2:1");
  fusion(0, {5, 2}, {6, 7}, "f.mlir:3:1"); // the same kernel again: (a + b)^2 + c
  exe.outputs = {4, 6};
  return exe;
}

// ---------------------------------------------------------------------------------------------
// Round trips and runs
// ---------------------------------------------------------------------------------------------

TEST(Artifact, RoundTripKeepsEveryField) {
  TempDir dir;
  Executable exe = everything();
  ArtifactExtras extras = extrasFor(exe, "cuda:sm_90");
  std::string path = dir.file("model.smelt");
  ASSERT_TRUE(writeArtifact(path, exe, extras).ok());
  Expected<LoadedArtifact> loaded = readArtifact(path);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  expectSameExecutable(loaded->executable, exe);
  EXPECT_EQ(loaded->extras.cpuObject, extras.cpuObject);
  EXPECT_EQ(loaded->extras.cpuSymbols, extras.cpuSymbols);
  EXPECT_EQ(loaded->extras.target, "cuda:sm_90");
  EXPECT_EQ(loaded->extras.producer, "ArtifactTest");
  // The encoding is a function of the contents: reading and writing again gives the same bytes.
  Expected<Bytes> again = encodeArtifact(loaded->executable, loaded->extras);
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(*again, readBytes(path));
  if (const char *seeds = std::getenv("SMELT_ARTIFACT_SEED_DIR")) { // a corpus for tests/fuzz
    EXPECT_TRUE(writeArtifact(std::string(seeds) + "/everything.smelt", exe, extras).ok());
  }
}

TEST(Artifact, MinimalArtifactHasNoCodeSections) {
  Executable exe = oneStep("copy", {{DType::f32, {3}}}, {DType::f32, {3}});
  Expected<Bytes> bytes = encodeArtifact(exe, {{}, {}, "cpu", ""});
  ASSERT_TRUE(bytes.ok()) << bytes.message();
  EXPECT_FALSE(findSection(*bytes, kCuda));
  EXPECT_FALSE(findSection(*bytes, kCpu));
  Expected<LoadedArtifact> loaded = decodeArtifact(*bytes, "min.smelt");
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  expectSameExecutable(loaded->executable, exe);
  EXPECT_TRUE(loaded->extras.cpuObject.empty());
}

TEST(Artifact, RunsBitIdenticallyOnTheCpuExecutor) {
  TempDir dir;
  Executable exe = plainProgram(rng()());
  std::string path = dir.file("plain.smelt");
  ASSERT_TRUE(writeArtifact(path, exe, {{}, {}, "cpu", "ArtifactTest"}).ok());
  Expected<LoadedArtifact> loaded = readArtifact(path);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  for (int run = 0; run < 3; ++run) {
    std::vector<HostTensor> inputs = {randomTensor(DType::f32, {4, 8})};
    std::vector<HostTensor> want = runOn(exe, inputs), got = runOn(loaded->executable, inputs);
    expectBitIdentical(got, want);
    if (const char *seeds = std::getenv("SMELT_ARTIFACT_SEED_DIR"); seeds && run == 0) {
      EXPECT_TRUE(
          writeArtifact(std::string(seeds) + "/plain.smelt", exe, {{}, {}, "cpu", ""}).ok());
    }
  }
}

TEST(Artifact, FusedKernelsRunFromTheArtifactsCpuCode) {
  // Large enough that the executor splits the kernels over its threads.
  int64_t n = 70000;
  Executable exe = fusedProgram(n);
  ArtifactExtras extras{
      testKernelLibrary(), {"smelt_test_add_mul", "smelt_test_square"}, "cpu", "ArtifactTest"};
  TempDir dir;
  std::string path = dir.file("fused.smelt");
  ASSERT_TRUE(writeArtifact(path, exe, extras).ok());
  Expected<LoadedArtifact> loaded = readArtifact(path);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  Expected<std::shared_ptr<const CpuCode>> code =
      loadCpuObject(loaded->extras.cpuObject, loaded->extras.cpuSymbols);
  ASSERT_TRUE(code.ok()) << code.message();
  loaded->executable.cpu = *code;
  exe.cpu = *loadCpuObject(extras.cpuObject, extras.cpuSymbols);

  std::vector<HostTensor> inputs = {randomTensor(DType::f32, {n}), randomTensor(DType::f32, {n})};
  std::vector<HostTensor> got = runOn(loaded->executable, inputs);
  expectBitIdentical(got, runOn(exe, inputs));
  ASSERT_EQ(got.size(), 2u);
  const float *a = inputs[0].data<float>(), *b = inputs[1].data<float>();
  const float *c = reinterpret_cast<const float *>(exe.constants[0].bytes.data());
  for (int64_t i = 0; i < n; ++i) {
    float sum = a[i] + b[i];
    ASSERT_EQ(std::bit_cast<uint32_t>(got[0].data<float>()[i]),
              std::bit_cast<uint32_t>(a[i] * b[i]))
        << i;
    ASSERT_EQ(std::bit_cast<uint32_t>(got[1].data<float>()[i]),
              std::bit_cast<uint32_t>(sum * sum + c[i]))
        << i;
  }
}

TEST(CpuObject, LoadsTwiceIndependentlyAndNamesMissingSymbols) {
  Bytes library = testKernelLibrary();
  Expected<std::shared_ptr<const CpuCode>> first = loadCpuObject(library, {"smelt_test_square"});
  Expected<std::shared_ptr<const CpuCode>> second =
      loadCpuObject(library, {"smelt_test_add_mul", "smelt_test_square"});
  ASSERT_TRUE(first.ok()) << first.message();
  ASSERT_TRUE(second.ok()) << second.message();
  ASSERT_EQ((*second)->entries.size(), 2u);
  float x[3] = {1.5f, -2, 3}, y[3] = {};
  void *args[2] = {x, y};
  (*first)->entries[0](args, 0, 3);
  EXPECT_EQ(std::vector<float>(y, y + 3), (std::vector<float>{2.25f, 4, 9}));
  first = Status::error("released"); // unloads the first copy; the second must still run
  std::fill(y, y + 3, 0.0f);
  (*second)->entries[1](args, 1, 3);
  EXPECT_EQ(std::vector<float>(y, y + 3), (std::vector<float>{0, 4, 9}));

  Expected<std::shared_ptr<const CpuCode>> missing =
      loadCpuObject(library, {"smelt_test_square", "smelt_test_cube"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("no symbol 'smelt_test_cube' (kernel #1)"), std::string::npos)
      << missing.message();
}

TEST(CpuObject, RejectsBytesThatAreNoSharedLibrary) {
  // A library loaded and released first: its descriptor number comes back for the next load,
  // and the library itself stays resident (the test library is linked -z nodelete), so a
  // loader that reused its path would find the old library instead of rejecting the new bytes.
  ASSERT_TRUE(loadCpuObject(testKernelLibrary(), {"smelt_test_square"}).ok());
  Expected<std::shared_ptr<const CpuCode>> garbage = loadCpuObject(randomBytes(4096), {"f"});
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.message().find("cannot load the CPU code (4096 bytes)"), std::string::npos)
      << garbage.message();
  Expected<std::shared_ptr<const CpuCode>> empty = loadCpuObject({}, {});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.message().find("empty"), std::string::npos) << empty.message();
}

TEST(Artifact, AKernelWithoutACpuSymbolLoadsButDoesNotRunOnTheCpu) {
  // A kernel only a GPU runs has an empty symbol: no CPU entry, and the CPU executor says so.
  Executable exe = fusedProgram(64);
  ArtifactExtras extras{testKernelLibrary(), {"smelt_test_add_mul", ""}, "cpu", "ArtifactTest"};
  Expected<Bytes> bytes = encodeArtifact(exe, extras);
  ASSERT_TRUE(bytes.ok()) << bytes.message();
  Expected<LoadedArtifact> loaded = decodeArtifact(*bytes, "gpu-only.smelt");
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_EQ(loaded->extras.cpuSymbols, (std::vector<std::string>{"smelt_test_add_mul", ""}));
  Expected<std::shared_ptr<const CpuCode>> code =
      loadCpuObject(loaded->extras.cpuObject, loaded->extras.cpuSymbols);
  ASSERT_TRUE(code.ok()) << code.message();
  EXPECT_NE((*code)->entries[0], nullptr);
  EXPECT_EQ((*code)->entries[1], nullptr);
  loaded->executable.cpu = *code;
  Expected<CpuExecutor> exec = CpuExecutor::create(loaded->executable);
  ASSERT_FALSE(exec.ok());
  EXPECT_NE(exec.message().find("kernel 1 ('smelt_test_square') has no entry in the CPU code"),
            std::string::npos)
      << exec.message();
}

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

TEST(Artifact, WriteReplacesAtomicallyAndFileErrorsNameThePath) {
  TempDir dir;
  std::string path = dir.file("model.smelt");
  Executable exe = plainProgram(1);
  ASSERT_TRUE(writeArtifact(path, oneStep("copy", {{DType::f32, {3}}}, {DType::f32, {3}}),
                            {{}, {}, "cpu", "old"})
                  .ok());
  ASSERT_TRUE(writeArtifact(path, exe, {{}, {}, "cpu", "new"}).ok());
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1)
      << "the temporary file is left behind";
  Expected<LoadedArtifact> loaded = readArtifact(path);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_EQ(loaded->extras.producer, "new");

  Status noDir = writeArtifact(dir.file("missing/model.smelt"), exe, {{}, {}, "cpu", ""});
  ASSERT_FALSE(noDir.ok());
  EXPECT_NE(noDir.message().find(dir.file("missing/model.smelt")), std::string::npos)
      << noDir.message();
  Expected<LoadedArtifact> missing = readArtifact(dir.file("absent.smelt"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.message(),
            dir.file("absent.smelt") + ": cannot open: No such file or directory");
  Expected<LoadedArtifact> directory = readArtifact(dir.path());
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.message(), dir.path() + ": is a directory, not a regular file");
}

/// The writer's error for `exe`, which it must refuse to write.
std::string writeError(const Executable &exe, const ArtifactExtras &extras) {
  Expected<Bytes> bytes = encodeArtifact(exe, extras);
  EXPECT_FALSE(bytes.ok()) << "an invalid executable was encoded";
  return bytes.ok() ? "" : bytes.message();
}

TEST(Artifact, WriterRefusesWhatTheReaderWouldReject) {
  Executable exe = everything();
  ArtifactExtras extras = extrasFor(exe, "cpu");
  auto expectError = [&](const Executable &bad, const ArtifactExtras &badExtras,
                         const std::string &part, const std::string &what) {
    std::string message = writeError(bad, badExtras);
    EXPECT_EQ(message.rfind("the artifact being written: " + part + ", byte ", 0), 0u) << message;
    EXPECT_NE(message.find(what), std::string::npos) << message;
  };
  Executable bad = exe;
  bad.inputs[1] = 25;
  expectError(bad, extras, "plan section",
              "input #1: buffer id 25 is out of range (the plan "
              "has 25 buffers)");
  bad = exe;
  bad.steps[1].results[1] = -1;
  expectError(bad, extras, "plan section", "step #1 ('fusion') result #1: buffer id -1");
  bad = exe;
  bad.constants[3].bytes.pop_back();
  expectError(bad, extras, "plan section", "constant #3 (b5, ");
  bad = exe;
  bad.steps[2].params = KernelParams{2};
  expectError(bad, extras, "plan section",
              "step #2 ('fusion') runs kernel #2, but the plan has 2 kernels");
  bad = exe;
  bad.buffers[4].type.shape = {int64_t(1) << 40, int64_t(1) << 40};
  expectError(bad, extras, "plan section", "buffer b4 has shape [1099511627776, 1099511627776]");
  bad = exe;
  bad.steps[3].params = NoParams{};
  EXPECT_EQ(writeError(bad, extras), "cannot encode the artifact: step #3 ('matmul') has "
                                     "parameters of another op");
  bad = exe;
  bad.kernels[0].units = -3;
  expectError(bad, extras, "plan section", "kernel #0 ('main_fusion0') has a negative count");
  ArtifactExtras badExtras = extras;
  badExtras.cpuSymbols.pop_back();
  expectError(exe, badExtras, "cpu section", "1 CPU symbols for 2 kernels");
  badExtras = extras;
  badExtras.target = "tpu";
  expectError(exe, badExtras, "meta section", "target 'tpu' is neither");
  badExtras.target = "cuda:sm_80";
  expectError(exe, badExtras, "cuda section", "arch 'sm_90' differs from the target 'cuda:sm_80'");
}

// ---------------------------------------------------------------------------------------------
// Reading damaged files
// ---------------------------------------------------------------------------------------------

/// A valid artifact with every section, as bytes.
Bytes validArtifact() {
  Executable exe = everything();
  Expected<Bytes> bytes = encodeArtifact(exe, extrasFor(exe, "cuda:sm_90"));
  EXPECT_TRUE(bytes.ok()) << bytes.message();
  return bytes.ok() ? *bytes : Bytes();
}

/// The reader's error for `bytes`, which it must reject, read as file "bad.smelt".
std::string readError(const Bytes &bytes) {
  Expected<LoadedArtifact> loaded = decodeArtifact(bytes, "bad.smelt");
  EXPECT_FALSE(loaded.ok()) << "a damaged artifact was accepted";
  return loaded.ok() ? "" : loaded.message();
}

bool startsWith(const std::string &s, const std::string &prefix) { return s.rfind(prefix, 0) == 0; }

TEST(Artifact, EveryTruncationIsRejected) {
  Bytes bytes = validArtifact();
  for (size_t size = 0; size < bytes.size(); ++size) {
    std::string message = readError(Bytes(bytes.begin(), bytes.begin() + std::ptrdiff_t(size)));
    ASSERT_TRUE(startsWith(message, fmt::format("bad.smelt: header, byte {}: truncated: the "
                                                "file has {} bytes",
                                                size, size)))
        << message;
  }
}

TEST(Artifact, EveryFlippedByteIsRejectedNamingItsPart) {
  Bytes bytes = validArtifact();
  auto sections = sectionsOf(bytes);
  ASSERT_EQ(sections.size(), 5u);
  size_t tableEnd = kHeaderBytes + kEntryBytes * sections.size();
  // The part a flip of byte i is reported in: header, a section (at its first byte), padding.
  auto expectedPrefix = [&](size_t i) {
    if (i < tableEnd)
      return std::string("bad.smelt: header, byte ");
    for (const auto &[kind, s] : sections)
      if (i >= s.offset && i < s.offset + s.size) {
        const char *names[] = {"", "meta", "plan", "constants", "cuda", "cpu"};
        return fmt::format("bad.smelt: {} section, byte {}: ", names[kind], s.offset);
      }
    return fmt::format("bad.smelt: padding, byte {}: ", i);
  };
  for (size_t i = 0; i < bytes.size(); ++i) {
    Bytes damaged = bytes;
    damaged[i] ^= uint8_t(1 + rng()() % 255);
    std::string message = readError(damaged);
    ASSERT_TRUE(startsWith(message, expectedPrefix(i))) << "byte " << i << ": " << message;
  }
}

TEST(Artifact, ForeignFilesAndOtherVersionsSaySo) {
  Bytes bytes = validArtifact();
  Bytes elf = bytes;
  std::memcpy(elf.data(),
              "\x7f"
              "ELF\x02\x01\x01\x00",
              8);
  EXPECT_EQ(readError(elf), "bad.smelt: header, byte 0: not a Smelt artifact: it starts with "
                            "0x7f454c4602010100 instead of the magic \"SMELTAOT\"");
  EXPECT_TRUE(startsWith(readError(Bytes{'{', '}'}), "bad.smelt: header, byte 0: not a Smelt"));

  Bytes newer = bytes;
  storeLE(newer, 8, kArtifactVersion + 1, 4);
  reseal(newer);
  EXPECT_EQ(readError(newer), fmt::format("bad.smelt: header, byte 8: the file has artifact "
                                          "format version {}; this runtime reads version {} "
                                          "(compile the model again with a matching smelt)",
                                          kArtifactVersion + 1, kArtifactVersion));
  // A file of the previous format (no scatter_add step) is told apart before anything else in
  // it is read.
  Bytes older = bytes;
  storeLE(older, 8, 6, 4);
  reseal(older);
  EXPECT_EQ(readError(older), "bad.smelt: header, byte 8: the file has artifact format version 6; "
                              "this runtime reads version 7 (compile the model again with a "
                              "matching smelt)");
  Bytes flagged = bytes;
  storeLE(flagged, 12, 0x4, 4);
  reseal(flagged);
  EXPECT_TRUE(startsWith(readError(flagged), "bad.smelt: header, byte 12: flags 0x4"));
  Bytes longer = bytes;
  longer.push_back(0);
  EXPECT_TRUE(startsWith(readError(longer), "bad.smelt: header, byte 24: the file has"));
}

/// Overwrites `width` bytes at `at` with `value`, fixes the checksums and returns the error.
std::string errorAfterPatch(Bytes bytes, size_t at, uint64_t value, int width) {
  storeLE(bytes, at, value, width);
  reseal(bytes);
  return readError(bytes);
}

TEST(Artifact, CountsClaimingHugeSizesFailBeforeAllocating) {
  Executable exe = everything();
  ArtifactExtras extras = extrasFor(exe, "cuda:sm_90");
  Expected<Bytes> encoded = encodeArtifact(exe, extras);
  ASSERT_TRUE(encoded.ok()) << encoded.message();
  const Bytes &bytes = *encoded;
  size_t plan = findSection(bytes, kPlan)->offset, cuda = findSection(bytes, kCuda)->offset;
  size_t cpu = findSection(bytes, kCpu)->offset;
  size_t buffers = plan + 4 + exe.name.size(); // after the name
  struct Case {
    size_t at;
    uint64_t value;
    int width;
    std::string part, what;
  };
  size_t cubin = cuda + 12 + exe.cuda->arch.size() + exe.cuda->source.size() + exe.cuda->ptx.size();
  size_t object = cpu + 4 + 4 * extras.cpuSymbols.size();
  for (const std::string &s : extras.cpuSymbols)
    object += s.size();
  const uint64_t huge = uint64_t(1) << 63;
  for (const Case &c : std::vector<Case>{
           {plan, 0xffffffff, 4, "plan section", "the executable's name needs 4294967295 bytes"},
           {buffers, 0xffffffff, 4, "plan section", "the buffer list claims 4294967295 entries"},
           {buffers + 5, 0xfffffff0, 4, "plan section", "a shape claims 4294967280 entries"},
           {cubin, huge, 8, "cuda section", "the CUBIN claims 9223372036854775808 bytes"},
           {object, huge, 8, "cpu section", "the CPU shared library claims"},
           {cpu, 0x7fffffff, 4, "cpu section", "the CPU symbol list claims 2147483647 entries"},
           // A section table entry whose size runs past the end of the file.
           {kHeaderBytes + kEntryBytes * 2 + 16, huge, 8, "section table",
            "has 9223372036854775808 bytes"},
       }) {
    std::string message = errorAfterPatch(bytes, c.at, c.value, c.width);
    EXPECT_TRUE(startsWith(message, "bad.smelt: " + c.part + ", byte "))
        << "patch at " << c.at << ": " << message;
    EXPECT_NE(message.find(c.what), std::string::npos) << "patch at " << c.at << ": " << message;
  }
  // The dtype of buffer 0 and the error's byte: the one patched.
  EXPECT_EQ(errorAfterPatch(bytes, buffers + 4, 9, 1),
            fmt::format("bad.smelt: plan section, byte {}: buffer b0 has dtype code 9 (known: "
                        "0..6, f32 to i1)",
                        buffers + 4));
}

TEST(Artifact, UnknownStepOpsBadFlagsAndNonzeroPaddingAreRejected) {
  Executable exe =
      oneStep("matmul", {{DType::f32, {2, 3}}, {DType::f32, {3, 4}}}, {DType::f32, {2, 4}},
              {{"transpose_lhs", int64_t(1)}});
  exe.steps[0].location = "zz_probe";
  Expected<Bytes> encoded = encodeArtifact(exe, {{}, {}, "cpu", ""});
  ASSERT_TRUE(encoded.ok()) << encoded.message();
  // The step's op byte comes just before its location (a 4-byte length, then the text).
  std::string key = "zz_probe";
  auto found = std::search(encoded->begin(), encoded->end(), key.begin(), key.end());
  ASSERT_NE(found, encoded->end());
  size_t op = size_t(found - encoded->begin()) - 5;
  ASSERT_EQ((*encoded)[op], uint8_t(StepOp::Matmul));
  EXPECT_EQ(errorAfterPatch(*encoded, op, kNumStepOps, 1),
            fmt::format("bad.smelt: plan section, byte {}: step #0 has op #{}; this runtime "
                        "knows ops 0..{}",
                        op, kNumStepOps, kNumStepOps - 1));
  // transpose_lhs, a flag, is the first byte after the step's two buffer-id lists (1 and 2
  // ids of 4 bytes, each list after a 4-byte count).
  size_t flag = op + 5 + key.size() + 4 + std::string("cpu:0").size() + 4 + 8 + 4 + 4;
  ASSERT_EQ((*encoded)[flag], 1);
  EXPECT_EQ(errorAfterPatch(*encoded, flag, 2, 1),
            fmt::format("bad.smelt: plan section, byte {}: step #0 ('matmul'): parameter "
                        "'transpose_lhs' is 2, not within 0..1",
                        flag));
  // After transpose_rhs and bias, the activation: an enum of four values.
  size_t activation = flag + 3;
  ASSERT_EQ((*encoded)[activation], 0);
  EXPECT_EQ(errorAfterPatch(*encoded, activation, 4, 1),
            fmt::format("bad.smelt: plan section, byte {}: step #0 ('matmul'): parameter "
                        "'activation' is 4, not within 0..3",
                        activation));
  Bytes logistic = *encoded;
  storeLE(logistic, activation, uint64_t(Activation::logistic), 1);
  reseal(logistic);
  Expected<LoadedArtifact> read = decodeArtifact(logistic, "logistic.smelt");
  ASSERT_TRUE(read.ok()) << read.message();
  EXPECT_EQ(read->executable.steps[0].epilogue().activation, Activation::logistic);
  size_t padding = kHeaderBytes + kEntryBytes * sectionsOf(*encoded).size();
  ASSERT_EQ((*encoded)[padding], 0);
  EXPECT_TRUE(startsWith(errorAfterPatch(*encoded, padding, 1, 1),
                         fmt::format("bad.smelt: padding, byte {}: ", padding)));
}

TEST(Artifact, RandomEditsWithValidChecksumsLoadOrFailCleanly) {
  // The fuzzer's job in small: edits the checksums do not catch must still be caught or be
  // harmless. A success must be an artifact that encodes again.
  Bytes bytes = validArtifact();
  auto sections = sectionsOf(bytes);
  int accepted = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    Bytes damaged = bytes;
    const SectionSpan &s = sections[rng()() % sections.size()].second;
    for (int edits = 1 + int(rng()() % 3); edits > 0; --edits) {
      size_t at = s.offset + rng()() % s.size;
      damaged[at] = (rng()() & 1) ? uint8_t(rng()()) : uint8_t(damaged[at] ^ 0x80);
    }
    reseal(damaged);
    Expected<LoadedArtifact> loaded = decodeArtifact(damaged, "bad.smelt");
    if (!loaded.ok()) {
      ASSERT_TRUE(startsWith(loaded.message(), "bad.smelt: ")) << loaded.message();
      continue;
    }
    ++accepted;
    Expected<Bytes> again = encodeArtifact(loaded->executable, loaded->extras);
    ASSERT_TRUE(again.ok()) << again.message();
  }
  std::printf("random edits: %d of 3000 still formed a valid artifact\n", accepted);
}

} // namespace
} // namespace smelt::rt::test
