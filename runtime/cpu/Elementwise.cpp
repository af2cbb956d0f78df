// Elementwise kernels: unary and binary math, compare, select, convert. Each (op, dtype) pair
// is its own loop instantiation so the compiler inlines and vectorizes the body; f16/bf16
// compute in float and round once when stored.
#include "runtime/DTypeDispatch.h"
#include "runtime/cpu/Kernels.h"

#include <fmt/format.h>

#include <cmath>
#include <type_traits>

namespace smelt::rt::cpu {

namespace {

/// Integer negation that wraps instead of overflowing (-INT_MIN is INT_MIN, not UB).
template <typename C> C negate(C x) {
  if constexpr (std::is_integral_v<C>)
    return C(-std::make_unsigned_t<C>(x));
  else
    return -x;
}

/// Wrapping integer arithmetic; plain arithmetic for floats.
template <typename C, typename Op> C wrapping(C a, C b, Op op) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return C(op(U(a), U(b)));
  } else {
    return op(a, b);
  }
}

template <typename C> C divide(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    if (b == 0)
      return 0; // defined, so user data can never trap the process
    if (b == -1)
      return negate(a);
  }
  return a / b;
}

// NaN propagates through max and min, as in XLA.
template <typename C> C maximum(C a, C b) { return (a > b || a != a) ? a : b; }
template <typename C> C minimum(C a, C b) { return (a < b || a != a) ? a : b; }

Status typeError(const Step &step, const TensorType &type, const char *allowed) {
  return Status::error(fmt::format("{}: operand type {} is not supported ({} only)",
                                   describe(step), type.str(), allowed));
}

/// Builds the loop for unary `fn` on the operand's dtype.
template <typename Fn>
Expected<Kernel> unaryKernel(const Step &step, const StepTypes &types, bool floatOnly, Fn fn) {
  int64_t n = types.result.numElements();
  return visitDType(types.result.dtype, [&](auto tag) -> Expected<Kernel> {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      return typeError(step, types.result, "numbers");
    } else {
      if (floatOnly && !kIsFloat<T>)
        return typeError(step, types.result, "floats");
      return Kernel([n, fn](const void *const *in, void *out) {
        const T *x = static_cast<const T *>(in[0]);
        T *y = static_cast<T *>(out);
        for (int64_t i = 0; i < n; ++i)
          y[i] = fromCompute<T>(fn(toCompute(x[i])));
      });
    }
  });
}

/// Builds the loop for binary `fn` over operands of one dtype, writing dtype R (bool for
/// compare, the operand dtype otherwise).
template <bool Predicate, typename Fn>
Expected<Kernel> binaryKernel(const Step &step, const StepTypes &types, bool floatOnly, Fn fn) {
  int64_t n = types.result.numElements();
  return visitDType(types.operands[0].dtype, [&](auto tag) -> Expected<Kernel> {
    using T = typename decltype(tag)::type;
    using R = std::conditional_t<Predicate, bool, T>;
    // Only comparisons take i1 operands; arithmetic on i1 is rejected (and not instantiated).
    if constexpr (std::is_same_v<T, bool> && !Predicate) {
      return typeError(step, types.operands[0], "numbers");
    } else {
      if (floatOnly && !kIsFloat<T>)
        return typeError(step, types.operands[0], "floats");
      return Kernel([n, fn](const void *const *in, void *out) {
        const T *a = static_cast<const T *>(in[0]);
        const T *b = static_cast<const T *>(in[1]);
        R *y = static_cast<R *>(out);
        for (int64_t i = 0; i < n; ++i)
          y[i] = fromCompute<R>(fn(toCompute(a[i]), toCompute(b[i])));
      });
    }
  });
}

Expected<Kernel> unary(const Step &step, const StepTypes &types) {
  const std::string &op = step.op;
  // Integer abs wraps: |INT_MIN| is INT_MIN, like negation.
  if (op == "neg")
    return unaryKernel(step, types, false, [](auto x) { return negate(x); });
  if (op == "abs")
    return unaryKernel(step, types, false, [](auto x) { return x < 0 ? negate(x) : x; });
  if (op == "relu")
    return unaryKernel(step, types, false, [](auto x) { return x < 0 ? decltype(x)(0) : x; });
  if (op == "exp")
    return unaryKernel(step, types, true, [](auto x) { return decltype(x)(std::exp(x)); });
  if (op == "log")
    return unaryKernel(step, types, true, [](auto x) { return decltype(x)(std::log(x)); });
  if (op == "tanh")
    return unaryKernel(step, types, true, [](auto x) { return decltype(x)(std::tanh(x)); });
  if (op == "logistic")
    return unaryKernel(step, types, true, [](auto x) {
      using C = decltype(x);
      return C(C(1) / (C(1) + std::exp(-x)));
    });
  if (op == "sqrt")
    return unaryKernel(step, types, true, [](auto x) { return decltype(x)(std::sqrt(x)); });
  if (op == "rsqrt")
    return unaryKernel(step, types, true,
                       [](auto x) { return decltype(x)(decltype(x)(1) / std::sqrt(x)); });
  if (op == "sin")
    return unaryKernel(step, types, true, [](auto x) { return decltype(x)(std::sin(x)); });
  if (op == "cos")
    return unaryKernel(step, types, true, [](auto x) { return decltype(x)(std::cos(x)); });
  return unaryKernel(step, types, true, [](auto x) { return decltype(x)(std::erf(x)); });
}

