// The CUDA ElementTarget: the op -> C expression table and the dtype spellings. Helpers named
// smelt_* live in the module prelude (CudaPrelude.cpp), where docs/ops.md's exact semantics
// (wrapping integers, x/0 = 0, NaN-propagating max/min, saturating float -> int) are written.
#include "codegen/cuda/CudaTarget.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ErrorHandling.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace smelt::codegen::cuda {

using rt::DType;

const char *storageType(DType dtype) {
  switch (dtype) {
  case DType::f32:
    return "float";
  case DType::f16:
    return "__half";
  case DType::bf16:
    return "__nv_bfloat16";
  case DType::f64:
    return "double";
  case DType::i32:
    return "int32_t";
  case DType::i64:
    return "int64_t";
  case DType::i1:
    return "uint8_t"; // one byte holding 0 or 1, never read as a C++ bool (any byte is valid)
  }
  llvm_unreachable("every dtype is listed");
}

const char *computeType(DType dtype) {
  switch (dtype) {
  case DType::f16:
  case DType::bf16:
    return "float";
  case DType::i1:
    return "bool";
  default:
    return storageType(dtype);
  }
}

std::string widen(DType dtype, const std::string &stored) {
  switch (dtype) {
  case DType::f16:
    return "__half2float(" + stored + ")";
  case DType::bf16:
    return "__bfloat162float(" + stored + ")";
  case DType::i1:
    return "(" + stored + " != 0)";
  default:
    return stored;
  }
}

std::string narrow(DType dtype, const std::string &value) {
  switch (dtype) {
  case DType::f16:
    return "__float2half_rn(" + value + ")";
  case DType::bf16:
    return "__float2bfloat16_rn(" + value + ")";
  case DType::i1:
    return "(uint8_t)(" + value + ")";
  default:
    return value;
  }
}

namespace {

/// How an op is written: {0} {1} are the operands, {f} is "f" for f32 math (f32, f16, bf16
/// compute in float) and "" for f64. Integer spellings go through the prelude's wrapping
/// helpers; a null spelling means the op takes floats only (the verifier sees to it).
struct OpSpelling {
  llvm::StringLiteral op;
  const char *onFloat;
  const char *onInteger;
};

constexpr OpSpelling kOps[] = {
    {"neg", "(-{0})", "smelt_neg({0})"},
    {"abs", "fabs{f}({0})", "smelt_abs({0})"},
    {"relu", "smelt_relu({0})", "smelt_relu({0})"},
    {"exp", "exp{f}({0})", nullptr},
    {"log", "log{f}({0})", nullptr},
    {"tanh", "tanh{f}({0})", nullptr},
    {"logistic", "smelt_logistic({0})", nullptr},
    {"sqrt", "sqrt{f}({0})", nullptr},
    {"rsqrt", "rsqrt{f}({0})", nullptr},
    {"erf", "erf{f}({0})", nullptr},
    {"sin", "sin{f}({0})", nullptr},
    {"cos", "cos{f}({0})", nullptr},
    {"add", "({0} + {1})", "smelt_add({0}, {1})"},
    {"sub", "({0} - {1})", "smelt_sub({0}, {1})"},
    {"mul", "({0} * {1})", "smelt_mul({0}, {1})"},
    {"div", "({0} / {1})", "smelt_div({0}, {1})"},
    {"max", "smelt_max({0}, {1})", "smelt_max({0}, {1})"},
    {"min", "smelt_min({0}, {1})", "smelt_min({0}, {1})"},
    {"pow", "pow{f}({0}, {1})", nullptr},
};

/// `pattern` with {0}, {1}, {2} replaced by `args` and {f} by `suffix`.
std::string fill(llvm::StringRef pattern, llvm::ArrayRef<std::string> args, const char *suffix) {
  std::string text;
  for (size_t i = 0; i < pattern.size(); ++i) {
    size_t end = pattern.find('}', i);
    if (pattern[i] != '{' || end == llvm::StringRef::npos) {
      text += pattern[i];
      continue;
    }
    llvm::StringRef key = pattern.slice(i + 1, end);
    text += key == "f" ? std::string(suffix) : args[key[0] - '0'];
    i = end;
  }
  return text;
}

/// A C++ literal that is exactly `value` as an element of `dtype`'s compute type. Negative
/// literals are parenthesized so that `-` before them never forms `--`.
std::string floatLiteral(double value, DType dtype) {
  bool isDouble = dtype == DType::f64;
  if (std::isnan(value))
    return isDouble ? "SMELT_NAN" : "SMELT_NAN_F";
  if (std::isinf(value))
    return value < 0 ? (isDouble ? "(-SMELT_INF)" : "(-SMELT_INF_F)")
                     : (isDouble ? "SMELT_INF" : "SMELT_INF_F");
  char buffer[64];
  // Shortest text that reads back as the same float (or double): exact and readable.
  char *end = isDouble ? std::to_chars(buffer, buffer + sizeof buffer, value).ptr
                       : std::to_chars(buffer, buffer + sizeof buffer, float(value)).ptr;
  std::string text(buffer, end);
  if (text.find_first_of(".e") == std::string::npos)
    text += ".0";
  if (!isDouble)
    text += "f";
  return value < 0 ? "(" + text + ")" : text;
}

std::string integerLiteral(int64_t value, DType dtype) {
  if (dtype == DType::i1)
    return value ? "true" : "false";
  bool is64 = dtype == DType::i64;
  // The most negative value has no literal: its magnitude does not fit the type.
  if (value == (is64 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int32_t>::min()))
    return is64 ? "(-9223372036854775807ll - 1)" : "(-2147483647 - 1)";
  std::string text = std::to_string(value) + (is64 ? "ll" : "");
  return value < 0 ? "(" + text + ")" : text;
}

/// Rounds `value` (a compute value of `from`) to f16 or bf16 once, staying in float.
std::string roundTo16(DType to, DType from, const std::string &value) {
  bool half = to == DType::f16;
  std::string rounded;
  switch (from) {
  case DType::f64:
    rounded = (half ? "__double2half(" : "__double2bfloat16(") + value + ")";
    break;
  case DType::i32:
    rounded = (half ? "__int2half_rn(" : "__int2bfloat16_rn(") + value + ")";
    break;
  case DType::i64:
    rounded = (half ? "__ll2half_rn(" : "__ll2bfloat16_rn(") + value + ")";
    break;
  case DType::i1:
    return "(float)(" + value + ")"; // 0 and 1 are exact
  default:                           // a float: f32, or f16/bf16 held in f32
    rounded = narrow(to, value);
  }
  return widen(to, rounded);
}

} // namespace

