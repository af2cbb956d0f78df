// AOT artifact encoder and reader; the format is documented in Artifact.h. The reader trusts no
// byte: the header and section table are checked before any payload is looked at, each payload
// against its CRC before it is decoded, and each decoded field against the bytes left and the
// plan around it, so a corrupt file ends in a Status naming the file, the part and the byte.
#include "runtime/Artifact.h"

#include "runtime/ByteCodec.h"
#include "runtime/ContentHash.h"
#include "runtime/Devices.h"
#include "runtime/FileIO.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>

namespace smelt::rt {

namespace {

constexpr char kMagic[8] = {'S', 'M', 'E', 'L', 'T', 'A', 'O', 'T'};
constexpr size_t kHeaderBytes = 32, kEntryBytes = 24, kAlignment = 64;
// Header fields, by their byte offset.
constexpr size_t kVersionAt = 8, kFlagsAt = 12, kCountAt = 16, kCrcAt = 20, kFileSizeAt = 24;
constexpr uint32_t kKnownFlags = 0;
// DType's enumerators in order, as the plan stores them.
constexpr uint8_t kDTypeCount = uint8_t(DType::i1) + 1;

enum class Section : uint32_t { meta = 1, plan, constants, cuda, cpu };
constexpr uint32_t kSectionKinds = 5;
constexpr const char *kSectionNames[] = {"", "meta", "plan", "constants", "cuda", "cpu"};

std::string sectionPart(Section kind) {
  return std::string(kSectionNames[uint32_t(kind)]) + " section";
}

// A step's op is stored as its StepOp number and its parameters as the fields its op's params
// struct lists (Executable.h): these pin the numbers the format was written with.
static_assert(uint8_t(StepOp::Fusion) == 0 && uint8_t(StepOp::RngNormal) == 17 &&
              uint8_t(StepOp::ScatterAdd) == 18 && kNumStepOps == 19);

/// The values a parameter stored as one byte may take (bool, the enums); 0 for the other kinds.
template <typename T> constexpr uint8_t kByteValues = 0;
template <> constexpr uint8_t kByteValues<bool> = 2;
template <> constexpr uint8_t kByteValues<ReduceKind> = 2;
template <> constexpr uint8_t kByteValues<Activation> = kNumActivations;
static_assert(uint8_t(Activation::swish) == 6 && kNumActivations == 7);
template <> constexpr uint8_t kByteValues<FilterLayout> = kNumFilterLayouts;
static_assert(uint8_t(FilterLayout::ohwi) == 1 && kNumFilterLayouts == 2);

uint32_t crcOf(const uint8_t *data, size_t size) { return uint32_t(crc32_z(0, data, size)); }

/// CRC32 of the header and section table, reading the checksum field itself as zero.
uint32_t headerCrc(const uint8_t *bytes, size_t tableEnd) {
  const uint8_t zeros[4] = {};
  uLong crc = crc32_z(0, bytes, kCrcAt);
  crc = crc32_z(crc, zeros, 4);
  return uint32_t(crc32_z(crc, bytes + kCrcAt + 4, tableEnd - kCrcAt - 4));
}

bool validTarget(const std::string &target) {
  return target == "cpu" || (target.starts_with("cuda:") && target.size() > 5);
}

// ---------------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------------

/// A step's parameters, field by field in the order `fields` lists them.
void encodeParams(ByteWriter &w, const StepParams &params) {
  std::visit(
      [&](auto p) {
        p.fields([&](const char *, const auto &v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (kByteValues<T> > 0)
            w.u8(uint8_t(v));
          else if constexpr (std::is_same_v<T, int64_t>)
            w.i64(v);
          else if constexpr (std::is_same_v<T, double>)
            w.f64(v);
          else
            w.i64s(v, "an integer-list parameter");
        });
      },
      params);
}

void encodeType(ByteWriter &w, const TensorType &type) {
  w.u8(uint8_t(type.dtype));
  w.i64s(type.shape, "a shape");
}

void encodeTypes(ByteWriter &w, const std::vector<TensorType> &types, const char *what) {
  w.count(types.size(), what);
  for (const TensorType &type : types)
    encodeType(w, type);
}

void encodePlan(const Executable &exe, const std::vector<uint64_t> &constantOffsets,
                ByteWriter &w) {
  w.str(exe.name, "the executable's name");
  w.count(exe.buffers.size(), "buffers");
  for (const BufferInfo &b : exe.buffers) {
    encodeType(w, b.type);
    w.str(b.name, "a buffer name");
    w.i64(b.offset);
  }
  w.i32s(exe.inputs, "inputs");
  w.i32s(exe.outputs, "outputs");
  for (const std::vector<std::string> *names : {&exe.inputNames, &exe.outputNames}) {
    w.count(names->size(), "names");
    for (const std::string &name : *names)
      w.str(name, "a name");
  }
  w.count(exe.constants.size(), "constants");
  for (size_t i = 0; i < exe.constants.size(); ++i) {
    w.i32(exe.constants[i].buffer);
    w.u64(constantOffsets[i]);
    w.u64(exe.constants[i].bytes.size());
  }
  w.count(exe.kernels.size(), "kernels");
  for (const FusedKernel &k : exe.kernels) {
    w.str(k.name, "a kernel name");
    w.str(k.kind, "a kernel kind");
    w.i64(k.units);
    encodeTypes(w, k.inputs, "a kernel's inputs");
    encodeTypes(w, k.results, "a kernel's results");
    w.str(k.ops, "a kernel's ops");
    w.i64(k.computeOps);
    w.i64(k.cudaBlock);
    w.i64(k.cudaGrid);
    w.u64(k.largestValueBytes);
  }
  w.count(exe.steps.size(), "steps");
  for (const Step &s : exe.steps) {
    w.u8(uint8_t(s.op));
    w.str(s.location, "a location");
    w.str(s.device, "a device");
    w.i32s(s.operands, "operands");
    w.i32s(s.results, "results");
    w.i32s(s.frees, "freed buffers");
    encodeParams(w, s.params);
  }
  w.count(exe.peakBytes.size(), "devices with a peak");
  for (const auto &[device, bytes] : exe.peakBytes) {
    w.str(device, "a device");
    w.u64(bytes);
  }
  w.count(exe.segments.size(), "segments");
  for (const Segment &segment : exe.segments) {
    w.str(segment.device, "a device");
    w.u32(segment.begin);
    w.u32(segment.end);
    w.i32s(segment.reads, "a segment's reads");
    w.i32s(segment.writes, "a segment's writes");
  }
}

struct Payload {
  Section kind;
  std::vector<uint8_t> bytes;
};

Expected<std::vector<Payload>> encodeSections(const Executable &exe, const ArtifactExtras &extras) {
  std::vector<Payload> sections;
  Status status;
  // Encodes one section with `fill`, keeping the first error.
  auto add = [&](Section kind, auto fill) {
    Payload p{kind, {}};
    ByteWriter w(p.bytes);
    fill(w);
    if (status.ok())
      status = w.status();
    sections.push_back(std::move(p));
  };
  add(Section::meta, [&](ByteWriter &w) {
    w.str(extras.target, "the target");
    w.str(extras.producer, "the producer");
  });
  // Constants before the plan, which records where each one landed.
  std::vector<uint64_t> offsets;
  add(Section::constants, [&](ByteWriter &w) {
    for (const Constant &c : exe.constants) {
      w.align(kAlignment);
      offsets.push_back(w.size());
      w.raw(c.bytes.data(), c.bytes.size());
    }
  });
  add(Section::plan, [&](ByteWriter &w) { encodePlan(exe, offsets, w); });
  if (exe.cuda)
    add(Section::cuda, [&](ByteWriter &w) {
      w.str(exe.cuda->arch, "the CUDA arch");
      w.str(exe.cuda->source, "the CUDA source");
      w.str(exe.cuda->ptx, "the PTX");
      w.blob(exe.cuda->cubin);
    });
  if (!extras.cpuObject.empty() || !extras.cpuSymbols.empty())
    add(Section::cpu, [&](ByteWriter &w) {
      w.count(extras.cpuSymbols.size(), "CPU symbols");
      for (const std::string &symbol : extras.cpuSymbols)
        w.str(symbol, "a CPU symbol");
      w.blob(extras.cpuObject);
    });
  if (!status.ok())
    return status;
  // Sections in the order of their kinds, which is also their order in the file.
  std::sort(sections.begin(), sections.end(),
            [](const Payload &a, const Payload &b) { return a.kind < b.kind; });
  return sections;
}

// ---------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------

struct Range {
  size_t offset = 0, size = 0;
  bool present = false;
};

/// Decodes one file: checks the header and table, then each section in an order that lets a
/// later one be checked against an earlier one (plan before constants and code).
class Decoder {
public:
  Decoder(const std::vector<uint8_t> &bytes, std::string name, bool keep)
      : bytes_(bytes), name_(std::move(name)), keep_(keep) {}

