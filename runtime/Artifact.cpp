// AOT artifact encoder and reader; the format is documented in Artifact.h. The reader trusts no
// byte: the header is checked before anything else, the plan and data against their CRCs, the
// plan by FlatBuffers' verifier, then each field against the plan around it, so a damaged file
// ends in a Status naming the file and the part (and the byte, or the plan's entry).
#include "runtime/Artifact.h"

#include "runtime/ArtifactPlan_generated.h"
#include "runtime/ContentHash.h"
#include "runtime/Devices.h"
#include "runtime/FileIO.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <zlib.h>

#include <bit>
#include <cstring>
#include <fstream>
#include <limits>

namespace smelt::rt {

namespace {

constexpr char kMagic[8] = {'S', 'M', 'E', 'L', 'T', 'A', 'O', 'T'};
constexpr size_t kHeaderBytes = 64, kAlignment = 64;
// Header fields, by their byte offset.
constexpr size_t kVersionAt = 8, kFlagsAt = 12, kPlanSizeAt = 16, kDataSizeAt = 24, kPlanCrcAt = 32,
                 kDataCrcAt = 36, kHeaderCrcAt = 40;
constexpr uint32_t kKnownFlags = 0;
constexpr uint8_t kDTypeCount = uint8_t(DType::i1) + 1;
static_assert(uint8_t(aot::DType::MAX) + 1 == kDTypeCount);

/// The values a parameter stored as a small integer may take (bool, the enums); 0 for the
/// other kinds.
template <typename T> constexpr int64_t kEnumValues = 0;
template <> constexpr int64_t kEnumValues<bool> = 2;
template <> constexpr int64_t kEnumValues<ReduceKind> = 2;
template <> constexpr int64_t kEnumValues<Activation> = kNumActivations;
template <> constexpr int64_t kEnumValues<FilterLayout> = kNumFilterLayouts;

uint64_t loadLE(const uint8_t *p, int width) {
  uint64_t v = 0;
  for (int i = 0; i < width; ++i)
    v |= uint64_t(p[i]) << (8 * i);
  return v;
}
void storeLE(uint8_t *p, uint64_t v, int width) {
  for (int i = 0; i < width; ++i)
    p[i] = uint8_t(v >> (8 * i));
}
size_t alignUp(size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }
uint32_t crcOf(const uint8_t *data, size_t size) { return uint32_t(crc32_z(0, data, size)); }

bool validTarget(const std::string &target) {
  return target == "cpu" || (target.starts_with("cuda:") && target.size() > 5);
}

// ---------------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------------

/// Zero bytes that pad the data part's pieces to multiples of kAlignment.
constexpr uint8_t kZeros[kAlignment] = {};

/// The data part being written: each blob at a multiple of kAlignment, as a view of the bytes
/// the Executable or the extras hold (nothing is copied).
struct DataWriter {
  std::vector<std::span<const uint8_t>> pieces;
  size_t size = 0;
  std::unique_ptr<aot::Range> add(const uint8_t *data, size_t bytes) {
    if (size_t padding = alignUp(size) - size) {
      pieces.emplace_back(kZeros, padding);
      size += padding;
    }
    auto range = std::make_unique<aot::Range>(size, bytes);
    if (bytes != 0)
      pieces.emplace_back(data, bytes);
    size += bytes;
    return range;
  }
  std::unique_ptr<aot::Range> add(const std::string &s) {
    return add(reinterpret_cast<const uint8_t *>(s.data()), s.size());
  }
};

std::unique_ptr<aot::TypeT> typeOf(const TensorType &type) {
  auto t = std::make_unique<aot::TypeT>();
  t->dtype = aot::DType(type.dtype);
  t->shape = type.shape;
  return t;
}

std::vector<std::unique_ptr<aot::TypeT>> typesOf(const std::vector<TensorType> &types) {
  std::vector<std::unique_ptr<aot::TypeT>> out;
  for (const TensorType &type : types)
    out.push_back(typeOf(type));
  return out;
}

/// A step's parameters, one Param per field its op's params struct lists.
std::vector<std::unique_ptr<aot::ParamT>> paramsOf(const StepParams &params) {
  std::vector<std::unique_ptr<aot::ParamT>> out;
  std::visit(
      [&](auto p) {
        p.fields([&](const char *name, const auto &v) {
          using T = std::decay_t<decltype(v)>;
          auto &param = out.emplace_back(std::make_unique<aot::ParamT>());
          param->name = name;
          if constexpr (std::is_same_v<T, std::vector<int64_t>>)
            param->integers = v;
          else if constexpr (std::is_same_v<T, double>)
            param->real = v;
          else
            param->integer = int64_t(v);
        });
      },
      params);
  return out;
}

aot::PlanT planOf(const Executable &exe, const ArtifactExtras &extras, DataWriter &data) {
  aot::PlanT plan;
  plan.target = extras.target;
  plan.producer = extras.producer;
  plan.name = exe.name;
  for (const BufferInfo &b : exe.buffers) {
    auto buffer = std::make_unique<aot::BufferT>();
    buffer->type = typeOf(b.type);
    buffer->name = b.name;
    buffer->offset = b.offset;
    plan.buffers.push_back(std::move(buffer));
  }
  plan.inputs = exe.inputs;
  plan.outputs = exe.outputs;
  plan.input_names = exe.inputNames;
  plan.output_names = exe.outputNames;
  for (const Constant &c : exe.constants) {
    auto constant = std::make_unique<aot::ConstantT>();
    constant->buffer = c.buffer;
    constant->bytes = data.add(c.bytes.data(), c.bytes.size());
    plan.constants.push_back(std::move(constant));
  }
  for (const FusedKernel &k : exe.kernels) {
    auto kernel = std::make_unique<aot::KernelT>();
    kernel->name = k.name;
    kernel->kind = k.kind;
    kernel->units = k.units;
    kernel->inputs = typesOf(k.inputs);
    kernel->results = typesOf(k.results);
    kernel->ops = k.ops;
    kernel->compute_ops = k.computeOps;
    kernel->cuda_block = k.cudaBlock;
    kernel->cuda_grid = k.cudaGrid;
    kernel->largest_value_bytes = k.largestValueBytes;
    plan.kernels.push_back(std::move(kernel));
  }
  for (const Step &s : exe.steps) {
    auto step = std::make_unique<aot::StepT>();
    step->op = s.name();
    step->location = s.location;
    step->device = s.device;
    step->operands = s.operands;
    step->results = s.results;
    step->frees = s.frees;
    step->params = paramsOf(s.params);
    plan.steps.push_back(std::move(step));
  }
  for (const auto &[device, bytes] : exe.peakBytes) {
    auto peak = std::make_unique<aot::PeakT>();
    peak->device = device;
    peak->bytes = bytes;
    plan.peaks.push_back(std::move(peak));
  }
  for (const Segment &s : exe.segments) {
    auto segment = std::make_unique<aot::SegmentT>();
    segment->device = s.device;
    segment->begin = s.begin;
    segment->end = s.end;
    segment->reads = s.reads;
    segment->writes = s.writes;
    plan.segments.push_back(std::move(segment));
  }
  if (exe.cuda) {
    plan.cuda = std::make_unique<aot::CudaCodeT>();
    plan.cuda->arch = exe.cuda->arch;
    plan.cuda->source = data.add(exe.cuda->source);
    plan.cuda->ptx = data.add(exe.cuda->ptx);
    plan.cuda->cubin = data.add(exe.cuda->cubin.data(), exe.cuda->cubin.size());
  }
  if (!extras.cpuObject.empty() || !extras.cpuSymbols.empty()) {
    plan.cpu = std::make_unique<aot::CpuCodeT>();
    plan.cpu->symbols = extras.cpuSymbols;
    plan.cpu->library = data.add(extras.cpuObject.data(), extras.cpuObject.size());
  }
  return plan;
}

// ---------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------

/// Decodes one file: the header, the checksums, the plan's structure, then the plan's fields in
/// an order that lets each be checked against the ones before it.
class Decoder {
public:
  /// With an `owner` of `bytes`, the blobs kept are views of them; without, copies. Without
  /// `keep`, the encoder's check of its own output: `bytes` are the header and the plan up to the
  /// data, which is the encoder's pieces (their CRC its own), and nothing is kept.
  /// Without `checkDataCrc`, the caller has checked the bytes against a cryptographic digest of
  /// the encoder's output.
  Decoder(std::span<const uint8_t> bytes, std::shared_ptr<const void> owner, std::string name,
          bool keep, bool checkDataCrc)
      : bytes_(bytes), owner_(std::move(owner)), name_(std::move(name)), keep_(keep),
        checkDataCrc_(checkDataCrc) {}

