// AOT artifacts: a round trip keeps every field; an artifact runs bit-identically on the
// CpuExecutor, its CPU code (a shared library built with the tests) included; the writer
// replaces files atomically and refuses what the reader would reject. Damaged files:
// ArtifactDamageTest.cpp.
#include "ArtifactEdit.h"
#include "ArtifactSamples.h"
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
    EXPECT_EQ(std::tie(g.op, g.operands, g.results, g.location, g.device, g.frees),
              std::tie(w.op, w.operands, w.results, w.location, w.device, w.frees))
        << "step " << i;
    EXPECT_EQ(g.params.index(), w.params.index()) << "step " << i;
    EXPECT_EQ(paramsBits(g), paramsBits(w)) << "step " << i;
  }
  ASSERT_EQ(got.segments.size(), want.segments.size());
  for (size_t i = 0; i < want.segments.size(); ++i) {
    const Segment &g = got.segments[i], &w = want.segments[i];
    EXPECT_EQ(std::tie(g.device, g.begin, g.end, g.reads, g.writes),
              std::tie(w.device, w.begin, w.end, w.reads, w.writes))
        << "segment " << i;
  }
  EXPECT_EQ(got.peakBytes, want.peakBytes);
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
/// five dtypes: s = slice(concat(x @ w^T, a copy of it)), its argmax, x @ w^T's rows added at
/// the argmax (scatter_add) and pads of the constants; also returns an input and a constant.
Executable plainProgram() {
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
  BufferId r = step("copy", {m}, {DType::f32, {4, 5}});
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
  EXPECT_FALSE(planOf(*bytes)->cuda);
  EXPECT_FALSE(planOf(*bytes)->cpu);
  Expected<LoadedArtifact> loaded = decodeArtifact(*bytes, "min.smelt");
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  expectSameExecutable(loaded->executable, exe);
  EXPECT_TRUE(loaded->extras.cpuObject.empty());
}

// Kept bytes are not copied: decoded from bytes an owner keeps, every constant is a view of
// them and keeps them alive; decoded from the caller's vector, each is a copy.
TEST(Artifact, ConstantsAreViewsOfKeptBytesAndCopiesOfTheCallers) {
  Executable exe = plainProgram();
  ASSERT_FALSE(exe.constants.empty());
  Expected<Bytes> bytes = encodeArtifact(exe, {{}, {}, "cpu", ""});
  ASSERT_TRUE(bytes.ok()) << bytes.message();
  auto kept = std::make_shared<Bytes>(*bytes);
  const uint8_t *begin = kept->data(), *end = kept->data() + kept->size();
  Expected<LoadedArtifact> viewed = decodeArtifact(kept, *kept, "kept.smelt");
  Expected<LoadedArtifact> copied = decodeArtifact(*bytes, "copied.smelt");
  ASSERT_TRUE(viewed.ok() && copied.ok()) << viewed.message() << copied.message();
  kept.reset(); // the constants hold the bytes now
  for (size_t i = 0; i < exe.constants.size(); ++i) {
    const SharedBytes &view = viewed->executable.constants[i].bytes;
    const SharedBytes &copy = copied->executable.constants[i].bytes;
    EXPECT_TRUE(view.data() >= begin && view.end() <= end) << "constant " << i;
    EXPECT_FALSE(copy.data() >= bytes->data() && copy.data() < bytes->data() + bytes->size())
        << "constant " << i;
  }
  expectSameExecutable(viewed->executable, exe);
  expectSameExecutable(copied->executable, exe);
}

// A verified copy (the JIT cache checked its digest of the encoder's output) skips the data
// part's CRC, which that digest covered, and nothing else: a damaged constant byte is what the
// digest would have caught, while the header and plan are still checked.
TEST(Artifact, AVerifiedCopySkipsOnlyTheDataCrc) {
  Executable exe = plainProgram();
  Expected<Bytes> bytes = encodeArtifact(exe, {{}, {}, "cpu", ""});
  ASSERT_TRUE(bytes.ok()) << bytes.message();
  auto decode = [](Bytes damaged, bool verified) {
    auto kept = std::make_shared<const Bytes>(std::move(damaged));
    return decodeArtifact(kept, *kept, "bad.smelt", verified);
  };
  Bytes data = *bytes, plan = *bytes;
  data.back() ^= 0x40; // the last constant's last byte
  plan[64 + 16] ^= 0x40;
  Expected<LoadedArtifact> checked = decode(data, false);
  ASSERT_FALSE(checked.ok());
  EXPECT_NE(checked.message().find("the data is corrupt"), std::string::npos) << checked.message();
  EXPECT_TRUE(decode(data, true).ok());
  for (bool verified : {false, true}) {
    Expected<LoadedArtifact> loaded = decode(plan, verified);
    ASSERT_FALSE(loaded.ok());
    EXPECT_NE(loaded.message().find("the plan is corrupt"), std::string::npos) << loaded.message();
  }
}

TEST(Artifact, RunsBitIdenticallyOnTheCpuExecutor) {
  TempDir dir;
  Executable exe = plainProgram();
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
  Executable exe = plainProgram();
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
                         const std::string &what) {
    std::string message = writeError(bad, badExtras);
    EXPECT_EQ(message.rfind("the artifact being written: plan: " + what, 0), 0u) << message;
  };
  Executable bad = exe;
  bad.inputs[1] = 25;
  expectError(bad, extras,
              "input #1: buffer id 25 is out of range (the plan "
              "has 25 buffers)");
  bad = exe;
  bad.steps[1].results[1] = -1;
  expectError(bad, extras, "step #1 ('fusion') result #1: buffer id -1");
  bad = exe;
  std::vector<uint8_t> shorter(bad.constants[3].bytes.begin(), bad.constants[3].bytes.end());
  shorter.pop_back();
  bad.constants[3].bytes = std::move(shorter);
  expectError(bad, extras, "constant #3 (b5, ");
  bad = exe;
  bad.steps[2].params = KernelParams{2};
  expectError(bad, extras, "step #2 ('fusion') runs kernel #2, but the plan has 2 kernels");
  bad = exe;
  bad.buffers[4].type.shape = {int64_t(1) << 40, int64_t(1) << 40};
  expectError(bad, extras, "buffer b4 has shape [1099511627776, 1099511627776]");
  bad = exe;
  bad.steps[3].params = NoParams{};
  EXPECT_EQ(writeError(bad, extras), "cannot encode the artifact: step #3 ('matmul') has "
                                     "parameters of another op");
  bad = exe;
  bad.kernels[0].units = -3;
  expectError(bad, extras, "kernel #0 ('main_fusion0') has a negative count");
  ArtifactExtras badExtras = extras;
  badExtras.cpuSymbols.pop_back();
  expectError(exe, badExtras, "1 CPU symbols for 2 kernels");
  badExtras = extras;
  badExtras.target = "tpu";
  expectError(exe, badExtras, "target 'tpu' is neither");
  badExtras.target = "cuda:sm_80";
  expectError(exe, badExtras, "the CUDA arch 'sm_90' differs from the target 'cuda:sm_80'");
}

} // namespace
} // namespace smelt::rt::test