  Status run(LoadedArtifact &out) {
    SMELT_RETURN_IF_ERROR(readHeader());
    SMELT_RETURN_IF_ERROR(readTable());
    for (uint32_t k = 1; k <= kSectionKinds; ++k)
      SMELT_RETURN_IF_ERROR(checkCrc(Section(k)));
    // One after the other: each may rely on the ones before it having passed.
    std::vector<uint64_t> constantOffsets;
    SMELT_RETURN_IF_ERROR(readMeta(out.extras));
    SMELT_RETURN_IF_ERROR(readPlan(out.executable, constantOffsets));
    readConstants(out.executable, constantOffsets);
    SMELT_RETURN_IF_ERROR(readCuda(out.executable, out.extras.target));
    return readCpu(out.extras, out.executable.kernels.size());
  }

private:
  Status error(const std::string &part, size_t at, const std::string &what) const {
    return Status::error(fmt::format("{}: {}, byte {}: {}", name_, part, at, what));
  }
  Status truncated(size_t needed, const std::string &what) const {
    return error(
        "header", bytes_.size(),
        fmt::format("truncated: the file has {} bytes, {} {}", bytes_.size(), what, needed));
  }
  ByteCursor cursor(Section kind) const {
    const Range &r = sections_[uint32_t(kind)];
    return ByteCursor(name_, sectionPart(kind), bytes_.data() + r.offset, r.size, r.offset);
  }

