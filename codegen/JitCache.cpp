// JitCache and JitFunction (JitCache.h): keys, the in-memory map, the on-disk artifacts and the
// explanation of a miss.
#include "codegen/JitCache.h"

#include "codegen/CacheFolder.h"
#include "codegen/CompileArtifact.h"
#include "codegen/CudaSources.h"
#include "ir/ConstantData.h"
#include "ir/SmeltDialect.h"
#include "runtime/CpuObject.h"
#include "runtime/FileIO.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/BLAKE3.h"
#include "llvm/Support/Errno.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/TargetParser/Host.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <link.h>
#include <set>
#include <span>
#include <sys/stat.h>
#include <unistd.h>

using namespace mlir;

namespace smelt::codegen {

namespace {

/// The key parts, in the order a miss reports them. A new signature changes the printed IR too,
/// and new IR the IR with locations, so each of those is said only when what comes before it
/// did not change.
constexpr const char *kPartNames[] = {"shapes",   "dtypes", "arch", "options",
                                      "compiler", "IR",     "locations"};
std::string JitKey::*const kParts[] = {&JitKey::shapes,   &JitKey::dtypes, &JitKey::arch,
                                       &JitKey::options,  &JitKey::compiler, &JitKey::ir,
                                       &JitKey::locations};

/// Where the cache lives when JitOptions::cacheDir is empty: $SMELT_CACHE_DIR as given (the
/// user named it), else $XDG_CACHE_HOME/smelt, else <home>/.cache/smelt, where <home> is $HOME or,
/// without it, the passwd entry's. A relative XDG_CACHE_HOME or home ("", "."), which would put
/// the cache in whatever folder the process runs in, is not used (as the XDG spec says); "" when
/// there is no absolute folder: never a shared one such as /tmp/smelt, which another user could
/// have created first and filled.
std::string defaultCacheDir() {
  if (std::optional<std::string> dir = llvm::sys::Process::GetEnv("SMELT_CACHE_DIR"))
    if (!dir->empty())
      return *dir;
  llvm::SmallString<128> dir;
  if (std::optional<std::string> xdg = llvm::sys::Process::GetEnv("XDG_CACHE_HOME");
      xdg && llvm::sys::path::is_absolute(*xdg))
    dir = *xdg;
  else if (llvm::sys::path::home_directory(dir) && llvm::sys::path::is_absolute(dir))
    llvm::sys::path::append(dir, ".cache");
  else
    return "";
  llvm::sys::path::append(dir, "smelt");
  return std::string(dir);
}

/// Writes `message` on `os` the first time this process is asked with `key`: a tool that makes a
/// cache per function (smelt bench) says why the disk is not used once, not once a function.
void sayOnce(llvm::raw_ostream &os, const std::string &key, const std::string &message) {
  static std::mutex mutex;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mutex);
  if (said.insert(key).second)
    os << message;
}

/// Why `st`, the status of a cache folder or entry, cannot be trusted with code this process
/// will run: owned by another user, or writable by its group or everyone (sticky or not: others
/// could create the entries looked for, or write an entry in place).
std::optional<std::string> notOnlyOurs(const struct stat &st) {
  if (st.st_uid != ::geteuid())
    return "it is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
           std::to_string(::geteuid()) + ")";
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
    return "it is writable by " + std::string(st.st_mode & S_IWOTH ? "everyone" : "its group") +
           " (mode " + mode + ")";
  }
  return std::nullopt;
}

/// Why the cache folder `dir` cannot be trusted (notOnlyOurs, or not a folder); none when it is
/// this user's alone or does not exist yet. The folder itself may be a symbolic link (a cache
/// moved to another disk): what it points to is checked. Its parents are trusted, as a home
/// folder's are.
std::optional<std::string> untrustedReason(const std::string &dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    return std::nullopt; // created 0700 by store()
  if (!S_ISDIR(st.st_mode))
    return std::string("it is not a folder");
  return notOnlyOurs(st);
}

/// A mapped file's bytes as text (a .key file).
llvm::StringRef textOf(const rt::MappedBytes &file) {
  return {reinterpret_cast<const char *>(file.bytes.data()), file.bytes.size()};
}

