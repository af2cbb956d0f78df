// The CUDA C++ ElementTarget: answers the fusion walk (codegen/FusionWalk.h) with one C++
// statement per value, spelled from a table of op -> C expression (tinygrad's cstyle renderer).
// The kernel emitters (CudaLoopKernel.cpp, CudaReductionKernel.cpp) own the loops around the
// statements; this file owns what a single element costs and how each dtype is spelled.
#pragma once

#include "codegen/FusionWalk.h"

#include "llvm/ADT/SmallBitVector.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace smelt::codegen::cuda {

/// How a dtype is stored in memory ("__half", "uint8_t" for i1) and computed in registers
/// ("float" for f16/bf16, "bool" for i1): the two types FusionWalk.h's number rules name.
const char *storageType(rt::DType dtype);
const char *computeType(rt::DType dtype);
/// A stored element as its compute value, and a compute value rounded into storage.
std::string widen(rt::DType dtype, const std::string &stored);
std::string narrow(rt::DType dtype, const std::string &value);

class CudaTarget final : public ElementTarget {
public:
  /// `indexType` is the C type of every index ("int32_t" when all of the kernel's tensors have
  /// fewer than 2^30 elements, so index arithmetic stays 32-bit, else "int64_t").
  CudaTarget(FusionOp fusion, std::string indexType);

  /// Appends `text` as a line at the current depth of the kernel body.
  void line(const std::string &text);
  /// A line that opens a block ("for (...) {"), and the line that closes it.
  void open(const std::string &text);
  void close();
  /// Blocks deep the next line is: 1 is the kernel's body.
  void setDepth(int depth) { depth_ = depth; }
  /// The text written so far; clears it.
  std::string take() { return std::exchange(text_, {}); }

  const std::string &expr(Val value) const { return exprs_[value]; }
  /// A Val for a name the emitter declared itself (a loop variable).
  Val name(std::string expression);
  /// Declares `const <type> vN = expression;` and returns its Val.
  Val define(const std::string &type, std::string expression);
  const std::string &indexType() const { return indexType_; }

  /// The index the emitter's loop is at. A load at exactly that index is contiguous across
  /// threads; with a lane, it reads component `lane` of the vector the emitter loaded for the
  /// input (named vectorName(input)) instead of memory.
  void setLoopIndex(Val index, std::optional<unsigned> lane = std::nullopt);
  static std::string vectorName(unsigned input) { return "l" + std::to_string(input); }
  /// The inputs read at the loop index since the target was made.
  const llvm::SmallBitVector &loadedAtLoopIndex() const { return loadedAtLoopIndex_; }

  Val indexConstant(int64_t value) override;
  Val indexAdd(Val a, Val b) override;
  Val indexMul(Val a, int64_t factor) override;
  Val indexDiv(Val a, int64_t divisor) override;
  Val indexRem(Val a, int64_t divisor) override;
  Val indexOffset(Val a, int64_t offset) override;
  Val indexOffsetClamped(Val a, int64_t offset, int64_t size) override;
  Val indexBelow(Val a, int64_t bound) override;
  Val load(unsigned input, Val index) override;
  Val floatConstant(double value, rt::DType dtype) override;
  Val integerConstant(int64_t value, rt::DType dtype) override;
  Val unary(llvm::StringRef op, Val x, rt::DType dtype) override;
  Val binary(llvm::StringRef op, Val a, Val b, rt::DType dtype) override;
  Val compare(CompareDirection direction, Val a, Val b, rt::DType dtype) override;
  Val select(Val pred, Val onTrue, Val onFalse, rt::DType dtype) override;
  Val convert(Val x, rt::DType from, rt::DType to) override;
  Val indexToElement(Val index, rt::DType dtype) override;
  Val elementToIndex(Val element, rt::DType dtype, int64_t size) override;
  Val uniform(Val index, Val offset, uint64_t seed, double low, double range,
              rt::DType dtype) override;
  Val normal(Val index, Val offset, uint64_t seed, double mean, double stddev,
             rt::DType dtype) override;

private:
  /// A Val for an expression used in place (a literal), not declared.
  Val literal(std::string expression);
  Val index(std::string expression) { return define(indexType_, std::move(expression)); }

  std::vector<rt::DType> inputDTypes_;
  std::string indexType_;
  std::vector<std::string> exprs_;
  unsigned nextVariable_ = 0;
  std::string text_;
  int depth_ = 1;
  std::optional<Val> loopIndex_;
  std::optional<unsigned> lane_;
  llvm::SmallBitVector loadedAtLoopIndex_;
};

} // namespace smelt::codegen::cuda