  Status readHeader() {
    size_t size = bytes_.size();
    const uint8_t *b = bytes_.data();
    if (size == 0)
      return truncated(kHeaderBytes, "the header needs");
    if (std::memcmp(b, kMagic, std::min(size, sizeof kMagic)) != 0) {
      std::string start;
      for (size_t i = 0; i < std::min(size, sizeof kMagic); ++i)
        start += fmt::format("{:02x}", b[i]);
      return error("header", 0,
                   fmt::format("not a Smelt artifact: it starts with 0x{} "
                               "instead of the magic \"SMELTAOT\"",
                               start));
    }
    if (size < kVersionAt + 4)
      return truncated(kVersionAt + 4, "reading the format version needs");
    // The version is read before anything else is trusted, so that a file of another version
    // says so instead of failing a check whose meaning changed.
    if (uint32_t version = uint32_t(loadLE(b + kVersionAt, 4)); version != kArtifactVersion)
      return error("header", kVersionAt,
                   fmt::format("the file has artifact format version {}; this runtime reads "
                               "version {} (compile the model again with a matching smelt)",
                               version, kArtifactVersion));
    if (size < kHeaderBytes)
      return truncated(kHeaderBytes, "the header needs");
    if (uint32_t flags = uint32_t(loadLE(b + kFlagsAt, 4)); flags & ~kKnownFlags)
      return error("header", kFlagsAt,
                   fmt::format("flags 0x{:x} include bits this runtime does not know (0x{:x})",
                               flags, flags & ~kKnownFlags));
    count_ = uint32_t(loadLE(b + kCountAt, 4));
    if (count_ == 0 || count_ > kSectionKinds)
      return error("header", kCountAt,
                   fmt::format("section count {} is not within 1..{} (one section per kind)",
                               count_, kSectionKinds));
    tableEnd_ = kHeaderBytes + kEntryBytes * count_;
    if (size < tableEnd_)
      return truncated(tableEnd_,
                       fmt::format("the header and its {}-entry section table need", count_));
    uint32_t stored = uint32_t(loadLE(b + kCrcAt, 4)), actual = headerCrc(b, tableEnd_);
    if (stored != actual)
      return error("header", kCrcAt,
                   fmt::format("checksum 0x{:08x} does not match the header and section table "
                               "(bytes 0..{} have CRC32 0x{:08x}): the file is corrupt",
                               stored, tableEnd_, actual));
    uint64_t declared = loadLE(b + kFileSizeAt, 8);
    if (declared > size)
      return truncated(declared, "the header declares");
    if (declared < size)
      return error("header", kFileSizeAt,
                   fmt::format("the file has {} bytes, {} more than the {} the header declares",
                               size, size - declared, declared));
    return Status();
  }

