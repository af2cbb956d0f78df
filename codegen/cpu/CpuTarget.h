// The CPU's answer to the fusion walk (codegen/FusionWalk.h): each element operation becomes
// arith/math ops at the builder's insertion point, with the semantics of the unfused CPU
// kernels (runtime/cpu/Elementwise.cpp): wrapping integers, x/0 = 0, NaN-propagating max/min.
#pragma once

#include "codegen/FusionWalk.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <array>
#include <string>
#include <vector>

namespace smelt::codegen::cpu {

class CpuTarget final : public ElementTarget {
public:
  /// `inputs` are the kernel's input pointers (!llvm.ptr), holding elements of `dtypes`.
  CpuTarget(mlir::ImplicitLocOpBuilder &builder, llvm::ArrayRef<mlir::Value> inputs,
            llvm::ArrayRef<rt::DType> dtypes);

  /// The value behind a handle, and a handle for a value the kernel made itself (a loop
  /// variable).
  mlir::Value value(Val v) const { return values_[v]; }
  Val wrap(mlir::Value v);
  /// What the walk asked for that this target cannot compute ("" when nothing): an op the
  /// fusion verifier admits but this file does not know yet.
  const std::string &error() const { return error_; }

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
  /// The first two words of Philox4x32-10 for element `index` under `offset` and `seed`.
  std::array<mlir::Value, 2> philox(Val index, Val offset, uint64_t seed);
  mlir::Value unitDraw(mlir::Value word, mlir::Type type, double plus);
  /// Records the first unknown op and returns a zero so the walk can finish.
  Val unknown(llvm::StringRef op, rt::DType dtype);
  mlir::Value zero(rt::DType dtype);

  mlir::ImplicitLocOpBuilder &b_;
  llvm::SmallVector<mlir::Value> inputs_;
  llvm::SmallVector<rt::DType> dtypes_;
  std::vector<mlir::Value> values_;
  std::string error_;
};

} // namespace smelt::codegen::cpu