/// The bytes of the cache entry file `path`, mapped (a warm hit's artifact is not copied into
/// memory: its constants stay views of the mapping; entries are replaced by rename, never
/// rewritten in place) only when it is a regular file of this user's that no one else may write:
/// opened without following a symbolic link (one planted in the folder would lead anywhere) and
/// without waiting on a FIFO, then checked and mapped through the same descriptor, so what is
/// checked is what is read. None with `why` empty: there is no such file.
std::optional<rt::MappedBytes> readEntryFile(const std::string &path, std::string &why) {
  why.clear();
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT)
      why = errno == ELOOP ? "it is a symbolic link" : "cannot open it: " + llvm::sys::StrError();
    return std::nullopt;
  }
  rt::MappedBytes entry;
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    why = "cannot stat it: " + llvm::sys::StrError();
  } else if (!S_ISREG(st.st_mode)) {
    why = "it is not a regular file";
  } else if (std::optional<std::string> problem = notOnlyOurs(st)) {
    why = *problem;
  } else if (rt::Expected<rt::MappedBytes> mapped = rt::mapDescriptor(fd, size_t(st.st_size), path);
             !mapped) {
    why = mapped.message();
  } else {
    entry = std::move(*mapped);
  }
  ::close(fd);
  if (!why.empty())
    return std::nullopt;
  return entry;
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

/// The GNU build ID (hex) of the loaded ELF object that holds `address`: the linker derives it
/// from the linked bytes, so a rebuilt compiler has a new one. "" when there is none.
std::string buildIdOf(const void *address) {
  struct Search {
    uintptr_t address;
    std::string id;
  } search{reinterpret_cast<uintptr_t>(address), ""};
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *data) {
        auto *s = static_cast<Search *>(data);
        bool holds = false;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr) &ph = info->dlpi_phdr[i];
          uintptr_t start = info->dlpi_addr + ph.p_vaddr;
          holds |= ph.p_type == PT_LOAD && s->address >= start && s->address < start + ph.p_memsz;
        }
        if (!holds)
          return 0;
        auto align = [](size_t n) { return (n + 3) & ~size_t(3); };
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr) &ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_NOTE)
            continue;
          const char *p = reinterpret_cast<const char *>(info->dlpi_addr + ph.p_vaddr);
          const char *end = p + ph.p_memsz;
          while (p + sizeof(ElfW(Nhdr)) <= end) {
            const auto *note = reinterpret_cast<const ElfW(Nhdr) *>(p);
            const char *name = p + sizeof(ElfW(Nhdr));
            const char *desc = name + align(note->n_namesz);
            if (desc + note->n_descsz > end)
              break;
            if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 &&
                std::memcmp(name, "GNU", 4) == 0) {
              s->id = llvm::toHex(llvm::StringRef(desc, note->n_descsz), /*LowerCase=*/true);
              return 1;
            }
            p = desc + align(note->n_descsz);
          }
        }
        return 1;
      },
      &search);
  return search.id;
}

/// Which compiler made an entry: a rebuilt Smelt may emit other code for the same key, and its
/// version string would not say so. Without a build ID (a linker that writes none), the
/// executable's size and modification time stand in for it.
const std::string &compilerIdentity() {
  static const std::string identity = [] {
    std::string build = buildIdOf(reinterpret_cast<const void *>(&buildIdOf));
    if (build.empty()) {
      std::string exe = llvm::sys::fs::getMainExecutable(nullptr, nullptr);
      llvm::sys::fs::file_status status;
      build = exe + (llvm::sys::fs::status(exe, status)
                         ? std::string(" (unknown)")
                         : " of " + std::to_string(status.getSize()) + " bytes, modified " +
                               std::to_string(status.getLastModificationTime()
                                                  .time_since_epoch()
                                                  .count()));
    }
    return std::string(kProducer) + " build " + build +
           ", LLVM " LLVM_VERSION_STRING ", artifact format " +
           std::to_string(rt::kArtifactVersion);
  }();
  return identity;
}

/// A function name as a file name: anything but letters, digits and _ becomes _.
std::string fileStem(llvm::StringRef function) {
  std::string stem;
  for (char c : function)
    stem += llvm::isAlnum(c) || c == '_' ? c : '_';
  return stem.empty() ? "function" : stem;
}

/// A key as lines, "part value" (what is hashed, and the start of its .key file), and back.
std::string keyText(const JitKey &key) {
  std::string text = "function " + key.function + "\n";
  for (auto [name, part] : llvm::zip(kPartNames, kParts))
    text += std::string(name) + " " + key.*part + "\n";
  return text;
}