  Status readTable() {
    size_t end = tableEnd_;
    for (uint32_t i = 0; i < count_; ++i) {
      size_t at = kHeaderBytes + kEntryBytes * i;
      const uint8_t *e = bytes_.data() + at;
      uint32_t kind = uint32_t(loadLE(e, 4));
      uint64_t offset = loadLE(e + 8, 8), size = loadLE(e + 16, 8);
      std::string entry = fmt::format("entry #{}", i);
      if (kind == 0 || kind > kSectionKinds)
        return error("section table", at,
                     fmt::format("{} has unknown kind {} (known: 1 meta, 2 plan, 3 constants, "
                                 "4 cuda, 5 cpu)",
                                 entry, kind));
      Range &r = sections_[kind];
      entry += fmt::format(" ({} section)", kSectionNames[kind]);
      if (r.present)
        return error("section table", at, entry + " repeats a section");
      if (offset % kAlignment != 0 || offset < end || offset > bytes_.size() ||
          size > bytes_.size() - offset)
        return error("section table", at + 8,
                     fmt::format("{} has {} bytes at byte {}, which is not a {}-byte aligned "
                                 "range after byte {} inside the file's {} bytes",
                                 entry, size, offset, kAlignment, end, bytes_.size()));
      SMELT_RETURN_IF_ERROR(checkZeros(end, offset, entry));
      r = {size_t(offset), size_t(size), true};
      crcAt_[kind] = at + 4;
      end = size_t(offset + size);
    }
    if (end != bytes_.size())
      return error("section table", kHeaderBytes,
                   fmt::format("bytes {}..{} at the end of the file belong to no section", end,
                               bytes_.size()));
    for (Section required : {Section::meta, Section::plan, Section::constants})
      if (!sections_[uint32_t(required)].present)
        return error("section table", kHeaderBytes,
                     fmt::format("the file has no {}", sectionPart(required)));
    return Status();
  }

  /// The padding before a section must be zero, so no byte of a file goes unchecked.
  Status checkZeros(size_t begin, size_t end, const std::string &before) const {
    for (size_t i = begin; i < end; ++i)
      if (bytes_[i] != 0)
        return error("padding", i,
                     fmt::format("byte 0x{:02x} before {} should be zero", bytes_[i], before));
    return Status();
  }

  Status checkCrc(Section kind) const {
    const Range &r = sections_[uint32_t(kind)];
    if (!r.present)
      return Status();
    uint32_t stored = uint32_t(loadLE(bytes_.data() + crcAt_[uint32_t(kind)], 4));
    uint32_t actual = crcOf(bytes_.data() + r.offset, r.size);
    if (stored == actual)
      return Status();
    return error(sectionPart(kind), r.offset,
                 fmt::format("bytes {}..{} have CRC32 0x{:08x}, the section table (byte {}) "
                             "says 0x{:08x}: the section is corrupt",
                             r.offset, r.offset + r.size, actual, crcAt_[uint32_t(kind)], stored));
  }

  Status readMeta(ArtifactExtras &extras) const {
    ByteCursor c = cursor(Section::meta);
    size_t at = c.at();
    extras.target = c.str("the target");
    if (c.ok() && !validTarget(extras.target))
      c.fail(at, fmt::format("target '{}' is neither \"cpu\" nor \"cuda:<arch>\"", extras.target));
    extras.producer = c.str("the producer");
    c.finish();
    return c.status();
  }

