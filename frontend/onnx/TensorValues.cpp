// ONNX tensors as Smelt sees them: element types mapped to Smelt's, TensorProto contents
// (raw little-endian bytes or the typed repeated fields) read into a TensorValue, and a
// TensorValue turned into a constant op or the runtime's tensor.
#include "frontend/onnx/NodeImporter.h"

#include "ir/ConstantData.h"
#include "ir/SmeltDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"

#include <cmath>
#include <cstring>
#include <fstream>

namespace smelt::onnx {

using ::onnx::TensorProto;

void fail(ImportErrorKind kind, const std::string &message, const std::string &value) {
  throw Failure{kind, message, value};
}

std::optional<DType> smeltDType(int onnxType) {
  switch (onnxType) {
  case TensorProto::FLOAT:
    return DType::f32;
  case TensorProto::FLOAT16:
    return DType::f16;
  case TensorProto::BFLOAT16:
    return DType::bf16;
  case TensorProto::DOUBLE:
    return DType::f64;
  case TensorProto::INT32:
    return DType::i32;
  case TensorProto::INT64:
    return DType::i64;
  case TensorProto::BOOL:
    return DType::i1;
  case TensorProto::INT8:
  case TensorProto::UINT8:
  case TensorProto::INT16:
  case TensorProto::UINT16:
    return DType::i32; // carried widened: isNarrowInteger
  default:
    return std::nullopt;
  }
}

bool isNarrowInteger(int onnxType) {
  return onnxType == TensorProto::INT8 || onnxType == TensorProto::UINT8 ||
         onnxType == TensorProto::INT16 || onnxType == TensorProto::UINT16;
}

std::pair<int64_t, int64_t> narrowRange(int onnxType) {
  switch (onnxType) {
  case TensorProto::INT8:
    return {-128, 127};
  case TensorProto::UINT8:
    return {0, 255};
  case TensorProto::INT16:
    return {-32768, 32767};
  default:
    return {0, 65535};
  }
}

/// Bytes per element of `onnxType` as a file stores it (Smelt's width for the types it has).
static size_t fileWidth(int onnxType, DType dtype) {
  if (!isNarrowInteger(onnxType))
    return byteWidth(dtype);
  return onnxType == TensorProto::INT8 || onnxType == TensorProto::UINT8 ? 1 : 2;
}

std::string onnxTypeName(int onnxType) {
  if (TensorProto::DataType_IsValid(onnxType))
    return TensorProto::DataType_Name(TensorProto::DataType(onnxType));
  return "type " + std::to_string(onnxType);
}

static double halfToDouble(uint16_t bits) {
  int exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
  double sign = (bits & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0)
    return sign * std::ldexp(mantissa, -24);
  if (exponent == 31)
    return mantissa ? NAN : sign * INFINITY;
  return sign * std::ldexp(mantissa + 1024, exponent - 25);
}

static double bfloatToDouble(uint16_t bits) {
  uint32_t word = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &word, 4);
  return f;
}

/// Element `i` of little-endian raw bytes of type `dtype`.
static double rawElement(llvm::StringRef raw, size_t i, DType dtype) {
  auto load = [&](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, raw.data() + i * sizeof(v), sizeof(v));
    return v;
  };
  switch (dtype) {
  case DType::f32:
    return load(float());
  case DType::f64:
    return load(double());
  case DType::f16:
    return halfToDouble(load(uint16_t()));
  case DType::bf16:
    return bfloatToDouble(load(uint16_t()));
  case DType::i32:
    return double(load(int32_t()));
  case DType::i64:
    return double(load(int64_t()));
  case DType::i1:
    return load(uint8_t()) ? 1.0 : 0.0;
  }
  return 0;
}

/// Element `i` of little-endian raw bytes of ONNX type `onnxType`, Smelt's `dtype` (narrow
/// integers at their file width).
static double fileElement(llvm::StringRef raw, size_t i, int onnxType, DType dtype) {
  auto load = [&](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, raw.data() + i * sizeof(v), sizeof(v));
    return double(v);
  };
  switch (onnxType) {
  case TensorProto::INT8:
    return load(int8_t());
  case TensorProto::UINT8:
    return load(uint8_t());
  case TensorProto::INT16:
    return load(int16_t());
  case TensorProto::UINT16:
    return load(uint16_t());
  default:
    return rawElement(raw, i, dtype);
  }
}

