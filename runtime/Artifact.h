// AOT artifacts (`model.smelt`): one Executable and its compiled code in a versioned,
// checksummed file that the runtime alone reads back, with no MLIR or LLVM.
//
// Format, version 13 (12 had no convolution filter layout; 11 no fusion results written in
// place of an operand; 10 no
// schedule: no freed buffers per step and no segments; 9 no
// kernel's largest value bytes; 8 no GPU kernel in argmax's and scatter_add's parameters, 7 no
// convolution group count and no relu6, hardswish or swish activation, 6 no scatter_add step,
// 5 no matmul/conv2d epilogue fields, 4 no kernel types, no argument or result names and CPU
// code with startup files, 3 string-keyed step attributes, 2 no peak bytes, 1 no step
// devices). A reader refuses every other version, naming both. Every integer is
// little-endian; offsets count from the start of the file.
//
//   header (32 bytes)
//     0  magic "SMELTAOT"            16  u32 section count (1..5)
//     8  u32 format version (13)      20  u32 CRC32 of bytes [0, 32 + 24 * count), this field as 0
//    12  u32 flags (none yet; a      24  u64 size of the whole file
//        reader rejects bits it does not know)
//   section table (count entries of 24 bytes, at byte 32)
//     u32 kind, u32 CRC32 of the payload, u64 offset, u64 size
//   payloads: each at a multiple of 64 bytes, in increasing offset order, zero bytes between
//     them, the last one ending at the end of the file. So every byte is checked: the header and
//     table by the header CRC, payloads by theirs, the gaps by being zero.
//
// Section kinds (each at most once; meta, plan and constants required):
//   1 meta       str target ("cpu", "cuda:sm_90"), str producer
//   2 plan       the Executable without its code and constant bytes, below
//   3 constants  raw little-endian element bytes, each constant at a multiple of 64 bytes
//   4 cuda       str arch, str source, str ptx, blob cubin
//   5 cpu        u32 n, n x str symbol (one per kernel, indexed like Executable::kernels),
//                blob shared library (an ELF image for this machine that runs no code when
//                loaded: runtime/ElfImage.h says what the loader checks before dlopen)
// where str is a u32 length and the bytes, blob a u64 length and the bytes, list<T> a u32 count
// and the elements, ids a list<i32> of buffer ids, type a u8 dtype (DType's order: f32 f16
// bf16 f64 i32 i64 i1) and a list<i64> shape.
//
//   plan: str name
//         list<buffer>   buffer   = type, str name, i64 arena offset (-1: none)
//         ids inputs, ids outputs
//         list<str> argument names, list<str> result names (none, or one each)
//         list<constant> constant = i32 buffer, u64 offset in the constants section, u64 size
//         list<kernel>   kernel   = str name, str kind, i64 units, list<type> inputs,
//                                   list<type> results, str ops, i64 compute ops,
//                                   i64 CUDA block, i64 CUDA grid, u64 largest value bytes
//         list<step>     step     = u8 op (StepOp), str location, str device ("cpu:0",
//                                   "gpu:N"), ids operands, ids results, ids frees (given
//                                   back after the step: Step::frees), then the fields the
//                                   op's parameters list (Executable.h), each as u8 (bool,
//                                   enum: 0..values-1), i64, f64 (IEEE bits) or list<i64>
//                                   (a fusion's: i64 kernel, list<i64> in place per result);
//                                   matmul's and conv2d's end with u8 bias (a third operand)
//                                   and u8 activation (0 none, 1 relu, 2 tanh, 3 logistic,
//                                   4 relu6, 5 hardswish, 6 swish); the convolutions' with
//                                   u8 filter layout (0 hwio, 1 ohwi)
//         list<peak>     peak     = str device, u64 bytes (smelt-assign-buffers' prediction)
//         list<segment>  segment  = str device, u32 first step, u32 end, ids reads, ids writes
//                                   (the compiler's schedule: Executable::segments)
//
// A reader checks everything before use: magic, version, flags, checksums, every length and
// count against the bytes left (so no corrupt count drives an allocation), dtype codes and step
// ops, shapes (non-negative, byte size within int64), buffer ids in range, constant sizes
// against their buffers' types, kernel steps' kernel index, one CPU symbol per kernel, and the
// CPU code's ELF structure. Errors read "<file>: <section> section, byte <N>: <what>". Whether
// the steps make sense (parameters, one producer per buffer, each buffer of the type its step
// and kernel expect) is the executor's check, as for any Executable.
//
// Trust: a .smelt file holds native code, which runs with the process's rights, as a shared
// library does. The checks above stop damaged files; they cannot tell a malicious file from an
// honest one. Load only files you would load as a library, or pin the content hash (see
// LoadOptions::expectedSha256 below and `smelt run --expect-sha256`).
#pragma once

#include "runtime/Executable.h"
#include "runtime/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace smelt::rt {

inline constexpr uint32_t kArtifactVersion = 13;

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

/// The bytes of an artifact. The encoder checks its own output with the reader, so anything it
/// returns reads back; an Executable the reader would reject (a buffer id out of range, a
/// constant of the wrong size) is an error here instead.
Expected<std::vector<uint8_t>> encodeArtifact(const Executable &exe, const ArtifactExtras &extras);

/// Reads an artifact from memory; `name` stands for the file in messages.
Expected<LoadedArtifact> decodeArtifact(const std::vector<uint8_t> &bytes,
                                        const std::string &name = "<memory>");

/// Writes atomically: a temporary file beside `path`, fsync, rename, fsync of the directory; a
/// crash leaves the old file or the new one, never a torn one.
Status writeArtifact(const std::string &path, const Executable &exe, const ArtifactExtras &extras);

struct ArtifactReadOptions {
  /// The file's SHA-256 as 64 hex digits (`smelt compile` prints it, as would sha256sum); when
  /// set, a file with any other content is refused before any of it is decoded. An artifact
  /// holds native code (see Trust above): pinning loads only the file you built or vetted.
  std::string expectedSha256;
};

Expected<LoadedArtifact> readArtifact(const std::string &path,
                                      const ArtifactReadOptions &options = {});

/// Whether the file at `path` starts with an artifact's magic (so a tool can tell a .smelt file
/// from a .mlir one whatever its name); false when it cannot be read.
bool isArtifactFile(const std::string &path);

} // namespace smelt::rt
