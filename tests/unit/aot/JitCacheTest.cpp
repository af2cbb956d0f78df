// JitCache: a second request is a memory hit, a new cache on the same directory a disk hit that
// gives bit-identical results and the same placement and locations; a changed shape is reported
// as such; the key names the compiler's build; caches writing the same key at once both succeed
// and leave a readable entry; a corrupt entry is reported and rebuilt; a refresh compiles again.
#include "codegen/JitCache.h"

#include "runtime/FileIO.h"

#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

namespace smelt::codegen {
namespace {

namespace fs = std::filesystem;

/// A model with a matmul and a fusion; `rows` changes the shape of x (and of everything after).
std::string model(int rows) {
  std::string r = std::to_string(rows);
  return "func.func @step(%x: tensor<" + r + "x8xf32>, %w: tensor<8x4xf32>) -> tensor<" + r +
         "xf32> {\n"
         "  %0 = smelt.matmul %x, %w : tensor<" + r + "x8xf32>, tensor<8x4xf32>\n"
         "  %1 = smelt.tanh %0 : tensor<" + r + "x4xf32>\n"
         "  %2 = smelt.reduce sum %1 axes = [1] : tensor<" + r + "x4xf32>\n"
         "  return %2 : tensor<" + r + "xf32>\n}\n";
}

struct Parsed {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  explicit Parsed(int rows) {
    loadDialects(context);
    module = mlir::parseSourceString<mlir::ModuleOp>(model(rows), &context);
  }
};

std::vector<rt::HostTensor> inputs(int rows) {
  std::vector<float> x(rows * 8), w(8 * 4);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 0.25f * float(i % 7) - 0.7f;
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = 0.125f * float(i % 5) - 0.3f;
  std::vector<rt::HostTensor> result;
  result.push_back(rt::HostTensor::fromVector<float>({rows, 8}, x));
  result.push_back(rt::HostTensor::fromVector<float>({8, 4}, w));
  return result;
}

/// Runs the cached function once and returns its output's bytes.
std::vector<uint8_t> runBytes(JitCache &cache, mlir::ModuleOp module, int rows) {
  JitFunction step(cache, module, "step");
  std::vector<rt::HostTensor> outputs;
  rt::Status s = step.call(inputs(rows), outputs);
  EXPECT_TRUE(s.ok()) << s.message();
  if (outputs.size() != 1)
    return {};
  auto *p = static_cast<const uint8_t *>(outputs[0].raw());
  return std::vector<uint8_t>(p, p + outputs[0].byteSize());
}

class JitCacheTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "smelt-jit-cache-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
  JitOptions options(llvm::raw_ostream *log = nullptr) {
    JitOptions o;
    o.cacheDir = dir;
    o.log = log;
    o.verbose = log != nullptr;
    return o;
  }
  std::vector<fs::path> files(const std::string &extension) {
    std::vector<fs::path> found;
    for (const auto &entry : fs::directory_iterator(dir))
      if (entry.path().extension() == extension)
        found.push_back(entry.path());
    return found;
  }
  std::string dir;
};

TEST_F(JitCacheTest, MissThenMemoryHitThenDiskHitWithIdenticalResults) {
  Parsed parsed(16);
  ASSERT_TRUE(parsed.module);
  JitCache cache(options());
  std::vector<uint8_t> cold = runBytes(cache, *parsed.module, 16);
  auto again = cache.get(*parsed.module, "step");
  ASSERT_TRUE(succeeded(again));
  EXPECT_EQ(cache.stats().misses, 1);
  EXPECT_EQ(cache.stats().memoryHits, 1);
  EXPECT_EQ(files(".smelt").size(), 1u);
  EXPECT_EQ(files(".key").size(), 1u);

  JitCache fresh(options());
  std::vector<uint8_t> warm = runBytes(fresh, *parsed.module, 16);
  EXPECT_EQ(fresh.stats().diskHits, 1);
  EXPECT_EQ(fresh.stats().misses, 0);
  EXPECT_EQ(cold, warm);
  EXPECT_FALSE(cold.empty());
}

TEST_F(JitCacheTest, DiskHitKeepsPlacementAndLocations) {
  Parsed parsed(16);
  JitCache cold(options()), warm(options());
  auto first = cold.get(*parsed.module, "step");
  auto second = warm.get(*parsed.module, "step");
  ASSERT_TRUE(succeeded(first) && succeeded(second));
  ASSERT_EQ(warm.stats().diskHits, 1);
  EXPECT_FALSE((*first)->placement.empty());
  EXPECT_EQ((*second)->placement, (*first)->placement);
  ASSERT_EQ((*second)->steps.size(), (*first)->steps.size());
  for (size_t i = 0; i < (*first)->steps.size(); ++i)
    EXPECT_EQ((*second)->steps[i].location, (*first)->steps[i].location) << "step " << i;
}

TEST_F(JitCacheTest, KeyNamesTheCompilerBuild) {
  Parsed parsed(16);
  mlir::FailureOr<JitKey> key = JitCache(options()).keyOf(*parsed.module, "step");
  ASSERT_TRUE(succeeded(key));
  // The GNU build ID of this test binary: 40 hex digits after "build ".
  size_t at = key->compiler.find(" build ");
  ASSERT_NE(at, std::string::npos) << key->compiler;
  std::string id = key->compiler.substr(at + 7, key->compiler.find(',', at) - at - 7);
  EXPECT_EQ(id.size(), 40u) << key->compiler;
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << key->compiler;
  EXPECT_NE(key->compiler.find("artifact format"), std::string::npos) << key->compiler;
}

TEST_F(JitCacheTest, RefreshCompilesAgainAndReplacesTheEntry) {
  Parsed parsed(16);
  {
    JitCache first(options());
    ASSERT_TRUE(succeeded(first.get(*parsed.module, "step")));
  }
  JitOptions refresh = options();
  refresh.refresh = true;
  JitCache cache(refresh);
  std::vector<uint8_t> again = runBytes(cache, *parsed.module, 16);
  ASSERT_TRUE(succeeded(cache.get(*parsed.module, "step")));
  EXPECT_EQ(cache.stats().misses, 2);
  EXPECT_EQ(cache.stats().diskHits + cache.stats().memoryHits, 0);
  EXPECT_EQ(files(".smelt").size(), 1u);
  JitCache after(options());
  EXPECT_EQ(runBytes(after, *parsed.module, 16), again);
  EXPECT_EQ(after.stats().diskHits, 1);
}

TEST_F(JitCacheTest, ChangedShapeIsExplained) {
  std::string log;
  llvm::raw_string_ostream os(log);
  Parsed small(16), large(32);
  JitCache cache(options(&os));
  ASSERT_TRUE(succeeded(cache.get(*small.module, "step")));
  EXPECT_NE(log.find("no earlier entry for @step"), std::string::npos) << log;
  ASSERT_TRUE(succeeded(cache.get(*large.module, "step")));
  EXPECT_NE(log.find("shapes changed ([16x8, 8x4] -> [32x8, 8x4])"), std::string::npos) << log;
  EXPECT_EQ(log.find("IR changed"), std::string::npos) << log;

  // Against the entries on disk too: a new process (here a new cache) explains its miss.
  log.clear();
  JitOptions noFuse = options(&os);
  noFuse.compile.pipeline.fuse = false;
  JitCache other(noFuse);
  ASSERT_TRUE(succeeded(other.get(*small.module, "step")));
  EXPECT_NE(log.find("options changed (fuse=1"), std::string::npos) << log;
}

// NVRTC's contraction changes the GPU's code, so a compile without it is another entry.
TEST_F(JitCacheTest, FmaContractionIsPartOfTheKey) {
  Parsed parsed(16);
  JitOptions noFmad = options();
  noFmad.compile.cudaFmad = false;
  mlir::FailureOr<JitKey> with = JitCache(options()).keyOf(*parsed.module, "step");
  mlir::FailureOr<JitKey> without = JitCache(noFmad).keyOf(*parsed.module, "step");
  ASSERT_TRUE(succeeded(with) && succeeded(without));
  EXPECT_NE(with->hash(), without->hash());
  EXPECT_NE(without->options.find("cuda-fmad=0"), std::string::npos) << without->options;
}

TEST_F(JitCacheTest, CacheDirectoryFromEnvironment) {
  ::setenv("SMELT_CACHE_DIR", dir.c_str(), 1);
  EXPECT_EQ(JitCache().directory(), dir);
  ::unsetenv("SMELT_CACHE_DIR");
  ::setenv("XDG_CACHE_HOME", dir.c_str(), 1);
  EXPECT_EQ(JitCache().directory(), dir + "/smelt");
  JitOptions memoryOnly;
  memoryOnly.diskCache = false;
  EXPECT_EQ(JitCache(memoryOnly).directory(), "");
}

TEST_F(JitCacheTest, ConcurrentWritersOfOneKey) {
  // Each thread has its own context, module and cache, as separate processes would.
  constexpr int kWriters = 3;
  std::vector<std::vector<uint8_t>> results(kWriters);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWriters; ++i)
    threads.emplace_back([&, i] {
      Parsed parsed(16);
      JitCache cache(options());
      results[i] = runBytes(cache, *parsed.module, 16);
    });
  for (std::thread &t : threads)
    t.join();
  for (int i = 1; i < kWriters; ++i)
    EXPECT_EQ(results[i], results[0]);
  // One entry, whole, and no temporary file left behind.
  EXPECT_EQ(files(".smelt").size(), 1u);
  for (const auto &entry : fs::directory_iterator(dir))
    EXPECT_EQ(entry.path().string().find(".tmp."), std::string::npos) << entry.path();
  Parsed parsed(16);
  JitCache reader(options());
  EXPECT_EQ(runBytes(reader, *parsed.module, 16), results[0]);
  EXPECT_EQ(reader.stats().diskHits, 1);
}

