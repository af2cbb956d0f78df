// JitCache and JitFunction (JitCache.h): keys, the in-memory map, the on-disk artifacts and the
// explanation of a miss.
#include "codegen/JitCache.h"

#include "codegen/CompileArtifact.h"
#include "runtime/CpuObject.h"
#include "runtime/FileIO.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/TargetParser/Host.h"

#include <algorithm>

using namespace mlir;

namespace smelt::codegen {

namespace {

/// The key parts, in the order a miss reports them. A new signature changes the printed IR too,
/// so "IR changed" is said only when the signature did not change.
constexpr const char *kPartNames[] = {"shapes", "dtypes", "arch", "options", "IR"};
std::string JitKey::*const kParts[] = {&JitKey::shapes, &JitKey::dtypes, &JitKey::arch,
                                       &JitKey::options, &JitKey::ir};

std::string defaultCacheDir() {
  if (std::optional<std::string> dir = llvm::sys::Process::GetEnv("SMELT_CACHE_DIR"))
    if (!dir->empty())
      return *dir;
  llvm::SmallString<128> dir;
  if (std::optional<std::string> xdg = llvm::sys::Process::GetEnv("XDG_CACHE_HOME");
      xdg && !xdg->empty())
    dir = *xdg;
  else if (llvm::sys::path::home_directory(dir))
    llvm::sys::path::append(dir, ".cache");
  else
    llvm::sys::path::system_temp_directory(/*erasedOnReboot=*/false, dir);
  llvm::sys::path::append(dir, "smelt");
  return std::string(dir);
}

/// The host CPU and a digest of its enabled features: code built for one machine may use
/// instructions another lacks, so a shared cache directory keeps them apart.
const std::string &hostArch() {
  static const std::string arch = [] {
    std::vector<std::string> features;
    for (const auto &feature : llvm::sys::getHostCPUFeatures())
      if (feature.second)
        features.push_back(feature.first().str());
    std::sort(features.begin(), features.end());
    std::string digest = llvm::toHex(
        llvm::SHA256::hash(llvm::arrayRefFromStringRef(llvm::join(features, ","))), true);
    return llvm::sys::getHostCPUName().str() + "+" + digest.substr(0, 8);
  }();
  return arch;
}

/// A function name as a file name: anything but letters, digits and _ becomes _.
std::string fileStem(llvm::StringRef function) {
  std::string stem;
  for (char c : function)
    stem += llvm::isAlnum(c) || c == '_' ? c : '_';
  return stem.empty() ? "function" : stem;
}

/// A key as the lines of its .key file, "part value", and back.
std::string keyText(const JitKey &key) {
  std::string text = "function " + key.function + "\n";
  for (auto [name, part] : llvm::zip(kPartNames, kParts))
    text += std::string(name) + " " + key.*part + "\n";
  return text;
}

std::optional<JitKey> parseKeyText(llvm::StringRef text) {
  JitKey key;
  llvm::SmallVector<llvm::StringRef> lines;
  text.split(lines, '\n', -1, false);
  if (lines.size() != 1 + std::size(kParts) || !lines[0].consume_front("function "))
    return std::nullopt;
  key.function = lines[0].str();
  for (auto [line, name, part] : llvm::zip(llvm::drop_begin(lines), kPartNames, kParts)) {
    if (!line.consume_front(std::string(name) + " "))
      return std::nullopt;
    key.*part = line.str();
  }
  return key;
}

} // namespace

std::string JitKey::hash() const {
  return llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(keyText(*this))),
                     /*LowerCase=*/true)
      .substr(0, 32);
}

std::string JitKey::differences(const JitKey &other) const {
  std::vector<std::string> changed;
  for (auto [name, part] : llvm::zip(kPartNames, kParts)) {
    if (this->*part == other.*part)
      continue;
    if (part == &JitKey::ir && (shapes != other.shapes || dtypes != other.dtypes))
      continue;
    std::string what = std::string(name) + " changed";
    // IR and feature digests are long or opaque; the others are worth showing.
    if (part != &JitKey::ir)
      what += " (" + other.*part + " -> " + this->*part + ")";
    changed.push_back(what);
  }
  return changed.empty() ? "nothing changed" : llvm::join(changed, ", ");
}