Expected<Kernel> binary(const Step &step, const StepTypes &types) {
  const std::string &op = step.op;
  if (op == "add")
    return binaryKernel<false>(step, types, false, [](auto a, auto b) {
      return wrapping(a, b, [](auto x, auto y) { return x + y; });
    });
  if (op == "sub")
    return binaryKernel<false>(step, types, false, [](auto a, auto b) {
      return wrapping(a, b, [](auto x, auto y) { return x - y; });
    });
  if (op == "mul")
    return binaryKernel<false>(step, types, false, [](auto a, auto b) {
      return wrapping(a, b, [](auto x, auto y) { return x * y; });
    });
  if (op == "div")
    return binaryKernel<false>(step, types, false,
                               [](auto a, auto b) { return divide(a, b); });
  if (op == "max")
    return binaryKernel<false>(step, types, false,
                               [](auto a, auto b) { return maximum(a, b); });
  if (op == "min")
    return binaryKernel<false>(step, types, false,
                               [](auto a, auto b) { return minimum(a, b); });
  return binaryKernel<false>(step, types, true,
                             [](auto a, auto b) { return decltype(a)(std::pow(a, b)); });
}

Expected<Kernel> compare(const Step &step, const StepTypes &types) {
  AttrReader attrs(step);
  std::string direction = attrs.keyword("direction");
  if (Status s = attrs.status(); !s.ok())
    return s;
  if (direction == "eq")
    return binaryKernel<true>(step, types, false, [](auto a, auto b) { return a == b; });
  if (direction == "ne")
    return binaryKernel<true>(step, types, false, [](auto a, auto b) { return a != b; });
  if (direction == "lt")
    return binaryKernel<true>(step, types, false, [](auto a, auto b) { return a < b; });
  if (direction == "le")
    return binaryKernel<true>(step, types, false, [](auto a, auto b) { return a <= b; });
  if (direction == "gt")
    return binaryKernel<true>(step, types, false, [](auto a, auto b) { return a > b; });
  if (direction == "ge")
    return binaryKernel<true>(step, types, false, [](auto a, auto b) { return a >= b; });
  return Status::error(fmt::format("{}: unknown direction '{}' (eq, ne, lt, le, gt, ge)",
                                   describe(step), direction));
}

Expected<Kernel> select(const Step &step, const StepTypes &types) {
  if (types.operands[0].dtype != DType::i1)
    return Status::error(fmt::format("{}: pred must be i1, got {}", describe(step),
                                     types.operands[0].str()));
  int64_t n = types.result.numElements();
  return visitDType(types.result.dtype, [&](auto tag) -> Expected<Kernel> {
    using T = typename decltype(tag)::type;
    return Kernel([n](const void *const *in, void *out) {
      const bool *pred = static_cast<const bool *>(in[0]);
      const T *a = static_cast<const T *>(in[1]);
      const T *b = static_cast<const T *>(in[2]);
      T *y = static_cast<T *>(out);
      for (int64_t i = 0; i < n; ++i)
        y[i] = pred[i] ? a[i] : b[i];
    });
  });
}

Expected<Kernel> convert(const StepTypes &types) {
  int64_t n = types.result.numElements();
  return visitDType(types.operands[0].dtype, [&](auto from) {
    using S = typename decltype(from)::type;
    return visitDType(types.result.dtype, [&](auto to) {
      using D = typename decltype(to)::type;
      return Kernel([n](const void *const *in, void *out) {
        const S *x = static_cast<const S *>(in[0]);
        D *y = static_cast<D *>(out);
        for (int64_t i = 0; i < n; ++i)
          y[i] = fromCompute<D>(toCompute(x[i]));
      });
    });
  });
}

} // namespace

Expected<Kernel> prepareElementwise(const Step &step, const StepTypes &types) {
  size_t arity = step.op == "select" ? 3 : (step.op == "compare" || step.op == "add" ||
                                            step.op == "sub" || step.op == "mul" ||
                                            step.op == "div" || step.op == "max" ||
                                            step.op == "min" || step.op == "pow")
                                               ? 2
                                               : 1;
  if (types.operands.size() != arity)
    return Status::error(fmt::format("{}: takes {} operands, got {}", describe(step), arity,
                                     types.operands.size()));
  for (size_t i = 0; i < arity; ++i) {
    const TensorType &t = types.operands[i];
    bool sameDType = step.op == "convert" || step.op == "compare" ||
                     (step.op == "select" && i == 0) || t.dtype == types.result.dtype;
    if (t.shape != types.result.shape || !sameDType ||
        (i > 0 && step.op != "select" && t.dtype != types.operands[0].dtype))
      return Status::error(fmt::format("{}: operand #{} {} does not fit result {}",
                                       describe(step), i, t.str(), types.result.str()));
  }
  if (step.op == "compare" && types.result.dtype != DType::i1)
    return Status::error(fmt::format("{}: result must be i1, got {}", describe(step),
                                     types.result.str()));
  if (step.op == "convert")
    return convert(types);
  if (step.op == "compare")
    return compare(step, types);
  if (step.op == "select")
    return select(step, types);
  return arity == 2 ? binary(step, types) : unary(step, types);
}

} // namespace smelt::rt::cpu