TEST_F(JitCacheTest, CorruptEntryIsReportedAndRebuilt) {
  Parsed parsed(16);
  std::vector<uint8_t> expected;
  {
    JitCache cache(options());
    expected = runBytes(cache, *parsed.module, 16);
  }
  ASSERT_EQ(files(".smelt").size(), 1u);
  std::string path = files(".smelt")[0].string();
  rt::Expected<std::vector<uint8_t>> bytes = rt::readFileBytes(path);
  ASSERT_TRUE(bytes);
  (*bytes)[bytes->size() / 2] ^= 0xFF;
  ASSERT_TRUE(rt::writeFileAtomically(path, *bytes).ok());

  std::string log;
  llvm::raw_string_ostream os(log);
  JitOptions quiet = options();
  quiet.log = &os; // not verbose: the corrupt entry is reported anyway
  JitCache cache(quiet);
  EXPECT_EQ(runBytes(cache, *parsed.module, 16), expected);
  EXPECT_EQ(cache.stats().misses, 1);
  EXPECT_NE(log.find("ignoring cache entry " + path), std::string::npos) << log;
  EXPECT_NE(log.find("compiling again"), std::string::npos) << log;

  JitCache after(options());
  EXPECT_EQ(runBytes(after, *parsed.module, 16), expected);
  EXPECT_EQ(after.stats().diskHits, 1);
}

} // namespace
} // namespace smelt::codegen