JitCache::JitCache(JitOptions options) : options_(std::move(options)) {
  if (options_.diskCache)
    dir_ = options_.cacheDir.empty() ? defaultCacheDir() : options_.cacheDir;
}

FailureOr<JitKey> JitCache::keyOf(ModuleOp module, llvm::StringRef entry) const {
  func::FuncOp function = findEntry(module, entry);
  if (!function)
    return failure();
  JitKey key;
  key.function = function.getSymName().str();
  // Printed without locations, so moving the model's source around keeps its entry.
  std::string printed;
  llvm::raw_string_ostream os(printed);
  function->print(os, OpPrintingFlags().enableDebugInfo(false));
  key.ir = llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(printed)), true);
  std::vector<std::string> shapes, dtypes;
  for (Type type : function.getArgumentTypes()) {
    auto tensor = llvm::dyn_cast<RankedTensorType>(type);
    std::string shape, dtype;
    llvm::raw_string_ostream shapeOs(shape), dtypeOs(dtype);
    if (tensor) {
      llvm::interleave(tensor.getShape(), shapeOs, "x");
      tensor.getElementType().print(dtypeOs);
    } else {
      type.print(shapeOs);
      type.print(dtypeOs);
    }
    shapes.push_back(tensor && tensor.getRank() == 0 ? "scalar" : shape);
    dtypes.push_back(dtype);
  }
  key.shapes = "[" + llvm::join(shapes, ", ") + "]";
  key.dtypes = "[" + llvm::join(dtypes, ", ") + "]";
  key.arch = options_.target + " on " + hostArch();
  const PipelineOptions &p = options_.pipeline;
  key.options = "fuse=" + std::to_string(p.fuse) + " devices=" + p.devices +
                " default-device=" + p.defaultDevice +
                " strict-placement=" + std::to_string(p.strictPlacement) +
                " artifact-version=" + std::to_string(rt::kArtifactVersion);
  return key;
}

std::string JitCache::pathOf(const JitKey &key, const char *extension) const {
  llvm::SmallString<256> path(dir_);
  llvm::sys::path::append(path, fileStem(key.function) + "-" + key.hash() + extension);
  return std::string(path);
}

std::shared_ptr<const rt::Executable> JitCache::loadFromDisk(const JitKey &key) {
  std::string path = pathOf(key, ".smelt");
  if (!llvm::sys::fs::exists(path))
    return nullptr;
  auto ignore = [&](const std::string &why) {
    log() << "smelt: ignoring cache entry " << path << ": " << why << "; compiling again\n";
    return nullptr;
  };
  rt::Expected<rt::LoadedArtifact> artifact = rt::readArtifact(path);
  if (!artifact)
    return ignore(artifact.message());
  if (artifact->executable.name != key.function || artifact->extras.target != options_.target)
    return ignore("it holds @" + artifact->executable.name + " for " + artifact->extras.target);
  if (!artifact->extras.cpuObject.empty()) {
    rt::Expected<std::shared_ptr<const rt::CpuCode>> cpu =
        rt::loadCpuObject(artifact->extras.cpuObject, artifact->extras.cpuSymbols);
    if (!cpu)
      return ignore(cpu.message());
    artifact->executable.cpu = std::move(*cpu);
  } else if (!artifact->executable.kernels.empty()) {
    return ignore("it has kernels but no CPU code");
  }
  return std::make_shared<const rt::Executable>(std::move(artifact->executable));
}

void JitCache::store(const JitKey &key, const rt::Executable &exe,
                     const rt::ArtifactExtras &extras) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir_)) {
    log() << "smelt: cannot create the kernel cache " << dir_ << ": " << ec.message() << "\n";
    return;
  }
  // The artifact first: a .key without its artifact would only explain, never load.
  rt::Status status = rt::writeArtifact(pathOf(key, ".smelt"), exe, extras);
  if (status.ok()) {
    std::string text = keyText(key);
    status = rt::writeFileAtomically(pathOf(key, ".key"),
                                     std::vector<uint8_t>(text.begin(), text.end()));
  }
  if (!status.ok())
    log() << "smelt: cannot write to the kernel cache: " << status.message() << "\n";
}