  Status run(LoadedArtifact &out) {
    SMELT_RETURN_IF_ERROR(readHeader());
    SMELT_RETURN_IF_ERROR(checkCrc("plan", kHeaderBytes, planSize_, kPlanCrcAt));
    for (size_t i = kHeaderBytes + planSize_; i < dataAt_; ++i)
      if (bytes_[i] != 0)
        return error(
            "padding", i,
            fmt::format("byte 0x{:02x} between the plan and the data should be zero", bytes_[i]));
    if (keep_ && checkDataCrc_)
      SMELT_RETURN_IF_ERROR(checkCrc("data", dataAt_, dataSize_, kDataCrcAt));
    if (planSize_ >= FLATBUFFERS_MAX_BUFFER_SIZE)
      return error("plan", kHeaderBytes,
                   fmt::format("{} bytes are more than a FlatBuffer can hold (2 GiB)", planSize_));
    // Every table visit counts against max_tables, so a plan cannot make the verifier walk more
    // tables than it has bytes.
    flatbuffers::Verifier::Options options;
    options.max_depth = 16;
    options.max_tables = flatbuffers::uoffset_t(planSize_ / 4 + 1);
    flatbuffers::Verifier verifier(bytes_.data() + kHeaderBytes, planSize_, options);
    if (!aot::VerifyPlanBuffer(verifier))
      return error("plan", kHeaderBytes,
                   fmt::format("the {} bytes are not a plan of runtime/ArtifactPlan.fbs "
                               "(FlatBuffers' verifier refuses them)",
                               planSize_));
    return readPlan(*aot::GetPlan(bytes_.data() + kHeaderBytes), out);
  }

private:
  Status error(std::string_view part, size_t at, const std::string &what) const {
    return Status::error(fmt::format("{}: {}, byte {}: {}", name_, part, at, what));
  }
  Status truncated(size_t needed, const std::string &what) const {
    return error(
        "header", bytes_.size(),
        fmt::format("truncated: the file has {} bytes, {} {}", bytes_.size(), what, needed));
  }
  /// Records the first error in the plan's fields; the reading goes on with defaults.
  void fail(const std::string &what) {
    if (status_.ok())
      status_ = Status::error(fmt::format("{}: plan: {}", name_, what));
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
    uint32_t stored = uint32_t(loadLE(b + kHeaderCrcAt, 4)), actual = crcOf(b, kHeaderCrcAt);
    if (stored != actual)
      return error("header", kHeaderCrcAt,
                   fmt::format("checksum 0x{:08x} does not match the header (bytes 0..{} have "
                               "CRC32 0x{:08x}): the file is corrupt",
                               stored, kHeaderCrcAt, actual));
    for (size_t i = kHeaderCrcAt + 4; i < kHeaderBytes; ++i)
      if (b[i] != 0)
        return error("header", i, fmt::format("reserved byte 0x{:02x} should be zero", b[i]));
    uint64_t plan = loadLE(b + kPlanSizeAt, 8), data = loadLE(b + kDataSizeAt, 8);
    // Sizes beyond the largest file keep the sums below from overflowing.
    constexpr uint64_t kLargest = uint64_t(1) << 56;
    if (plan > kLargest || data > kLargest)
      return truncated(std::max(plan, data), "the header declares a part of");
    planSize_ = size_t(plan);
    dataAt_ = alignUp(kHeaderBytes + planSize_);
    dataSize_ = size_t(data);
    if (!keep_)
      size += dataSize_;
    if (dataAt_ + dataSize_ > size)
      return truncated(dataAt_ + dataSize_, "the header declares");
    if (dataAt_ + dataSize_ < size)
      return error("header", kDataSizeAt,
                   fmt::format("the file has {} bytes, {} more than the {} the header declares",
                               size, size - dataAt_ - dataSize_, dataAt_ + dataSize_));
    return Status();
  }