  /// A buffer id in [0, buffers).
  static BufferId readId(ByteCursor &c, const std::string &what, size_t buffers) {
    size_t at = c.at();
    BufferId id = c.i32("a buffer id");
    if (c.ok() && (id < 0 || size_t(id) >= buffers))
      c.fail(at, fmt::format("{}: buffer id {} is out of range (the plan has {} buffers)", what, id,
                             buffers));
    return id;
  }

  static std::vector<BufferId> readIds(ByteCursor &c, const std::string &what, size_t buffers) {
    uint32_t n = c.count("the " + what + " list", 4);
    std::vector<BufferId> ids;
    ids.reserve(n);
    for (uint32_t i = 0; i < n && c.ok(); ++i)
      ids.push_back(readId(c, fmt::format("{} #{}", what, i), buffers));
    return ids;
  }

  static TensorType readType(ByteCursor &c, const std::string &what) {
    size_t at = c.at();
    uint8_t code = c.u8("a dtype");
    if (c.ok() && code >= kDTypeCount)
      c.fail(at, fmt::format("{} has dtype code {} (known: 0..{}, f32 to i1)", what, code,
                             kDTypeCount - 1));
    TensorType type{c.ok() ? DType(code) : DType::f32, {}};
    at = c.at();
    type.shape = c.i64s("a shape");
    // The byte size must fit int64, so numElements() and byteSize() cannot overflow later.
    uint64_t bytes = byteWidth(type.dtype);
    for (int64_t d : type.shape)
      if (c.ok() && (d < 0 || __builtin_mul_overflow(bytes, uint64_t(d), &bytes) ||
                     bytes > uint64_t(std::numeric_limits<int64_t>::max())))
        c.fail(at, fmt::format("{} has shape [{}], which is negative or too large", what,
                               fmt::join(type.shape, ", ")));
    return type;
  }

  /// The names of the function's arguments or results: none (a hand-built Executable), or one
  /// each.
  static std::vector<std::string> readNames(ByteCursor &c, const std::string &what, size_t want) {
    size_t at = c.at();
    uint32_t n = c.count("the " + what + " names", 4);
    if (c.ok() && n != 0 && n != want)
      c.fail(at, fmt::format("{} {} names for {} {}s", n, what, want, what));
    std::vector<std::string> names;
    for (uint32_t i = 0; i < n && c.ok(); ++i)
      names.push_back(c.str("a name"));
    return names;
  }

  /// A list of types (each a dtype byte and a shape list: at least 5 bytes).
  static std::vector<TensorType> readTypes(ByteCursor &c, const std::string &what) {
    std::vector<TensorType> types;
    uint32_t n = c.count(what + " list", 5);
    for (uint32_t i = 0; i < n && c.ok(); ++i)
      types.push_back(readType(c, fmt::format("{} #{}", what, i)));
    return types;
  }

  /// Reads the parameters `step.op` takes, field by field, into `step.params`.
  static void readParams(ByteCursor &c, Step &step, const std::string &what) {
    step.params = paramsFor(step.op);
    std::visit(
        [&](auto &p) {
          p.fields([&](const char *name, auto &v) {
            using T = std::decay_t<decltype(v)>;
            size_t at = c.at();
            std::string field = fmt::format("{}: parameter '{}'", what, name);
            if constexpr (kByteValues<T> > 0) {
              uint8_t byte = c.u8(field);
              if (c.ok() && byte >= kByteValues<T>)
                c.fail(at, fmt::format("{} is {}, not within 0..{}", field, byte,
                                       kByteValues<T> - 1));
              v = T(byte);
            } else if constexpr (std::is_same_v<T, int64_t>) {
              v = c.i64(field);
            } else if constexpr (std::is_same_v<T, double>) {
              v = c.f64(field);
            } else {
              v = c.i64s(field);
            }
          });
        },
        step.params);
  }