TensorLayout tensorLayout(const TensorProto &proto, const std::string &what) {
  std::optional<DType> dtype = smeltDType(proto.data_type());
  if (!dtype)
    fail(ImportErrorKind::UnsupportedDtype,
         what + " has element type " + onnxTypeName(proto.data_type()) +
             ", which Smelt does not have (float, float16, bfloat16, double, int8 to int64, "
             "uint8, uint16, bool)");
  TensorLayout layout{*dtype, {}, 1, proto.data_type(), fileWidth(proto.data_type(), *dtype)};
  for (int64_t d : proto.dims()) {
    if (d < 0 || (d > 0 && layout.count > (int64_t(1) << 40) / d))
      fail(ImportErrorKind::BadFile, what + " has an invalid shape");
    layout.shape.push_back(d);
    layout.count *= d;
  }
  return layout;
}

/// Fails unless `have` elements are the `count` the shape needs.
static void needElements(const std::string &what, int64_t have, int64_t count) {
  if (have != count)
    fail(ImportErrorKind::BadFile, what + " holds " + std::to_string(have) +
                                       " elements where its shape needs " + std::to_string(count));
}

void checkRawSize(const std::string &what, size_t size, const TensorLayout &layout) {
  if (size % layout.fileWidth)
    fail(ImportErrorKind::BadFile, what + "'s raw data is not a whole number of elements");
  needElements(what, int64_t(size / layout.fileWidth), layout.count);
}

/// Fails for a tensor whose data is still in an external file: the importer brings it in first.
static void needDataInProto(const TensorProto &proto, const std::string &what) {
  if (proto.data_location() == TensorProto::EXTERNAL)
    fail(ImportErrorKind::UnsupportedAttribute,
         what + " keeps its data in an external file, which only a model's initializers and "
                "Constant nodes may");
}

TensorValue tensorValue(const TensorProto &proto, const std::string &what) {
  needDataInProto(proto, what);
  TensorLayout layout = tensorLayout(proto, what);
  auto [dtype, shape, count, onnxType, width] = layout;
  TensorValue v;
  v.type = dtype;
  v.shape = shape;
  if (proto.has_raw_data()) {
    const std::string &raw = proto.raw_data();
    checkRawSize(what, raw.size(), layout);
    v.values.reserve(size_t(count));
    for (int64_t i = 0; i < count; ++i)
      v.values.push_back(fileElement(raw, size_t(i), onnxType, dtype));
    return v;
  }
  switch (dtype) {
  case DType::f32:
    needElements(what, proto.float_data_size(), count);
    v.values.assign(proto.float_data().begin(), proto.float_data().end());
    break;
  case DType::f64:
    needElements(what, proto.double_data_size(), count);
    v.values.assign(proto.double_data().begin(), proto.double_data().end());
    break;
  case DType::i64:
    needElements(what, proto.int64_data_size(), count);
    for (int64_t x : proto.int64_data())
      v.values.push_back(double(x));
    break;
  case DType::i32: // narrow integers too, one element per int32
  case DType::i1:
    needElements(what, proto.int32_data_size(), count);
    for (int32_t x : proto.int32_data())
      v.values.push_back(dtype == DType::i1 ? double(x != 0) : double(x));
    break;
  case DType::f16:
  case DType::bf16: // the bits, one element per int32
    needElements(what, proto.int32_data_size(), count);
    for (int32_t x : proto.int32_data())
      v.values.push_back(dtype == DType::f16 ? halfToDouble(uint16_t(x))
                                             : bfloatToDouble(uint16_t(x)));
    break;
  }
  return v;
}

int64_t Weight::count() const {
  return int64_t(bytes.data.size() /
                 (narrowType ? fileWidth(narrowType, dtype) : byteWidth(dtype)));
}

double weightElement(const Weight &w, int64_t i) {
  return fileElement(w.bytes.data, size_t(i), w.narrowType, w.dtype);
}

/// `w` with narrow integers widened to the i32 it is (a copy); any other weight as it is.
static Weight widened(const Weight &w) {
  if (!w.narrowType)
    return w;
  auto wide = std::make_shared<std::vector<int32_t>>(size_t(w.count()));
  for (size_t i = 0; i < wide->size(); ++i)
    (*wide)[i] = int32_t(weightElement(w, int64_t(i)));
  llvm::StringRef data(reinterpret_cast<const char *>(wide->data()), wide->size() * 4);
  return Weight{w.dtype, w.shape, WeightBytes{std::move(wide), data}};
}

/// The typed field `values` packed as little-endian elements of `T`.
template <typename T, typename Field> static std::string packed(const Field &values) {
  std::string bytes(size_t(values.size()) * sizeof(T), '\0');
  char *to = bytes.data();
  for (auto x : values) {
    T element = T(x);
    std::memcpy(to, &element, sizeof(T));
    to += sizeof(T);
  }
  return bytes;
}