CudaTarget::CudaTarget(FusionOp fusion, std::string indexType)
    : indexType_(std::move(indexType)), loadedAtLoopIndex_(fusion.getInputs().size()) {
  for (mlir::Value input : fusion.getInputs())
    inputDTypes_.push_back(elementDType(input));
}

void CudaTarget::line(const std::string &text) {
  text_.append(2 * size_t(depth_), ' ');
  text_ += text;
  text_ += '\n';
}

void CudaTarget::open(const std::string &text) {
  line(text);
  ++depth_;
}

void CudaTarget::close() {
  --depth_;
  line("}");
}

Val CudaTarget::literal(std::string expression) {
  exprs_.push_back(std::move(expression));
  return Val(exprs_.size() - 1);
}

Val CudaTarget::name(std::string expression) { return literal(std::move(expression)); }

Val CudaTarget::define(const std::string &type, std::string expression) {
  std::string variable = "v" + std::to_string(nextVariable_++);
  line("const " + type + " " + variable + " = " + expression + ";");
  return literal(variable);
}

void CudaTarget::setLoopIndex(Val index, std::optional<unsigned> lane) {
  loopIndex_ = index;
  lane_ = lane;
}

Val CudaTarget::indexConstant(int64_t value) { return literal(std::to_string(value)); }

Val CudaTarget::indexAdd(Val a, Val b) { return index(expr(a) + " + " + expr(b)); }

Val CudaTarget::indexMul(Val a, int64_t factor) {
  return index(expr(a) + " * " + std::to_string(factor));
}

Val CudaTarget::indexDiv(Val a, int64_t divisor) {
  return index(expr(a) + " / " + std::to_string(divisor));
}

Val CudaTarget::indexRem(Val a, int64_t divisor) {
  return index(expr(a) + " % " + std::to_string(divisor));
}

/// `a + offset` in C++, spelled `a - n` for a negative offset.
static std::string offsetText(const std::string &a, int64_t offset) {
  return offset < 0 ? a + " - " + std::to_string(-offset) : a + " + " + std::to_string(offset);
}

Val CudaTarget::indexOffset(Val a, int64_t offset) { return index(offsetText(expr(a), offset)); }

Val CudaTarget::indexOffsetClamped(Val a, int64_t offset, int64_t size) {
  std::string sum = expr(index(offsetText(expr(a), offset)));
  std::string last = std::to_string(size - 1);
  return index(sum + " < 0 ? 0 : " + sum + " > " + last + " ? " + last + " : " + sum);
}

Val CudaTarget::indexBelow(Val a, int64_t bound) {
  return define("bool", "(" + expr(a) + " < " + std::to_string(bound) + ")");
}

Val CudaTarget::load(unsigned input, Val index) {
  DType dtype = inputDTypes_[input];
  bool atLoopIndex = loopIndex_ && index == *loopIndex_;
  if (atLoopIndex)
    loadedAtLoopIndex_.set(input);
  std::string stored = atLoopIndex && lane_
                           ? vectorName(input) + ".v[" + std::to_string(*lane_) + "]"
                           : "in" + std::to_string(input) + "[" + expr(index) + "]";
  return define(computeType(dtype), widen(dtype, stored));
}