  Status readPlan(Executable &exe, std::vector<uint64_t> &constantOffsets) const {
    ByteCursor c = cursor(Section::plan);
    exe.name = c.str("the executable's name");
    uint32_t n = c.count("the buffer list", 17);
    for (uint32_t i = 0; i < n && c.ok(); ++i) {
      BufferInfo b;
      b.type = readType(c, fmt::format("buffer b{}", i));
      b.name = c.str("a buffer name");
      size_t offsetAt = c.at();
      b.offset = c.i64("a buffer's arena offset");
      // The executor checks offsets against each other when it lays out its arena.
      if (c.ok() && b.offset < -1)
        c.fail(offsetAt, fmt::format("buffer b{} has arena offset {}", i, b.offset));
      exe.buffers.push_back(std::move(b));
    }
    size_t buffers = exe.buffers.size();
    exe.inputs = readIds(c, "input", buffers);
    exe.outputs = readIds(c, "output", buffers);
    exe.inputNames = readNames(c, "argument", exe.inputs.size());
    exe.outputNames = readNames(c, "result", exe.outputs.size());

    size_t constantsSize = sections_[uint32_t(Section::constants)].size;
    n = c.count("the constant list", 20);
    for (uint32_t i = 0; i < n && c.ok(); ++i) {
      size_t at = c.at();
      Constant constant;
      constant.buffer = readId(c, fmt::format("constant #{}", i), buffers);
      uint64_t offset = c.u64("a constant's offset"), size = c.u64("a constant's size");
      if (!c.ok())
        break;
      const TensorType &type = exe.buffers[size_t(constant.buffer)].type;
      if (size != type.byteSize())
        c.fail(at, fmt::format("constant #{} (b{}, {}) has {} bytes, its type needs {}", i,
                               constant.buffer, type.str(), size, type.byteSize()));
      else if (offset % kAlignment != 0 || size > constantsSize || offset > constantsSize - size)
        c.fail(at, fmt::format("constant #{} (b{}) has {} bytes at offset {}, which is not a "
                               "{}-byte aligned range inside the constants section's {} bytes",
                               i, constant.buffer, size, offset, kAlignment, constantsSize));
      exe.constants.push_back(std::move(constant));
      constantOffsets.push_back(offset);
    }

    n = c.count("the kernel list", 60);
    for (uint32_t i = 0; i < n && c.ok(); ++i) {
      size_t at = c.at();
      FusedKernel k;
      k.name = c.str("a kernel name");
      k.kind = c.str("a kernel kind");
      k.units = c.i64("a kernel's units");
      k.inputs = readTypes(c, fmt::format("kernel #{} input", i));
      k.results = readTypes(c, fmt::format("kernel #{} result", i));
      k.ops = c.str("a kernel's ops");
      k.computeOps = c.i64("a kernel's compute op count");
      k.cudaBlock = c.i64("a kernel's CUDA block");
      k.cudaGrid = c.i64("a kernel's CUDA grid");
      k.largestValueBytes = c.u64("a kernel's largest value");
      if (c.ok() && (k.units < 0 || k.computeOps < 0 || k.cudaBlock < 0 || k.cudaGrid < 0))
        c.fail(at, fmt::format("kernel #{} ('{}') has a negative count: units {}, compute ops "
                               "{}, CUDA block {}, grid {}",
                               i, k.name, k.units, k.computeOps, k.cudaBlock, k.cudaGrid));
      exe.kernels.push_back(std::move(k));
    }

    n = c.count("the step list", 17);
    for (uint32_t i = 0; i < n && c.ok(); ++i) {
      size_t at = c.at();
      Step step;
      uint8_t op = c.u8("a step op");
      if (c.ok() && op >= kNumStepOps)
        c.fail(at, fmt::format("step #{} has op #{}; this runtime knows ops 0..{}", i, op,
                               kNumStepOps - 1));
      step.op = c.ok() ? StepOp(op) : StepOp::Copy;
      std::string what = fmt::format("step #{} ('{}')", i, step.name());
      step.location = c.str("a location");
      size_t deviceAt = c.at();
      step.device = c.str("a device");
      if (c.ok() && !isDeviceName(step.device))
        c.fail(deviceAt, fmt::format("{}: device '{}' is not cpu:0 or gpu:<N>", what,
                                     step.device));
      step.operands = readIds(c, what + " operand", buffers);
      step.results = readIds(c, what + " result", buffers);
      step.frees = readIds(c, what + " freed buffer", buffers);
      readParams(c, step, what);
      if (c.ok() && (step.op == StepOp::Fusion || step.kernel() != kNoKernel)) {
        int64_t kernel = step.kernel();
        if (kernel < 0 || uint64_t(kernel) >= exe.kernels.size())
          c.fail(at, fmt::format("{} runs kernel #{}, but the plan has {} kernels", what, kernel,
                                 exe.kernels.size()));
      }
      exe.steps.push_back(std::move(step));
    }
    n = c.count("the peak bytes per device", 12);
    for (uint32_t i = 0; i < n && c.ok(); ++i) {
      std::string device = c.str("a device with a peak");
      exe.peakBytes[device] = c.u64("a device's peak bytes");
    }
    n = c.count("the schedule's segments", 20);
    for (uint32_t i = 0; i < n && c.ok(); ++i) {
      Segment &segment = exe.segments.emplace_back();
      std::string what = fmt::format("segment #{}", i);
      size_t deviceAt = c.at();
      segment.device = c.str("a segment's device");
      if (c.ok() && !isDeviceName(segment.device))
        c.fail(deviceAt,
               fmt::format("{}: device '{}' is not cpu:0 or gpu:<N>", what, segment.device));
      segment.begin = c.u32("a segment's first step");
      segment.end = c.u32("a segment's end");
      segment.reads = readIds(c, what + " read", buffers);
      segment.writes = readIds(c, what + " write", buffers);
    }
    c.finish();
    return c.status();
  }

