// Reductions: reduce (sum, max, min over any axes) and argmax. Sums accumulate in double (int64
// for integers) so an f32 sum over a large axis keeps its precision; max and min propagate NaN.
#include "runtime/DTypeDispatch.h"
#include "runtime/cpu/Kernels.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <limits>

namespace smelt::rt::cpu {

namespace {

template <typename T, typename A, typename Combine>
void reduceBox(const T *x, A *acc, const int64_t *dims, const int64_t *inStrides,
               const int64_t *accStrides, size_t rank, Combine combine) {
  if (rank == 0) {
    *acc = combine(*acc, A(toCompute(*x)));
    return;
  }
  if (rank > 1) {
    for (int64_t i = 0; i < dims[0]; ++i)
      reduceBox(x + i * inStrides[0], acc + i * accStrides[0], dims + 1, inStrides + 1,
                accStrides + 1, rank - 1, combine);
    return;
  }
  for (int64_t i = 0; i < dims[0]; ++i)
    acc[i * accStrides[0]] = combine(acc[i * accStrides[0]], A(toCompute(x[i * inStrides[0]])));
}

template <typename A> A maximum(A a, A b) { return (b > a || b != b) ? b : a; }
template <typename A> A minimum(A a, A b) { return (b < a || b != b) ? b : a; }

Expected<Kernel> reduce(const Step &step, const StepTypes &types) {
  AttrReader attrs(step);
  std::string kind = attrs.keyword("kind");
  std::vector<int64_t> axes = attrs.ints("axes");
  if (Status s = attrs.status(); !s.ok())
    return s;
  const TensorType &in = types.operands[0], &out = types.result;
  size_t rank = in.shape.size();
  // Element strides of the input, and of the accumulator seen from the input (0 on reduced axes).
  std::vector<int64_t> inStrides(rank), accStrides(rank, 0), expected;
  int64_t s = 1;
  for (size_t i = rank; i-- > 0;) {
    inStrides[i] = s;
    s *= in.shape[i];
  }
  std::vector<bool> reduced(rank, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= int64_t(rank) || (i && axes[i] <= axes[i - 1]))
      return Status::error(fmt::format("{}: axes = [{}] are not increasing axes of {}",
                                       describe(step), fmt::join(axes, ", "), in.str()));
    reduced[axes[i]] = true;
  }
  s = 1;
  for (size_t i = rank; i-- > 0;)
    if (!reduced[i]) {
      accStrides[i] = s;
      s *= in.shape[i];
    }
  for (size_t i = 0; i < rank; ++i)
    if (!reduced[i])
      expected.push_back(in.shape[i]);
  if (expected != out.shape || in.dtype != out.dtype)
    return Status::error(fmt::format("{}: result {} does not match {} reduced over [{}]",
                                     describe(step), out.str(), in.str(), fmt::join(axes, ", ")));
  if (kind != "sum" && kind != "max" && kind != "min")
    return Status::error(fmt::format("{}: unknown kind '{}' (sum, max, min)", describe(step),
                                     kind));
  int64_t outCount = out.numElements();
  std::vector<int64_t> dims = in.shape;
  return visitDType(in.dtype, [&](auto tag) -> Expected<Kernel> {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      return Status::error(fmt::format("{}: cannot reduce i1 {}", describe(step), in.str()));
    } else {
      using A = std::conditional_t<kIsFloat<T>, double, int64_t>;
      A init = kind == "sum" ? A(0)
               : kind == "max"
                   ? (kIsFloat<T> ? -std::numeric_limits<A>::infinity()
                                  : A(std::numeric_limits<T>::lowest()))
                   : (kIsFloat<T> ? std::numeric_limits<A>::infinity()
                                  : A(std::numeric_limits<T>::max()));
      return Kernel([=](const void *const *inputs, void *result) {
        std::vector<A> acc(size_t(outCount), init);
        const T *x = static_cast<const T *>(inputs[0]);
        if (kind == "sum")
          reduceBox(x, acc.data(), dims.data(), inStrides.data(), accStrides.data(), dims.size(),
                    [](A a, A b) {
                      if constexpr (std::is_integral_v<A>)
                        return A(uint64_t(a) + uint64_t(b)); // wraps, never UB
                      else
                        return a + b;
                    });
        else if (kind == "max")
          reduceBox(x, acc.data(), dims.data(), inStrides.data(), accStrides.data(), dims.size(),
                    maximum<A>);
        else
          reduceBox(x, acc.data(), dims.data(), inStrides.data(), accStrides.data(), dims.size(),
                    minimum<A>);
        T *y = static_cast<T *>(result);
        for (int64_t i = 0; i < outCount; ++i)
          y[i] = fromCompute<T>(acc[i]);
      });
    }
  });
}

Expected<Kernel> argmax(const Step &step, const StepTypes &types) {
  AttrReader attrs(step);
  int64_t axis = attrs.integer("axis");
  if (Status s = attrs.status(); !s.ok())
    return s;
  const TensorType &in = types.operands[0];
  if (axis < 0 || axis >= int64_t(in.shape.size()) || in.shape[axis] == 0 ||
      types.result.dtype != DType::i64 ||
      types.result.numElements() * in.shape[axis] != in.numElements())
    return Status::error(fmt::format("{}: result {} is not the argmax of {} along axis {}",
                                     describe(step), types.result.str(), in.str(), axis));
  int64_t outer = 1, inner = 1, size = in.shape[axis];
  for (int64_t i = 0; i < axis; ++i)
    outer *= in.shape[i];
  for (size_t i = size_t(axis) + 1; i < in.shape.size(); ++i)
    inner *= in.shape[i];
  return visitDType(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return Kernel([=](const void *const *inputs, void *result) {
      const T *x = static_cast<const T *>(inputs[0]);
      int64_t *y = static_cast<int64_t *>(result);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < inner; ++j) {
          const T *row = x + o * size * inner + j;
          auto best = toCompute(row[0]);
          int64_t bestIndex = 0;
          for (int64_t k = 1; k < size && best == best; ++k) {
            auto v = toCompute(row[k * inner]);
            if (v > best || v != v) { // the first NaN wins and ends the search
              best = v;
              bestIndex = k;
            }
          }
          y[o * inner + j] = bestIndex;
        }
    });
  });
}

} // namespace

Expected<Kernel> prepareReduce(const Step &step, const StepTypes &types) {
  if (types.operands.size() != 1)
    return Status::error(fmt::format("{}: takes 1 operand, got {}", describe(step),
                                     types.operands.size()));
  return step.op == "reduce" ? reduce(step, types) : argmax(step, types);
}

} // namespace smelt::rt::cpu