Weight weightValue(TensorProto &proto, const std::string &what) {
  needDataInProto(proto, what);
  TensorLayout layout = tensorLayout(proto, what);
  auto [dtype, shape, count, onnxType, width] = layout;
  if (dtype == DType::i1)
    fail(ImportErrorKind::Internal, what + ": bool initializers are imported as values");
  auto bytes = std::make_shared<std::string>();
  if (proto.has_raw_data()) {
    checkRawSize(what, proto.raw_data().size(), layout);
    bytes->swap(*proto.mutable_raw_data()); // the file's bytes, moved: no copy
  } else {
    auto need = [&](int have) { needElements(what, have, layout.count); };
    switch (dtype) {
    case DType::f32:
      need(proto.float_data_size());
      *bytes = packed<float>(proto.float_data());
      break;
    case DType::f64:
      need(proto.double_data_size());
      *bytes = packed<double>(proto.double_data());
      break;
    case DType::i64:
      need(proto.int64_data_size());
      *bytes = packed<int64_t>(proto.int64_data());
      break;
    case DType::i32:
      need(proto.int32_data_size());
      *bytes = packed<int32_t>(proto.int32_data());
      break;
    case DType::f16:
    case DType::bf16: // the bits, one element per int32
      need(proto.int32_data_size());
      *bytes = packed<uint16_t>(proto.int32_data());
      break;
    case DType::i1:
      break;
    }
  }
  llvm::StringRef data(*bytes);
  return fileWeight(layout, WeightBytes{std::move(bytes), data});
}

Weight fileWeight(const TensorLayout &layout, WeightBytes bytes) {
  // Narrow integers stay at their width (a quantized model's int8 weights): their usual reader
  // dequantizes them into f32 constants, and a copy widened to i32 would be held beside them.
  bool narrow = isNarrowInteger(layout.onnxType) &&
                bytes.data.size() == size_t(layout.count) * layout.fileWidth;
  return Weight{layout.dtype, layout.shape, std::move(bytes), narrow ? layout.onnxType : 0};
}

TensorValue weightAsValue(const Weight &w) {
  TensorValue v;
  v.type = w.dtype;
  v.shape = w.shape;
  v.values.reserve(size_t(w.count()));
  for (int64_t i = 0; i < w.count(); ++i)
    v.values.push_back(weightElement(w, i));
  return v;
}

Tensor weightConstant(Graph &g, const std::string &name, const Weight &file) {
  Weight w = widened(file);
  mlir::OpBuilder &b = g.builder();
  auto type = mlir::RankedTensorType::get(w.shape, g.elementType(w.dtype));
  // The blob shares the bytes (its deleter keeps them alive): the module holds the file's
  // weights once, and printing or writing bytecode reads them from there.
  mlir::AsmResourceBlob blob =
      sharedBlob(llvm::ArrayRef<char>(w.bytes.data.data(), w.bytes.data.size()), byteWidth(w.dtype),
                 w.bytes.owner, w.bytes.fileMapped);
  auto value = mlir::DenseResourceElementsAttr::get(type, name, std::move(blob));
  return Tensor(&g, ConstantOp::create(b, b.getUnknownLoc(), value).getResult());
}

rt::HostTensor weightTensor(const Weight &file) {
  Weight w = widened(file);
  rt::HostTensor t = rt::HostTensor::zeros({w.dtype, w.shape});
  std::memcpy(t.raw(), w.bytes.data.data(), w.bytes.data.size());
  // The copy is the parameter's value now: the mapped pages it came from may go, or a model's
  // weights would be resident twice (`smelt import --weights-out`).
  if (w.bytes.fileMapped)
    releaseFilePages(llvm::ArrayRef<char>(w.bytes.data.data(), w.bytes.data.size()));
  return t;
}

llvm::Expected<TensorValue> readTensorFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  TensorProto proto;
  if (!in || !proto.ParseFromIstream(&in))
    return llvm::make_error<ImportError>(ImportErrorKind::BadFile,
                                         path + ": not a readable TensorProto");
  try {
    return tensorValue(proto, path);
  } catch (const Failure &f) {
    return llvm::make_error<ImportError>(f.kind, f.message);
  }
}

Tensor constantTensor(Graph &g, const TensorValue &value) {
  return constant(g, value.values, value.shape, value.type);
}

rt::HostTensor hostTensor(const TensorValue &value) {
  return rt::HostTensor::fromDoubles({value.type, value.shape}, value.values);
}

} // namespace smelt::onnx
