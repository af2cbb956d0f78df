// JitCache: a second request is a memory hit, a new cache on the same directory a disk hit that
// gives bit-identical results and the same placement and locations; a changed shape is reported
// as such; the key names the compiler's build; caches writing the same key at once both succeed
// and leave a readable entry; a corrupt entry is reported and rebuilt; a refresh compiles again.
// What the cache trusts: another model's artifact copied into an entry, an entry that fails to
// load, entries others could write or reach through a symbolic link are refused, compiled again
// (checked against a float64 reference) and replaced; a folder others can write or own is not
// used; without a home folder there is no disk cache. The folder's bound: the least recently
// used entries go first (a disk hit counts as a use), files that are not entries stay, an
// artifact larger than the bound is not written, SMELT_CACHE_MAX_SIZE sets it.
#include "codegen/JitCache.h"

#include "runtime/FileIO.h"

#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/BLAKE3.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace smelt::codegen {
namespace {

namespace fs = std::filesystem;

/// A model with a matmul and a fusion; `rows` changes the shape of x (and of everything after),
/// `unary` the op between them (another model of the same name and signature).
std::string model(int rows, const std::string &unary = "tanh") {
  std::string r = std::to_string(rows);
  return "func.func @step(%x: tensor<" + r + "x8xf32>, %w: tensor<8x4xf32>) -> tensor<" + r +
         "xf32> {\n"
         "  %0 = smelt.matmul %x, %w : tensor<" +
         r +
         "x8xf32>, tensor<8x4xf32>\n"
         "  %1 = smelt." +
         unary + " %0 : tensor<" + r +
         "x4xf32>\n"
         "  %2 = smelt.reduce sum %1 axes = [1] : tensor<" +
         r +
         "x4xf32>\n"
         "  return %2 : tensor<" +
         r + "xf32>\n}\n";
}

struct Parsed {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  explicit Parsed(int rows, const std::string &unary = "tanh") {
    loadDialects(context);
    module = mlir::parseSourceString<mlir::ModuleOp>(model(rows, unary), &context);
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

/// The model of `model(rows, "tanh")` on `inputs(rows)` in float64: sum_j tanh((x w)[r, j]).
std::vector<double> tanhReference(int rows) {
  std::vector<rt::HostTensor> in = inputs(rows);
  const float *x = in[0].data<float>(), *w = in[1].data<float>();
  std::vector<double> out(rows, 0.0);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < 4; ++j) {
      double dot = 0;
      for (int k = 0; k < 8; ++k)
        dot += double(x[r * 8 + k]) * double(w[k * 4 + j]);
      out[r] += std::tanh(dot);
    }
  return out;
}

/// Whether the output bytes `bytes` (f32) are the tanh model's, by relative norm.
::testing::AssertionResult isTanhModel(const std::vector<uint8_t> &bytes, int rows) {
  std::vector<double> expected = tanhReference(rows);
  if (bytes.size() != expected.size() * sizeof(float))
    return ::testing::AssertionFailure() << bytes.size() << " bytes, not " << rows << " floats";
  double diff = 0, norm = 0;
  for (int r = 0; r < rows; ++r) {
    float got;
    std::memcpy(&got, bytes.data() + r * sizeof(float), sizeof got);
    diff += (got - expected[r]) * (got - expected[r]);
    norm += expected[r] * expected[r];
  }
  double relative = std::sqrt(diff / norm);
  if (relative < 1e-5)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "relative error " << relative << " against float64";
}

/// Replaces `path` with `bytes`, mode 0600 (an entry as the cache writes one).
void writePrivateFile(const std::string &path, const std::vector<uint8_t> &bytes) {
  fs::remove(path);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
}

/// Sets or unsets environment variables for one scope, then puts them back.
class ScopedEnv {
public:
  void set(const char *name, const char *value) {
    if (!saved_.count(name)) {
      const char *old = std::getenv(name);
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~ScopedEnv() {
    for (const auto &[name, value] : saved_)
      value ? ::setenv(name.c_str(), value->c_str(), 1) : ::unsetenv(name.c_str());
  }

private:
  std::map<std::string, std::optional<std::string>> saved_;
};

size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

/// A user id no test machine gives anyone (as smelt-cache-others.test uses).
constexpr uid_t kOtherUser = 54321;

/// In a child process run as root: becomes kOtherUser (who has no passwd entry) with no HOME,
/// makes two caches and compiles through one; 0 when neither has a directory, the model ran
/// right and the note was written once (and is on stderr), else 1.
int withoutHome() {
  // A temporary folder of the user's own for the compile's files (the CPU library's link),
  // which it removes: under /tmp (sticky), where it may.
  std::string tmp = (fs::temp_directory_path() / "smelt-no-home-XXXXXX").string();
  if (!::mkdtemp(tmp.data()) || ::chown(tmp.c_str(), kOtherUser, kOtherUser) != 0)
    return 2;
  ::unsetenv("HOME");
  ::unsetenv("XDG_CACHE_HOME");
  ::unsetenv("SMELT_CACHE_DIR");
  ::setenv("TMPDIR", tmp.c_str(), 1);
  if (::setresgid(kOtherUser, kOtherUser, kOtherUser) != 0 ||
      ::setresuid(kOtherUser, kOtherUser, kOtherUser) != 0)
    return 2;
  std::string log;
  llvm::raw_string_ostream os(log);
  JitOptions o;
  o.log = &os;
  JitCache first(o), second(o);
  Parsed parsed(16);
  bool compiled = isTanhModel(runBytes(second, *parsed.module, 16), 16);
  llvm::errs() << log;
  bool ok = first.directory().empty() && second.directory().empty() && compiled &&
            count(log, "no kernel cache on disk") == 1 && !fs::exists(tmp + "/smelt");
  std::error_code ignored;
  fs::remove_all(tmp, ignored);
  return ok ? 0 : 1;
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
  /// Options for a cache in `folder` whose warnings (not its verbose lines) go to `log`.
  JitOptions loggedOptions(const std::string &folder, llvm::raw_ostream &log) {
    JitOptions o = options();
    o.cacheDir = folder;
    o.log = &log;
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

/// The bytes an entry's files hold, by the entry's stem.
std::map<std::string, uintmax_t> entrySizes(const std::string &dir) {
  std::map<std::string, uintmax_t> sizes;
  for (const auto &file : fs::directory_iterator(dir))
    if (file.path().extension() == ".key" || file.path().extension() == ".smelt")
      sizes[file.path().stem().string()] += file.file_size();
  return sizes;
}

/// Sets the modification time of `path` to `seconds` ago.
void makeOlder(const fs::path &path, int seconds) {
  fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::seconds(seconds));
}

TEST_F(JitCacheTest, FolderStaysWithinItsBoundLeastRecentlyUsedFirst) {
  // Three entries of different shapes; the oldest written is hit last, so the one in between
  // is the least recently used and the one that goes.
  JitOptions unbounded = options();
  unbounded.maxDiskBytes = 0;
  for (int rows : {16, 32}) {
    Parsed parsed(rows);
    JitCache cache(unbounded);
    ASSERT_TRUE(isTanhModel(runBytes(cache, *parsed.module, rows), rows));
  }
  std::map<std::string, uintmax_t> two = entrySizes(dir);
  ASSERT_EQ(two.size(), 2u);
  Parsed sixteen(16);
  mlir::FailureOr<JitKey> firstKey = JitCache(unbounded).keyOf(*sixteen.module, "step");
  ASSERT_TRUE(mlir::succeeded(firstKey));
  std::string first, second;
  for (const auto &[stem, bytes] : two)
    (stem.find(firstKey->hash()) != std::string::npos ? first : second) = stem;
  makeOlder(fs::path(dir) / (first + ".key"), 200);
  makeOlder(fs::path(dir) / (second + ".key"), 100);
  {
    Parsed parsed(16);
    JitCache hit(unbounded);
    ASSERT_TRUE(isTanhModel(runBytes(hit, *parsed.module, 16), 16));
    ASSERT_EQ(hit.stats().diskHits, 1);
  }
  // Files that are not entries are the user's, whatever their names: never removed.
  std::ofstream(fs::path(dir) / "notes.txt") << "kept\n";
  std::ofstream(fs::path(dir) / "step-not-a-hash.key") << "kept\n";
  makeOlder(fs::path(dir) / "notes.txt", 1000);
  makeOlder(fs::path(dir) / "step-not-a-hash.key", 1000);

  // Room for two entries of about this size, not three.
  std::string log;
  llvm::raw_string_ostream os(log);
  JitOptions bounded = options(&os);
  bounded.maxDiskBytes = two[first] + two[second] + two[first] / 2;
  Parsed third(64);
  JitCache cache(bounded);
  ASSERT_TRUE(isTanhModel(runBytes(cache, *third.module, 64), 64));
  std::map<std::string, uintmax_t> left = entrySizes(dir);
  EXPECT_EQ(left.size(), 3u) << log; // two entries and the user's step-not-a-hash.key
  EXPECT_TRUE(left.count(first)) << "the entry hit last is kept\n" << log;
  EXPECT_FALSE(left.count(second)) << "the least recently used entry goes\n" << log;
  uintmax_t entryBytes = 0;
  for (const auto &[stem, bytes] : left)
    if (stem != "step-not-a-hash")
      entryBytes += bytes;
  EXPECT_LE(entryBytes, *bounded.maxDiskBytes);
  EXPECT_TRUE(fs::exists(fs::path(dir) / "notes.txt"));
  EXPECT_TRUE(fs::exists(fs::path(dir) / "step-not-a-hash.key"));
  EXPECT_NE(log.find("removed 1 least recently used entry"), std::string::npos) << log;

  // What is left still hits, and the evicted shape compiles again and is right.
  for (int rows : {16, 32, 64}) {
    Parsed parsed(rows);
    JitCache after(unbounded);
    EXPECT_TRUE(isTanhModel(runBytes(after, *parsed.module, rows), rows)) << rows << " rows";
    EXPECT_EQ(after.stats().diskHits, rows == 32 ? 0 : 1) << rows << " rows";
  }
}

TEST_F(JitCacheTest, ArtifactLargerThanTheBoundIsNotWritten) {
  std::string log;
  llvm::raw_string_ostream os(log);
  JitOptions tiny = loggedOptions(dir, os);
  tiny.maxDiskBytes = 512;
  Parsed parsed(16);
  JitCache cache(tiny);
  EXPECT_TRUE(isTanhModel(runBytes(cache, *parsed.module, 16), 16));
  EXPECT_TRUE(files(".smelt").empty());
  EXPECT_TRUE(files(".key").empty());
  EXPECT_NE(log.find("smelt: not keeping @step in the kernel cache: its artifact ("),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("is larger than the cache's bound (512 B"), std::string::npos) << log;
}

TEST_F(JitCacheTest, BoundFromEnvironment) {
  ScopedEnv env;
  Parsed parsed(16);
  // A bound smaller than the artifact: nothing written.
  env.set("SMELT_CACHE_MAX_SIZE", "1KiB");
  {
    JitCache cache(options());
    EXPECT_TRUE(isTanhModel(runBytes(cache, *parsed.module, 16), 16));
    EXPECT_TRUE(files(".smelt").empty());
  }
  // Not a size: said, naming the variable, and the default bound kept (the entry is written).
  env.set("SMELT_CACHE_MAX_SIZE", "lots");
  std::string log;
  llvm::raw_string_ostream os(log);
  {
    JitCache cache(loggedOptions(dir, os));
    EXPECT_TRUE(isTanhModel(runBytes(cache, *parsed.module, 16), 16));
  }
  EXPECT_NE(log.find("smelt: SMELT_CACHE_MAX_SIZE: 'lots' is not a size"), std::string::npos)
      << log;
  EXPECT_NE(log.find("keeping the kernel cache within 5"), std::string::npos) << log;
  EXPECT_EQ(files(".smelt").size(), 1u);
  // "0": no bound; an explicit option wins over the variable.
  env.set("SMELT_CACHE_MAX_SIZE", "0");
  JitOptions explicitBound = options();
  explicitBound.maxDiskBytes = 1;
  Parsed other(32);
  {
    JitCache cache(explicitBound);
    EXPECT_TRUE(isTanhModel(runBytes(cache, *other.module, 32), 32));
  }
  EXPECT_EQ(files(".smelt").size(), 1u);
  {
    JitCache cache(options());
    EXPECT_TRUE(isTanhModel(runBytes(cache, *other.module, 32), 32));
  }
  EXPECT_EQ(files(".smelt").size(), 2u);
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

// Another model of the same function name and signature, its artifact copied over an entry:
// the BLAKE3 digest the .key records refuses it, and the entry is compiled again and replaced, so
// no run gives the other model's outputs.
TEST_F(JitCacheTest, AnotherModelsArtifactCopiedInIsRefusedAndReplaced) {
  Parsed tanhModel(16), negModel(16, "neg");
  std::string otherDir = dir + "/other";
  {
    JitCache cache(options());
    ASSERT_TRUE(isTanhModel(runBytes(cache, *tanhModel.module, 16), 16));
    JitOptions other = options();
    other.cacheDir = otherDir;
    JitCache otherCache(other);
    ASSERT_FALSE(isTanhModel(runBytes(otherCache, *negModel.module, 16), 16));
  }
  ASSERT_EQ(files(".smelt").size(), 1u);
  std::string path = files(".smelt")[0].string();
  std::vector<fs::path> others;
  for (const auto &entry : fs::directory_iterator(otherDir))
    if (entry.path().extension() == ".smelt")
      others.push_back(entry.path());
  ASSERT_EQ(others.size(), 1u);
  // Same function, same shapes (so the name and target it holds match): only the .key's record
  // of the bytes tells them apart.
  fs::copy_file(others[0], path, fs::copy_options::overwrite_existing);

  std::string log;
  llvm::raw_string_ostream os(log);
  JitCache cache(options(&os));
  EXPECT_TRUE(isTanhModel(runBytes(cache, *tanhModel.module, 16), 16));
  EXPECT_EQ(cache.stats().diskHits, 0);
  EXPECT_EQ(cache.stats().misses, 1);
  EXPECT_NE(log.find("ignoring cache entry " + path), std::string::npos) << log;
  EXPECT_NE(log.find("its BLAKE3 is"), std::string::npos) << log;
  EXPECT_NE(log.find("compiled (" + fs::path(path).stem().string().substr(5) +
                     "): its entry on disk was not used"),
            std::string::npos)
      << log;

  // Replaced: the next process hits the disk again, with the right model.
  JitCache after(options());
  EXPECT_TRUE(isTanhModel(runBytes(after, *tanhModel.module, 16), 16));
  EXPECT_EQ(after.stats().diskHits, 1);
}

// An entry whose bytes match its .key's digest but do not load (damaged when written, or by
// someone who rewrote the .key too) is refused, compiled again and replaced, not reloaded and
// refused on every run.
TEST_F(JitCacheTest, EntryThatFailsToLoadIsReplacedAndHitAfter) {
  Parsed parsed(16);
  {
    JitCache cache(options());
    ASSERT_TRUE(isTanhModel(runBytes(cache, *parsed.module, 16), 16));
  }
  ASSERT_EQ(files(".smelt").size(), 1u);
  ASSERT_EQ(files(".key").size(), 1u);
  std::string path = files(".smelt")[0].string(), keyPath = files(".key")[0].string();
  rt::Expected<std::vector<uint8_t>> bytes = rt::readFileBytes(path);
  rt::Expected<std::vector<uint8_t>> keyBytes = rt::readFileBytes(keyPath);
  ASSERT_TRUE(bytes && keyBytes);
  std::vector<uint8_t> truncated(bytes->begin(), bytes->begin() + bytes->size() * 2 / 3);
  std::string key(keyBytes->begin(), keyBytes->end());
  size_t at = key.find("\nartifact ");
  ASSERT_NE(at, std::string::npos) << key;
  key.replace(at + 10, 64,
              llvm::toHex(llvm::BLAKE3::hash(llvm::ArrayRef<uint8_t>(truncated)), true));
  writePrivateFile(path, truncated);
  writePrivateFile(keyPath, std::vector<uint8_t>(key.begin(), key.end()));

  for (int run = 0; run < 2; ++run) {
    std::string log;
    llvm::raw_string_ostream os(log);
    JitOptions quiet = options();
    quiet.log = &os;
    JitCache cache(quiet);
    EXPECT_TRUE(isTanhModel(runBytes(cache, *parsed.module, 16), 16)) << "run " << run;
    if (run == 0) {
      EXPECT_EQ(cache.stats().misses, 1);
      EXPECT_NE(log.find("ignoring cache entry " + path), std::string::npos) << log;
      EXPECT_EQ(log.find("BLAKE3"), std::string::npos) << "not the refusal tested: " << log;
    } else {
      EXPECT_EQ(cache.stats().diskHits, 1) << "the entry was not replaced";
      EXPECT_EQ(log, "");
    }
  }
}

// A folder its group or everyone may write is not used: a warning, then everything compiles in
// memory and nothing is written there.
TEST_F(JitCacheTest, FolderOthersMayWriteIsNotUsed) {
  Parsed parsed(16);
  for (auto [mode, who] :
       {std::pair{0777, "everyone (mode 0777)"}, std::pair{01777, "everyone (mode 1777)"},
        std::pair{0770, "its group (mode 0770)"}}) {
    std::string open = dir + "/open";
    fs::create_directory(open);
    ASSERT_EQ(::chmod(open.c_str(), mode), 0);
    std::string log;
    llvm::raw_string_ostream os(log);
    JitOptions o = loggedOptions(open, os);
    JitCache cache(o);
    EXPECT_EQ(cache.directory(), "");
    EXPECT_NE(log.find("not using the kernel cache " + open + ": it is writable by " + who),
              std::string::npos)
        << log;
    EXPECT_TRUE(isTanhModel(runBytes(cache, *parsed.module, 16), 16));
    EXPECT_EQ(cache.stats().misses, 1);
    EXPECT_TRUE(fs::is_empty(open)) << who;
    fs::remove_all(open);
  }
}

// A folder that did not exist when the cache was made, then made by someone else and open to
// them, is checked again before it is used.
TEST_F(JitCacheTest, FolderMadeLaterIsCheckedBeforeUse) {
  Parsed parsed(16);
  std::string later = dir + "/later";
  std::string log;
  llvm::raw_string_ostream os(log);
  JitOptions o = loggedOptions(later, os);
  JitCache cache(o);
  EXPECT_EQ(cache.directory(), later);
  fs::create_directory(later);
  ASSERT_EQ(::chmod(later.c_str(), 0777), 0);
  EXPECT_TRUE(isTanhModel(runBytes(cache, *parsed.module, 16), 16));
  EXPECT_NE(log.find("not using the kernel cache " + later + ": it is writable by everyone"),
            std::string::npos)
      << log;
  EXPECT_TRUE(fs::is_empty(later));
  EXPECT_EQ(cache.directory(), "");
}

// Entries are written for this user alone, and one that others could write, or that is a
// symbolic link planted in the folder, is refused, compiled again and replaced by a file.
TEST_F(JitCacheTest, EntriesOthersCouldWriteOrSymbolicLinksAreRefused) {
  Parsed parsed(16);
  {
    JitCache cache(options());
    ASSERT_TRUE(isTanhModel(runBytes(cache, *parsed.module, 16), 16));
  }
  ASSERT_EQ(files(".smelt").size(), 1u);
  std::string path = files(".smelt")[0].string(), keyPath = files(".key")[0].string();
  for (const std::string &entry : {path, keyPath}) {
    struct stat st;
    ASSERT_EQ(::lstat(entry.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << entry;
  }

  // Each damage, then a run that refuses it and one that hits the replaced entry.
  std::string elsewhere = dir + "/elsewhere.bin";
  struct Damage {
    std::string name, why;
    std::function<void()> apply;
  };
  std::vector<Damage> damages = {
      {"artifact writable by everyone", "it is writable by everyone (mode 0666)",
       [&] { ASSERT_EQ(::chmod(path.c_str(), 0666), 0); }},
      {"key writable by its group", keyPath + ": it is writable by its group (mode 0620)",
       [&] { ASSERT_EQ(::chmod(keyPath.c_str(), 0620), 0); }},
      // To the entry's own bytes, so only the link itself can be refused.
      {"artifact is a symbolic link", "it is a symbolic link",
       [&] {
         fs::copy_file(path, elsewhere, fs::copy_options::overwrite_existing);
         fs::remove(path);
         fs::create_symlink(elsewhere, path);
       }},
  };
  for (const Damage &damage : damages) {
    SCOPED_TRACE(damage.name);
    damage.apply();
    std::string log;
    llvm::raw_string_ostream os(log);
    JitOptions quiet = options();
    quiet.log = &os;
    JitCache cache(quiet);
    EXPECT_TRUE(isTanhModel(runBytes(cache, *parsed.module, 16), 16));
    EXPECT_EQ(cache.stats().misses, 1);
    EXPECT_NE(log.find("ignoring cache entry " + path + ": " + damage.why + "; compiling again"),
              std::string::npos)
        << log;
    EXPECT_FALSE(fs::is_symlink(path));
    JitCache after(options());
    EXPECT_TRUE(isTanhModel(runBytes(after, *parsed.module, 16), 16));
    EXPECT_EQ(after.stats().diskHits, 1);
  }
  EXPECT_TRUE(fs::is_regular_file(elsewhere)) << "the link's target is left alone";
}

// As root (whose processes would run the code), a folder or entries another user owns are not
// trusted, even with modes that keep everyone else out.
TEST_F(JitCacheTest, WhatAnotherUserOwnsIsNotTrusted) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "needs root, to give files to another user";
  Parsed parsed(16);
  std::string theirs = dir + "/theirs";
  fs::create_directory(theirs);
  ASSERT_EQ(::chmod(theirs.c_str(), 0700), 0);
  ASSERT_EQ(::chown(theirs.c_str(), kOtherUser, kOtherUser), 0);
  std::string log;
  llvm::raw_string_ostream os(log);
  JitOptions o = loggedOptions(theirs, os);
  JitCache refused(o);
  EXPECT_EQ(refused.directory(), "");
  EXPECT_NE(log.find("not using the kernel cache " + theirs + ": it is owned by uid 54321"),
            std::string::npos)
      << log;
  EXPECT_TRUE(isTanhModel(runBytes(refused, *parsed.module, 16), 16));
  EXPECT_TRUE(fs::is_empty(theirs));

  // Entries of theirs in this user's folder (each file alone): refused and replaced.
  {
    JitCache cache(options());
    ASSERT_TRUE(isTanhModel(runBytes(cache, *parsed.module, 16), 16));
  }
  for (const char *extension : {".smelt", ".key"}) {
    SCOPED_TRACE(extension);
    ASSERT_EQ(files(extension).size(), 1u);
    std::string entry = files(extension)[0].string();
    ASSERT_EQ(::chown(entry.c_str(), kOtherUser, kOtherUser), 0);
    log.clear();
    JitOptions quiet = options();
    quiet.log = &os;
    JitCache cache(quiet);
    EXPECT_TRUE(isTanhModel(runBytes(cache, *parsed.module, 16), 16));
    EXPECT_EQ(cache.stats().misses, 1);
    EXPECT_NE(log.find("it is owned by uid 54321, not by this user (uid 0); compiling again"),
              std::string::npos)
        << log;
    struct stat st;
    ASSERT_EQ(::stat(entry.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 0u) << "not replaced";
  }
}

// A home that is empty or relative would put the cache in whatever folder the process runs in
// (a shared /tmp, say), as a relative XDG_CACHE_HOME would: neither is used, and without an
// absolute one there is no disk cache.
TEST_F(JitCacheTest, NoAbsoluteHomeMeansNoDiskCache) {
  ScopedEnv env;
  env.set("SMELT_CACHE_DIR", nullptr);
  env.set("XDG_CACHE_HOME", "relative-cache");
  env.set("HOME", dir.c_str());
  EXPECT_EQ(JitCache().directory(), dir + "/.cache/smelt");
  env.set("XDG_CACHE_HOME", nullptr);
  for (const char *home : {"", ".", "relative-home"}) {
    env.set("HOME", home);
    std::string log;
    llvm::raw_string_ostream os(log);
    JitOptions o;
    o.log = &os;
    EXPECT_EQ(JitCache(o).directory(), "") << "HOME='" << home << "'";
  }
}

// With no HOME and no passwd entry (a process run as a user id with no account), no disk cache
// rather than a shared folder such as /tmp/smelt; said once however many caches are made.
// Not in the fixture: the child runs the test again from its start (threadsafe style) and
// cannot remove a folder of root's once it is another user.
TEST(JitCacheWithoutHome, NoDiskCacheAndNoSharedFolder) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "needs root, to run as a user with no passwd entry";
  GTEST_FLAG_SET(death_test_style, "threadsafe"); // a fresh process: nothing said yet
  EXPECT_EXIT(
      std::_Exit(withoutHome()), ::testing::ExitedWithCode(0),
      "smelt: no kernel cache on disk: no home folder to keep it in \\(set SMELT_CACHE_DIR\\); "
      "compiling in memory only");
}

} // namespace
} // namespace smelt::codegen
