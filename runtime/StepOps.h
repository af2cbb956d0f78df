// What the runtime knows of each step op, one class per family of ops (a fusion, a contraction,
// a pooling, argmax, scatter_add, a data movement, a collective), whatever
// device runs it: the checks of a step's parameters and buffers beyond its dataflow, its cost
// from shapes alone, and how the CPU runs it. Each op's name, kind and parameters (whose
// `fields` the AOT format reads and writes) stay in Executable.cpp's table, which the artifact
// reader and its fuzzer link without the CPU kernels. The GPU's classes (cuda/GpuSteps.h) plan
// and bind the same families on a device.
#pragma once

#include "runtime/Executable.h"
#include "runtime/Status.h"
#include "runtime/StepCost.h"
#include "runtime/cpu/Kernels.h"

#include <vector>

namespace smelt::rt {

class StepFamily {
public:
  virtual ~StepFamily() = default;
  /// Whether a step writes several results (a fusion, an all_reduce bucket); else exactly one.
  virtual bool writesSeveralResults() const { return false; }
  /// The checks of a step's parameters and buffers that its dataflow does not cover, run once
  /// by validateDataflow so that no executor indexes past a short list or a kernel's buffers.
  /// Errors name the step. The step's parameters are of its op's kind (checked before).
  virtual Status validate(const Executable &exe, const Step &step) const;
  /// Fills what `cost` knows of the family: its kind, name and ops where they are not the
  /// step's, its FLOPs. `cost` has its bytes and shapes; `touched` is the largest operand or
  /// result's element count. By default one FLOP per element touched: a compare or an add, for
  /// the families that make one pass over their data (pooling, argmax).
  virtual void cost(const Executable &exe, const Step &step,
                    const std::vector<TensorType> &operands, const TensorType &result,
                    int64_t touched, StepCost &cost) const;
  /// The CPU kernel of a library call or a copy step, prepared once; a fusion or a
  /// collective is the CPU executor's own, and an error here.
  virtual Expected<cpu::Kernel> prepareCpu(const Step &step, const cpu::StepTypes &types) const;
};

/// A matmul's problem: lhs [..., M, K] x rhs [..., K, N] (the last two dims swapped by the
/// transpose flags) gives [..., M, N], the leading dims one batch of row-major matrices.
struct MatmulShape {
  int64_t batch = 1, m = 0, k = 0, n = 0;
};
/// The problem of matmul `step` whose operands (lhs, rhs[, bias]) and result have these types,
/// or an error naming the step and the types when the operands do not give the result. Both
/// devices' matmuls take it from here; the bias is the Contraction family's check.
Expected<MatmulShape> matmulShape(const Step &step, const std::vector<TensorType> &operands,
                                  const TensorType &result);

/// The family of `op` (one outside the set is treated as a copy, which validateDataflow
/// refuses first).
const StepFamily &stepFamily(StepOp op);

} // namespace smelt::rt