  Status checkCrc(std::string_view part, size_t offset, size_t size, size_t crcAt) const {
    uint32_t stored = uint32_t(loadLE(bytes_.data() + crcAt, 4));
    uint32_t actual = crcOf(bytes_.data() + offset, size);
    if (stored == actual)
      return Status();
    return error(part, offset,
                 fmt::format("bytes {}..{} have CRC32 0x{:08x}, the header (byte {}) says "
                             "0x{:08x}: the {} is corrupt",
                             offset, offset + size, actual, crcAt, stored, part));
  }

  // Every string and vector the plan materializes is charged against the plan's size: a writer
  // stores each once, so a plan whose parts are shared (one shape for a million buffers) ends
  // here instead of in an allocation far larger than the file.
  bool charge(size_t bytes) {
    charged_ += bytes;
    if (charged_ <= planSize_)
      return true;
    fail(fmt::format("its entries refer to more than its {} bytes (parts are shared)", planSize_));
    return false;
  }
  std::string text(const flatbuffers::String *s) {
    if (!s || !charge(s->size()))
      return {};
    return s->str();
  }
  /// Copied bytewise: the verifier checks a list's length field, not that 8-byte elements are
  /// 8-byte aligned, which a damaged plan may break.
  template <typename T> std::vector<T> list(const flatbuffers::Vector<T> *v) {
    if (!v || !charge(v->size() * sizeof(T)))
      return {};
    static_assert(std::endian::native == std::endian::little, "the file's lists are little-endian");
    std::vector<T> out(v->size());
    if (!out.empty())
      std::memcpy(out.data(), v->Data(), v->size() * sizeof(T));
    return out;
  }
  /// The entries of a list of tables, or none once an error is recorded.
  template <typename T>
  std::vector<const T *> tables(const flatbuffers::Vector<flatbuffers::Offset<T>> *v) {
    std::vector<const T *> out;
    if (!v || !charge(v->size() * 4))
      return out;
    for (const T *t : *v)
      out.push_back(t);
    return out;
  }