  void readConstants(Executable &exe, const std::vector<uint64_t> &offsets) const {
    if (!keep_)
      return;
    const uint8_t *base = bytes_.data() + sections_[uint32_t(Section::constants)].offset;
    // readPlan checked every range against the section's size.
    for (size_t i = 0; i < exe.constants.size(); ++i) {
      size_t size = exe.buffers[size_t(exe.constants[i].buffer)].type.byteSize();
      exe.constants[i].bytes = std::vector<uint8_t>(base + offsets[i], base + offsets[i] + size);
    }
  }

  Status readCuda(Executable &exe, const std::string &target) const {
    if (!sections_[uint32_t(Section::cuda)].present)
      return Status();
    ByteCursor c = cursor(Section::cuda);
    auto code = std::make_shared<CudaCode>();
    size_t at = c.at();
    code->arch = c.str("the CUDA arch");
    if (c.ok() && target.starts_with("cuda:") && target.substr(5) != code->arch)
      c.fail(at, fmt::format("arch '{}' differs from the target '{}' in the meta section",
                             code->arch, target));
    code->source = c.str("the CUDA source");
    code->ptx = c.str("the PTX");
    code->cubin = c.blob("the CUBIN", keep_);
    c.finish();
    exe.cuda = std::move(code);
    return c.status();
  }

  Status readCpu(ArtifactExtras &extras, size_t kernels) const {
    if (!sections_[uint32_t(Section::cpu)].present)
      return Status();
    ByteCursor c = cursor(Section::cpu);
    size_t at = c.at();
    uint32_t n = c.count("the CPU symbol list", 4);
    if (c.ok() && n != kernels)
      c.fail(at, fmt::format("{} CPU symbols for {} kernels: the CPU code needs one symbol per "
                             "kernel",
                             n, kernels));
    for (uint32_t i = 0; i < n && c.ok(); ++i) {
      size_t symbolAt = c.at();
      std::string symbol = c.str("a CPU symbol");
      // An empty symbol: a kernel only a GPU runs.
      if (c.ok() && symbol.find('\0') != std::string::npos)
        c.fail(symbolAt, fmt::format("CPU symbol #{} holds a NUL byte", i));
      extras.cpuSymbols.push_back(std::move(symbol));
    }
    at = c.at();
    extras.cpuObject = c.blob("the CPU shared library", keep_);
    if (c.ok() && at + 8 == c.at())
      c.fail(at, "the CPU shared library is empty");
    c.finish();
    return c.status();
  }

