// AOT artifacts (`model.smelt`): one Executable and its compiled code in a versioned,
// checksummed file that the runtime alone reads back, with no MLIR or LLVM.
//
// Format, version 14: a header, the plan as a FlatBuffer (runtime/ArtifactPlan.fbs), and the data
// part that holds the constants' and the code's bytes. The plan's tables take new fields without
// a new version: a field an older file lacks reads as its default, a step parameter it lacks as
// its params struct's default (so adding an op, a field or a parameter keeps old files). Only a
// change old readers would misread bumps the version; a reader refuses every other version,
// naming both (13 and older: sections of hand-encoded bytes). Integers are little-endian.
//
//   header (64 bytes)
//     0  magic "SMELTAOT"            24  u64 data size
//     8  u32 format version (14)     32  u32 CRC32 of the plan
//    12  u32 flags (none yet; a      36  u32 CRC32 of the data
//        reader rejects bits it      40  u32 CRC32 of bytes [0, 40)
//        does not know)              44  zero up to byte 64
//    16  u64 plan size
//   plan at byte 64: a FlatBuffer with file identifier "SMLT" and root table smelt.aot.Plan
//   zero bytes up to the next multiple of 64, where the data starts
//   data: its size in bytes, ending at the end of the file. The plan names each constant, the
//     CUDA source, PTX and CUBIN, and the CPU shared library by a 64-byte aligned range of it
//     (readArtifact maps the file and keeps the constants as views of it: the weights are not
//     copied, and processes that run one file share them).
// So every byte is checked: the header by its CRC and zeros, plan and data by theirs, the gap by
// being zero.
//
// The plan (ArtifactPlan.fbs says what each table holds) is the Executable without its bytes:
// target and producer; buffers (type, name, arena offset); inputs, outputs and their names;
// constants; kernels; steps (op by name, location, device, operands, results, the buffers freed
// after it, and its parameters by name: the fields of its op's params struct in Executable.h);
// peak bytes per device; the compiler's schedule (segments); the CUDA code; the CPU code (a
// symbol per kernel and an ELF image for this machine that runs no code when loaded:
// runtime/ElfImage.h says what the loader checks before dlopen).
//
// A reader checks everything before use: magic, version, flags, checksums and sizes; the plan
// with FlatBuffers' verifier (every offset and length inside it, a table count bounded by its
// size); then each field: dtypes and shapes (non-negative, byte size within int64), step ops and
// parameters (names, enum ranges), buffer ids in range, constant sizes against their buffers'
// types, ranges inside the data, kernel steps' kernel index, one CPU symbol per kernel, devices.
// What it materializes is counted against the plan's size, so shared parts of a crafted plan
// cannot drive an allocation larger than the file. Errors read "<file>: <part>, byte <N>: <what>"
// for the header, the checksums and the verifier, "<file>: plan: <entry>: <what>" for a field.
// Whether the steps make sense (parameters, one producer per buffer, each buffer of the type its
// step and kernel expect) is the executor's check, as for any Executable.
//
// Trust: a .smelt file holds native code, which runs with the process's rights, as a shared
// library does. The checks above stop damaged files; they cannot tell a malicious file from an
// honest one. Load only files you would load as a library, or pin the content hash (see
// LoadOptions::expectedSha256 below and `smelt run --expect-sha256`).
#pragma once

#include "runtime/Executable.h"
#include "runtime/Status.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace smelt::rt {

inline constexpr uint32_t kArtifactVersion = 14;

/// What an artifact holds beside the Executable.
struct ArtifactExtras {
  /// The fused kernels compiled for the CPU as a shared library's bytes (loadCpuObject in
  /// CpuObject.h loads them), and the symbol of each kernel, indexed like Executable::kernels.
  /// Empty when the artifact has no CPU code.
  std::vector<uint8_t> cpuObject;
  std::vector<std::string> cpuSymbols;
  /// The target it was compiled for: "cpu" or "cuda:<arch>" ("cuda:sm_90").
  std::string target;
  /// Who wrote it, for messages: "smelt compile 0.1".
  std::string producer;
};

struct LoadedArtifact {
  /// The plan, constants and CUDA code; `cpu` stays empty until the caller loads
  /// extras.cpuObject with loadCpuObject.
  Executable executable;
  ArtifactExtras extras;
};

/// An artifact encoded for writing: the header and plan, padded up to where the data starts,
/// then the data part as pieces that point into the Executable and extras it was encoded from,
/// which must outlive it. Written piece by piece, a model's weights are not copied once more on
/// their way to the file.
class EncodedArtifact {
public:
  /// The file's bytes in order: the header and plan, then the data part's pieces and padding.
  std::vector<std::span<const uint8_t>> parts() const;
  /// The bytes in one buffer (a copy of every piece).
  std::vector<uint8_t> bytes() const;
  /// Writes the bytes to descriptor `fd`; errors name `what` (the file).
  Status write(int fd, const std::string &what) const;

private:
  friend Expected<EncodedArtifact> encodeArtifactParts(const Executable &exe,
                                                       const ArtifactExtras &extras);
  std::vector<uint8_t> front_;
  std::vector<std::span<const uint8_t>> data_;
};

/// Encodes an artifact. The encoder checks its own output with the reader, so anything it
/// returns reads back; an Executable the reader would reject (a buffer id out of range, a
/// constant of the wrong size) is an error here instead.
Expected<EncodedArtifact> encodeArtifactParts(const Executable &exe, const ArtifactExtras &extras);
/// The same, gathered into one buffer.
Expected<std::vector<uint8_t>> encodeArtifact(const Executable &exe, const ArtifactExtras &extras);

/// Reads an artifact from memory, copying the constants and code it keeps out of `bytes`; `name`
/// stands for the file in messages.
Expected<LoadedArtifact> decodeArtifact(const std::vector<uint8_t> &bytes,
                                        const std::string &name = "<memory>");
/// The same from `bytes` that `owner` keeps alive and unchanged: the constants stay views of
/// them, not a second copy of the weights. With `verifiedCopy`, the caller has checked that
/// `bytes` are what an encoder wrote, by a cryptographic digest of its output (the JIT cache's
/// key file records one), which covers every byte the data part's CRC would: that CRC is not
/// computed again.
Expected<LoadedArtifact> decodeArtifact(std::shared_ptr<const void> owner,
                                        std::span<const uint8_t> bytes, const std::string &name,
                                        bool verifiedCopy = false);

/// Writes atomically, piece by piece: a temporary file beside `path`, fsync, rename, fsync of the
/// directory; a crash leaves the old file or the new one, never a torn one.
Status writeArtifact(const std::string &path, const Executable &exe, const ArtifactExtras &extras);
/// The same for an artifact already encoded (whose SHA-256 the caller also wants, say).
Status writeArtifact(const std::string &path, const EncodedArtifact &encoded);

struct ArtifactReadOptions {
  /// The file's SHA-256 as 64 hex digits (`smelt compile` prints it, as would sha256sum); when
  /// set, a file with any other content is refused before any of it is decoded. An artifact
  /// holds native code (see Trust above): pinning loads only the file you built or vetted.
  std::string expectedSha256;
};

/// Maps the file at `path` (FileIO.h's mapFile: replace it by rename, as `smelt compile` does,
/// not in place under a running process) and decodes it; its constants are views of the mapping.
Expected<LoadedArtifact> readArtifact(const std::string &path,
                                      const ArtifactReadOptions &options = {});

/// Whether the file at `path` starts with an artifact's magic (so a tool can tell a .smelt file
/// from a .mlir one whatever its name); false when it cannot be read.
bool isArtifactFile(const std::string &path);

} // namespace smelt::rt