  BufferId id(int32_t value, const std::string &what) {
    if (value < 0 || size_t(value) >= buffers_)
      fail(fmt::format("{}: buffer id {} is out of range (the plan has {} buffers)", what, value,
                       buffers_));
    return value;
  }
  std::vector<BufferId> ids(const flatbuffers::Vector<int32_t> *v, const std::string &what) {
    std::vector<BufferId> out = list(v);
    for (size_t i = 0; i < out.size(); ++i)
      id(out[i], fmt::format("{} #{}", what, i));
    return out;
  }

  TensorType type(const aot::Type *t, const std::string &what) {
    if (!t) {
      fail(what + " has no type");
      return {};
    }
    uint8_t code = uint8_t(t->dtype());
    if (code >= kDTypeCount)
      fail(fmt::format("{} has dtype code {} (known: 0..{}, f32 to i1)", what, code,
                       kDTypeCount - 1));
    TensorType type{code < kDTypeCount ? DType(code) : DType::f32, list(t->shape())};
    // The byte size must fit int64, so numElements() and byteSize() cannot overflow later.
    uint64_t bytes = byteWidth(type.dtype);
    for (int64_t d : type.shape)
      if (d < 0 || __builtin_mul_overflow(bytes, uint64_t(d), &bytes) ||
          bytes > uint64_t(std::numeric_limits<int64_t>::max())) {
        fail(fmt::format("{} has shape [{}], which is negative or too large", what,
                         fmt::join(type.shape, ", ")));
        break;
      }
    return type;
  }
  std::vector<TensorType> types(const flatbuffers::Vector<flatbuffers::Offset<aot::Type>> *v,
                                const std::string &what) {
    std::vector<TensorType> out;
    for (const aot::Type *t : tables(v))
      out.push_back(type(t, fmt::format("{} #{}", what, out.size())));
    return out;
  }