/// The BLAKE3 of `parts` one after another, as hex: what a .key records of its artifact. (Not
/// SHA-256: a warm hit hashes the whole artifact, weights included, and BLAKE3 is several times
/// faster.)
std::string digestOf(const std::vector<std::span<const uint8_t>> &parts) {
  llvm::BLAKE3 hasher;
  for (std::span<const uint8_t> part : parts)
    hasher.update(llvm::ArrayRef<uint8_t>(part.data(), part.size()));
  return llvm::toHex(hasher.final(), true);
}

/// A .key file: the key's lines, the BLAKE3 of its artifact (loaded only when the .smelt has
/// exactly those bytes), then the Executable's placement summary (one line: a newline in it is
/// kept as "\n", a backslash as "\\").
std::string sidecarText(const JitKey &key, const std::string &artifactDigest,
                        llvm::StringRef placement) {
  std::string line;
  for (char c : placement)
    line += c == '\n' ? std::string("\\n") : c == '\\' ? std::string("\\\\") : std::string(1, c);
  return keyText(key) + "artifact " + artifactDigest + "\n" + "placement " + line + "\n";
}

struct Sidecar {
  JitKey key;
  std::string artifactDigest;
  std::string placement;
};

std::optional<Sidecar> parseSidecar(llvm::StringRef text) {
  Sidecar sidecar;
  JitKey &key = sidecar.key;
  llvm::SmallVector<llvm::StringRef> lines;
  text.split(lines, '\n', -1, false);
  if (lines.size() != 3 + std::size(kParts) || !lines[0].consume_front("function "))
    return std::nullopt;
  key.function = lines[0].str();
  for (auto [line, name, part] : llvm::zip(llvm::drop_begin(lines), kPartNames, kParts)) {
    if (!line.consume_front(std::string(name) + " "))
      return std::nullopt;
    key.*part = line.str();
  }
  llvm::StringRef artifact = lines[lines.size() - 2], placement = lines.back();
  if (!artifact.consume_front("artifact ") || !placement.consume_front("placement "))
    return std::nullopt;
  sidecar.artifactDigest = artifact.str();
  for (size_t i = 0; i < placement.size(); ++i) {
    char c = placement[i];
    if (c == '\\' && i + 1 < placement.size())
      c = placement[++i] == 'n' ? '\n' : placement[i];
    sidecar.placement += c;
  }
  return sidecar;
}

/// Constants past this many elements are printed elided and hashed by their bytes instead.
constexpr int64_t kPrintedElements = 64;

/// BLAKE3 of the elements of every constant of `function` that printedHash elides, in order:
/// printing a model's weights as hex text, twice, cost more than compiling it.
std::string largeConstantsDigest(func::FuncOp function) {
  llvm::BLAKE3 hasher;
  function.walk([&](ConstantOp constant) {
    auto elements = dyn_cast<ElementsAttr>(constant.getValue());
    if (!elements || elements.getNumElements() <= kPrintedElements)
      return;
    if (std::optional<ArrayRef<char>> raw = rawElementBytes(elements)) {
      hasher.update(llvm::arrayRefFromStringRef(llvm::StringRef(raw->data(), raw->size())));
      // Hashing read every page of a memory-mapped weight; most of an embedding table is
      // never read by the model: let the pages go until a kernel reads them.
      releaseMappedPages(*raw);
    } else if (auto dense = dyn_cast<DenseElementsAttr>(elements)) // a splat, or i1 bits
      hasher.update(llvm::arrayRefFromStringRef(
          llvm::StringRef(dense.getRawData().data(), dense.getRawData().size())));
    else
      hasher.update(llvm::arrayRefFromStringRef("a dense_resource without its blob"));
  });
  return llvm::toHex(hasher.final(), true);
}

/// Hex SHA-256 of `function` as printed, with or without its locations, and of the digest of
/// its large constants.
std::string printedHash(func::FuncOp function, bool locations, const std::string &constants) {
  std::string printed;
  llvm::raw_string_ostream os(printed);
  function->print(os, OpPrintingFlags()
                          .enableDebugInfo(locations)
                          .elideLargeElementsAttrs(kPrintedElements)
                          .elideLargeResourceString(kPrintedElements));
  printed += "\nconstants " + constants;
  return llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(printed)), true);
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
    bool signature = shapes != other.shapes || dtypes != other.dtypes;
    if ((part == &JitKey::ir && signature) ||
        (part == &JitKey::locations && (signature || ir != other.ir)))
      continue;
    std::string what = std::string(name) + " changed";
    // Digests of the IR are long and opaque; the others are worth showing.
    if (part != &JitKey::ir && part != &JitKey::locations)
      what += " (" + other.*part + " -> " + this->*part + ")";
    changed.push_back(what);
  }
  return changed.empty() ? "nothing changed" : llvm::join(changed, ", ");
}