Val CudaTarget::floatConstant(double value, DType dtype) {
  return literal(floatLiteral(value, dtype));
}

Val CudaTarget::integerConstant(int64_t value, DType dtype) {
  return literal(integerLiteral(value, dtype));
}

Val CudaTarget::unary(llvm::StringRef op, Val x, DType dtype) {
  return binary(op, x, x, dtype); // one table: a unary op's spelling names {0} only
}

Val CudaTarget::binary(llvm::StringRef op, Val a, Val b, DType dtype) {
  for (const OpSpelling &spelling : kOps) {
    if (spelling.op != op)
      continue;
    const char *pattern = rt::isFloat(dtype) ? spelling.onFloat : spelling.onInteger;
    if (!pattern)
      llvm::report_fatal_error(llvm::Twine("smelt.") + op + " has no integer form");
    return define(computeType(dtype),
                  fill(pattern, {expr(a), expr(b)}, dtype == DType::f64 ? "" : "f"));
  }
  llvm::report_fatal_error(llvm::Twine("the CUDA renderer has no spelling for smelt.") + op);
}

Val CudaTarget::compare(CompareDirection direction, Val a, Val b, DType) {
  static constexpr const char *kOperators[] = {"==", "!=", "<", "<=", ">", ">="};
  llvm::StringRef name = stringifyCompareDirection(direction);
  static constexpr llvm::StringLiteral kNames[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  for (size_t i = 0; i < std::size(kNames); ++i)
    if (name == kNames[i])
      return define("bool", "(" + expr(a) + " " + kOperators[i] + " " + expr(b) + ")");
  llvm::report_fatal_error("unknown compare direction " + name);
}

Val CudaTarget::select(Val pred, Val onTrue, Val onFalse, DType dtype) {
  return define(computeType(dtype),
                "(" + expr(pred) + " ? " + expr(onTrue) + " : " + expr(onFalse) + ")");
}

Val CudaTarget::convert(Val x, DType from, DType to) {
  if (from == to)
    return x;
  const std::string &value = expr(x);
  std::string text;
  if (to == DType::i1)
    text = "(" + value + " != 0)"; // NaN != 0 holds, as on the CPU
  else if (to == DType::f16 || to == DType::bf16)
    text = roundTo16(to, from, value);
  else if (!rt::isFloat(to) && rt::isFloat(from))
    text = std::string("smelt_to_int<") + storageType(to) + ">(" + value + ")";
  else
    text = std::string("(") + computeType(to) + ")(" + value + ")";
  return define(computeType(to), text);
}

Val CudaTarget::indexToElement(Val index, DType dtype) {
  // An index is a 32- or 64-bit integer; spell it as an i64 so integer results get their own
  // type (a bare int32_t index would not deduce as int64_t in the prelude's templates).
  if (!rt::isFloat(dtype))
    return define(computeType(dtype),
                  std::string("(") + computeType(dtype) + ")(" + expr(index) + ")");
  return convert(index, DType::i64, dtype);
}

// The prelude's smelt_uniform_*: the counter is the element's index as an unsigned 64-bit
// number.
Val CudaTarget::uniform(Val index, Val offset, uint64_t seed, double low, double range,
                        DType dtype) {
  bool wide = dtype == DType::f64;
  DType compute = wide ? DType::f64 : DType::f32;
  return define(computeType(dtype), std::string(wide ? "smelt_uniform_f64" : "smelt_uniform_f32") +
                                        "((uint64_t)(" + expr(index) + "), " + expr(offset) +
                                        ", " + std::to_string(seed) + "ull, " +
                                        floatLiteral(low, compute) + ", " +
                                        floatLiteral(range, compute) + ")");
}

// The prelude's smelt_normal_*.
Val CudaTarget::normal(Val index, Val offset, uint64_t seed, double mean, double stddev,
                       DType dtype) {
  bool wide = dtype == DType::f64;
  DType compute = wide ? DType::f64 : DType::f32;
  return define(computeType(dtype),
                std::string(wide ? "smelt_normal_f64" : "smelt_normal_f32") + "((uint64_t)(" +
                    expr(index) + "), " + expr(offset) + ", " + std::to_string(seed) + "ull, " +
                    floatLiteral(mean, compute) + ", " + floatLiteral(stddev, compute) + ")");
}

// Clamped in the element's own type before the cast to the index type, so an i64 index past
// int32_t cannot wrap into range.
Val CudaTarget::elementToIndex(Val element, DType dtype, int64_t size) {
  std::string type = computeType(dtype), x = expr(element);
  int64_t last = dtype == DType::i32 ? std::min<int64_t>(size - 1, INT32_MAX) : size - 1;
  std::string high = "(" + type + ")" + std::to_string(last);
  return index("(" + indexType_ + ")(" + x + " < (" + type + ")0 ? (" + type + ")0 : " + x +
               " > " + high + " ? " + high + " : " + x + ")");
}

} // namespace smelt::codegen::cuda