  std::string device(const flatbuffers::String *s, const std::string &what) {
    std::string name = text(s);
    if (!isDeviceName(name))
      fail(fmt::format("{}: device '{}' is not cpu:0 or gpu:<N>", what, name));
    return name;
  }

  /// The data part's bytes [offset, offset + size) that `range` names; with keep false, none.
  SharedBytes blob(const aot::Range *range, const std::string &what) {
    if (!range) {
      fail(what + " has no range in the data part");
      return {};
    }
    uint64_t offset = range->offset(), size = range->size();
    if (offset % kAlignment != 0 || offset > dataSize_ || size > dataSize_ - offset) {
      fail(fmt::format("{} has {} bytes at offset {}, which is not a {}-byte aligned range inside "
                       "the data part's {} bytes",
                       what, size, offset, kAlignment, dataSize_));
      return {};
    }
    if (!keep_)
      return {};
    const uint8_t *data = bytes_.data() + dataAt_ + offset;
    if (!owner_)
      return SharedBytes(std::vector<uint8_t>(data, data + size));
    return SharedBytes(owner_, data, size_t(size));
  }
  std::vector<uint8_t> copy(const aot::Range *range, const std::string &what) {
    SharedBytes bytes = blob(range, what);
    return std::vector<uint8_t>(bytes.begin(), bytes.end());
  }

  /// Names of the function's arguments or results: none (a hand-built Executable), or one each.
  std::vector<std::string>
  names(const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>> *v,
        const std::string &what, size_t want) {
    std::vector<std::string> out;
    for (const flatbuffers::String *s : tables(v))
      out.push_back(text(s));
    if (!out.empty() && out.size() != want)
      fail(fmt::format("{} {} names for {} {}s", out.size(), what, want, what));
    return out;
  }

  /// `step.op`'s parameters from the file's, by name: a field the file lacks (written before the
  /// field existed) keeps its default; one this runtime does not know is refused.
  void readParams(const aot::Step &s, Step &step, const std::string &what) {
    std::vector<const aot::Param *> params = tables(s.params());
    std::vector<bool> used(params.size());
    step.params = paramsFor(step.op);
    std::visit(
        [&](auto &p) {
          p.fields([&](const char *name, auto &v) {
            using T = std::decay_t<decltype(v)>;
            const aot::Param *param = nullptr;
            for (size_t i = 0; i < params.size(); ++i)
              if (params[i]->name() && params[i]->name()->string_view() == name) {
                if (param)
                  fail(fmt::format("{}: parameter '{}' appears twice", what, name));
                param = params[i];
                used[i] = true;
              }
            if (!param)
              return;
            std::string field = fmt::format("{}: parameter '{}'", what, name);
            if constexpr (kEnumValues < T >> 0) {
              int64_t value = param->integer();
              if (value < 0 || value >= kEnumValues<T>)
                fail(fmt::format("{} is {}, not within 0..{}", field, value, kEnumValues<T> - 1));
              else
                v = T(value);
            } else if constexpr (std::is_same_v<T, int64_t>) {
              v = param->integer();
            } else if constexpr (std::is_same_v<T, double>) {
              v = param->real();
            } else {
              v = list(param->integers());
            }
          });
        },
        step.params);
    for (size_t i = 0; i < params.size(); ++i)
      if (!used[i])
        fail(fmt::format("{}: parameter '{}' is not one this runtime knows (a newer smelt wrote "
                         "the file?)",
                         what, text(params[i]->name())));
  }