  const std::vector<uint8_t> &bytes_;
  std::string name_;
  bool keep_;
  uint32_t count_ = 0;
  size_t tableEnd_ = 0;
  Range sections_[kSectionKinds + 1];
  size_t crcAt_[kSectionKinds + 1] = {};
};

/// Decodes `bytes`; with keep false, checks only (constant bytes and binaries are not copied).
Expected<LoadedArtifact> decode(const std::vector<uint8_t> &bytes, const std::string &name,
                                bool keep) {
  try {
    LoadedArtifact artifact;
    SMELT_RETURN_IF_ERROR(Decoder(bytes, name, keep).run(artifact));
    return artifact;
  } catch (const std::exception &e) {
    // Only allocation can throw here: every size was checked against the file's.
    return Status::error(fmt::format("{}: cannot read the artifact: {}", name, e.what()));
  }
}

} // namespace

Expected<std::vector<uint8_t>> encodeArtifact(const Executable &exe, const ArtifactExtras &extras) {
  // The format stores a step's parameters as the fields its op takes: parameters of another
  // kind could not be read back as written.
  for (size_t i = 0; i < exe.steps.size(); ++i) {
    const Step &step = exe.steps[i];
    if (uint8_t(step.op) >= kNumStepOps || step.params.index() != paramsFor(step.op).index())
      return Status::error(fmt::format("cannot encode the artifact: step #{} ('{}') has "
                                       "parameters of another op",
                                       i, step.name()));
  }
  Expected<std::vector<Payload>> sections = encodeSections(exe, extras);
  if (!sections)
    return Status::error("cannot encode the artifact: " + sections.message());
  size_t tableEnd = kHeaderBytes + kEntryBytes * sections->size();
  std::vector<uint8_t> out(tableEnd);
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  storeLE(&out[kVersionAt], kArtifactVersion, 4);
  storeLE(&out[kFlagsAt], 0, 4);
  storeLE(&out[kCountAt], uint32_t(sections->size()), 4);
  for (size_t i = 0; i < sections->size(); ++i) {
    const Payload &p = (*sections)[i];
    ByteWriter(out).align(kAlignment);
    uint8_t *entry = &out[kHeaderBytes + kEntryBytes * i];
    storeLE(entry, uint32_t(p.kind), 4);
    storeLE(entry + 4, crcOf(p.bytes.data(), p.bytes.size()), 4);
    storeLE(entry + 8, out.size(), 8);
    storeLE(entry + 16, p.bytes.size(), 8);
    out.insert(out.end(), p.bytes.begin(), p.bytes.end());
  }
  storeLE(&out[kFileSizeAt], out.size(), 8);
  storeLE(&out[kCrcAt], headerCrc(out.data(), tableEnd), 4);
  SMELT_RETURN_IF_ERROR(decode(out, "the artifact being written", /*keep=*/false).status());
  return out;
}

Expected<LoadedArtifact> decodeArtifact(const std::vector<uint8_t> &bytes,
                                        const std::string &name) {
  return decode(bytes, name, /*keep=*/true);
}

Status writeArtifact(const std::string &path, const Executable &exe, const ArtifactExtras &extras) {
  Expected<std::vector<uint8_t>> bytes = encodeArtifact(exe, extras);
  if (!bytes)
    return Status::error(path + ": " + bytes.message());
  return writeFileAtomically(path, *bytes);
}

Expected<LoadedArtifact> readArtifact(const std::string &path,
                                      const ArtifactReadOptions &options) {
  SMELT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, readFileBytes(path));
  if (!options.expectedSha256.empty())
    SMELT_RETURN_IF_ERROR(checkSha256(bytes, options.expectedSha256, path));
  return decode(bytes, path, /*keep=*/true);
}

bool isArtifactFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  char magic[sizeof kMagic] = {};
  return in.read(magic, sizeof magic) && std::memcmp(magic, kMagic, sizeof magic) == 0;
}

} // namespace smelt::rt