std::string JitCache::explainMiss(const JitKey &key) const {
  std::vector<JitKey> earlier;
  for (const auto &[hash, entry] : entries_)
    if (entry.key.function == key.function)
      earlier.push_back(entry.key);
  if (!dir_.empty()) {
    std::error_code ec;
    std::string prefix = fileStem(key.function) + "-";
    for (llvm::sys::fs::directory_iterator it(dir_, ec), end; it != end && !ec; it.increment(ec)) {
      llvm::StringRef name = llvm::sys::path::filename(it->path());
      if (!name.starts_with(prefix) || !name.ends_with(".key"))
        continue;
      if (auto text = rt::readFileBytes(it->path()))
        if (std::optional<JitKey> parsed =
                parseKeyText(llvm::StringRef(reinterpret_cast<const char *>(text->data()),
                                             text->size()));
            parsed && parsed->function == key.function)
          earlier.push_back(std::move(*parsed));
    }
  }
  const JitKey *closest = nullptr;
  size_t fewest = std::size(kParts) + 1;
  for (const JitKey &other : earlier) {
    size_t n = llvm::count_if(kParts, [&](auto part) { return key.*part != other.*part; });
    if (n < fewest)
      fewest = n, closest = &other;
  }
  return closest ? key.differences(*closest) : "no earlier entry for @" + key.function;
}

FailureOr<std::shared_ptr<const rt::Executable>> JitCache::get(ModuleOp module,
                                                              llvm::StringRef entry) {
  FailureOr<JitKey> key = keyOf(module, entry);
  if (failed(key))
    return failure();
  std::string hash = key->hash();
  // One compile at a time per cache: compile() is not safe to run twice at once on one
  // context, and a second request for the same key should wait and find the first's result.
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = entries_.find(hash); it != entries_.end()) {
    ++stats_.memoryHits;
    if (options_.verbose)
      log() << "smelt: jit cache: @" << key->function << " found in memory (" << hash << ")\n";
    return it->second.executable;
  }
  if (!dir_.empty())
    if (std::shared_ptr<const rt::Executable> exe = loadFromDisk(*key)) {
      ++stats_.diskHits;
      if (options_.verbose)
        log() << "smelt: jit cache: @" << key->function << " loaded from "
              << pathOf(*key, ".smelt") << "\n";
      entries_[hash] = {*key, exe};
      return exe;
    }
  ++stats_.misses;
  if (options_.verbose)
    log() << "smelt: jit cache: @" << key->function << " compiled (" << hash
          << "): " << explainMiss(*key) << "\n";
  CompileOptions compileOptions;
  compileOptions.pipeline = options_.pipeline;
  FailureOr<CompiledArtifact> compiled =
      compileArtifact(module, key->function, compileOptions, options_.target);
  if (failed(compiled))
    return failure();
  if (!dir_.empty())
    store(*key, compiled->executable, compiled->extras);
  auto exe = std::make_shared<const rt::Executable>(std::move(compiled->executable));
  entries_[hash] = {*key, exe};
  return exe;
}

JitCache::Stats JitCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

rt::Status JitFunction::call(const std::vector<rt::HostTensor> &inputs,
                             std::vector<rt::HostTensor> &outputs) {
  if (!executor_) {
    FailureOr<std::shared_ptr<const rt::Executable>> exe = cache_.get(module_, entry_);
    if (failed(exe))
      return rt::Status::error("@" + (entry_.empty() ? std::string("main") : entry_) +
                               " failed to compile (see the diagnostics)");
    rt::Expected<rt::CpuExecutor> executor = rt::CpuExecutor::create(**exe);
    if (!executor)
      return executor.status();
    executor_ = std::make_unique<rt::CpuExecutor>(std::move(*executor));
  }
  return executor_->run(inputs, outputs);
}

} // namespace smelt::codegen