  Status readPlan(const aot::Plan &plan, LoadedArtifact &out) {
    Executable &exe = out.executable;
    ArtifactExtras &extras = out.extras;
    extras.target = text(plan.target());
    if (!validTarget(extras.target))
      fail(fmt::format("target '{}' is neither \"cpu\" nor \"cuda:<arch>\"", extras.target));
    extras.producer = text(plan.producer());
    exe.name = text(plan.name());
    for (const aot::Buffer *b : tables(plan.buffers())) {
      BufferInfo &buffer = exe.buffers.emplace_back();
      std::string what = fmt::format("buffer b{}", exe.buffers.size() - 1);
      buffer.type = type(b->type(), what);
      buffer.name = text(b->name());
      buffer.offset = b->offset();
      // The executor checks offsets against each other when it lays out its arena.
      if (buffer.offset < -1)
        fail(fmt::format("{} has arena offset {}", what, buffer.offset));
    }
    buffers_ = exe.buffers.size();
    exe.inputs = ids(plan.inputs(), "input");
    exe.outputs = ids(plan.outputs(), "output");
    exe.inputNames = names(plan.input_names(), "argument", exe.inputs.size());
    exe.outputNames = names(plan.output_names(), "result", exe.outputs.size());
    if (!status_.ok())
      return status_;

    for (const aot::Constant *c : tables(plan.constants())) {
      std::string what = fmt::format("constant #{}", exe.constants.size());
      Constant &constant = exe.constants.emplace_back();
      constant.buffer = id(c->buffer(), what);
      if (!status_.ok())
        break;
      const TensorType &type = exe.buffers[size_t(constant.buffer)].type;
      if (c->bytes() && c->bytes()->size() != type.byteSize())
        fail(fmt::format("{} (b{}, {}) has {} bytes, its type needs {}", what, constant.buffer,
                         type.str(), c->bytes()->size(), type.byteSize()));
      constant.bytes = blob(c->bytes(), what);
    }

    for (const aot::Kernel *k : tables(plan.kernels())) {
      std::string what = fmt::format("kernel #{}", exe.kernels.size());
      FusedKernel &kernel = exe.kernels.emplace_back();
      kernel.name = text(k->name());
      kernel.kind = text(k->kind());
      kernel.units = k->units();
      kernel.inputs = types(k->inputs(), what + " input");
      kernel.results = types(k->results(), what + " result");
      kernel.ops = text(k->ops());
      kernel.computeOps = k->compute_ops();
      kernel.cudaBlock = k->cuda_block();
      kernel.cudaGrid = k->cuda_grid();
      kernel.largestValueBytes = k->largest_value_bytes();
      if (kernel.units < 0 || kernel.computeOps < 0 || kernel.cudaBlock < 0 || kernel.cudaGrid < 0)
        fail(fmt::format("{} ('{}') has a negative count: units {}, compute ops {}, CUDA block "
                         "{}, grid {}",
                         what, kernel.name, kernel.units, kernel.computeOps, kernel.cudaBlock,
                         kernel.cudaGrid));
    }

    for (const aot::Step *s : tables(plan.steps())) {
      size_t index = exe.steps.size();
      Step &step = exe.steps.emplace_back();
      std::string op = text(s->op());
      size_t known = 0;
      while (known < kNumStepOps && op != stepOpName(StepOp(known)))
        ++known;
      if (known == kNumStepOps) {
        fail(fmt::format("step #{} has op '{}', which this runtime does not know", index, op));
        break;
      }
      step.op = StepOp(known);
      std::string what = fmt::format("step #{} ('{}')", index, op);
      step.location = text(s->location());
      step.device = device(s->device(), what);
      step.operands = ids(s->operands(), what + " operand");
      step.results = ids(s->results(), what + " result");
      step.frees = ids(s->frees(), what + " freed buffer");
      readParams(*s, step, what);
      int64_t kernel = step.kernel();
      if ((step.op == StepOp::Fusion || kernel != kNoKernel) &&
          (kernel < 0 || uint64_t(kernel) >= exe.kernels.size()))
        fail(fmt::format("{} runs kernel #{}, but the plan has {} kernels", what, kernel,
                         exe.kernels.size()));
    }
    for (const aot::Peak *p : tables(plan.peaks()))
      exe.peakBytes[text(p->device())] = p->bytes();
    for (const aot::Segment *s : tables(plan.segments())) {
      std::string what = fmt::format("segment #{}", exe.segments.size());
      Segment &segment = exe.segments.emplace_back();
      segment.device = device(s->device(), what);
      segment.begin = s->begin();
      segment.end = s->end();
      segment.reads = ids(s->reads(), what + " read");
      segment.writes = ids(s->writes(), what + " write");
    }

    if (const aot::CudaCode *cuda = plan.cuda()) {
      auto code = std::make_shared<CudaCode>();
      code->arch = text(cuda->arch());
      if (extras.target.starts_with("cuda:") && extras.target.substr(5) != code->arch)
        fail(fmt::format("the CUDA arch '{}' differs from the target '{}'", code->arch,
                         extras.target));
      SharedBytes source = blob(cuda->source(), "the CUDA source"),
                  ptx = blob(cuda->ptx(), "the PTX");
      code->source.assign(source.begin(), source.end());
      code->ptx.assign(ptx.begin(), ptx.end());
      code->cubin = copy(cuda->cubin(), "the CUBIN");
      exe.cuda = std::move(code);
    }
    if (const aot::CpuCode *cpu = plan.cpu()) {
      for (const flatbuffers::String *s : tables(cpu->symbols())) {
        std::string symbol = text(s);
        // An empty symbol: a kernel only a GPU runs.
        if (symbol.find('\0') != std::string::npos)
          fail(fmt::format("CPU symbol #{} holds a NUL byte", extras.cpuSymbols.size()));
        extras.cpuSymbols.push_back(std::move(symbol));
      }
      if (extras.cpuSymbols.size() != exe.kernels.size())
        fail(fmt::format("{} CPU symbols for {} kernels: the CPU code needs one symbol per kernel",
                         extras.cpuSymbols.size(), exe.kernels.size()));
      if (cpu->library() && cpu->library()->size() == 0)
        fail("the CPU shared library is empty");
      extras.cpuObject = copy(cpu->library(), "the CPU shared library");
    }
    return status_;
  }