std::string jitTarget(const CompileOptions &options) {
  bool gpu = llvm::StringRef(options.pipeline.devices).contains("gpu:");
  return gpu && !options.cudaArch.empty() ? "cuda:" + options.cudaArch : "cpu";
}

JitCache::JitCache(JitOptions options) : options_(std::move(options)) {
  if (!options_.diskCache)
    return;
  dir_ = options_.cacheDir.empty() ? defaultCacheDir() : options_.cacheDir;
  if (!options_.maxDiskBytes) {
    rt::Expected<uint64_t> bound = cacheBoundFromEnvironment();
    if (!bound)
      sayOnce(log(), bound.message(),
              "smelt: " + bound.message() + "; keeping the kernel cache within " +
                  rt::formatBytes(kDefaultCacheBytes) + "\n");
    options_.maxDiskBytes = bound ? *bound : kDefaultCacheBytes;
  }
  if (dir_.empty())
    sayOnce(log(), "no home",
            "smelt: no kernel cache on disk: no home folder to keep it in (set "
            "SMELT_CACHE_DIR); compiling in memory only\n");
  else
    diskTrusted();
}

bool JitCache::diskTrusted() {
  if (dir_.empty())
    return false;
  std::optional<std::string> why = untrustedReason(dir_);
  if (!why)
    return true;
  sayOnce(log(), "untrusted " + dir_ + ": " + *why,
          "smelt: not using the kernel cache " + dir_ + ": " + *why +
              "; its entries are code this process would run; compiling in memory only\n");
  dir_.clear();
  return false;
}

FailureOr<JitKey> JitCache::keyOf(ModuleOp module, llvm::StringRef entry) const {
  func::FuncOp function = findEntry(module, entry);
  if (!function)
    return failure();
  JitKey key;
  key.function = function.getSymName().str();
  // Both: the locations end up in the Executable (each step's, for errors and `smelt bench`),
  // and apart from the IR a miss can say that only they moved.
  std::string constants = largeConstantsDigest(function);
  key.ir = printedHash(function, /*locations=*/false, constants);
  key.locations = printedHash(function, /*locations=*/true, constants);
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
  // Appended rather than "[" + ... + "]": GCC 12 warns (-Wrestrict, a false positive) there.
  key.shapes.append("[").append(llvm::join(shapes, ", ")).append("]");
  key.dtypes.append("[").append(llvm::join(dtypes, ", ")).append("]");
  key.arch = options_.target + " on " + hostArch();
  // Every option the pipeline reads except where it writes its reports (logDevicePlacement,
  // fusionReport), and NVRTC's contraction; the reason for no GPU is in the placement summary
  // the Executable carries.
  const PipelineOptions &p = options_.compile.pipeline;
  key.options = "fuse=" + std::to_string(p.fuse) + " epilogues=" + std::to_string(p.epilogues) +
                " conv-epilogues=" + std::to_string(p.convEpilogues) + " devices=" + p.devices +
                " default-device=" + p.defaultDevice +
                " strict-placement=" + std::to_string(p.strictPlacement) +
                " all-reduce-bucket-bytes=" + std::to_string(p.allReduceBucketBytes) +
                " no-gpu-reason=" + p.noGpuReason +
                " cuda-fmad=" + std::to_string(options_.compile.cudaFmad);
  key.compiler = compilerIdentity();
  return key;
}

std::string JitCache::stemOf(const JitKey &key) {
  return fileStem(key.function) + "-" + key.hash();
}

std::string JitCache::pathOf(const JitKey &key, const char *extension) const {
  llvm::SmallString<256> path(dir_);
  llvm::sys::path::append(path, stemOf(key) + extension);
  return std::string(path);
}

