// The JIT for code that compiles the same functions again and again (a training script run
// twice, a test suite, a notebook, the `smelt` tools): a JitCache compiles a function of a module
// on its first request and keeps the result in memory and, as an AOT artifact (runtime/
// Artifact.h, CPU shared library included), on disk, so a later request (or process) skips the
// pipeline, LLVM and NVRTC.
//
// Entries are found by a key: SHA-256 over seven parts, each of which can change on its own and
// each of which can change the compiled result:
//   ir         the function as printed, without locations
//   locations  the function printed with its locations (steps and errors name them)
//   shapes     its arguments' shapes                  dtypes   their element types
//   arch       the target and the host CPU with its features (the CPU code is built for it)
//   options    the pipeline options that change code or what the Executable says (placement)
//   compiler   the Smelt build (its GNU build ID), the LLVM version and the artifact format
// On disk, <dir>/<function>-<key>.smelt holds the artifact and <function>-<key>.key the parts and
// the placement summary (which the artifact format does not carry). The .key is written after
// the artifact and read before using it: an artifact whose .key is missing is not used yet, one
// whose .key names another key is refused. A miss in verbose mode says which parts changed
// against the closest earlier entry of the same function. Both files are written atomically
// (temporary file, rename): processes that share a directory may write the same entry at once,
// and each reader sees a whole file or none. A file that does not read back is reported,
// ignored, compiled again and replaced.
//
// What it trusts: an entry is code this process runs. The folder is used only when it is this
// user's and no one else may write to it (checked when the cache is made and again before each
// use of the disk; else a note and memory only); one it creates is 0700. An entry file is read
// only when it is a regular file of this user's that no one else may write, never through a
// symbolic link, and the artifact only when it has the BLAKE3 digest its .key records. An entry
// refused for any of these is compiled again and replaced (written 0600), never run.
//
// The folder is bounded (JitOptions::maxDiskBytes, 5 GiB unless set): each write removes the
// least recently used entries until the rest fit (CacheFolder.h).
#pragma once

#include "codegen/Compile.h"
#include "codegen/CompileArtifact.h"
#include "runtime/Artifact.h"
#include "runtime/CpuExecutor.h"

#include "llvm/Support/raw_ostream.h"

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace smelt::codegen {

struct JitOptions {
  /// Where artifacts are kept; empty: $SMELT_CACHE_DIR, else $XDG_CACHE_HOME/smelt, else
  /// ~/.cache/smelt (a relative XDG_CACHE_HOME or home is not used); with none of them, no disk
  /// cache: never a shared folder such as /tmp/smelt.
  std::string cacheDir;
  /// Off: memory only.
  bool diskCache = true;
  /// The most the folder's entries may hold on disk, in bytes: after an entry is written, the
  /// least recently used ones (by their last write or disk hit) are removed until the rest fit,
  /// and an artifact larger than the bound is not written (a note says so). 0: no bound.
  /// Unset: $SMELT_CACHE_MAX_SIZE ("512MiB", "20GiB", "0"), else 5 GiB (CacheFolder.h).
  std::optional<uint64_t> maxDiskBytes;
  /// Say on `log` what each request found and, for a miss, which key parts changed.
  bool verbose = false;
  /// Where messages go (verbose ones, and unreadable cache files); null: stderr.
  llvm::raw_ostream *log = nullptr;
  /// "cpu" or "cuda:<arch>": a CUDA target compiles the GPU's kernels for the arch (where the
  /// CUDA back end is built) and the CPU's code for every kernel, as CUDA artifacts do.
  std::string target = "cpu";
  /// Compile even when memory or disk holds the entry, and replace it: for a caller that asked
  /// to see the compile (a dump, a profile, the placement log), which a hit would skip.
  bool refresh = false;
  /// How a miss compiles. Its pipeline options are part of the key; its dump directory and
  /// trace are not (they change what the compile writes beside the code, never the code), and
  /// `target` sets its CUDA arch and host fallback.
  CompileOptions compile;
};

/// The JitOptions::target for a compile with `options`: "cuda:<arch>" when its pipeline may
/// place ops on a GPU and it names an arch, else "cpu".
std::string jitTarget(const CompileOptions &options);

/// An entry's key: the function's name and the seven parts, as text (see the file comment).
struct JitKey {
  std::string function, ir, locations, shapes, dtypes, arch, options, compiler;
  /// The SHA-256 of the parts, 32 hex digits (the first 128 bits).
  std::string hash() const;
  /// "shapes changed (4x8 -> 8x8)", the parts that differ from `other`, joined by ", ".
  std::string differences(const JitKey &other) const;
};

class JitCache {
public:
  explicit JitCache(JitOptions options = {});

  /// The Executable of function `entry` of `module` (empty: as compile() picks), compiled on
  /// the first request for its key, from memory or disk after. Errors are diagnostics.
  mlir::FailureOr<std::shared_ptr<const rt::Executable>> get(mlir::ModuleOp module,
                                                             llvm::StringRef entry = "");
  /// The same with the artifact's extras (its CPU library, target, producer): what `smelt
  /// compile` writes out.
  mlir::FailureOr<std::shared_ptr<const CompiledArtifact>> getArtifact(mlir::ModuleOp module,
                                                                       llvm::StringRef entry = "");

  /// The key `get` would use; a diagnostic and failure when there is no such entry.
  mlir::FailureOr<JitKey> keyOf(mlir::ModuleOp module, llvm::StringRef entry) const;

  struct Stats {
    int64_t memoryHits = 0, diskHits = 0, misses = 0;
  };
  Stats stats() const;
  /// The on-disk directory in use ("" without a disk cache, or once it was found untrusted).
  std::string directory() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return dir_;
  }

private:
  std::shared_ptr<const CompiledArtifact> loadFromDisk(const JitKey &key);
  /// Whether the directory may be used: checked when the cache is made and before each use of
  /// the disk (it may appear later, made by someone else); once not, it is dropped, said once.
  bool diskTrusted();
  void store(const JitKey &key, const CompiledArtifact &artifact);
  /// Why `key` missed: the parts that changed against the closest earlier entry.
  std::string explainMiss(const JitKey &key) const;
  /// "<function>-<hash>": an entry's file names without their extension.
  static std::string stemOf(const JitKey &key);
  std::string pathOf(const JitKey &key, const char *extension) const;
  llvm::raw_ostream &log() const { return options_.log ? *options_.log : llvm::errs(); }

  JitOptions options_;
  std::string dir_;
  mutable std::mutex mutex_;
  struct Entry {
    JitKey key;
    std::shared_ptr<const CompiledArtifact> artifact;
  };
  std::map<std::string, Entry> entries_;
  Stats stats_;
};

/// One function of a module, compiled through a JitCache on its first call and run on the CPU.
/// The module must outlive the first call; later changes to it are not seen.
class JitFunction {
public:
  JitFunction(JitCache &cache, mlir::ModuleOp module, std::string entry = "")
      : cache_(cache), module_(module), entry_(std::move(entry)) {}

  /// Compiles (or finds) the function on the first call, then runs it. A compile error is
  /// reported as a diagnostic and returned as a Status.
  rt::Status call(const std::vector<rt::HostTensor> &inputs, std::vector<rt::HostTensor> &outputs);

  /// The Executable, once a call compiled it.
  const rt::Executable *executable() const {
    return executor_ ? &executor_->executable() : nullptr;
  }

private:
  JitCache &cache_;
  mlir::ModuleOp module_;
  std::string entry_;
  std::unique_ptr<rt::CpuExecutor> executor_;
};

} // namespace smelt::codegen