  std::span<const uint8_t> bytes_;
  std::shared_ptr<const void> owner_;
  std::string name_;
  bool keep_, checkDataCrc_;
  size_t planSize_ = 0, dataAt_ = 0, dataSize_ = 0, buffers_ = 0, charged_ = 0;
  Status status_;
};

/// Decodes `bytes`, whose constants stay views of them when `owner` keeps them alive; with keep
/// false, checks the header and plan that `bytes` hold (the encoder's self-check).
Expected<LoadedArtifact> decode(std::span<const uint8_t> bytes, std::shared_ptr<const void> owner,
                                const std::string &name, bool keep, bool checkDataCrc = true) {
  try {
    LoadedArtifact artifact;
    SMELT_RETURN_IF_ERROR(Decoder(bytes, std::move(owner), name, keep, checkDataCrc).run(artifact));
    return artifact;
  } catch (const std::exception &e) {
    // Only allocation can throw here: every size was checked against the file's.
    return Status::error(fmt::format("{}: cannot read the artifact: {}", name, e.what()));
  }
}

} // namespace

std::vector<std::span<const uint8_t>> EncodedArtifact::parts() const {
  std::vector<std::span<const uint8_t>> parts{front_};
  parts.insert(parts.end(), data_.begin(), data_.end());
  return parts;
}

std::vector<uint8_t> EncodedArtifact::bytes() const {
  std::vector<uint8_t> out;
  std::vector<std::span<const uint8_t>> all = parts();
  size_t size = 0;
  for (std::span<const uint8_t> part : all)
    size += part.size();
  out.reserve(size);
  for (std::span<const uint8_t> part : all)
    out.insert(out.end(), part.begin(), part.end());
  return out;
}

Status EncodedArtifact::write(int fd, const std::string &what) const {
  for (std::span<const uint8_t> part : parts())
    SMELT_RETURN_IF_ERROR(writeAll(fd, part.data(), part.size(), what));
  return Status();
}

Expected<EncodedArtifact> encodeArtifactParts(const Executable &exe, const ArtifactExtras &extras) {
  // A step's parameters are written as the fields its op takes: parameters of another op could
  // not be read back as written.
  for (size_t i = 0; i < exe.steps.size(); ++i) {
    const Step &step = exe.steps[i];
    if (uint8_t(step.op) >= kNumStepOps || step.params.index() != paramsFor(step.op).index())
      return Status::error(fmt::format("cannot encode the artifact: step #{} ('{}') has "
                                       "parameters of another op",
                                       i, step.name()));
  }
  DataWriter data;
  aot::PlanT plan = planOf(exe, extras, data);
  flatbuffers::FlatBufferBuilder builder;
  // A value equal to its field's default would be left out, and -0.0 read back as 0.0.
  builder.ForceDefaults(true);
  aot::FinishPlanBuffer(builder, aot::Plan::Pack(builder, &plan));
  size_t planSize = builder.GetSize(), dataAt = alignUp(kHeaderBytes + planSize);
  uint32_t dataCrc = 0;
  for (std::span<const uint8_t> piece : data.pieces)
    dataCrc = uint32_t(crc32_z(dataCrc, piece.data(), piece.size()));
  EncodedArtifact encoded;
  std::vector<uint8_t> &out = encoded.front_;
  out.resize(dataAt);
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  storeLE(&out[kVersionAt], kArtifactVersion, 4);
  storeLE(&out[kPlanSizeAt], planSize, 8);
  storeLE(&out[kDataSizeAt], data.size, 8);
  storeLE(&out[kPlanCrcAt], crcOf(builder.GetBufferPointer(), planSize), 4);
  storeLE(&out[kDataCrcAt], dataCrc, 4);
  storeLE(&out[kHeaderCrcAt], crcOf(out.data(), kHeaderCrcAt), 4);
  std::memcpy(&out[kHeaderBytes], builder.GetBufferPointer(), planSize);
  // The encoder checks its output with the reader, so an Executable the reader would refuse is
  // an error here, not in a later load. The data part is its own pieces, whose CRC it just took.
  SMELT_RETURN_IF_ERROR(
      decode(out, nullptr, "the artifact being written", /*keep=*/false).status());
  encoded.data_ = std::move(data.pieces);
  return encoded;
}

Expected<std::vector<uint8_t>> encodeArtifact(const Executable &exe, const ArtifactExtras &extras) {
  SMELT_ASSIGN_OR_RETURN(EncodedArtifact encoded, encodeArtifactParts(exe, extras));
  return encoded.bytes();
}

Expected<LoadedArtifact> decodeArtifact(const std::vector<uint8_t> &bytes,
                                        const std::string &name) {
  return decode(bytes, nullptr, name, /*keep=*/true);
}

Expected<LoadedArtifact> decodeArtifact(std::shared_ptr<const void> owner,
                                        std::span<const uint8_t> bytes, const std::string &name,
                                        bool verifiedCopy) {
  return decode(bytes, std::move(owner), name, /*keep=*/true, /*checkDataCrc=*/!verifiedCopy);
}

Status writeArtifact(const std::string &path, const Executable &exe, const ArtifactExtras &extras) {
  Expected<EncodedArtifact> encoded = encodeArtifactParts(exe, extras);
  if (!encoded)
    return Status::error(path + ": " + encoded.message());
  return writeArtifact(path, *encoded);
}

Status writeArtifact(const std::string &path, const EncodedArtifact &encoded) {
  return writeFileAtomically(
      path, [&](int fd, const std::string &tmp) { return encoded.write(fd, tmp); });
}

Expected<LoadedArtifact> readArtifact(const std::string &path,
                                      const ArtifactReadOptions &options) {
  // The constants stay views of the mapped file: the weights are the page cache's, read as they
  // are used and shared by every process that runs the file.
  SMELT_ASSIGN_OR_RETURN(MappedBytes file, mapFile(path));
  if (!options.expectedSha256.empty())
    SMELT_RETURN_IF_ERROR(checkSha256(file.bytes, options.expectedSha256, path));
  return decode(file.bytes, file.owner, path, /*keep=*/true);
}

bool isArtifactFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  char magic[sizeof kMagic] = {};
  return in.read(magic, sizeof magic) && std::memcmp(magic, kMagic, sizeof magic) == 0;
}

} // namespace smelt::rt