std::shared_ptr<const CompiledArtifact> JitCache::loadFromDisk(const JitKey &key) {
  // The folder again: it may have appeared since the cache was made, someone else's.
  if (!diskTrusted())
    return nullptr;
  std::string path = pathOf(key, ".smelt");
  auto ignore = [&](const std::string &why) {
    log() << "smelt: ignoring cache entry " << path << ": " << why << "; compiling again\n";
    return nullptr;
  };
  // The .key is written second (store): without it the entry is absent or still being written.
  std::string keyPath = pathOf(key, ".key"), why;
  std::optional<rt::MappedBytes> keyBytes = readEntryFile(keyPath, why);
  if (!keyBytes)
    return why.empty() ? nullptr : ignore(keyPath + ": " + why);
  std::optional<Sidecar> sidecar = parseSidecar(textOf(*keyBytes));
  if (!sidecar)
    return ignore(keyPath + " does not read back as a key");
  if (keyText(sidecar->key) != keyText(key))
    return ignore(keyPath + " holds another key (" + key.differences(sidecar->key) + ")");
  std::optional<rt::MappedBytes> file = readEntryFile(path, why);
  if (!file)
    return why.empty() ? nullptr : ignore(why);
  // Its bytes must be the ones the .key recorded: another entry's artifact copied over it, or
  // code altered with its checksums recomputed, is refused before any of it is decoded.
  if (std::string digest = digestOf({file->bytes}); digest != sidecar->artifactDigest)
    return ignore("its BLAKE3 is " + digest + ", not the " + sidecar->artifactDigest +
                  " its .key records");
  // The constants stay views of the mapped file, not a copy of the weights; the digest
  // just checked is the encoder's output's, so the data part's CRC need not be taken again.
  rt::Expected<rt::LoadedArtifact> artifact =
      rt::decodeArtifact(file->owner, file->bytes, path, /*verifiedCopy=*/true);
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
  if (artifact->executable.cuda)
    if (rt::Status kept = keepCudaSource(*artifact->executable.cuda); !kept.ok())
      log() << "smelt: " << kept.message() << "\n";
  auto loaded = std::make_shared<CompiledArtifact>();
  loaded->executable = std::move(artifact->executable);
  loaded->executable.placement = std::move(sidecar->placement);
  loaded->extras = std::move(artifact->extras);
  markCacheEntryUsed(keyPath);
  return loaded;
}

void JitCache::store(const JitKey &key, const CompiledArtifact &artifact) {
  // Only this user may write where this process loads code from: a new folder is 0700, and one
  // that was there already (made since the cache was, by anyone) is checked again.
  if (std::error_code ec = llvm::sys::fs::create_directories(
          dir_, /*IgnoreExisting=*/true, llvm::sys::fs::owner_all)) {
    log() << "smelt: cannot create the kernel cache " << dir_ << ": " << ec.message() << "\n";
    return;
  }
  if (!diskTrusted())
    return;
  // Entries are this user's alone (loadFromDisk refuses others), whatever the umask. Something
  // that is not a regular file where an entry goes (a symbolic link, a FIFO) is removed first:
  // it is refused on load, and would otherwise be refused and never replaced.
  auto write = [&](const std::string &path, const rt::FileWriter &writeContents) {
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      ::unlink(path.c_str());
    return rt::writeFileAtomically(path, [&](int fd, const std::string &tmp) {
      if (::fchmod(fd, S_IRUSR | S_IWUSR) != 0)
        return rt::Status::error(tmp + ": cannot make it private: " + llvm::sys::StrError());
      return writeContents(fd, tmp);
    });
  };
  // The artifact first: a .key without its artifact would only explain, never load. It is
  // written piece by piece: the weights go from the Executable to the file without a copy.
  rt::Expected<rt::EncodedArtifact> encoded =
      rt::encodeArtifactParts(artifact.executable, artifact.extras);
  uint64_t bound = *options_.maxDiskBytes, size = 0;
  if (encoded)
    for (std::span<const uint8_t> part : encoded->parts())
      size += part.size();
  if (bound != 0 && size > bound) {
    sayOnce(log(), "too large " + stemOf(key),
            "smelt: not keeping @" + key.function + " in the kernel cache: its artifact (" +
                rt::formatBytes(size) + ") is larger than the cache's bound (" +
                rt::formatBytes(bound) + ", SMELT_CACHE_MAX_SIZE)\n");
    return;
  }
  rt::Status status =
      encoded ? write(pathOf(key, ".smelt"),
                      [&](int fd, const std::string &tmp) { return encoded->write(fd, tmp); })
              : encoded.status();
  if (status.ok()) {
    std::string text = sidecarText(key, digestOf(encoded->parts()), artifact.executable.placement);
    status = write(pathOf(key, ".key"), [&](int fd, const std::string &tmp) {
      return rt::writeAll(fd, text.data(), text.size(), tmp);
    });
  }
  if (!status.ok()) {
    log() << "smelt: cannot write to the kernel cache: " << status.message() << "\n";
    return;
  }
  if (bound == 0)
    return;
  CacheTrim trimmed = trimCacheFolder(dir_, bound, stemOf(key));
  if (options_.verbose && trimmed.entries > 0)
    log() << "smelt: jit cache: removed " << trimmed.entries << " least recently used "
          << (trimmed.entries == 1 ? "entry" : "entries") << " (" << rt::formatBytes(trimmed.bytes)
          << ") to keep " << dir_ << " within " << rt::formatBytes(bound) << "\n";
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
      std::string why;
      std::optional<rt::MappedBytes> file = readEntryFile(it->path(), why);
      if (std::optional<Sidecar> parsed = file ? parseSidecar(textOf(*file)) : std::nullopt;
          parsed && parsed->key.function == key.function)
        earlier.push_back(std::move(parsed->key));
    }
  }
  const JitKey *closest = nullptr;
  size_t fewest = std::size(kParts) + 1;
  for (const JitKey &other : earlier) {
    size_t n = llvm::count_if(kParts, [&](auto part) { return key.*part != other.*part; });
    if (n < fewest)
      fewest = n, closest = &other;
  }
  if (!closest)
    return "no earlier entry for @" + key.function;
  // Only a .key on disk can hold this very key and still miss: its entry was refused (and said
  // why) or its artifact is gone.
  return fewest == 0 ? "its entry on disk was not used" : key.differences(*closest);
}

FailureOr<std::shared_ptr<const rt::Executable>> JitCache::get(ModuleOp module,
                                                               llvm::StringRef entry) {
  FailureOr<std::shared_ptr<const CompiledArtifact>> artifact = getArtifact(module, entry);
  if (failed(artifact))
    return failure();
  // Shares the artifact's ownership: the Executable lives as long as either is held.
  return std::shared_ptr<const rt::Executable>(*artifact, &(*artifact)->executable);
}

FailureOr<std::shared_ptr<const CompiledArtifact>> JitCache::getArtifact(ModuleOp module,
                                                                         llvm::StringRef entry) {
  FailureOr<JitKey> key = keyOf(module, entry);
  if (failed(key))
    return failure();
  std::string hash = key->hash();
  // One compile at a time per cache: compile() is not safe to run twice at once on one
  // context, and a second request for the same key should wait and find the first's result.
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = entries_.find(hash); it != entries_.end() && !options_.refresh) {
    ++stats_.memoryHits;
    if (options_.verbose)
      log() << "smelt: jit cache: @" << key->function << " found in memory (" << hash << ")\n";
    return it->second.artifact;
  }
  if (!dir_.empty() && !options_.refresh)
    if (std::shared_ptr<const CompiledArtifact> loaded = loadFromDisk(*key)) {
      ++stats_.diskHits;
      if (options_.verbose)
        log() << "smelt: jit cache: @" << key->function << " loaded from "
              << pathOf(*key, ".smelt") << "\n";
      entries_[hash] = {*key, loaded};
      return loaded;
    }
  ++stats_.misses;
  if (options_.verbose)
    log() << "smelt: jit cache: @" << key->function << " compiled (" << hash << "): "
          << (options_.refresh ? std::string("asked to compile again") : explainMiss(*key))
          << "\n";
  FailureOr<CompiledArtifact> compiled =
      compileArtifact(module, key->function, options_.compile, options_.target);
  if (failed(compiled))
    return failure();
  auto artifact = std::make_shared<const CompiledArtifact>(std::move(*compiled));
  if (!dir_.empty())
    store(*key, *artifact);
  entries_[hash] = {*key, artifact};
  return artifact;
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
      return rt::Status::error(std::string("@")
                                   .append(entry_.empty() ? "main" : entry_)
                                   .append(" failed to compile (see the diagnostics)"));
    rt::Expected<rt::CpuExecutor> executor = rt::CpuExecutor::create(**exe);
    if (!executor)
      return executor.status();
    executor_ = std::make_unique<rt::CpuExecutor>(std::move(*executor));
  }
  return executor_->run(inputs, outputs);
}

} // namespace smelt::codegen
